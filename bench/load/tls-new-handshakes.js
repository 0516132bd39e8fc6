// N new TLS connections one after another, each a full handshake (no session offered) then a
// close_notify and close, no request: the client of bench/load/tls-callgrind.sh.
// usage: node tls-new-handshakes.js PORT N [SERVERNAME|-]  (- : no SNI, as openssl s_time -connect IP)
const tls = require('node:tls');
const [port, n, name] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4] ?? 'bench.test'];
let done = 0;
function one() {
  if (done === n) return;
  const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...(name !== '-' ? { servername: name } : {}) });
  s.on('error', (err) => {
    console.error(err.message);
    process.exit(1);
  });
  s.once('secureConnect', () => s.end());
  s.on('data', () => {});
  s.once('close', () => {
    done++;
    one();
  });
}
one();
