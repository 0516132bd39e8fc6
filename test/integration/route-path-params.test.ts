/**
 * Issue 27, finding 2: path parameters and case let a client past a route's allowlist. Routes
 * `/admin` (guarded: only 127.0.0.3) and `/` (open) on one backend; client 127.0.0.2 sends raw
 * request lines (no client library in between):
 * - Tomcat served /admin/index.html for `/admin;x=1/`, `/;/admin/` and `/public/..;/admin/`
 *   (a servlet container cuts every segment at its ";" before resolving dot segments), which
 *   ipgate decided by `/`; explain agreed with the wire;
 * - nginx `location /admin` took `/admin;x=1/` and `/admin%3bx=1/`;
 * - a case-insensitive router (Express's routing) served `/ADMIN/` as admin under `/`'s decision.
 * Now: ";" and "%3B" are refused (400, route_path_params, counted) on routed listeners; with
 * `http.pathParameters: servlet` the route is chosen on the servlet reading and the upstream gets
 * that normal form (parameters of the remaining segments kept); `ignoreCase` paths match
 * `/ADMIN/` for a case-insensitive backend. Each row fails on the code before the fix.
 */
import t from 'tap';
import { startAdminGate } from '../helpers/admin-api';
import { rawRequest, type RawReply } from '../helpers/http';
import { locationNginx, locationTomcat, locationWhatwg, servedLocation } from '../helpers/location-backends';
import { missing } from '../helpers/peers';
import { threeBackends } from '../helpers/routes';
import { tomcatMissing } from '../helpers/tomcat';

const skip = missing('nginx') || tomcatMissing();

const ATTACKER = '127.0.0.2'; // in "open", not in "guarded"
const INSIDER = '127.0.0.3'; // in both

/** Routes `/admin` (guarded) and `/` (open) on www.example.com, to one backend. */
function listener(name: string, port: number, opts: { servlet?: boolean; ignoreCase?: boolean } = {}): Record<string, unknown> {
  return {
    name,
    mode: 'http',
    listen: '127.0.0.1:0',
    allowlist: 'open',
    upstreams: [`127.0.0.1:${port}`],
    http: opts.servlet === true ? { pathParameters: 'servlet' } : {},
    routes: [
      {
        name: 'www-admin',
        hosts: ['www.example.com'],
        paths: [{ path: '/admin', match: 'prefix', ...(opts.ignoreCase === true ? { ignoreCase: true } : {}) }],
        allowlist: 'guarded',
        http: { deniedBody: 'denied by www-admin\n', requestHeaders: { 'X-Route': 'www-admin' } },
      },
      { name: 'www', hosts: ['www.example.com'], paths: [{ path: '/', match: 'prefix' }], http: { requestHeaders: { 'X-Route': 'www' } } },
    ],
  };
}

const get = (target: string): Buffer =>
  Buffer.from(`GET ${target} HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n`, 'latin1');

/** "status loc=..." or "status own: <body>" for ipgate's own answers (they carry no Date header). */
function show(r: RawReply): string {
  const loc = servedLocation(r.body);
  if (r.header('date') === undefined) return `${r.status} ipgate: ${r.body.trim()}`;
  return loc === null ? `${r.status} backend, no location` : `${r.status} loc=${loc}`;
}

t.test('finding 2: path parameters and case, over real sockets', { skip }, async (t) => {
  const [nginxPrefix, tomcat, whatwg, echo] = await Promise.all([
    locationNginx(t, { locationAdmin: 'prefix' }),
    locationTomcat(t),
    locationWhatwg(t),
    threeBackends(t),
  ]);
  const g = await startAdminGate(t, {
    allowlists: { open: ['127.0.0.0/8'], guarded: [`${INSIDER}/32`] },
    listeners: [
      listener('nginx', nginxPrefix),
      listener('tomcat', tomcat),
      listener('tomcat-servlet', tomcat, { servlet: true }),
      listener('echo-servlet', echo.a, { servlet: true }),
      listener('whatwg', whatwg, { ignoreCase: true }),
      listener('whatwg-case-sensitive', whatwg),
    ],
  });

  const rows: Array<[desc: string, listener: string, from: string, target: string, want: string]> = [
    // Refused by default: the bypasses of the issue.
    ['Tomcat: /admin;x=1/ (served /admin/index.html under "/")', 'tomcat', ATTACKER, '/admin;x=1/', '400 ipgate: Bad Request'],
    ['Tomcat: /;/admin/', 'tomcat', ATTACKER, '/;/admin/', '400 ipgate: Bad Request'],
    [
      'Tomcat: /public/..;/admin/ ("..;" is ".." to a servlet container)',
      'tomcat',
      ATTACKER,
      '/public/..;/admin/',
      '400 ipgate: Bad Request',
    ],
    ['nginx location /admin: /admin;x=1/', 'nginx', ATTACKER, '/admin;x=1/', '400 ipgate: Bad Request'],
    ['nginx location /admin: /admin%3bx=1/ (nginx decodes %3B)', 'nginx', ATTACKER, '/admin%3bx=1/', '400 ipgate: Bad Request'],
    ['the route still decides a plain /admin/', 'tomcat', ATTACKER, '/admin/', '403 ipgate: denied by www-admin'],
    ['and serves it to a client of its list', 'tomcat', INSIDER, '/admin/', '200 loc=www-admin'],
    ['a ";" in the query is not a path parameter', 'tomcat', ATTACKER, '/?a;b', '200 loc=www-root'],
    // http.pathParameters: servlet decides on the servlet container's reading.
    ['servlet: /admin;x=1/ is /admin', 'tomcat-servlet', ATTACKER, '/admin;x=1/', '403 ipgate: denied by www-admin'],
    ['servlet: /;/admin/ is /admin/', 'tomcat-servlet', ATTACKER, '/;/admin/', '403 ipgate: denied by www-admin'],
    ['servlet: /public/..;/admin/ is /admin/', 'tomcat-servlet', ATTACKER, '/public/..;/admin/', '403 ipgate: denied by www-admin'],
    ['servlet: the admitted client gets /admin/ from Tomcat', 'tomcat-servlet', INSIDER, '/public/..;/admin/', '200 loc=www-admin'],
    [
      'servlet: jsessionid reaches Tomcat, which serves the file',
      'tomcat-servlet',
      INSIDER,
      '/admin/index.html;jsessionid=ABC',
      '200 loc=www-admin',
    ],
    ['servlet: /admin/..;/ is "/" for both', 'tomcat-servlet', ATTACKER, '/admin/..;/', '200 loc=www-root'],
    [
      'servlet: %3B is still refused (Tomcat reads it as part of the name, nginx as ";")',
      'tomcat-servlet',
      ATTACKER,
      '/admin%3bx=1/',
      '400 ipgate: Bad Request',
    ],
    // Case: a case-insensitive backend needs ignoreCase on the route's paths.
    ['ignoreCase: /ADMIN/ is decided by /admin', 'whatwg', ATTACKER, '/ADMIN/', '403 ipgate: denied by www-admin'],
    ['ignoreCase: /Admin/x too', 'whatwg', ATTACKER, '/Admin/x', '403 ipgate: denied by www-admin'],
    ['ignoreCase: the admitted client is served admin', 'whatwg', INSIDER, '/ADMIN/', '200 loc=www-admin'],
    ['ignoreCase: /ADMINX is not /admin', 'whatwg', ATTACKER, '/ADMINX', '200 loc=www-root'],
    [
      'without ignoreCase, the risk docs/routes-and-sni.md names: "/" decides /ADMIN/, the router serves admin',
      'whatwg-case-sensitive',
      ATTACKER,
      '/ADMIN/',
      '200 loc=www-admin',
    ],
  ];
  for (const [desc, name, from, target, want] of rows) {
    t.equal(show(await rawRequest(g.port(name), get(target), from)), want, `${desc} (${name}, ${from} ${target})`);
  }

  // The upstream receives the servlet normal form: parameters of the remaining segments kept,
  // removed segments (and theirs) gone, so no backend resolves a "..;" the router did not.
  const forwarded: Array<[string, string]> = [
    ['/public;v=1/..;x/admin/x;jsessionid=ABC?q=1', '/admin/x;jsessionid=ABC?q=1'],
    ['/;/admin/', '/admin/'],
    ['/app;jsessionid=ABC/cart', '/app;jsessionid=ABC/cart'],
  ];
  for (const [target, want] of forwarded) {
    const r = await rawRequest(g.port('echo-servlet'), get(target), INSIDER);
    t.equal(r.body.split('|')[1], want, `servlet: ${target} is forwarded as ${want}`);
  }

  // Counted, logged with its reason, and explain says what the wire does.
  const metrics = await g.api('GET', '/metrics');
  t.match(
    metrics.text,
    /ipgate_http_route_misses_total\{listener="tomcat",reason="route_path_params"\} 3/,
    'counted per listener with its reason',
  );
  t.ok(
    g.logs.find((l) => l.result === 'route_path_params' && l.path === '/admin;x=1/' && l.route === null),
    'the access line says why',
  );
  const explain = async (listenerName: string, path: string): Promise<Record<string, unknown>> =>
    (await g.api('POST', '/v1/explain', { body: { listener: listenerName, peer: ATTACKER, host: 'www.example.com', path } })).json;
  t.match(
    await explain('tomcat', '/public/..;/admin/'),
    { decision: 'no_route', reason: 'route_path_params', status: 400 },
    'explain: refused',
  );
  t.match(
    await explain('tomcat-servlet', '/public/..;/admin/'),
    { decision: 'deny', route: { name: 'www-admin', path: { path: '/admin', match: 'prefix' } } },
    'explain: the servlet reading',
  );
  t.match(
    await explain('whatwg', '/ADMIN/'),
    { decision: 'deny', route: { name: 'www-admin', path: { path: '/admin', ignoreCase: true } } },
    'explain: ignoreCase',
  );
  const routes = (await g.api('GET', '/v1/routes?listener=tomcat-servlet')).json as { listeners: Array<Record<string, unknown>> };
  t.match(
    routes.listeners[0],
    { listener: 'tomcat-servlet', pathParameters: 'servlet' },
    'GET /v1/routes shows the listener\'s reading of ";"',
  );
});
