/**
 * Routes on an HTTP listener, over real sockets to real nginx backends (docs/routes-and-sni.md):
 * two hosts (and a wildcard and the default) and three paths to three backends, each route's
 * allowlist decided per request (one keep-alive connection carries an allowed and a denied host),
 * exact vs prefix and the longest prefix, 404 / 400 for misses with their counters, per-route
 * requestHeaders / upstreamTimeoutMs / deniedBody, the normal form forwarded, the `route` label in
 * metrics and the access log, and a listener without routes unchanged.
 */
import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { readAll, stalledPort, waitFor } from '../helpers/net';
import { threeBackends } from '../helpers/routes';
import { missing } from '../helpers/peers';
import { request } from '../helpers/http';

const skip = missing('nginx');

function routedConfig(ports: { a: number; b: number; c: number }, stalled: number): Record<string, unknown> {
  return {
    allowlists: { everyone: ['127.0.0.0/8'], api: ['127.0.0.3/32', '127.0.0.5/32'], admin: ['127.0.0.5/32'] },
    listeners: [
      {
        name: 'edge',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'everyone',
        upstreams: [`127.0.0.1:${ports.c}`],
        routes: [
          {
            name: 'api',
            hosts: ['api.example.com'],
            paths: [
              { path: '/v1', match: 'prefix' },
              { path: '/health', match: 'exact' },
            ],
            upstreams: [`127.0.0.1:${ports.a}`],
            allowlist: 'api',
            http: { requestHeaders: { 'X-Route': 'api' }, deniedBody: 'api: not for you\n' },
          },
          {
            name: 'api-admin',
            hosts: ['api.example.com'],
            paths: [{ path: '/v1/admin', match: 'prefix' }],
            upstreams: [`127.0.0.1:${ports.b}`],
            allowlist: 'admin',
          },
          { name: 'tenants', hosts: ['*.tenants.example.com', 'shop.example.com'], upstreams: [`127.0.0.1:${ports.b}`] },
          { name: 'slow', hosts: ['slow.example.com'], upstreams: [`127.0.0.1:${stalled}`], http: { upstreamTimeoutMs: 300 } },
          { name: 'default', hosts: ['*'] },
        ],
      },
    ],
  };
}

/** Requests on one keep-alive connection from `localAddress`; returns each status, body and the client port used. */
async function keepAlive(
  port: number,
  localAddress: string,
  reqs: Array<{ host: string; path: string }>,
): Promise<Array<{ status: number; body: string; localPort: number }>> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const out: Array<{ status: number; body: string; localPort: number }> = [];
  try {
    for (const r of reqs) {
      out.push(
        await new Promise((resolve, reject) => {
          const req = http.request({ host: '127.0.0.1', port, path: r.path, localAddress, agent, headers: { host: r.host } }, (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body, localPort: req.socket!.localPort! }));
          });
          req.on('error', reject);
          req.end();
        }),
      );
    }
  } finally {
    agent.destroy();
  }
  return out;
}

t.test('routes on an HTTP listener', { skip }, async (t) => {
  const ports = await threeBackends(t);
  const stalled = await stalledPort();
  t.teardown(stalled.cleanup);
  const g: Started = await startIpgate(routedConfig(ports, stalled.port), 'info');
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();

  const cases: Array<{ desc: string; host: string; path: string; from: string; status: number; body?: RegExp }> = [
    {
      desc: 'exact host, prefix path: backend A with the route header',
      host: 'api.example.com',
      path: '/v1/users?x=1',
      from: '127.0.0.3',
      status: 200,
      body: /^A\|\/v1\/users\?x=1\|api\|127\.0\.0\.3$/,
    },
    { desc: 'the prefix itself', host: 'api.example.com', path: '/v1', from: '127.0.0.3', status: 200, body: /^A\|\/v1\|api\|/ },
    { desc: 'exact path', host: 'api.example.com', path: '/health', from: '127.0.0.3', status: 200, body: /^A\|\/health\|api\|/ },
    {
      desc: 'exact path does not take a longer one: the host decides, no fallback to the default',
      host: 'api.example.com',
      path: '/health/x',
      from: '127.0.0.3',
      status: 404,
      body: /^Not Found$/,
    },
    { desc: 'prefix on a / boundary only', host: 'api.example.com', path: '/v1x', from: '127.0.0.3', status: 404 },
    {
      desc: 'longest prefix wins: /v1/admin to backend B, its allowlist admits .5',
      host: 'api.example.com',
      path: '/v1/admin/users',
      from: '127.0.0.5',
      status: 200,
      body: /^B\|\/v1\/admin\/users\|\|127\.0\.0\.5$/,
    },
    {
      desc: "longest prefix wins: /v1/admin refuses .3 (its own allowlist, its own 403 body: the listener's)",
      host: 'api.example.com',
      path: '/v1/admin',
      from: '127.0.0.3',
      status: 403,
      body: /Forbidden|denied|not allowed/i,
    },
    {
      desc: 'route allowlist: .4 is not in "api": the route\'s deniedBody',
      host: 'api.example.com',
      path: '/v1/users',
      from: '127.0.0.4',
      status: 403,
      body: /^api: not for you$/,
    },
    {
      desc: 'Host any case, with a port and a trailing dot',
      host: 'API.Example.COM.:8080',
      path: '/v1/x',
      from: '127.0.0.3',
      status: 200,
      body: /^A\|\/v1\/x\|api\|/,
    },
    {
      desc: 'wildcard, one label',
      host: 'acme.tenants.example.com',
      path: '/any/thing',
      from: '127.0.0.4',
      status: 200,
      body: /^B\|\/any\/thing\|\|127\.0\.0\.4$/,
    },
    { desc: 'wildcard, several labels', host: 'a.b.tenants.example.com', path: '/', from: '127.0.0.4', status: 200, body: /^B\|\/\|/ },
    {
      desc: 'wildcard never the bare suffix: default route, listener upstream C',
      host: 'tenants.example.com',
      path: '/',
      from: '127.0.0.4',
      status: 200,
      body: /^C\|\/\|\|127\.0\.0\.4$/,
    },
    { desc: 'second host of a route', host: 'shop.example.com', path: '/cart', from: '127.0.0.4', status: 200, body: /^B\|\/cart\|/ },
    { desc: 'unknown host: the default route', host: 'unknown.example.org', path: '/x', from: '127.0.0.4', status: 200, body: /^C\|\/x\|/ },
    { desc: 'an IP literal Host: the default route', host: '127.0.0.1', path: '/ip', from: '127.0.0.4', status: 200, body: /^C\|\/ip\|/ },
    {
      desc: 'normal form forwarded: dot segments resolved before matching and upstream',
      host: 'api.example.com',
      path: '/v1/./a/../users',
      from: '127.0.0.3',
      status: 200,
      body: /^A\|\/v1\/users\|api\|/,
    },
    {
      desc: 'normal form forwarded: merged slashes, query as sent',
      host: 'api.example.com',
      path: '//v1//users?q=%2F',
      from: '127.0.0.3',
      status: 200,
      body: /^A\|\/v1\/users\?q=%2F\|api\|/,
    },
    {
      desc: 'encoded dot segments leave /v1: decided (and refused) as /secret',
      host: 'api.example.com',
      path: '/v1/%2e%2e/secret',
      from: '127.0.0.3',
      status: 404,
    },
    {
      desc: 'encoded slash: 400 route_bad_path',
      host: 'api.example.com',
      path: '/v1/a%2Fb',
      from: '127.0.0.3',
      status: 400,
      body: /^Bad Request$/,
    },
    { desc: '.. above the root: 400', host: 'api.example.com', path: '/../etc', from: '127.0.0.3', status: 400 },
  ];
  for (const c of cases) {
    const r = await request({ port, localAddress: c.from, path: c.path, headers: { host: c.host } });
    t.equal(r.status, c.status, `${c.desc}: status`);
    if (c.body !== undefined) t.match(r.body.trim(), c.body, `${c.desc}: body`);
  }

  t.test('one keep-alive connection, two hosts: one allowed, one denied, per request', async (t) => {
    const rs = await keepAlive(port, '127.0.0.4', [
      { host: 'acme.tenants.example.com', path: '/one' },
      { host: 'api.example.com', path: '/v1/users' },
      { host: 'acme.tenants.example.com', path: '/two' },
      { host: 'nowhere.invalid', path: '/three' },
    ]);
    t.same(
      rs.map((r) => r.status),
      [200, 403, 200, 200],
    );
    t.equal(new Set(rs.map((r) => r.localPort)).size, 1, 'all four on one client connection');
    t.match(rs[0]!.body, /^B\|\/one\|/);
    t.equal(rs[1]!.body, 'api: not for you\n');
    t.match(rs[2]!.body, /^B\|\/two\|/);
    t.match(rs[3]!.body, /^C\|\/three\|/);
  });

  t.test("per-route upstreamTimeoutMs: 504 after the route's 300 ms, not the listener's", async (t) => {
    const started = Date.now();
    const r = await request({ port, localAddress: '127.0.0.4', path: '/', headers: { host: 'slow.example.com' } });
    t.equal(r.status, 504);
    const ms = Date.now() - started;
    t.ok(ms >= 250 && ms < 5000, `answered after ${ms} ms`);
  });

  t.test('an absolute-form target: its authority (not the Host header) picks the route', async (t) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.3' });
    t.teardown(() => s.destroy());
    s.write('GET http://api.example.com/v1/abs HTTP/1.1\r\nHost: ignored.example\r\nConnection: close\r\n\r\n');
    const got = (await readAll(s, 5000)).toString();
    t.match(got, /^HTTP\/1\.1 200/);
    t.match(got, /A\|\/v1\/abs\|api\|127\.0\.0\.3/, 'the authority picked the route; the path went upstream');
  });

  t.test('metrics carry the route; misses counted by reason', async (t) => {
    const text = await g.app.metrics.registry.metrics();
    const value = (re: RegExp): number => Number(re.exec(text)?.[1] ?? NaN);
    /** ipgate_http_requests_total of `route` and `cls` over every method and status (HTTP/1.1). */
    const requests = (route: string, cls: string): number => {
      const re = new RegExp(
        `^ipgate_http_requests_total\\{listener="edge",route="${route}",method="\\w+",status="\\w+",code_class="${cls}",protocol="h1"\\} (\\d+)$`,
        'gm',
      );
      let n = 0;
      for (const m of text.matchAll(re)) n += Number(m[1]);
      return n;
    };
    t.ok(requests('api', '2xx') >= 6, 'api 2xx');
    t.ok(requests('api', '4xx') >= 2, 'api 4xx (its 403s)');
    t.ok(requests('tenants', '2xx') >= 5, 'tenants 2xx');
    t.ok(requests('slow', '5xx') >= 1, 'slow 5xx');
    t.equal(
      value(/ipgate_http_route_misses_total\{listener="edge",reason="route_no_path"\} (\d+)/),
      3,
      'route_no_path: /health/x, /v1x, /secret',
    );
    t.equal(value(/ipgate_http_route_misses_total\{listener="edge",reason="route_bad_path"\} (\d+)/), 2, 'route_bad_path: %2F, /../');
    t.ok(requests('', '4xx') >= 5, 'misses under route=""');
    t.match(text, /ipgate_http_request_duration_seconds_count\{listener="edge",route="api"\} \d+/);
    t.notMatch(text, /ipgate_http_requests_total\{listener="edge",method=/, 'no route-less series on a routed listener');
    t.ok(value(/ipgate_denied_total\{listener="edge",reason="not_allowlisted"\} (\d+)/) >= 3, 'route denials counted as denials');
  });

  t.test('the access log names the route', async (t) => {
    await waitFor(() => g.logs.lines.some((l) => l.msg === 'access' && l.route === 'tenants' && l.path === '/cart'));
    const hit = g.logs.find((l) => l.msg === 'access' && l.path === '/v1/users?x=1')!;
    t.equal(hit.route, 'api');
    t.equal(hit.decision, 'allow');
    const miss = g.logs.find((l) => l.msg === 'access' && l.path === '/health/x')!;
    t.equal(miss.route, null);
    t.equal(miss.result, 'route_no_path');
    t.equal(miss.decision, 'none');
    t.equal(miss.status, 404);
  });
});

t.test('a listener without routes: no route field, no route label, behaviour unchanged', { skip }, async (t) => {
  const ports = await threeBackends(t);
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.3/32'] },
      listeners: [{ name: 'plain', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${ports.a}`] }],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const ok = await request({ port: g.port(), localAddress: '127.0.0.3', path: '/a/../b', headers: { host: 'whatever' } });
  t.equal(ok.status, 200);
  t.match(ok.body, /^A\|\/a\/\.\.\/b\|\|127\.0\.0\.3/, 'the target goes upstream as sent (no route normalisation)');
  t.equal((await request({ port: g.port(), localAddress: '127.0.0.4', path: '/' })).status, 403);
  const text = await g.app.metrics.registry.metrics();
  t.match(text, /ipgate_http_requests_total\{listener="plain",method="GET",status="200",code_class="2xx",protocol="h1"\} 1/);
  t.notMatch(text, /ipgate_http_requests_total\{[^}]*route=/, 'no route label');
  await waitFor(() => g.logs.lines.some((l) => l.msg === 'access' && l.path === '/a/../b'));
  t.notOk('route' in g.logs.find((l) => l.msg === 'access' && l.path === '/a/../b')!, 'no route field');
});
