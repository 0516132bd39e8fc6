/**
 * A minimal Node TCP forwarder for bench/load/compare.ts (`--proxies ...,tcp-min`): what two Node
 * sockets per connection cost on this machine, without ipgate's listener, PROXY decoder checks,
 * allowlist, timeouts, metrics and relay. Not a proxy to use: it trusts any PROXY v2 header
 * without checking it, has no allowlist, no timeouts, and handles only what the benchmark's
 * `tcp` and `tcp-ppin` workloads send (IPv4, the header in the first read).
 *
 *   node dist/bench/load/tcp-min.js TCP_PORT PPIN_PORT UPSTREAM_PORT
 *
 * TCP_PORT: client address from the socket; PPIN_PORT: from the client's PROXY v2 header. Both
 * send a PROXY v2 header upstream, then `pipe()` both ways, as a naive Node proxy would.
 */
import net from 'node:net';
import { v2 } from './min-proxy-v2';

function forward(client: net.Socket, header: Buffer, rest: Buffer | null, upPort: number): void {
  const up = net.connect({ host: '127.0.0.1', port: upPort });
  up.write(header);
  if (rest !== null && rest.length > 0) up.write(rest);
  client.pipe(up);
  up.pipe(client);
  up.on('error', () => client.destroy());
  client.on('error', () => up.destroy());
}

function main(): void {
  const [tcpPort, ppinPort, upPort] = process.argv.slice(2).map(Number) as [number, number, number];
  net
    .createServer((c) => {
      c.on('error', () => c.destroy());
      forward(
        c,
        v2(c.remoteAddress!.replace(/^::ffff:/, ''), c.remotePort!, c.localAddress!.replace(/^::ffff:/, ''), c.localPort!),
        null,
        upPort,
      );
    })
    .listen(tcpPort, '127.0.0.1');
  net
    .createServer((c) => {
      c.on('error', () => c.destroy());
      c.once('data', (d: Buffer) => {
        const len = 16 + d.readUInt16BE(14);
        const src = `${d[16]}.${d[17]}.${d[18]}.${d[19]}`;
        const dst = `${d[20]}.${d[21]}.${d[22]}.${d[23]}`;
        forward(c, v2(src, d.readUInt16BE(24), dst, d.readUInt16BE(26)), d.subarray(len), upPort);
      });
    })
    .listen(ppinPort, '127.0.0.1');
}

main();
