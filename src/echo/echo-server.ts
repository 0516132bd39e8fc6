/**
 * `ipgate echo`: the built-in demo backend. It reports the client address it learned, so an
 * operator can see the whole idea working with nc or curl:
 *
 * - TCP: accepts an optional PROXY v1/v2 header (from any peer: it is a loopback demo and test
 *   backend, never a public listener), writes one line
 *   `ipgate-echo client=203.0.113.7:5555 via=proxy-v2 peer=127.0.0.1:40312\n`, then echoes every byte.
 * - HTTP: answers every request with JSON: the client address it learned (X-Real-IP, else the
 *   socket), and the forwarded headers it received.
 */
import http from 'node:http';
import net from 'node:net';
import { canonicalAddress, formatHostPort } from '../identity/address';
import { decodeProxyHeader } from '../proxy-protocol/decoder';

export interface EchoServers {
  tcp: net.Server | null;
  http: http.Server | null;
  close(): Promise<void>;
}

/** The line the TCP echo writes first. Exported for tests. */
export function echoLine(client: string, via: string, peer: string): string {
  return `ipgate-echo client=${client} via=${via} peer=${peer}\n`;
}

export function createTcpEcho(): net.Server {
  return net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => socket.destroy());
    const peer = formatHostPort(canonicalAddress(socket.remoteAddress ?? ''), socket.remotePort ?? 0);
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), 10_000).unref();
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const r = decodeProxyHeader(buf);
      if (r.kind === 'more') return;
      socket.off('data', onData);
      clearTimeout(timer);
      let client = peer;
      let via = 'socket';
      let rest = buf;
      if (r.kind === 'error') {
        socket.end(`ipgate-echo error=${r.reason}\n`);
        return;
      }
      if (r.kind === 'done') {
        rest = buf.subarray(r.length);
        if (r.header.source !== null) {
          client = formatHostPort(r.header.source.address, r.header.source.port);
          via = `proxy-v${r.header.version}`;
        } else {
          via = `proxy-v${r.header.version}-local`;
        }
      }
      socket.write(echoLine(client, via, peer));
      if (rest.length > 0) socket.write(rest);
      socket.pipe(socket);
    };
    socket.on('data', onData);
    // A client that sends nothing still learns its address after a moment: many TCP protocols
    // wait for the server to speak first, and a person typing into nc wants to see it at once.
    socket.once('end', () => {
      clearTimeout(timer);
      if (socket.listenerCount('data') > 0 && buf.length === 0) socket.end(echoLine(peer, 'socket', peer));
    });
  });
}

export function createHttpEcho(): http.Server {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 65_536) chunks.push(c);
    });
    req.on('end', () => {
      const peer = canonicalAddress(req.socket.remoteAddress ?? '');
      const realIp = req.headers['x-real-ip'];
      const body = JSON.stringify({
        client: typeof realIp === 'string' ? realIp : peer,
        via: typeof realIp === 'string' ? 'x-real-ip' : 'socket',
        peer: formatHostPort(peer, req.socket.remotePort ?? 0),
        method: req.method,
        url: req.url,
        headers: {
          'x-real-ip': req.headers['x-real-ip'] ?? null,
          'x-forwarded-for': req.headers['x-forwarded-for'] ?? null,
          'x-forwarded-proto': req.headers['x-forwarded-proto'] ?? null,
          'x-forwarded-host': req.headers['x-forwarded-host'] ?? null,
          'x-forwarded-port': req.headers['x-forwarded-port'] ?? null,
          forwarded: req.headers.forwarded ?? null,
          host: req.headers.host ?? null,
        },
        bodyBytes: size,
      }) + '\n';
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 30_000;
  return server;
}

function listen(server: net.Server, address: string): Promise<void> {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(colon + 1));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export async function startEcho(opts: { tcp: string | null; http: string | null }): Promise<EchoServers> {
  const tcp = opts.tcp !== null ? createTcpEcho() : null;
  const web = opts.http !== null ? createHttpEcho() : null;
  if (tcp && opts.tcp !== null) await listen(tcp, opts.tcp);
  if (web && opts.http !== null) await listen(web, opts.http);
  return {
    tcp,
    http: web,
    close: async () => {
      const closing: Promise<void>[] = [];
      for (const s of [tcp, web]) {
        if (!s) continue;
        closing.push(new Promise((r) => s.close(() => r())));
        if (s instanceof http.Server) s.closeAllConnections();
      }
      await Promise.all(closing);
    },
  };
}
