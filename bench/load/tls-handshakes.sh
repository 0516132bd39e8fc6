#!/bin/bash
# New TLS handshakes per CPU-second: ipgate (dist/, `npm run build` first) vs nginx at its defaults
# vs a minimal Node tls.Server (tls-min-server.js), on the same certificate, ECDSA P-256 and RSA
# 2048, TLS 1.3 (openssl s_time -new: a full handshake per connection, no request). The CPU is
# each server process's utime+stime from /proc/PID/stat over the run. bench/README.md "TLS
# termination" has the numbers. Env: KINDS ("ec rsa"), ROUNDS ("1 2 3"), SECS (6), NODE (node: the
# binary that runs ipgate and the Node server), BASE (another checkout with a dist/ build: run too,
# as `ipgate-base`, for an A/B of two builds; the servers' order is reversed every other round).
set -u
REPO=${REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
D=${D:-$(mktemp -d /tmp/ipgate-tls-bench-XXXXXX)}
cp "$REPO/bench/load/tls-min-server.js" "$D/min.js"
cd $D
[ -f ca.crt ] || {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt -days 3 -subj /CN=benchca 2>/dev/null
  for kind in ec rsa; do
    if [ $kind = ec ]; then K="-newkey ec -pkeyopt ec_paramgen_curve:P-256"; else K="-newkey rsa:2048"; fi
    printf 'subjectAltName=DNS:bench.test\n' > $kind.ext
    openssl req -new $K -nodes -keyout $kind.key -out $kind.csr -subj /CN=bench.test 2>/dev/null
    openssl x509 -req -in $kind.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile $kind.ext -out $kind.leaf 2>/dev/null
    cat $kind.leaf ca.crt > $kind.crt
  done
}
cpu() { awk '{print $14+$15}' /proc/$1/stat; }   # utime+stime, clock ticks (100/s)
mkdir -p ng/logs ng/tmp
for kind in ${KINDS:-ec rsa}; do
  cat > ng.conf <<NG
daemon off; master_process off; worker_processes 1; pid $D/ng/nginx.pid; error_log $D/ng/logs/error.log warn;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp; uwsgi_temp_path tmp; scgi_temp_path tmp;
  server { listen 127.0.0.1:18601 ssl; ssl_certificate $D/$kind.crt; ssl_certificate_key $D/$kind.key; location / { return 200 ok; } }
  server { listen 127.0.0.1:18602; location / { return 200 ok; } } }
NG
  cat > ig.yaml <<IG
admin: {listen: null}
store: {type: memory}
logging: {level: warn, access: false}
allowlists: {main: [127.0.0.0/8]}
listeners:
  - {name: web, mode: http, listen: "127.0.0.1:18603", allowlist: main, upstreams: ["127.0.0.1:18602"],
     tls: {certificates: [{cert: $D/$kind.crt, key: $D/$kind.key}]}}
IG
  nginx -p $D/ng -c $D/ng.conf -e $D/ng/logs/error.log & NGPID=$!
  ${NODE:-node} $REPO/dist/src/main.js --config $D/ig.yaml > ig.log 2>&1 & IGPID=$!
  ${NODE:-node} $D/min.js $kind & MNPID=$!
  SERVERS="ipgate nginx node-tls-server"; BSPID=
  if [ -n "${BASE:-}" ]; then
    sed 's/127.0.0.1:18603/127.0.0.1:18605/' ig.yaml > ig-base.yaml
    ${NODE:-node} $BASE/dist/src/main.js --config $D/ig-base.yaml > ig-base.log 2>&1 & BSPID=$!
    SERVERS="ipgate ipgate-base nginx node-tls-server"
    for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18605) 2>/dev/null && break; sleep 0.2; done
  fi
  for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18603) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/18601) 2>/dev/null && break; sleep 0.2; done
  for round in ${ROUNDS:-1 2 3}; do
    order=$SERVERS; [ $((round % 2)) = 0 ] && order=$(echo $SERVERS | tr ' ' '\n' | tac | tr '\n' ' ')
    for srv in $order; do
      case $srv in
        ipgate) P=18603; PID=$IGPID ;;
        ipgate-base) P=18605; PID=$BSPID ;;
        nginx) P=18601; PID=$NGPID ;;
        *) P=18604; PID=$MNPID ;;
      esac
      c0=$(cpu $PID)
      out=$(openssl s_time -connect 127.0.0.1:$P -new -time ${SECS:-6} 2>&1 | grep 'connections in' | head -1)
      c1=$(cpu $PID)
      n=$(echo "$out" | awk '{print $1}')
      echo "$kind round=$round $srv handshakes=$n cpu_s=$(echo "($c1-$c0)/100" | bc -l | cut -c1-6) us_per_handshake=$(echo "($c1-$c0)*10000/$n" | bc -l | cut -c1-7) hs_per_cpu_s=$(echo "$n*100/($c1-$c0)" | bc -l | cut -c1-7)"
    done
  done
  kill $IGPID $NGPID $MNPID $BSPID; wait $IGPID $NGPID $MNPID $BSPID 2>/dev/null
done
