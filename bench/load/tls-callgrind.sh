#!/bin/bash
# Instructions per new TLS handshake under callgrind (bench/README.md "What ipgate adds
# to a new TLS handshake"): one server process, `ipgate` (the build in R, `.../dist`: an HTTP
# listener with `tls`, access log off, as tls-handshakes.sh runs it) or `node-tls-server`
# (tls-min-server.js), on the certificate KIND (ec | rsa) that tls-handshakes.sh makes in $D;
# W warm-up handshakes, then instrumentation on for N (tls-new-handshakes.js, one at a time, SNI
# `bench.test` unless SNI=-). Counts the server only: compare the `totals:` lines of two runs.
# usage: D=<tls-handshakes.sh dir> tls-callgrind.sh ipgate|node-tls-server R TAG KIND [N] [W]
set -u
SRV=$1; R=$2; TAG=$3; KIND=$4; N=${5:-300}; W=${6:-300}
HERE=$(cd "$(dirname "$0")" && pwd)
cd $D; rm -f cgout.$TAG.*
cat > cg-ig.yaml <<IG
admin: {listen: null}
store: {type: memory}
logging: {level: warn, access: false}
allowlists: {main: [127.0.0.0/8]}
listeners:
  - {name: web, mode: http, listen: "127.0.0.1:18623", allowlist: main, upstreams: ["127.0.0.1:18602"],
     tls: {certificates: [{cert: $D/$KIND.crt, key: $D/$KIND.key}]}}
IG
sed 's/18604/18623/' "$HERE/tls-min-server.js" > cg-min.js
if [ $SRV = ipgate ]; then ARGS="$R/src/main.js --config $D/cg-ig.yaml"; else ARGS="$D/cg-min.js $KIND"; fi
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$D/cgout.$TAG.%p ${NODE:-node} $ARGS > /dev/null 2>cgerr.$TAG & P=$!
for i in $(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/18623) 2>/dev/null && break; sleep 0.5; done
node "$HERE/tls-new-handshakes.js" 18623 $W ${SNI:-bench.test}
callgrind_control -i on $P > /dev/null
node "$HERE/tls-new-handshakes.js" 18623 $N ${SNI:-bench.test}
callgrind_control -i off $P > /dev/null
callgrind_control -d $P > /dev/null
kill $P; wait $P
grep -H '^totals:' $D/cgout.$TAG.*
