// The floor for bench/load/tls-handshakes.sh: Node's own tls.Server at its defaults, nothing else.
const tls = require('node:tls'),
  fs = require('node:fs');
const k = process.argv[2];
tls
  .createServer({ cert: fs.readFileSync(`${k}.crt`), key: fs.readFileSync(`${k}.key`) }, (s) => {
    s.on('error', () => {});
    s.on('data', () => {});
  })
  .listen(18604, '127.0.0.1');
