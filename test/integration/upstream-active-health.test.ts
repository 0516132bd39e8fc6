/**
 * Active upstream health checks (docs/edge-rules.md "Upstream health"; HAProxy check inter / rise /
 * fall, nginx Plus health_check), in process over real sockets: nginx is the target that stays up,
 * a Node backend dies (its listener closed, its connections cut) and comes back on the same port.
 * - HTTP: while GETs run in a loop, the dead target is marked down by its checks within fall x
 *   interval (+ the check's timeout), no GET fails, it is taken back only after `rise` good checks,
 *   and the checks are not client traffic (no request or upstream counts);
 * - an HTTP check answered with a status not expected marks the target down, and back;
 * - a check of a target that accepts and never answers is bounded by timeoutMs, one at a time;
 * - a group whose only target is down by its checks answers 503 without a connect;
 * - a reload changes the interval, and one that turns the checks off stops them;
 * - TCP listeners: passive (a failed connect takes the target out) and active tcp checks skip a
 *   dead target instead of paying a failed connect per connection; none up closes at once.
 */
import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { connect, readAll, waitFor } from '../helpers/net';
import { deadPort, request } from '../helpers/http';
import { missing } from '../helpers/peers';
import { threeBackends } from '../helpers/routes';
import { restartable } from '../helpers/restartable';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import { clientHello, sniExt } from '../fixtures/tls/client-hello-vectors';
import type { Config } from '../../src/schema/config';

const skip = missing('nginx');
const execFileP = promisify(execFile);
type Routes = NonNullable<Config['listeners'][number]['routes']>;

const failures = (g: Started, target: string, listener = 0): number =>
  [...(g.app.listeners[listener]!.stats.upstreams.get(target)?.failures.values() ?? [])].reduce((x, y) => x + y, 0);

async function gauge(g: Started, listener: string, route: string, target: string): Promise<string | undefined> {
  const re = new RegExp(
    `ipgate_upstream_target_up\\{listener="${listener}",route="${route}",upstream="${target.replace(/\./g, '\\.')}"\\} (\\d)`,
  );
  return re.exec(await g.app.metrics.scrape())?.[1];
}

async function requestsTotal(g: Started, listener: string): Promise<number> {
  let n = 0;
  for (const m of (await g.app.metrics.scrape()).matchAll(
    new RegExp(`^ipgate_http_requests_total\\{listener="${listener}"[^}]*\\} (\\d+)$`, 'gm'),
  ))
    n += Number(m[1]);
  return n;
}

t.test('HTTP active checks', { skip }, async (t) => {
  const nginx = await threeBackends(t);
  const A = `127.0.0.1:${nginx.a}`;
  const b = await restartable(t, 'B');
  const B = `127.0.0.1:${b.port}`;
  const c = await restartable(t, 'C');
  const C = `127.0.0.1:${c.port}`;
  const d = await restartable(t, 'D');
  const D = `127.0.0.1:${d.port}`;
  const e = await restartable(t, 'E', 502);
  const E = `127.0.0.1:${e.port}`;
  const dead = `127.0.0.1:${await deadPort()}`;
  // Accepts and never answers: an HTTP check of it can only time out. Counts its open sockets.
  const silentAccepts: number[] = [];
  const silentSockets = new Set<net.Socket>();
  const silent = net.createServer((s) => {
    silentSockets.add(s);
    silentAccepts.push(performance.now());
    s.on('error', () => undefined);
    s.resume(); // reads the check's request (and its close), answers nothing
    s.once('close', () => silentSockets.delete(s));
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of silentSockets) s.destroy();
    silent.close();
  });
  const S = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;

  // Every field given: a reload below swaps routes built here, not loaded (no defaults filled in).
  const check = { type: 'http', path: '/healthz', expectStatuses: [], intervalMs: 100, timeoutMs: 1000, rise: 3, fall: 1 };
  const routes = (dActive: Record<string, unknown> | null): Routes =>
    [
      // No upstreams of its own: the listener's group (its gauge has route="").
      { name: 'default', hosts: ['web.example'] },
      { name: 'status', hosts: ['status.example'], upstreams: [A, C], upstreamHealth: { active: { ...check, fall: 2 } } },
      {
        name: 'silent',
        hosts: ['silent.example'],
        upstreams: [A, S],
        upstreamHealth: { active: { ...check, intervalMs: 100, timeoutMs: 250 } },
      },
      { name: 'alone', hosts: ['alone.example'], upstreams: [dead], upstreamHealth: { active: { type: 'tcp', intervalMs: 100, fall: 1 } } },
      {
        name: 'both',
        hosts: ['both.example'],
        upstreams: [E, A],
        upstreamHealth: {
          passive: { maxFails: 1, failTimeoutMs: 100, statuses: [502] },
          active: { ...check, intervalMs: 150, rise: 3, fall: 3 },
        },
      },
      { name: 'reload', hosts: ['reload.example'], upstreams: [A, D], upstreamHealth: { passive: null, active: dActive } },
    ] as unknown[] as Routes;
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [A, B],
          upstreamHealth: { active: check },
          routes: routes({ ...check, intervalMs: 5000 }),
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  const get = (host = 'web.example', path = '/x'): Promise<{ status: number; body: string }> =>
    request({ port, localAddress: '127.0.0.4', path, headers: { host } }).then((r) => ({ status: r.status, body: r.body.split('|')[0]! }));

  t.test('a target that dies is marked down by its checks and taken back after rise; no GET fails', async (t) => {
    await waitFor(async () => (await gauge(g, 'web', '', B)) === '1', 15_000, 'the gauge shows B');
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) seen.add((await get()).body);
    t.same([...seen].sort(), ['A', 'B'], 'both targets answer while up');

    // A load loop: 4 clients sending GETs back to back for the whole test.
    const statuses: number[] = [];
    let loop = true;
    let sent = 0;
    const done = [0, 0, 0, 0];
    const loops = [0, 1, 2, 3].map(async (i) => {
      while (loop) {
        sent++;
        statuses.push((await get()).status);
        done[i]!++;
      }
    });
    const requestsBefore = await requestsTotal(g, 'web');

    await b.stop();
    const stoppedAt = performance.now();
    await waitFor(async () => (await gauge(g, 'web', '', B)) === '0', 15_000, 'B marked down');
    const downAfter = performance.now() - stoppedAt;
    // interval + timeout, and slack for a loaded machine (a refused connect fails at once).
    t.ok(downAfter < 100 + 1000 + 1000, `marked down within interval + timeout: ${downAfter.toFixed(0)} ms`);
    // A GET each client had in flight when the mark came may have dialled B before it (its
    // failed connect is counted, and it is retried on A): counted from once each has finished.
    const mark = done.slice();
    await waitFor(() => done.every((n, i) => n > mark[i]!), 10_000, 'the GETs in flight at the mark finished');
    const failed = failures(g, B);
    const sentAtDown = sent;
    await waitFor(() => sent >= sentAtDown + 40, 10_000, '40 more GETs');
    t.equal(failures(g, B), failed, 'while down, no client request dialled B');

    const pathsBefore = b.paths.length;
    const hitsBefore = b.hits();
    await b.start();
    await waitFor(async () => (await gauge(g, 'web', '', B)) === '1', 15_000, 'B up again');
    await waitFor(() => b.hits() > hitsBefore, 15_000, 'B takes client requests again');
    const after = b.paths.slice(pathsBefore);
    t.same(after.slice(0, 3), ['/healthz', '/healthz', '/healthz'], 'B was taken back only after rise (3) good checks');
    t.not(after[3], undefined);
    loop = false;
    await Promise.all(loops);
    t.same(
      statuses.filter((s) => s !== 200),
      [],
      `none of ${statuses.length} GETs failed while B died and came back`,
    );
    t.equal(
      (await requestsTotal(g, 'web')) - requestsBefore,
      statuses.length,
      'ipgate_http_requests_total counts the GETs only: the checks are not client traffic',
    );
    const answered = g.app.listeners[0]!.stats.upstreams.get(B)!.responses.reduce((x, y) => x + y, 0);
    t.ok(answered <= b.hits(), `B's upstream response count (${answered}) has no check in it (checks: ${b.hits('/healthz')})`);
  });

  t.test('an HTTP check answered with a status not expected marks the target down, and back', async (t) => {
    c.checkStatus = 500;
    await waitFor(async () => (await gauge(g, 'web', 'status', C)) === '0', 15_000, 'C down (2 checks of 500)');
    const hits = c.hits();
    for (let i = 0; i < 6; i++) t.equal((await get('status.example')).body, 'A');
    t.equal(c.hits(), hits, 'C gets no request while its check answers 500 (it would answer 200 to them)');
    c.checkStatus = 302;
    await waitFor(async () => (await gauge(g, 'web', 'status', C)) === '1', 15_000, 'C up again: a 3xx is expected by default');
  });

  t.test('a check of a target that never answers is bounded by timeoutMs, one at a time', async (t) => {
    await waitFor(async () => (await gauge(g, 'web', 'silent', S)) === '0', 15_000, 'the silent target down');
    const first = silentAccepts.length;
    await waitFor(() => silentAccepts.length >= first + 8, 15_000, 'eight more checks');
    // The mean gap between starts over eight checks (one late accept on a loaded machine shortens
    // the next gap, not the mean). Two checks at a time would start one every ~100 ms (the
    // interval); a check not cut at its timeout would hold the target's slot and stop the checks.
    const mean = (silentAccepts[first + 7]! - silentAccepts[first]!) / 7;
    t.ok(mean >= 225, `each check starts after the last timed out (250 ms > the 100 ms interval): ${mean.toFixed(0)} ms apart`);
    t.ok(mean < 250 + 1000, `each ended at its timeout (250 ms, and slack for a loaded machine): ${mean.toFixed(0)} ms apart`);
    for (let i = 0; i < 4; i++) t.equal((await get('silent.example')).status, 200, 'requests go to nginx');
  });

  t.test('a group whose only target is down by its checks answers 503 without a connect', async (t) => {
    await waitFor(async () => (await gauge(g, 'web', 'alone', dead)) === '0', 15_000, 'the dead target down');
    t.equal((await get('alone.example')).status, 503);
    t.equal(failures(g, dead), 0, 'never dialled by a request');
  });

  t.test('passive and active: a passive failure takes the target down, only rise good checks bring it back', async (t) => {
    const r = await get('both.example');
    t.equal(r.status, 502, "E's 502 is relayed (and counted against E)");
    const down = e.paths.length;
    t.equal(await gauge(g, 'web', 'both', E), '0', 'E down at once (maxFails 1), though its checks pass');
    const at = performance.now();
    for (let i = 0; i < 4; i++) t.equal((await get('both.example')).body, 'A', 'nginx takes the requests');
    await waitFor(async () => (await gauge(g, 'web', 'both', E)) === '1', 15_000, 'E up again');
    const after = e.paths.slice(down);
    t.same(after.slice(0, 3), ['/healthz', '/healthz', '/healthz'], 'three good checks first (rise 3)');
    t.equal(e.hits(), 1, 'no request reached E meanwhile');
    t.ok(performance.now() - at > 100, 'back later than the passive window (100 ms) would have had it');
  });

  t.test('a reload changes the interval, and turning the checks off stops them', async (t) => {
    const update = (dActive: Record<string, unknown> | null): void => {
      const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(dActive) }] };
      t.same(g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners))).problems, []);
    };
    const before = d.hits('/healthz');
    t.ok(before <= 2, `at 5 s, at most one or two checks so far (${before})`);
    const at = performance.now();
    update({ ...check, intervalMs: 100 });
    await waitFor(() => d.hits('/healthz') >= before + 10, 15_000, '10 checks at the new interval');
    t.ok(performance.now() - at < 15_000, 'ten checks in under 15 s (50 s at the old interval): the 100 ms one is in force');
    update(null);
    const stopped = d.hits('/healthz');
    const other = b.hits('/healthz');
    await waitFor(() => b.hits('/healthz') >= other + 10, 15_000, 'ten checks of another group');
    t.ok(d.hits('/healthz') <= stopped + 1, `no check of D after the reload (but one in flight): ${d.hits('/healthz') - stopped}`);
    t.equal(await gauge(g, 'web', 'reload', D), undefined, 'no health rules: no target gauge for the route');
  });
});

t.test('TCP listeners', { skip }, async (t) => {
  const nginx = await threeBackends(t);
  const A = `127.0.0.1:${nginx.a}`;
  const b = await restartable(t, 'B');
  const B = `127.0.0.1:${b.port}`;
  const dead = `127.0.0.1:${await deadPort()}`;
  const dead2 = `127.0.0.1:${await deadPort()}`;
  const tcp = (name: string, upstreams: string[], upstreamHealth: unknown) => ({
    name,
    mode: 'tcp',
    listen: '127.0.0.1:0',
    allowlist: 'main',
    upstreams,
    upstreamHealth,
  });
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        tcp('passive', [A, dead], { passive: { maxFails: 1, failTimeoutMs: 60_000 } }),
        tcp('active', [A, B], { active: { type: 'tcp', intervalMs: 100, timeoutMs: 300, rise: 2, fall: 1 } }),
        tcp('none', [dead2], { active: { type: 'tcp', intervalMs: 100, fall: 1 } }),
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const fetch = async (listener: string): Promise<string> => {
    const s = await connect({ port: g.port(listener), localAddress: '127.0.0.5' });
    s.write('GET /t HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const text = (await readAll(s)).toString('latin1');
    return text.startsWith('HTTP/1.1 200') ? text.slice(text.indexOf('\r\n\r\n') + 4).split('|')[0]! : `fail:${text.slice(0, 12)}`;
  };

  t.test('passive: one failed connect takes the target out; no connection fails', async (t) => {
    const got: string[] = [];
    for (let i = 0; i < 10; i++) got.push(await fetch('passive'));
    t.same(got, Array(10).fill('A'), 'every connection reached nginx (the first after a refused connect to the dead target)');
    t.equal(failures(g, dead, 0), 1, 'the dead target was dialled once, then skipped');
    t.equal(await gauge(g, 'passive', '', dead), '0', 'gauge: out');
  });

  t.test('active tcp checks: a target that dies is skipped before a client pays a connect, back after rise', async (t) => {
    await b.stop();
    await waitFor(async () => (await gauge(g, 'active', '', B)) === '0', 15_000, 'B down');
    const got: string[] = [];
    for (let i = 0; i < 6; i++) got.push(await fetch('active'));
    t.same(got, Array(6).fill('A'));
    t.equal(failures(g, B, 1), 0, 'no connection dialled B');
    await b.start();
    await waitFor(async () => (await gauge(g, 'active', '', B)) === '1', 15_000, 'B up after 2 checks');
    const back = new Set<string>();
    for (let i = 0; i < 4; i++) back.add(await fetch('active'));
    t.same([...back].sort(), ['A', 'B'], 'both take connections again');
  });

  t.test('no target up: the connection closes at once, counted upstream_none_up', async (t) => {
    await waitFor(async () => (await gauge(g, 'none', '', dead2)) === '0', 15_000, 'down');
    t.equal(await fetch('none'), 'fail:', 'closed without an answer');
    t.equal(failures(g, dead2, 2), 0, 'nothing dialled');
    await waitFor(() => (g.app.listeners[2]!.stats.closed.get('upstream_none_up') ?? 0) === 1, 15_000, 'counted');
  });
});

/** A TCP backend that counts the connections that sent it bytes, and can die and come back on its port. */
async function tcpBackend(
  t: Test,
): Promise<{ port: number; label: string; got: () => number; stop: () => Promise<void>; start: () => Promise<void> }> {
  let got = 0;
  let port = 0;
  let server: net.Server | null = null;
  const sockets = new Set<net.Socket>();
  const start = async (): Promise<void> => {
    const s = net.createServer((c) => {
      sockets.add(c);
      c.on('error', () => undefined);
      c.once('close', () => sockets.delete(c));
      c.once('data', () => {
        got++;
        c.destroy();
      });
    });
    await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
    port = (s.address() as net.AddressInfo).port;
    server = s;
  };
  const stop = async (): Promise<void> => {
    const s = server;
    server = null;
    if (s === null) return;
    for (const c of sockets) c.destroy();
    await new Promise<void>((r) => s.close(() => r()));
  };
  await start();
  t.teardown(stop);
  return { port, label: `127.0.0.1:${port}`, got: () => got, stop, start };
}

t.test("TCP listener with SNI routes: a route's active checks skip its dead target; a reload keeps or stops them", async (t) => {
  const x1 = await tcpBackend(t);
  const x2 = await tcpBackend(t);
  const active = { type: 'tcp', expectStatuses: [], intervalMs: 100, timeoutMs: 300, rise: 2, fall: 1 };
  const routes = (health: unknown): Routes =>
    [{ name: 'x', hosts: ['x.example'], upstreams: [x1.label, x2.label], upstreamHealth: health }] as unknown[] as Routes;
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        { name: 'sni', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [], routes: routes({ passive: null, active }) },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const hello = clientHello({ extensions: [sniExt('x.example')] });
  const send = async (): Promise<void> => {
    const s = await connect({ port: g.port(), localAddress: '127.0.0.6' });
    s.write(hello);
    await readAll(s);
  };
  await waitFor(async () => (await gauge(g, 'sni', 'x', x2.label)) === '1', 5000, "the gauge shows the route's targets");
  await x2.stop();
  await waitFor(async () => (await gauge(g, 'sni', 'x', x2.label)) === '0', 15_000, 'x2 down');
  const before = x1.got();
  for (let i = 0; i < 6; i++) await send();
  await waitFor(() => x1.got() === before + 6, 15_000, 'every connection reached x1');
  t.equal(failures(g, x2.label), 0, 'no connection dialled x2');
  await x2.start();
  await waitFor(async () => (await gauge(g, 'sni', 'x', x2.label)) === '1', 15_000, 'x2 up after rise');

  const listener = g.app.listeners[0]!;
  const group = listener.sniRoutes!.routes[0]!.upstreams;
  t.ok(group.checking, "the route's group is checked");
  const reload = (health: unknown): void => {
    const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(health) }] };
    t.same(g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners))).problems, []);
  };
  reload({ passive: null, active: { ...active } });
  t.equal(listener.sniRoutes!.routes[0]!.upstreams, group, 'the same rules: the group (its state, its checks) is kept');
  t.ok(group.checking);
  reload({ passive: null, active: null });
  t.notOk(group.checking, "checks off: the old group's checks stopped");
  t.equal(await gauge(g, 'sni', 'x', x2.label), undefined, 'and the route has no target gauge');
});

t.test('an idempotent GET whose target closes before answering goes to the next target; a POST gets 502', { skip }, async (t) => {
  const nginx = await threeBackends(t);
  const A = `127.0.0.1:${nginx.a}`;
  // Reads a request head, then closes without a byte of answer (a backend dying with the request in flight).
  const heads: string[] = [];
  const closer = net.createServer((c) => {
    c.on('error', () => undefined);
    let buf = '';
    c.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      if (!buf.includes('\r\n\r\n')) return;
      heads.push(buf.slice(0, buf.indexOf(' ')));
      c.destroy();
    });
  });
  await new Promise<void>((r) => closer.listen(0, '127.0.0.1', r));
  t.teardown(() => closer.close());
  const R = `127.0.0.1:${(closer.address() as net.AddressInfo).port}`;
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [R, A] },
        { name: 'h2c', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [R, A], http: { http2: { cleartext: true } } },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const send = (method: string): Promise<number> =>
    request({ port: g.port(), localAddress: '127.0.0.7', method, path: '/r', headers: { host: 'x' } }).then((r) => r.status);
  const gets: number[] = [];
  for (let i = 0; i < 4; i++) gets.push(await send('GET'));
  t.same(gets, [200, 200, 200, 200], 'every GET answered (by nginx)');
  t.same(heads, ['GET', 'GET'], 'two of them reached the closing target first (round robin), and were sent on');
  const posts = [await send('POST'), await send('POST')];
  t.same(posts, [502, 200], 'a POST the closing target took is not sent again (it may have acted on it): 502');
  t.same(heads, ['GET', 'GET', 'POST']);

  // The HTTP/2 engine, on the same rule (curl with prior knowledge over h2c).
  const h2: string[] = [];
  for (let i = 0; i < 4; i++) {
    const { stdout } = await execFileP('curl', [
      '-sS',
      '--http2-prior-knowledge',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} %{http_version}',
      `http://127.0.0.1:${g.port('h2c')}/s`,
    ]);
    h2.push(stdout);
  }
  t.same(h2, Array(4).fill('200 2'), 'every HTTP/2 GET answered');
  t.same(heads, ['GET', 'GET', 'POST', 'GET', 'GET'], 'two of them reached the closing target first');
});
