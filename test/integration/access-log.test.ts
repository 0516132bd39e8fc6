/**
 * The access log over real sockets, asserted field by field: an allowed PROXY-v2 client, a denied
 * client, an upstream failure, HTTP requests (allowed and 403), a PROXY header refused; each
 * denied request's line at info naming the route, the list, the entry and the reason (a route's
 * own list included); the denial lines' rate limit with the count of those suppressed; and with
 * the access log off, the denial summary at info ("N denials from M addresses in the last ... s",
 * bounded address set).
 */
import http from 'node:http';
import type net from 'node:net';
import t, { type Test } from 'tap';
import { createTcpEcho } from '../../src/echo/echo-server';
import { encodeProxyV1, encodeProxyV2 } from '../../src/proxy-protocol/encoder';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, connect, readAll, readLine, readUntil, refusingPort, waitFor } from '../helpers/net';
import { listenLoopback } from '../helpers/http';

type Line = Record<string, unknown>;

async function echoBackend(t: Test): Promise<number> {
  const server = createTcpEcho();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

async function httpBackend(t: Test): Promise<number> {
  const server = http.createServer((req, res) => res.end(`hello ${req.headers['x-real-ip']}\n`));
  return listenLoopback(t, server);
}

function accessLines(g: Started, listener: string): Line[] {
  return g.logs.lines.filter((l) => l.msg === 'access' && l.listener === listener);
}

async function accessLine(g: Started, listener: string, pred: (l: Line) => boolean): Promise<Line> {
  let found: Line | undefined;
  await waitFor(() => (found = accessLines(g, listener).find(pred)) !== undefined, 10_000, `access line on ${listener}`);
  return found!;
}

/** The fields whose values vary run to run: present and of the right type; the rest exact. */
function assertLine(t: Test, line: Line, exact: Line, numbers: string[]): void {
  for (const [k, v] of Object.entries(exact)) t.same(line[k], v, `${k} = ${JSON.stringify(v)}`);
  for (const k of numbers) t.type(line[k], 'number', `${k} is a number`);
  t.match(line.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'time in ISO 8601 UTC, as in production');
  t.notOk('clientAddress' in line, 'no stray fields');
}

t.test('TCP: allowed PROXY-v2 client, denied client, upstream failure', async (t) => {
  const backend = await echoBackend(t);
  const dead = refusingPort(t);
  const g = await startIpgate({
    logging: { denialSummaryIntervalMs: 0 },
    allowlists: { main: ['10.1.2.0/24', '127.0.0.2/32'] },
    listeners: [
      {
        name: 'edge',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [`127.0.0.1:${backend}`],
        proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.10/32'] },
      },
      { name: 'dead', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${dead}`] },
    ],
  });
  t.teardown(() => g.app.shutdown(0));

  // Allowed through a load balancer (127.0.0.10) sending PROXY v2 for 10.1.2.3:40000.
  const lb = await connect({ port: g.port('edge'), localAddress: '127.0.0.10' });
  const header = encodeProxyV2({ address: '10.1.2.3', port: 40000 }, { address: '192.0.2.1', port: 443 });
  lb.write(Buffer.concat([header, Buffer.from('ping\n')]));
  await readUntil(lb, 'ping\n');
  lb.end();
  await closed(lb);
  const allowed = await accessLine(g, 'edge', (l) => l.client === '10.1.2.3');
  assertLine(
    t,
    allowed,
    {
      level: 'info',
      msg: 'access',
      kind: 'tcp',
      listener: 'edge',
      client: '10.1.2.3',
      clientPort: 40000,
      via: 'proxy-v2',
      peer: '127.0.0.10',
      decision: 'allow',
      entry: '10.1.2.0/24',
      result: 'ok',
      upstream: `127.0.0.1:${backend}`,
      bytesIn: header.length + 5,
    },
    ['conn', 'bytesOut', 'durationMs'],
  );
  t.ok((allowed.bytesOut as number) > 5, 'bytesOut counts the echo line and the payload');
  t.notOk('reason' in allowed, 'no reason on an allowed connection');

  // Denied: 127.0.0.3 is trusted by nobody and not listed (no PROXY header from it: required mode
  // closes it as pp_untrusted) -- so use the plain listener for an allowlist denial.
  const denied = await connect({ port: g.port('dead'), localAddress: '127.0.0.3' });
  await readAll(denied);
  const deniedLine = await accessLine(g, 'dead', (l) => l.client === '127.0.0.3');
  assertLine(
    t,
    deniedLine,
    {
      level: 'info',
      msg: 'access',
      kind: 'tcp',
      listener: 'dead',
      client: '127.0.0.3',
      clientPort: denied.localPort,
      via: 'socket',
      peer: '127.0.0.3',
      decision: 'deny',
      reason: 'not_allowlisted',
      list: 'main',
      entry: null,
      result: 'denied',
      upstream: null,
      bytesOut: 0,
    },
    ['conn', 'bytesIn', 'durationMs'],
  );

  // Upstream failure: 127.0.0.2 is allowed, the upstream port is closed.
  const c = await connect({ port: g.port('dead'), localAddress: '127.0.0.2' });
  await readAll(c);
  const failed = await accessLine(g, 'dead', (l) => l.client === '127.0.0.2');
  assertLine(
    t,
    failed,
    {
      level: 'info',
      msg: 'access',
      kind: 'tcp',
      listener: 'dead',
      client: '127.0.0.2',
      via: 'socket',
      peer: '127.0.0.2',
      decision: 'allow',
      entry: '127.0.0.2/32',
      result: 'upstream_refused',
      upstream: `127.0.0.1:${dead}`,
      bytesOut: 0,
    },
    ['conn', 'clientPort', 'bytesIn', 'durationMs'],
  );
  const warn = g.logs.find((l) => l.msg === 'upstream connect failed');
  t.equal(warn?.level, 'warn', 'the upstream fault itself is a warning');

  // A PROXY header from a peer outside trustedSources: rejected, reason pp_untrusted.
  const rogue = await connect({ port: g.port('edge'), localAddress: '127.0.0.4' });
  rogue.write(encodeProxyV1({ address: '10.1.2.9', port: 1 }, { address: '192.0.2.1', port: 443 }));
  await readAll(rogue);
  const rejected = await accessLine(g, 'edge', (l) => l.peer === '127.0.0.4');
  assertLine(
    t,
    rejected,
    {
      level: 'info',
      kind: 'tcp',
      client: '127.0.0.4',
      via: 'socket',
      decision: 'reject',
      reason: 'pp_untrusted',
      result: 'pp_untrusted',
      upstream: null,
    },
    ['conn', 'durationMs'],
  );
  t.notOk('list' in rejected, 'a rejection before any list decided names none');
  t.notOk(
    accessLines(g, 'edge').some((l) => JSON.stringify(l).includes('10.1.2.9')),
    'an untrusted header never names the client',
  );
});

t.test('HTTP: a line per request, allowed and denied', async (t) => {
  const backend = await httpBackend(t);
  const g = await startIpgate({
    logging: { denialSummaryIntervalMs: 0 },
    allowlists: { main: ['127.0.0.2/32'] },
    listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${backend}`] }],
  });
  t.teardown(() => g.app.shutdown(0));
  const get = (localAddress: string, path: string): Promise<number> =>
    new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: g.port(), path, localAddress, agent: false }, (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
        })
        .once('error', reject);
    });
  t.equal(await get('127.0.0.2', '/a?b=1'), 200);
  t.equal(await get('127.0.0.5', '/secret'), 403);
  const ok = await accessLine(g, 'web', (l) => l.client === '127.0.0.2');
  assertLine(
    t,
    ok,
    {
      level: 'info',
      kind: 'http',
      listener: 'web',
      client: '127.0.0.2',
      via: 'socket',
      peer: '127.0.0.2',
      decision: 'allow',
      entry: '127.0.0.2/32',
      result: 'ok',
      upstream: `127.0.0.1:${backend}`,
      method: 'GET',
      path: '/a?b=1',
      status: 200,
    },
    ['conn', 'bytesOut', 'durationMs'],
  );
  const no = await accessLine(g, 'web', (l) => l.client === '127.0.0.5');
  assertLine(
    t,
    no,
    {
      level: 'info',
      kind: 'http',
      client: '127.0.0.5',
      decision: 'deny',
      reason: 'not_allowlisted',
      list: 'main',
      entry: null,
      result: 'denied',
      upstream: null,
      method: 'GET',
      path: '/secret',
      status: 403,
    },
    ['conn', 'bytesOut', 'durationMs'],
  );
  t.match(no.requestId, /^[0-9a-f]{32}$/, 'a denied request has its request id too');
  const stats = g.app.listeners[0]!.stats;
  await waitFor(() => stats.httpDuration.count === 2, 5000, 'both requests timed');
});

t.test('access log off: denials at info in one summary line per interval, addresses bounded', async (t) => {
  const backend = await echoBackend(t);
  const g = await startIpgate(
    {
      logging: { access: false, denialSummaryIntervalMs: 300, denialSummaryMaxAddresses: 2 },
      allowlists: { main: ['127.0.0.2/32'] },
      listeners: [{ name: 'edge', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${backend}`] }],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  for (const a of ['127.0.0.21', '127.0.0.22', '127.0.0.23', '127.0.0.21'])
    await readAll(await connect({ port: g.port(), localAddress: a }));
  const ok = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  ok.write('x');
  await readLine(ok);
  ok.end();
  await closed(ok);
  let summary: Line | undefined;
  await waitFor(() => (summary = g.logs.find((l) => typeof l.denials === 'number')) !== undefined, 5000, 'summary line');
  t.equal(summary!.msg, '4 denials from 2+ addresses in the last 0.3 s');
  t.match(summary, {
    level: 'info',
    denials: 4,
    addresses: 2,
    addressesCapped: true,
    reasons: { not_allowlisted: 4 },
    listeners: { edge: 4 },
  });
  t.same(summary!.sample, ['127.0.0.21', '127.0.0.22']);
  t.equal(g.logs.lines.filter((l) => l.msg === 'access').length, 0, 'no access lines');
  // Shutdown flushes the interval under way: nothing was denied since, so no second line.
  await g.app.shutdown(0);
  t.equal(g.logs.lines.filter((l) => typeof l.denials === 'number').length, 1, 'quiet intervals write nothing');
});

t.test('entry: the entry that admits the client, kept current when the list changes under a live connection', async (t) => {
  const tcpBackend = await echoBackend(t);
  const webBackend = await httpBackend(t);
  const g = await startIpgate({
    logging: { denialSummaryIntervalMs: 0 },
    allowlists: { main: ['127.0.0.0/24'] },
    listeners: [
      { name: 'edge', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${tcpBackend}`] },
      { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${webBackend}`] },
    ],
  });
  t.teardown(() => g.app.shutdown(0));
  // A TCP connection and an HTTP keep-alive connection, both admitted by 127.0.0.0/24.
  const tcp = await connect({ port: g.port('edge'), localAddress: '127.0.0.2' });
  tcp.write('one\n');
  await readUntil(tcp, 'one\n');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const get = (path: string): Promise<number> =>
    new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: g.port('web'), path, localAddress: '127.0.0.2', agent }, (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
        })
        .once('error', reject);
    });
  t.equal(await get('/before'), 200);
  // The list changes: the client is still allowed, now by a narrower entry.
  await g.app.service.replace('main', [{ cidr: '127.0.0.2/32' }, { cidr: '10.0.0.0/8' }], null, 'test');
  await waitFor(() => g.app.lists.get('main').matcher.entries.length === 2, 5000, 'new list applied');
  t.equal(await get('/after'), 200);
  tcp.end();
  await closed(tcp);
  const before = await accessLine(g, 'web', (l) => l.path === '/before');
  const after = await accessLine(g, 'web', (l) => l.path === '/after');
  t.equal(before.conn, after.conn, 'one keep-alive connection');
  t.equal(before.entry, '127.0.0.0/24', 'a request logs the entry that admitted it');
  t.equal(after.entry, '127.0.0.2/32', 'a request after the change logs the entry in force');
  const tcpLine = await accessLine(g, 'edge', (l) => l.client === '127.0.0.2');
  assertLine(t, tcpLine, { level: 'info', decision: 'allow', entry: '127.0.0.2/32', result: 'ok' }, [
    'conn',
    'bytesIn',
    'bytesOut',
    'durationMs',
  ]);
});

/** GET `path` from `localAddress` with Host `host`; the status. */
function get(port: number, localAddress: string, path: string, host = 'app.example'): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, localAddress, agent: false, headers: { host } }, (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      })
      .once('error', reject);
  });
}

t.test("a 403 from a route's own list: its access line at info names the route, the list, the deny entry and the reason", async (t) => {
  const backend = await httpBackend(t);
  const g = await startIpgate(
    {
      allowlists: {
        main: ['127.0.0.0/24'],
        partners: ['127.0.0.0/24', { cidr: '127.0.0.7/32', action: 'deny', comment: 'offboarded' }],
      },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${backend}`],
          routes: [
            { name: 'api', hosts: ['api.example'], allowlist: 'partners' },
            { name: 'site', hosts: ['*'] },
          ],
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  t.equal(await get(g.port(), '127.0.0.7', '/v1/orders', 'api.example'), 403, "the route's deny entry refuses");
  t.equal(await get(g.port(), '127.0.0.7', '/', 'www.example'), 200, "the same client on the listener's list");
  t.equal(await get(g.port(), '127.0.0.9', '/v1/orders', 'api.example:443'), 200);
  const line = await accessLine(g, 'web', (l) => l.decision === 'deny');
  assertLine(
    t,
    line,
    {
      level: 'info',
      kind: 'http',
      listener: 'web',
      client: '127.0.0.7',
      via: 'socket',
      decision: 'deny',
      reason: 'denied_by_entry',
      list: 'partners',
      entry: '127.0.0.7/32',
      route: 'api',
      result: 'denied',
      upstream: null,
      method: 'GET',
      path: '/v1/orders',
      status: 403,
      host: 'api.example',
    },
    ['conn', 'bytesOut', 'durationMs'],
  );
  t.equal(accessLines(g, 'web').length, 3, 'a line for every request, the 403 included');
  t.notOk(
    g.logs.find((l) => typeof l.denials === 'number'),
    'no summary with the access log on',
  );
});

t.test('denial lines past logging.deniedLinesPerSecond: counted, and one line says how many were not written', async (t) => {
  const backend = await httpBackend(t);
  const tcpBackend = await echoBackend(t);
  const g = await startIpgate(
    {
      logging: { deniedLinesPerSecond: 3 },
      allowlists: { main: ['127.0.0.2/32'] },
      listeners: [
        { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${backend}`] },
        { name: 'edge', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${tcpBackend}`] },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  // 12 denied requests on one keep-alive connection (pipelined: within a second), and 4 denied
  // TCP connections: one rate for the process.
  const s = await connect({ port: g.port('web'), localAddress: '127.0.0.5' });
  s.write(Array.from({ length: 12 }, (_, i) => `GET /${i} HTTP/1.1\r\nHost: a\r\n${i === 11 ? 'Connection: close\r\n' : ''}\r\n`).join(''));
  const text = (await readAll(s)).toString('latin1');
  t.equal([...text.matchAll(/^HTTP\/1\.1 403 /gm)].length, 12, 'every request answered 403');
  for (const a of ['127.0.0.21', '127.0.0.22', '127.0.0.23', '127.0.0.24'])
    await readAll(await connect({ port: g.port('edge'), localAddress: a }));
  const stats = g.app.listeners.map((l) => l.stats);
  await waitFor(() => stats[0]!.http.duration.count === 12 && stats[1]!.active === 0, 5000, 'all recorded');
  await g.app.shutdown(0); // writes the count of the second under way
  const denialLines = g.logs.lines.filter((l) => l.msg === 'access' && l.decision === 'deny');
  const counts = g.logs.lines.filter((l) => typeof l.suppressed === 'number');
  const suppressed = counts.reduce((n, l) => n + (l.suppressed as number), 0);
  t.ok(denialLines.length >= 3, `the first 3 a second are written (${denialLines.length})`);
  t.ok(counts.length >= 1, 'a count line');
  t.equal(denialLines.length + suppressed, 16, 'every denial is written or counted as suppressed');
  t.match(counts[0], {
    level: 'info',
    deniedLinesPerSecond: 3,
    msg: /^\d+ access lines? of denials and rejections suppressed in the last [\d.]+ s \(logging\.deniedLinesPerSecond: 3\); ipgate_denied_total counts every one$/,
  });
  t.equal(stats[0]!.denied.get('not_allowlisted'), 12, 'the metric counts every denial');
  for (const l of denialLines) t.equal(l.level, 'info');
});

t.test('access log off with a summary: the first denial of an address names its list and route', async (t) => {
  const backend = await httpBackend(t);
  const g = await startIpgate(
    {
      logging: { access: false, denialSummaryIntervalMs: 60_000, denialLinesPerInterval: 10 },
      allowlists: { main: ['127.0.0.0/24'], partners: ['10.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${backend}`],
          routes: [{ name: 'api', hosts: ['api.example'], allowlist: 'partners' }],
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  t.equal(await get(g.port(), '127.0.0.8', '/', 'api.example'), 403);
  let first: Line | undefined;
  await waitFor(
    () => (first = g.logs.find((l) => typeof l.msg === 'string' && l.msg.startsWith('denied 127.0.0.8'))) !== undefined,
    5000,
    'first-denial line',
  );
  t.match(first, {
    level: 'info',
    listener: 'web',
    route: 'api',
    list: 'partners',
    reason: 'not_allowlisted',
    msg: 'denied 127.0.0.8 (not_allowlisted) by list partners on route api; further denials of it this interval are counted in the summary',
  });
  t.equal(g.logs.lines.filter((l) => l.msg === 'access').length, 0, 'no access lines');
});
