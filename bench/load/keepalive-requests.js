// usage: node keepalive-requests.js PORT N — N GET requests over 4 keep-alive connections, one at a time each (bench/load/http-callgrind.sh).
// N keep-alive requests on 4 connections, sequential per connection, then exit.
const net = require('node:net');
const [port, n] = [+process.argv[2], +process.argv[3]];
let left = n,
  conns = 4,
  done = 0;
for (let c = 0; c < conns; c++) {
  const s = net.connect(port, '127.0.0.1');
  let buf = '';
  const send = () => {
    if (left <= 0) {
      s.end();
      return;
    }
    left--;
    s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  };
  s.on('connect', send);
  s.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\r\n\r\nok')) >= 0) {
      buf = buf.slice(i + 6);
      send();
    }
  });
  s.on('close', () => {
    if (++done === conns) process.exit(0);
  });
}
