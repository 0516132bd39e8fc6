#!/bin/bash
# Instructions per plaintext keep-alive HTTP request under callgrind (bench/README.md "TLS
# termination"): ipgate from build dir R (`.../dist`), an HTTP listener with the access log on, an
# nginx `return 200` backend; 2,000 warm-up requests, then instrumentation on for N requests. Run
# it for two builds and compare the `totals:` lines of the cgout files.
# usage: http-callgrind.sh DIST_DIR TAG [N]
set -u
R=$1; TAG=$2; N=${3:-3000}
HERE=$(cd "$(dirname "$0")" && pwd)
D=${D:-$(mktemp -d /tmp/ipgate-callgrind-XXXXXX)}; cd $D; mkdir -p ng/logs ng/tmp
cat > ngp.conf <<NG
daemon off; master_process off; worker_processes 1; pid $D/ng/nginx2.pid; error_log $D/ng/logs/error2.log warn;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp; uwsgi_temp_path tmp; scgi_temp_path tmp;
  keepalive_requests 100000; server { listen 127.0.0.1:18612; location / { return 200 ok; } } }
NG
cat > plain.yaml <<IG
admin: {listen: null}
store: {type: memory}
logging: {level: info, access: true}
allowlists: {main: [127.0.0.0/8]}
listeners:
  - {name: web, mode: http, listen: "127.0.0.1:18613", allowlist: main, upstreams: ["127.0.0.1:18612"]}
IG
cp "$HERE/keepalive-requests.js" reqs.js
nginx -p $D/ng -c $D/ngp.conf -e $D/ng/logs/error2.log & NGPID=$!
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$D/cgout.$TAG.%p node $R/src/main.js --config $D/plain.yaml > /dev/null 2>cgerr.$TAG & P=$!
for i in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/18613) 2>/dev/null && break; sleep 0.5; done
node reqs.js 18613 2000
callgrind_control -i on $P > /dev/null
node reqs.js 18613 $N
callgrind_control -i off $P > /dev/null
callgrind_control -d $P > /dev/null
kill $P; wait $P; kill $NGPID; wait $NGPID 2>/dev/null
grep -H '^totals:' $D/cgout.$TAG.*
