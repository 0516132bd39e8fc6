/**
 * Prefix rewrites (docs/edge-rules.md "Rewrites"), in process over real sockets with nginx as the
 * backend reporting the target and X-Forwarded-Prefix it received: the matched prefix replaced
 * (`/` strips it, ingress-nginx `rewrite-target: /$2`), an exact path replaced, a prefix added on a
 * route without paths, the query kept, the normal form rewritten (never the client's spelling), a
 * forged X-Forwarded-Prefix replaced; a crafted long path costs linear time (no regular
 * expression runs on a request); refused with servlet path parameters; a reload changes it live.
 */
import t from 'tap';
import { startIpgate } from '../helpers/ipgate';
import { freePort } from '../helpers/net';
import { missing, nginxHttpPreamble, startNginx } from '../helpers/peers';
import { rawRequest, request } from '../helpers/http';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import type { Config } from '../../src/schema/config';

const skip = missing('nginx');

type Routes = NonNullable<Config['listeners'][number]['routes']>;

t.test('rewrites: prefix replaced, X-Forwarded-Prefix, normal form, crafted path, reload', { skip }, async (t) => {
  const np = await freePort();
  const peer = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  large_client_header_buffers 4 32k;
  server { listen 127.0.0.1:${np}; location / { return 200 "$request_uri|$http_x_forwarded_prefix\\n"; } }
}`,
    [np],
  );
  t.teardown(() => peer.stop());
  const up = [`127.0.0.1:${np}`];
  const routes = (apiTo: string): Routes =>
    [
      {
        name: 'api',
        hosts: ['a.example'],
        paths: [{ path: '/api/v1/', match: 'prefix' }],
        upstreams: up,
        http: { rewrite: { replacePrefix: apiTo, forwardedPrefix: true } },
      },
      {
        name: 'old',
        hosts: ['a.example'],
        paths: [{ path: '/old', match: 'prefix' }],
        upstreams: up,
        http: { rewrite: { replacePrefix: '/new/', forwardedPrefix: false } },
      },
      {
        name: 'login',
        hosts: ['a.example'],
        paths: [{ path: '/login', match: 'exact' }],
        upstreams: up,
        http: { rewrite: { replacePrefix: '/auth/login', forwardedPrefix: true } },
      },
      { name: 'plain', hosts: ['a.example'], paths: [{ path: '/', match: 'prefix' }], upstreams: up },
      { name: 'add', hosts: ['b.example'], upstreams: up, http: { rewrite: { replacePrefix: '/app', forwardedPrefix: true } } },
    ] as unknown[] as Routes;
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: up, routes: routes('/') }],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  /** What nginx saw (`target|X-Forwarded-Prefix`), or the status when it was not a 200. */
  const seen = async (path: string, host = 'a.example', headers: Record<string, string> = {}): Promise<string> => {
    const r = await request({ port, localAddress: '127.0.0.3', path, headers: { host, ...headers } });
    return r.status === 200 ? r.body.trimEnd() : `status ${r.status}`;
  };

  t.test('the matched prefix replaced; the query kept; X-Forwarded-Prefix', async (t) => {
    t.equal(await seen('/api/v1/users/7?expand=1'), '/users/7?expand=1|/api/v1', 'replacePrefix "/": the prefix stripped');
    t.equal(await seen('/api/v1'), '/|/api/v1', 'the prefix itself: "/"');
    t.equal(await seen('/api/v1?q=1'), '/?q=1|/api/v1');
    t.equal(await seen('/api/v1/'), '/|/api/v1');
    t.equal(await seen('/old/a/b'), '/new/a/b|', 'replaced by "/new/" (one slash), no X-Forwarded-Prefix when turned off');
    t.equal(await seen('/login?next=/x'), '/auth/login?next=/x|/login', 'an exact path replaced');
    t.equal(await seen('/x', 'b.example'), '/app/x|', 'a route without paths: the prefix added');
    t.equal(await seen('/other'), '/other|', 'a route without a rewrite: as sent');
    t.equal(g.app.listeners[0]!.stats.edge.get('api\0rewrite'), 4, 'counted');
  });

  t.test('the normal form is rewritten; a forged X-Forwarded-Prefix is replaced or dropped', async (t) => {
    t.equal(await seen('/api/v1/a/../b/./c'), '/b/c|/api/v1', 'dot segments resolved before the rewrite');
    t.equal(await seen('/api/%76%31/x'), '/x|/api/v1', 'an encoded unreserved character matched and rewritten in normal form');
    t.equal(await seen('/api/v1/x', 'a.example', { 'x-forwarded-prefix': '/evil' }), '/x|/api/v1', "ours replaces a client's");
    t.equal(await seen('/old/x', 'a.example', { 'x-forwarded-prefix': '/evil' }), '/new/x|', "a client's is dropped where ours is off");
    const dotted = await rawRequest(
      port,
      Buffer.from('GET /api/v1/../../etc HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n'),
      '127.0.0.3',
    );
    t.equal(
      dotted.body.trimEnd(),
      '/etc|',
      '/api/v1/../../etc is /etc: no dot segment survives, the plain route took it, nothing rewritten',
    );
  });

  t.test('a crafted path costs time linear in its length', async (t) => {
    const times: number[] = [];
    for (const n of [1000, 4000, 8000]) {
      const p = `/api/v1/${'a/'.repeat(n)}`;
      const start = performance.now();
      t.ok((await seen(p)) === `/${'a/'.repeat(n)}|/api/v1`, `${p.length} bytes of path rewritten`);
      times.push(performance.now() - start);
    }
    t.ok(times[2]! < 1000, `16 KB of path answered in ${Math.round(times[2]!)} ms (no backtracking)`);
  });

  t.test('a reload changes a rewrite live', async (t) => {
    const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes('/v2') }] };
    t.same(g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners))).problems, []);
    t.equal(await seen('/api/v1/users'), '/v2/users|/api/v1', 'the new replacement');
  });
});

t.test('a rewrite on a listener reading servlet path parameters is refused by name', async (t) => {
  await t.rejects(
    startIpgate(
      {
        allowlists: { main: ['127.0.0.0/8'] },
        listeners: [
          {
            name: 'web',
            mode: 'http',
            listen: '127.0.0.1:0',
            allowlist: 'main',
            upstreams: ['127.0.0.1:1'],
            http: { pathParameters: 'servlet' },
            routes: [{ name: 'api', hosts: ['*'], paths: [{ path: '/api', match: 'prefix' }], http: { rewrite: { replacePrefix: '/' } } }],
          },
        ],
      },
      'info',
    ),
    /routes "api": http\.rewrite cannot be used on a listener with http\.pathParameters "servlet"/,
  );
});
