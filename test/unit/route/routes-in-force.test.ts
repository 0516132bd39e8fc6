import t from 'tap';
import { planRoutes, routeReloader, routesChanged, routesVersion, RoutesInForce, routesUpdate } from '../../../src/route/routes-in-force';
import { buildConfig } from '../../../src/config/load';
import type { Config } from '../../../src/schema/config';

const base = (listeners: Array<Record<string, unknown>>): Config =>
  buildConfig({
    store: { type: 'memory' },
    admin: { listen: null },
    allowlists: { a: [], b: [] },
    listeners,
  });
const http = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  name: 'edge',
  mode: 'http',
  listen: '127.0.0.1:8080',
  allowlist: 'a',
  upstreams: ['127.0.0.1:9000'],
  routes: [{ name: 'r', hosts: ['a.example'] }],
  ...over,
});

t.test('planRoutes: what needs a restart', async (t) => {
  const current = base([http()]);
  const rows: Array<{ desc: string; next: Config; want: RegExp[] }> = [
    { desc: 'routes only changed: live', next: base([http({ routes: [{ name: 'x', hosts: ['*'] }] })]), want: [] },
    { desc: 'routes removed: live', next: base([http({ routes: undefined })]), want: [] },
    {
      desc: 'another listen address',
      next: base([http({ listen: '127.0.0.1:8081' })]),
      want: [/\.listen: "127\.0\.0\.1:8080" -> "127\.0\.0\.1:8081" needs a restart/],
    },
    { desc: 'another mode', next: base([http({ mode: 'tcp', routes: undefined })]), want: [/\.mode: "http" -> "tcp" needs a restart/] },
    {
      desc: 'a listener added',
      next: base([http(), http({ name: 'two', listen: '127.0.0.1:8082' })]),
      want: [/\(two\): a new listener needs a restart/],
    },
    {
      desc: 'a listener removed',
      next: base([http({ name: 'other' })]),
      want: [/\(other\): a new listener/, /removing listener "edge" needs a restart/],
    },
  ];
  for (const row of rows) {
    const got = planRoutes(current, row.next);
    t.equal(got.length, row.want.length, `${row.desc}: ${got.join(' | ')}`);
    row.want.forEach((re, i) => {
      t.match(got[i], re, row.desc);
    });
  }
});

t.test('routesChanged and the version hash', async (t) => {
  const a = base([http()]);
  const b = base([http({ upstreams: ['127.0.0.1:9001'] })]);
  t.notOk(routesChanged(a, b), 'a change outside routes is not a routes change');
  t.ok(routesChanged(a, base([http({ routes: [{ name: 'r', hosts: ['b.example'] }] })])));
  t.equal(routesVersion(a.listeners).hash, routesVersion(b.listeners).hash, 'same routes, same hash');
  t.match(routesVersion(a.listeners).hash, /^[0-9a-f]{16}$/);
});

t.test('routeReloader: refuses a restart change, skips an unchanged file, applies and logs a change', async (t) => {
  const started = base([http()]);
  const applied: string[] = [];
  const logged: unknown[] = [];
  const reload = routeReloader(started, { info: (o) => logged.push(o) }, (u) => {
    applied.push(u.listeners[0]!.routes?.[0]?.name ?? 'none');
    return { problems: [], closed: { edge: 0 } };
  });
  t.match(reload(base([http({ listen: '127.0.0.1:9999' })])), [/needs a restart/]);
  t.same(reload(base([http()])), [], 'unchanged: nothing to do');
  t.same(applied, []);
  t.same(reload(base([http({ routes: [{ name: 'n', hosts: ['*'] }] })])), []);
  t.same(applied, ['n']);
  t.equal(logged.length, 1);
  const refusing = routeReloader(started, { info: () => undefined }, () => ({ problems: ['no'], closed: {} }));
  t.same(refusing(base([http({ routes: [{ name: 'n', hosts: ['*'] }] })])), ['no'], 'a swap refused is a refusal');
});

t.test('RoutesInForce follows an update', async (t) => {
  const c = base([http()]);
  const rif = new RoutesInForce(c.listeners, routesVersion(c.listeners, 1));
  t.equal(rif.get('edge')!.table!.lookup('a.example', '/').kind, 'match');
  const next = base([http({ routes: undefined })]);
  rif.set(routesUpdate(next, routesVersion(next.listeners, 2)));
  t.equal(rif.get('edge')!.table, null, 'no routes any more');
  t.equal(rif.version.loadedAt, 2);
});
