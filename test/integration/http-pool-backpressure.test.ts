/**
 * A kept upstream connection whose response ended while the client's socket was full. The relay
 * pauses the upstream when a write to the client says false and resumes it on the client's
 * drain; when the response's last bytes are the ones that fill the client's socket, the exchange
 * is over before that drain, and the upstream went back to the pool paused: the next request on
 * it was sent and its answer never read (no read timeout runs on a paused socket). Found by
 * test/integration/tls-handle.test.ts's stalled reader followed by a new connection. curl reads
 * slowly (--limit-rate) on plaintext and on TLS, then another request must reuse the connection
 * and be answered. Without the fix (relay-conn.ts responseDone) the TLS case timed out here; the
 * plaintext one passed (the kernel took the last write whole), and stays as a check.
 */
import http from 'node:http';
import type net from 'node:net';
import t, { type Test } from 'tap';
import { CertDir } from '../helpers/certs';
import { startHttpGate } from '../helpers/ipgate';
import { missing } from '../helpers/peers';
import { run } from '../helpers/tls-nginx';

const skip = missing('curl') || missing('openssl');
const BIG = 2 * 1024 * 1024;

/** /big: 2 MiB at once (Content-Length); anything else: `small`. Records each request's socket port. */
async function backend(t: Test, ports: number[]): Promise<number> {
  const body = Buffer.alloc(BIG, 7);
  const server = http.createServer((req, res) => {
    ports.push(req.socket.remotePort!);
    if (req.url === '/big') {
      res.setHeader('content-length', BIG);
      res.end(body);
    } else {
      res.end('small');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

const certs = skip ? null : new CertDir();
const web = certs?.issue('web', { cn: 'web.test', dns: ['web.test'], kind: 'ec' });

for (const tls of [false, true]) {
  t.test(
    `a response that ends with the client's socket full leaves its upstream connection reading${tls ? ', over TLS' : ''}`,
    { skip },
    async (t) => {
      const ports: number[] = [];
      const up = await backend(t, ports);
      const g = await startHttpGate(t, {
        upstreams: [`127.0.0.1:${up}`],
        ...(tls ? { tls: { certificates: [{ cert: web!.cert, key: web!.key, name: 'web' }] } } : {}),
      });
      const port = g.port();
      const url = (p: string): string => `${tls ? 'https' : 'http'}://web.test:${port}${p}`;
      const curl = (p: string, extra: string[]): ReturnType<typeof run> =>
        run('curl', [
          '-sS',
          '--http1.1',
          ...(tls ? ['--cacert', certs!.file('ca.crt')] : []),
          '--resolve',
          `web.test:${port}:127.0.0.1`,
          ...extra,
          '-o',
          '/dev/null',
          '-w',
          '%{http_code} %{size_download}',
          url(p),
        ]);
      const slow = await curl('/big', ['--limit-rate', '1M']);
      t.equal(slow.stdout, `200 ${BIG}`, `2 MiB read at 1 MB/s: ${slow.stderr}`);
      const next = await curl('/small', ['-m', '5']);
      t.equal(next.stdout, '200 5', `the next request is answered within 5 s: ${next.stderr}`);
      t.equal(ports.length, 2, 'the backend saw both requests');
      t.equal(ports[1], ports[0], 'on the one kept upstream connection');
    },
  );
}
