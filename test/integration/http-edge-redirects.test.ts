/**
 * Redirect rules (docs/edge-rules.md "Redirects"), in process over real sockets with curl as the
 * client and nginx behind the routes that forward: HTTP to HTTPS per listener (308, its port) and
 * per route (301; null turns the listener's off), a trusted proxy's X-Forwarded-Proto deciding
 * (a forged one from an untrusted client is not), a fixed URL (ingress-nginx permanent-redirect),
 * a host redirect to `www.` keeping path and query, a path replaced; after the allowlist by
 * default (a refused client gets 403 and no Location), before it with `beforeAllowlist`; counted;
 * a reload changes a redirect live.
 */
import { execFile } from 'node:child_process';
import t from 'tap';
import { startIpgate } from '../helpers/ipgate';
import { missing } from '../helpers/peers';
import { request } from '../helpers/http';
import { threeBackends } from '../helpers/routes';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import type { Config } from '../../src/schema/config';

const skip = missing('nginx') || missing('curl');

/** curl from `from`: the status and the Location it was told to follow (not followed). */
function curl(
  url: string,
  resolvePort: number,
  host: string,
  from = '127.0.0.3',
  extra: string[] = [],
): Promise<{ status: number; location: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      'curl',
      [
        '-sS',
        '--max-time',
        '10',
        '--interface',
        from,
        '--resolve',
        `${host}:${resolvePort}:127.0.0.1`,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code} %{redirect_url}',
        ...extra,
        url,
      ],
      (err, stdout) => {
        if (err !== null) return reject(err);
        const [status, location] = stdout.split(' ');
        resolve({ status: Number(status), location: location ?? '' });
      },
    );
  });
}

type Routes = NonNullable<Config['listeners'][number]['routes']>;

t.test('redirects: HTTPS, URL, host, path; trusted X-Forwarded-Proto; order with the allowlist; reload', { skip }, async (t) => {
  const nginx = await threeBackends(t);
  const up = [`127.0.0.1:${nginx.a}`];
  const routes = (movedTo: string | null): Routes =>
    [
      { name: 'inherits', hosts: ['inherits.example'], upstreams: up },
      { name: 'plain', hosts: ['plain.example'], upstreams: up, http: { httpsRedirect: null } },
      { name: 'secure', hosts: ['secure.example'], upstreams: up, http: { httpsRedirect: { status: 301 } } },
      {
        name: 'moved',
        hosts: ['moved.example'],
        upstreams: up,
        http: { httpsRedirect: null, ...(movedTo === null ? {} : { redirect: { url: movedTo, status: 301 } }) },
      },
      {
        name: 'www',
        hosts: ['example.com'],
        upstreams: up,
        http: { httpsRedirect: null, redirect: { host: 'www.example.com', status: 308 } },
      },
      {
        name: 'newpath',
        hosts: ['path.example'],
        upstreams: up,
        http: { httpsRedirect: null, redirect: { path: '/new', scheme: 'https' } },
      },
      {
        name: 'late',
        hosts: ['late.example'],
        upstreams: up,
        allowlist: 'few',
        http: { httpsRedirect: null, redirect: { url: 'https://elsewhere.example/' } },
      },
      {
        name: 'early',
        hosts: ['early.example'],
        upstreams: up,
        allowlist: 'few',
        http: { httpsRedirect: null, redirect: { url: 'https://elsewhere.example/', beforeAllowlist: true } },
      },
    ] as unknown[] as Routes; // defaults (status, port, beforeAllowlist) left out, as in a config file
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'], few: ['127.0.0.3/32'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: up,
          http: { httpsRedirect: { status: 308, port: 8443 }, trustedProxies: ['127.0.0.9/32'] },
          routes: routes('https://new.example/landing'),
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  const at = (host: string, p = '/some/path?q=1'): string => `http://${host}:${port}${p}`;
  const edge = (route: string, rule: string): number => g.app.listeners[0]!.stats.edge.get(`${route}\0${rule}`) ?? 0;

  t.test('HTTP to HTTPS: the listener default, a route of its own, a route turning it off', async (t) => {
    t.same(
      await curl(at('inherits.example'), port, 'inherits.example'),
      { status: 308, location: 'https://inherits.example:8443/some/path?q=1' },
      "the listener's: 308 to its HTTPS port, path and query kept, the request's port dropped",
    );
    t.same(
      await curl(at('secure.example'), port, 'secure.example'),
      { status: 301, location: 'https://secure.example/some/path?q=1' },
      "the route's: 301, port 443 not written",
    );
    const plain = await curl(at('plain.example'), port, 'plain.example');
    t.same(plain, { status: 200, location: '' }, 'httpsRedirect: null: forwarded to nginx');
    t.equal(edge('inherits', 'https_redirect'), 1, 'counted per route and rule');
  });

  t.test("a trusted proxy's X-Forwarded-Proto decides; an untrusted client's is ignored", async (t) => {
    const https = await request({
      port,
      localAddress: '127.0.0.9',
      path: '/x',
      headers: { host: 'inherits.example', 'x-forwarded-proto': 'https', 'x-forwarded-for': '127.0.0.3' },
    });
    t.equal(https.status, 200, 'the proxy terminated TLS: forwarded');
    t.match(https.body, /^A\|\/x\|/, 'to nginx');
    const http = await request({
      port,
      localAddress: '127.0.0.9',
      path: '/x',
      headers: { host: 'inherits.example', 'x-forwarded-proto': 'http', 'x-forwarded-for': '127.0.0.3' },
    });
    t.equal(http.status, 308, 'the proxy says plain HTTP: redirected');
    const forged = await curl(at('inherits.example', '/x'), port, 'inherits.example', '127.0.0.3', ['-H', 'X-Forwarded-Proto: https']);
    t.equal(forged.status, 308, 'a direct client claiming https is redirected all the same');
  });

  t.test('URL, host and path redirects', async (t) => {
    t.same(
      await curl(at('moved.example'), port, 'moved.example'),
      { status: 301, location: 'https://new.example/landing' },
      'a fixed URL, the path not appended',
    );
    t.same(
      await curl(at('example.com'), port, 'example.com'),
      { status: 308, location: `http://www.example.com:${port}/some/path?q=1` },
      'to www.: scheme, port, path and query kept',
    );
    t.same(
      await curl(at('path.example', '/old?a=b'), port, 'path.example'),
      { status: 302, location: 'https://path.example/new?a=b' },
      'a path replaced (the query kept), the scheme changed (its default port): 302 by default',
    );
    const c = await request({
      port,
      localAddress: '127.0.0.3',
      method: 'POST',
      path: '/p',
      headers: { host: 'moved.example' },
      body: 'x'.repeat(1000),
    });
    t.equal(c.status, 301, 'a request with a body is redirected too');
    t.equal(c.headers.location, 'https://new.example/landing');
    t.equal(c.headers['content-length'], '0');
  });

  t.test('after the allowlist by default; before it with beforeAllowlist', async (t) => {
    t.same(
      await curl(at('late.example'), port, 'late.example', '127.0.0.4'),
      { status: 403, location: '' },
      'a refused client learns nothing but 403',
    );
    t.same(
      await curl(at('late.example'), port, 'late.example', '127.0.0.3'),
      { status: 302, location: 'https://elsewhere.example/' },
      'an allowed one is redirected',
    );
    t.same(
      await curl(at('early.example'), port, 'early.example', '127.0.0.4'),
      { status: 302, location: 'https://elsewhere.example/' },
      "beforeAllowlist: nginx's order, a refused client is redirected too",
    );
  });

  t.test('a reload changes a redirect live', async (t) => {
    const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes('https://newer.example/') }] };
    t.same(g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners))).problems, []);
    t.same(await curl(at('moved.example'), port, 'moved.example'), { status: 301, location: 'https://newer.example/' }, 'the new URL');
    const off = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(null) }] };
    t.same(g.app.replaceRoutes(routesUpdate(off, routesVersion(off.listeners))).problems, []);
    t.same(await curl(at('moved.example'), port, 'moved.example'), { status: 200, location: '' }, 'removed: forwarded');
  });

  t.test('the counter is published', async (t) => {
    const text = await g.app.metrics.scrape();
    t.match(text, /ipgate_http_edge_total\{listener="web",route="moved",rule="redirect"\} [1-9]/);
  });
});

t.test('a listener without routes: httpsRedirect before the allowlist answers refused direct clients too', { skip }, async (t) => {
  const nginx = await threeBackends(t);
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.3/32'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${nginx.b}`],
          http: { httpsRedirect: { beforeAllowlist: true } },
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  t.same(
    await curl(`http://a.example:${port}/`, port, 'a.example', '127.0.0.4'),
    { status: 308, location: 'https://a.example/' },
    'refused for the whole connection, still redirected (no quick denial)',
  );
  t.same(await curl(`http://a.example:${port}/`, port, 'a.example', '127.0.0.3'), { status: 308, location: 'https://a.example/' });
});
