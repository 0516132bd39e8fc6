/**
 * Per-client rate and connection limits (docs/edge-rules.md "Rate and connection limits"), in
 * process over real sockets, clients told apart by their 127.0.0.x source or by the PROXY v2
 * header a trusted balancer sends: nginx limit_req's burst with nodelay (burst + 1 at once, the
 * rest refused), without it (each request past `delay` waits (excess - delay) / rate), 429 or
 * 503; exemption by allowlist name; a refused client's 403 before any limit; limit_conn as
 * requests in progress; a route's own limit apart from the listener's; a reload that changes a
 * limit; counted in ipgate_limited_total and the access log's `result`; and a table that stays
 * within maxClients under many distinct clients.
 */
import type http from 'node:http';
import http2 from 'node:http2';
import t from 'tap';
import { tcpEcho } from '../helpers/echo';
import { countingBackend } from '../helpers/http';
import { startIpgate, type Started } from '../helpers/ipgate';
import { connect, readAll, waitFor } from '../helpers/net';
import { buildConfig } from '../../src/config/load';
import { encodeProxyV2 } from '../../src/proxy-protocol/encoder';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';

/** One request on its own connection from `from` (optionally as `client` behind a PROXY v2 header): the status. */
async function get(port: number, from: string, host = 'a.example', client: string | null = null, path = '/'): Promise<number> {
  const c = await connect({ port, localAddress: from });
  if (client !== null) c.write(encodeProxyV2({ address: client, port: 40000 }, { address: '127.0.0.1', port }));
  c.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  const reply = (await readAll(c, 10_000)).toString('latin1');
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0);
}

/** `n` requests at once from `from`: their statuses in the order they finished, and each one's time. */
async function burst(port: number, from: string, n: number, host = 'a.example'): Promise<{ status: number; ms: number }[]> {
  const t0 = performance.now();
  return Promise.all(Array.from({ length: n }, () => get(port, from, host).then((status) => ({ status, ms: performance.now() - t0 }))));
}

const count = (xs: { status: number }[], status: number): number => xs.filter((x) => x.status === status).length;
const limited = (g: Started, key: string): number => g.app.listeners[0]!.stats.limited.get(key) ?? 0;

t.test('HTTP limits on a listener with routes', async (t) => {
  // Holds the requests to /hold until released, so limit_conn can be seen.
  const held: http.ServerResponse[] = [];
  const be = await countingBackend((req, res) => {
    if (req.url === '/hold') held.push(res);
    else res.end('ok\n');
  });
  t.teardown(() => be.close());
  const up = `127.0.0.1:${be.port}`;
  const routes = (slowBurst: number): Record<string, unknown>[] => [
    // The listener's limits (nodelay burst 3 at 1r/s, 2 in progress) apply here.
    { name: 'inherits', hosts: ['a.example'], upstreams: [up] },
    // nginx's default: delayed within the burst.
    { name: 'delayed', hosts: ['d.example'], upstreams: [up], limits: { requests: { rate: '10r/s', burst: slowBurst } } },
    // delay=2: two of the burst at once, the rest delayed.
    { name: 'two-fast', hosts: ['t.example'], upstreams: [up], limits: { requests: { rate: '10r/s', burst: 4, delay: 2 } } },
    // 503 as nginx's limit_req_status default; the concurrency limit off.
    {
      name: 'status503',
      hosts: ['s.example'],
      upstreams: [up],
      limits: { requests: { rate: '1r/m', burst: 0, status: 503 }, concurrent: null },
    },
    // limit_conn: 2 in progress per client.
    { name: 'conn', hosts: ['c.example'], upstreams: [up], limits: { requests: null, concurrent: { perClient: 2 } } },
    // No limits at all.
    { name: 'free', hosts: ['f.example'], upstreams: [up], limits: { requests: null, concurrent: null } },
    // Only 127.0.0.20 is allowed here: anyone else gets 403, never a 429.
    { name: 'narrow', hosts: ['n.example'], upstreams: [up], allowlist: 'narrow' },
  ];
  const raw = (slowBurst: number): Record<string, unknown> => ({
    allowlists: { main: ['127.0.0.0/8'], ops: ['127.0.0.9/32'], narrow: ['127.0.0.20/32'] },
    logging: { level: 'info', access: true },
    listeners: [
      {
        name: 'web',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [up],
        limits: {
          requests: { rate: '1r/s', burst: 3, nodelay: true, exempt: ['ops'] },
          concurrent: { perClient: 20 },
        },
        routes: routes(slowBurst),
      },
    ],
  });
  const g = await startIpgate(raw(5), 'info');
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();

  t.test('nodelay: burst + 1 at once, the rest 429 at once; another client is unaffected', async (t) => {
    const r = await burst(port, '127.0.0.2', 6);
    t.equal(count(r, 200), 4, 'burst 3 + 1 forwarded');
    t.equal(count(r, 429), 2, 'the rest refused with 429');
    t.ok(
      r.every((x) => x.ms < 1000),
      'none waited (nodelay)',
    );
    t.equal(await get(port, '127.0.0.3'), 200, 'another client: its own bucket');
    t.equal(limited(g, 'inherits\0requests\0refused'), 2, 'ipgate_limited_total{route="inherits",limit="requests",action="refused"}');
    const line = g.logs.find((l) => l.msg === 'access' && l.result === 'limited_requests');
    t.ok(line, 'the access log line carries result limited_requests');
    t.equal(line?.status, 429);
    t.equal(line?.client, '127.0.0.2');
  });

  t.test('exempt by allowlist name (ingress-nginx limit-whitelist)', async (t) => {
    const r = await burst(port, '127.0.0.9', 10);
    t.equal(count(r, 200), 10, 'every request of an exempt client passes');
  });

  t.test('the allowlist decides first: a refused client gets 403, and spends no token', async (t) => {
    const r = await burst(port, '127.0.0.21', 8, 'n.example');
    t.equal(count(r, 403), 8, 'all 403, none 429');
    t.equal(await get(port, '127.0.0.20', 'n.example'), 200, 'the allowed client passes');
  });

  t.test('without nodelay: each request past the first waits its turn at the rate', async (t) => {
    const r = await burst(port, '127.0.0.4', 7, 'd.example');
    t.equal(count(r, 200), 6, 'burst 5 + 1 forwarded');
    t.equal(count(r, 429), 1, 'the seventh, past the burst, refused at once');
    const ok = r
      .filter((x) => x.status === 200)
      .map((x) => x.ms)
      .sort((a, b) => a - b);
    // The 6th has excess ~5 at 10r/s: it waits 500 ms more than the first (less what drained
    // while the seven arrived); measured from the first, so a slow connect does not count.
    const spread = ok.map((x) => Math.round(x - ok[0]!));
    t.ok(spread[5]! >= 380 && spread[5]! < 3000, `the last waited about 500 ms after the first (${spread.join(', ')} ms)`);
    t.ok(spread[3]! >= 180 && spread[3]! < spread[5]!, 'each later one waits longer');
    t.equal(limited(g, 'delayed\0requests\0delayed'), 5, 'five counted as delayed');
    t.equal(limited(g, 'delayed\0requests\0refused'), 1, 'one as refused');
  });

  t.test('delay=2: the first three at once, the next two delayed', async (t) => {
    const r = await burst(port, '127.0.0.5', 5, 't.example');
    t.equal(count(r, 200), 5);
    const ms = r.map((x) => x.ms).sort((a, b) => a - b);
    const spread = ms.map((x) => Math.round(x - ms[0]!));
    t.ok(spread[4]! >= 120 && spread[4]! < 3000, `the fifth waited ~200 ms after the first (${spread.join(', ')} ms)`);
    t.equal(limited(g, 'two-fast\0requests\0delayed'), 2, 'two delayed: the first three (delay=2) went at once');
  });

  t.test('status 503 (nginx limit_req_status default)', async (t) => {
    t.equal(await get(port, '127.0.0.6', 's.example'), 200);
    t.equal(await get(port, '127.0.0.6', 's.example'), 503, '1r/m burst 0: the second is refused with 503');
  });

  t.test('a route with its limits turned off (null)', async (t) => {
    const r = await burst(port, '127.0.0.2', 10, 'f.example');
    t.equal(count(r, 200), 10);
  });

  t.test('limit_conn: requests in progress per client; freed when they finish', async (t) => {
    const from = '127.0.0.7';
    const a = get(port, from, 'c.example', null, '/hold');
    const b = get(port, from, 'c.example', null, '/hold');
    await waitFor(() => held.length === 2, 5000, 'two requests at the backend');
    t.equal(await get(port, from, 'c.example', null, '/hold'), 429, 'a third in progress: 429 at once');
    t.equal(limited(g, 'conn\0concurrent\0refused'), 1, 'counted as limit="concurrent"');
    t.equal(await get(port, '127.0.0.8', 'c.example'), 200, 'another client is not counted with it');
    for (const res of held.splice(0)) res.end('done\n');
    t.same(await Promise.all([a, b]), [200, 200]);
    const c = get(port, from, 'c.example', null, '/hold');
    await waitFor(() => held.length === 1, 5000, 'a new request once the others finished');
    held.splice(0)[0]!.end('done\n');
    t.equal(await c, 200);
  });

  t.test("a reload changes a route's limit live", async (t) => {
    // 127.0.0.4 spent d.example's burst of 5 above; with a burst of 50 (the same zone
    // parameters changed: a new zone) ten more pass at once.
    const next = buildConfig({ store: { type: 'memory' }, admin: { listen: null }, ...raw(50) });
    t.same(g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners))).problems, []);
    const r = await burst(port, '127.0.0.4', 10, 'd.example');
    t.equal(count(r, 200), 10, 'all ten forwarded after the reload');
  });
});

t.test('clients behind a trusted balancer (PROXY v2): each real client has its own bucket; the table is bounded', async (t) => {
  const be = await countingBackend();
  t.teardown(() => be.close());
  const g = await startIpgate(
    {
      allowlists: { main: ['10.0.0.0/8', '127.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${be.port}`],
          proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.1/32'] },
          limits: { requests: { rate: '1r/m', burst: 1, nodelay: true, maxClients: 200 } },
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push(await get(port, '127.0.0.1', 'a.example', '10.0.0.1'));
  t.same(statuses, [200, 200, 429], "the balancer's client 10.0.0.1: burst 1 + 1, then refused");
  t.equal(await get(port, '127.0.0.1', 'a.example', '10.0.0.2'), 200, 'the next client through the same balancer is not');
  // 1000 distinct clients through a table of 200: it stays at 200, forgetting the least recent.
  for (let i = 0; i < 1000; i += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, k) => get(port, '127.0.0.1', 'a.example', `10.1.${(i + k) >> 8}.${(i + k) & 255}`)));
  }
  const zone = [...g.app.limits.all()][0]!;
  t.equal(zone.table.size, 200, 'the table holds maxClients, no more');
  const rt = zone.table as { evictedActive: number; evictedIdle: number };
  t.equal(rt.evictedActive + rt.evictedIdle, 1002 - 200, "each client past maxClients took the least recent one's slot");
  t.equal(await get(port, '127.0.0.1', 'a.example', '10.0.0.1'), 200, '10.0.0.1 was forgotten (its excess lost: counted active)');
});

t.test('TCP listener: new connections per client, open connections per client', async (t) => {
  const echo = await tcpEcho(t);
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${echo}`],
          outboundProxyProtocol: 'v1',
          limits: { connectionRate: { rate: '1r/m', burst: 2 }, concurrent: { perClient: 1 } },
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  /** Connect from `from`: the echo's greeting line, or '' when ipgate closed the connection. */
  const open = async (from: string): Promise<{ line: string; c: import('node:net').Socket }> => {
    const c = await connect({ port, localAddress: from });
    const line = await new Promise<string>((resolve) => {
      let got = '';
      c.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.includes('\n')) resolve(got);
      });
      c.on('close', () => resolve(got));
    });
    return { line, c };
  };
  const first = await open('127.0.0.2');
  t.match(first.line, /client=127\.0\.0\.2:/, 'the first connection is relayed');
  const second = await open('127.0.0.2');
  t.equal(second.line, '', 'a second at once: closed (perClient 1)');
  t.equal(limited(g, '\0concurrent\0refused'), 1);
  const other = await open('127.0.0.3');
  t.match(other.line, /client=127\.0\.0\.3:/, 'another client is not counted with it');
  other.c.destroy();
  first.c.destroy();
  await waitFor(() => (g.app.limits.all().find((z) => z.kind === 'concurrent')?.table.size ?? 1) === 0, 5000, 'the slot given back');
  // The rate: burst 2 + 1 = three connections (the two above and this one), then closed.
  const third = await open('127.0.0.2');
  t.match(third.line, /client=127\.0\.0\.2:/, 'the third connection within the burst is relayed');
  third.c.destroy();
  await waitFor(() => (g.app.limits.all().find((z) => z.kind === 'concurrent')?.table.size ?? 1) === 0, 5000, 'the slot given back');
  const fourth = await open('127.0.0.2');
  t.equal(fourth.line, '', 'the fourth: past the connection rate, closed');
  t.equal(limited(g, '\0connection_rate\0refused'), 1, 'ipgate_limited_total{limit="connection_rate"}');
});

t.test('HTTP/2 (h2c): each stream is a request to the rate limit, delayed or refused alone; each in progress counts', async (t) => {
  const held: http.ServerResponse[] = [];
  const be = await countingBackend((req, res) => {
    if (req.url === '/hold') held.push(res);
    else res.end('ok\n');
  });
  t.teardown(() => be.close());
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        {
          name: 'h2c',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${be.port}`],
          http: { http2: { cleartext: true } },
          routes: [
            { name: 'rate', hosts: ['r.example'], limits: { requests: { rate: '10r/s', burst: 3 } } },
            { name: 'conn', hosts: ['c.example'], limits: { concurrent: { perClient: 2 } } },
          ],
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  const s = http2.connect(`http://127.0.0.1:${port}`, { localAddress: '127.0.0.2' } as http2.ClientSessionOptions);
  t.teardown(() => s.close());
  const stream = (authority: string, path = '/'): Promise<{ status: number; ms: number }> =>
    new Promise((resolve, reject) => {
      const t0 = performance.now();
      const req = s.request({ ':authority': authority, ':path': path });
      let status = 0;
      req.on('response', (h) => (status = Number(h[':status'])));
      req.on('data', () => undefined);
      req.on('end', () => resolve({ status, ms: performance.now() - t0 }));
      req.on('error', reject);
    });
  const r = await Promise.all(Array.from({ length: 5 }, () => stream('r.example')));
  t.same(
    r.map((x) => x.status).sort(),
    [200, 200, 200, 200, 429],
    'five streams at once on one connection: burst 3 + 1 forwarded, one refused',
  );
  const ms = r
    .filter((x) => x.status === 200)
    .map((x) => x.ms)
    .sort((a, b) => a - b);
  t.ok(ms[3]! - ms[0]! >= 200, `the fourth delayed ~300 ms after the first (${ms.map(Math.round).join(', ')} ms)`);
  const a = stream('c.example', '/hold');
  const b = stream('c.example', '/hold');
  await waitFor(() => held.length === 2, 5000, 'two streams at the backend');
  t.equal((await stream('c.example', '/hold')).status, 429, 'a third stream in progress: 429');
  for (const res of held.splice(0)) res.end('done\n');
  t.same([(await a).status, (await b).status], [200, 200]);
});
