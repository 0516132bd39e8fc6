/**
 * What a swap of routes and a list change do to open connections on a routed HTTP listener, in
 * process over real sockets to real nginx backends: a connection whose route is removed closes
 * after its in-flight response (`route_removed`), one whose route stays is not cut; a list change
 * is decided per route (revokeLive re-checks each connection's latest request against its route's
 * list, and the next request on a keep-alive connection is decided afresh); the admin API's GET /v1/routes
 * and POST /v1/explain with host and path (the same route table as the data path).
 */
import net from 'node:net';
import t from 'tap';
import { startAdminGate } from '../helpers/admin-api';
import { closed, readUntil } from '../helpers/net';
import { missing } from '../helpers/peers';
import { threeBackends } from '../helpers/routes';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import type { Config } from '../../src/schema/config';

const skip = missing('nginx');

/** One request on an open socket; resolves with the response text (Content-Length framed). */
async function ask(s: net.Socket, host: string, path: string): Promise<string> {
  s.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  const head = (await readUntil(s, '\r\n\r\n', 5000)).toString('latin1');
  const len = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
  // Every body here (nginx's `return` texts, ipgate's canned ones) ends its lines with "\n".
  let body = '';
  while (Buffer.byteLength(body, 'latin1') < len) body += (await readUntil(s, '\n', 5000)).toString('latin1');
  return head + body;
}

t.test('live routes: removal closes only the connections of removed routes; list changes per route; admin API', { skip }, async (t) => {
  const ports = await threeBackends(t);
  const routes = (withOld: boolean): NonNullable<Config['listeners'][number]['routes']> => [
    { name: 'stable', hosts: ['stable.example.com'], upstreams: [`127.0.0.1:${ports.a}`] },
    ...(withOld ? [{ name: 'old', hosts: ['old.example.com'], upstreams: [`127.0.0.1:${ports.b}`] }] : []),
    {
      name: 'guarded',
      hosts: ['guarded.example.com'],
      paths: [{ path: '/in', match: 'prefix' as const }],
      upstreams: [`127.0.0.1:${ports.c}`],
      allowlist: 'guard',
    },
  ];
  const g = await startAdminGate(t, {
    allowlists: { everyone: ['127.0.0.0/8'], guard: ['127.0.0.3/32'] },
    listeners: [{ name: 'edge', mode: 'http', listen: '127.0.0.1:0', allowlist: 'everyone', routes: routes(true) }],
  });
  const port = g.port();
  const open = async (): Promise<net.Socket> => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.3' });
    await new Promise((r) => s.once('connect', r));
    t.teardown(() => s.destroy());
    return s;
  };

  t.test('GET /v1/routes: routes, inherited fields, version and load time', async (t) => {
    const r = await g.api('GET', '/v1/routes');
    t.equal(r.status, 200);
    t.match(r.json, {
      version: /^[0-9a-f]{16}$/,
      loadedAt: /^\d{4}-\d\d-\d\dT/,
      listeners: [{ listener: 'edge', mode: 'http', routed: true }],
    });
    t.same(r.json.listeners[0].routes[0], {
      name: 'stable',
      hosts: ['stable.example.com'],
      paths: null,
      upstreams: [`127.0.0.1:${ports.a}`],
      upstreamsInherited: false,
      allowlist: 'everyone',
      allowlistInherited: true,
    });
    t.same(r.json.listeners[0].routes[2].paths, [{ path: '/in', match: 'prefix' }]);
    const unknown = await g.api('GET', '/v1/routes?listener=nope');
    t.equal(unknown.status, 404);
    t.match(unknown.json.message, /"nope"/, 'quotes the value');
  });

  t.test('POST /v1/explain with host and path', async (t) => {
    const rows: Array<{ desc: string; body: Record<string, unknown>; want: Record<string, unknown> }> = [
      {
        desc: "allowed by the route's own list",
        body: { host: 'guarded.example.com', path: '/in/x', peer: '127.0.0.3' },
        want: {
          decision: 'allow',
          allowlist: 'guard',
          route: { name: 'guarded', host: 'guarded.example.com', hostMatch: 'exact', path: { path: '/in', match: 'prefix' } },
          entry: { cidr: '127.0.0.3/32' },
        },
      },
      {
        desc: "denied by the route's list, allowed by the listener's",
        body: { host: 'GUARDED.example.com:80', path: '/in', peer: '127.0.0.4' },
        want: { decision: 'deny', allowlist: 'guard', reason: 'not_allowlisted', route: { name: 'guarded' } },
      },
      {
        desc: 'host from the Host header among headers',
        body: { headers: { Host: 'stable.example.com' }, peer: '127.0.0.4' },
        want: { decision: 'allow', allowlist: 'everyone', route: { name: 'stable', path: null } },
      },
      {
        desc: 'no path of the host matches',
        body: { host: 'guarded.example.com', path: '/out', peer: '127.0.0.3' },
        want: { decision: 'no_route', reason: 'route_no_path', status: 404, route: null },
      },
      {
        desc: 'no host matches (no default route)',
        body: { host: 'x.example.com', peer: '127.0.0.3' },
        want: { decision: 'no_route', reason: 'route_no_host', status: 404 },
      },
      {
        desc: 'a path that cannot be matched safely',
        body: { host: 'guarded.example.com', path: '/in/%2F', peer: '127.0.0.3' },
        want: { decision: 'no_route', reason: 'route_bad_path', status: 400 },
      },
    ];
    for (const row of rows) {
      const r = await g.api('POST', '/v1/explain', { body: { listener: 'edge', ...row.body } });
      t.equal(r.status, 200, `${row.desc}: 200`);
      t.match(r.json, row.want, row.desc);
    }
    const noHost = await g.api('POST', '/v1/explain', { body: { listener: 'edge', peer: '127.0.0.3' } });
    t.equal(noHost.status, 400, 'a routed listener needs a host');
    t.equal(noHost.json.field, 'host');
  });

  t.test('a list change is decided per route, on one keep-alive connection', async (t) => {
    const s = await open();
    t.match(await ask(s, 'guarded.example.com', '/in/1'), /^HTTP\/1\.1 200[\s\S]*C\|\/in\/1\|/);
    t.match(await ask(s, 'stable.example.com', '/s0'), /^HTTP\/1\.1 200[\s\S]*A\|\/s0\|/, 'its latest request: on the stable route');
    const onGuarded = await open();
    t.match(await ask(onGuarded, 'guarded.example.com', '/in/0'), /^HTTP\/1\.1 200/);
    g.app.lists.apply('guard', [{ cidr: '127.0.0.9/32' }], 'v2');
    await closed(onGuarded, 5000);
    t.pass('an idle connection whose latest request the guard list admitted is cut');
    t.match(
      await ask(s, 'guarded.example.com', '/in/2'),
      /^HTTP\/1\.1 403/,
      'one whose latest request was on another route stays; its next request: refused by the new list',
    );
    t.match(
      await ask(s, 'stable.example.com', '/s'),
      /^HTTP\/1\.1 200[\s\S]*A\|\/s\|/,
      'another route on the same connection: still served',
    );
    g.app.lists.apply('guard', [{ cidr: '127.0.0.3/32' }], 'v3');
    t.match(await ask(s, 'guarded.example.com', '/in/3'), /^HTTP\/1\.1 200/, 'admitted again');
  });

  t.test('a reload removing a route closes only its connections', async (t) => {
    const onOld = await open();
    const onStable = await open();
    t.match(await ask(onOld, 'old.example.com', '/o'), /^HTTP\/1\.1 200[\s\S]*B\|\/o\|/);
    t.match(await ask(onStable, 'stable.example.com', '/s'), /^HTTP\/1\.1 200/);
    const before = (await g.api('GET', '/v1/routes')).json.version;
    const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(false) }] };
    const r = g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners)));
    t.same(r, { problems: [], closed: { edge: 1 } }, 'one connection marked (the idle one on "old")');
    await closed(onOld, 5000);
    t.pass('the connection on the removed route closed');
    t.match(
      await ask(onStable, 'stable.example.com', '/s2'),
      /^HTTP\/1\.1 200[\s\S]*A\|\/s2\|/,
      "the stable route's connection is not cut",
    );
    const fresh = await open();
    t.match(await ask(fresh, 'old.example.com', '/o'), /^HTTP\/1\.1 404/, 'the removed route: 404 now');
    const after = (await g.api('GET', '/v1/routes')).json;
    t.not(after.version, before, 'GET /v1/routes shows the new version');
    t.same(
      after.listeners[0].routes.map((x: { name: string }) => x.name),
      ['stable', 'guarded'],
    );
  });

  t.test('a reload that cannot compile changes nothing', async (t) => {
    const bad = { listeners: [{ ...g.app.config.listeners[0]!, routes: [{ name: 'x', hosts: ['a.*.com'] }] }] };
    const r = g.app.replaceRoutes(routesUpdate(bad, routesVersion(bad.listeners)));
    t.match(r.problems, [/a wildcard is only allowed/]);
    const s = await open();
    t.match(await ask(s, 'stable.example.com', '/still'), /^HTTP\/1\.1 200/, 'the routes in force still serve');
  });
});
