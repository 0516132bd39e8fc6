/**
 * Per-route upstream timeouts (docs/edge-rules.md "Timeouts"; ingress-nginx proxy-connect-timeout,
 * proxy-read-timeout, proxy-send-timeout), in process over real sockets: a connect that never
 * completes (a full accept queue), a backend that never answers, one that stops half way through
 * its body, one that trickles its body slower than a whole-response bound but faster than the read
 * bound, one that stops reading a large upload, and nginx as the target that works. Each bound
 * answers 504 before a response head (the next target takes a GET after a connect timeout), cuts
 * the connection after one; a route's value replaces the listener's and follows a reload.
 */
import http from 'node:http';
import net from 'node:net';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { connect, readAll, readUntil, stalledPort } from '../helpers/net';
import { missing } from '../helpers/peers';
import { request, listenLoopback } from '../helpers/http';
import { threeBackends } from '../helpers/routes';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import type { Config } from '../../src/schema/config';

const skip = missing('nginx') || missing('python3');

/** A raw TCP backend: `onConn` gets each accepted socket. */
async function rawServer(t: Test, onConn: (s: net.Socket) => void): Promise<number> {
  const server = net.createServer((s) => {
    s.on('error', () => undefined);
    onConn(s);
  });
  const open = new Set<net.Socket>();
  server.on('connection', (s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  );
  return (server.address() as net.AddressInfo).port;
}

/** An HTTP backend that answers after `ms`. */
async function slowBackend(t: Test, ms: number): Promise<number> {
  const server = http.createServer((_req, res) => {
    setTimeout(() => res.end('slow\n'), ms);
  });
  return listenLoopback(t, server);
}

type Routes = NonNullable<Config['listeners'][number]['routes']>;

t.test('connect, read and send timeouts per route', { skip }, async (t) => {
  const nginx = await threeBackends(t);
  const good = `127.0.0.1:${nginx.a}`;
  const stalled = await stalledPort();
  t.teardown(stalled.cleanup);
  const dead = `127.0.0.1:${stalled.port}`;
  // Reads the request, never answers.
  const silent = await rawServer(t, (s) => s.resume());
  // A head and half its body, then nothing.
  const halfway = await rawServer(t, (s) => s.once('data', () => s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello')));
  // Its body one byte every 100 ms for 1.2 s: slower than 300 ms in all, never 300 ms silent.
  const trickle = await rawServer(t, (s) =>
    s.once('data', () => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n');
      let n = 0;
      const timer = setInterval(() => {
        s.write('x');
        if (++n === 12) clearInterval(timer);
      }, 100);
      s.on('close', () => clearInterval(timer));
    }),
  );
  // Never reads: an upload fills the socket buffers and stalls.
  const deaf = await rawServer(t, (s) => s.pause());
  const slow = await slowBackend(t, 600);
  const routes = (slowRead: number | null): Routes => [
    { name: 'failover', hosts: ['failover.example'], upstreams: [dead, good], http: { connectTimeoutMs: 300 } },
    { name: 'deadonly', hosts: ['dead.example'], upstreams: [dead], http: { connectTimeoutMs: 300 } },
    { name: 'silent', hosts: ['silent.example'], upstreams: [`127.0.0.1:${silent}`], http: { readTimeoutMs: 300 } },
    { name: 'inherits', hosts: ['inherits.example'], upstreams: [`127.0.0.1:${silent}`] },
    { name: 'halfway', hosts: ['halfway.example'], upstreams: [`127.0.0.1:${halfway}`], http: { readTimeoutMs: 300 } },
    { name: 'trickle', hosts: ['trickle.example'], upstreams: [`127.0.0.1:${trickle}`], http: { readTimeoutMs: 300 } },
    { name: 'deaf', hosts: ['deaf.example'], upstreams: [`127.0.0.1:${deaf}`], http: { sendTimeoutMs: 300, readTimeoutMs: null } },
    { name: 'slow', hosts: ['slow.example'], upstreams: [`127.0.0.1:${slow}`], http: { readTimeoutMs: slowRead } },
  ];
  const g: Started = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [good],
          http: { readTimeoutMs: 400, upstreamTimeoutMs: 20_000 },
          routes: routes(300),
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  const get = async (host: string, method = 'GET', body?: string): Promise<{ status: number; body: string; ms: number }> => {
    const start = performance.now();
    const r = await request({ port, localAddress: '127.0.0.3', method, headers: { host }, body, path: '/t' });
    return { status: r.status, body: r.body, ms: performance.now() - start };
  };
  const fails = (): number => [...(g.app.listeners[0]!.stats.upstreams.get(dead)?.failures.values() ?? [])].reduce((a, b) => a + b, 0);

  t.test('connect timeout: the next target takes a GET; alone, or with a body, 504', async (t) => {
    const ok = await get('failover.example');
    t.equal(ok.status, 200, 'the GET went to the next target');
    t.match(ok.body, /^A\|\/t\|/, 'nginx answered it');
    t.ok(ok.ms >= 250 && ok.ms < 5000, `after the 300 ms connect timeout, not the listener's 5 s (${Math.round(ok.ms)} ms)`);
    const alone = await get('dead.example');
    t.equal(alone.status, 504, 'no other target: 504, as nginx answers a connect timeout');
    t.ok(alone.ms < 5000, `within the route's bound (${Math.round(alone.ms)} ms)`);
    // A request with a body is not sent twice (it may have been read): 504 even with another target.
    let post = await get('failover.example', 'POST', 'payload');
    if (post.status === 200) post = await get('failover.example', 'POST', 'payload'); // the round robin may start at the good one
    t.equal(post.status, 504, 'a POST whose target timed out is not retried');
    t.ok(fails() >= 3, 'each timed-out connect counted on the target');
  });

  t.test('read timeout: silence before the head is a 504; the listener value is inherited', async (t) => {
    const r = await get('silent.example');
    t.equal(r.status, 504);
    t.ok(r.ms >= 250 && r.ms < 5000, `after ~300 ms, not upstreamTimeoutMs (${Math.round(r.ms)} ms)`);
    const inh = await get('inherits.example');
    t.equal(inh.status, 504, "the listener's readTimeoutMs (400) applies to a route without its own");
    t.ok(inh.ms >= 350 && inh.ms < 5000, `${Math.round(inh.ms)} ms`);
  });

  t.test('read timeout after the head: the client connection is cut', async (t) => {
    const c = await connect({ port, localAddress: '127.0.0.3' });
    c.write('GET /t HTTP/1.1\r\nHost: halfway.example\r\n\r\n');
    const got = (await readAll(c, 5000)).toString('latin1');
    t.match(got, /^HTTP\/1\.1 200 OK\r\n/, 'the head was relayed');
    t.ok(got.endsWith('\r\n\r\nhello'), 'then the half body, then the close (the client sees a short body)');
  });

  t.test('the read bound is between reads, not for the whole response', async (t) => {
    const r = await get('trickle.example');
    t.same([r.status, r.body], [200, 'x'.repeat(12)], 'a body trickled over 1.2 s with 100 ms gaps passes a 300 ms read bound');
    t.ok(r.ms >= 1000, `${Math.round(r.ms)} ms`);
  });

  t.test('send timeout: an upstream that stops reading an upload', async (t) => {
    const c = await connect({ port, localAddress: '127.0.0.3' });
    t.teardown(() => c.destroy());
    c.on('error', () => undefined);
    const size = 256 * 1024 * 1024;
    c.write(`POST /t HTTP/1.1\r\nHost: deaf.example\r\nContent-Length: ${size}\r\n\r\n`);
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    let sent = 0;
    const pump = (): void => {
      while (sent < size && !c.destroyed) {
        sent += chunk.length;
        if (!c.write(chunk)) return void c.once('drain', pump);
      }
    };
    pump();
    const head = (await readUntil(c, '\r\n\r\n', 15_000)).toString('latin1');
    t.match(head, /^HTTP\/1\.1 504 Gateway Timeout\r\n/, '504 once the upstream took nothing for 300 ms');
    t.ok(sent < size, `answered before the upload ended (${sent >> 20} MiB of ${size >> 20} sent)`);
  });

  t.test('a reload changes a route timeout live', async (t) => {
    t.equal((await get('slow.example')).status, 504, 'a 600 ms backend under a 300 ms read bound');
    const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(2000) }] };
    t.same(g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners))).problems, []);
    const r = await get('slow.example');
    t.same([r.status, r.body], [200, 'slow\n'], 'answered under the reloaded 2 s bound');
    const off = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(null) }] };
    t.same(g.app.replaceRoutes(routesUpdate(off, routesVersion(off.listeners))).problems, []);
    t.equal((await get('slow.example')).status, 200, 'null: no read bound (the listener value turned off for the route)');
  });
});
