/**
 * SniRoutes: the compiled routes of a TCP listener (route/sni-routes.ts). Each route gets its own
 * upstream group (or the listener's), its own list (or the listener's) and its counters; the
 * decision is the route table's host lookup.
 */
import t from 'tap';
import { ListenerStats } from '../../../src/metrics/listener-stats';
import { SniRoutes } from '../../../src/route/sni-routes';
import { LiveLists } from '../../../src/store/live-lists';

t.test('compile and decide', async (t) => {
  const lists = new LiveLists();
  const stats = new ListenerStats('edge');
  const r = SniRoutes.compile(
    {
      name: 'edge',
      allowlist: 'main',
      upstreams: ['10.0.0.1:443', '10.0.0.2:443'],
      routes: [
        { name: 'a', hosts: ['a.example'], upstreams: ['10.1.0.1:443'], allowlist: 'a-list' },
        { name: 'w', hosts: ['*.w.example'] },
        { name: 'v', hosts: ['*.v.example'] },
        { name: 'd', hosts: ['*'], upstreams: ['backend.internal:443'] },
      ],
    },
    lists,
    stats,
  );
  const cases = [
    { desc: 'exact name', sni: 'a.example', route: 'a', list: 'a-list', targets: ['10.1.0.1:443'] },
    { desc: 'wildcard, several labels deep', sni: 'x.y.w.example', route: 'w', list: 'main', targets: ['10.0.0.1:443', '10.0.0.2:443'] },
    { desc: 'the wildcard never takes its own suffix', sni: 'w.example', route: 'd', list: 'main', targets: ['backend.internal:443'] },
    { desc: 'no SNI: the default', sni: null, route: 'd', list: 'main', targets: ['backend.internal:443'] },
  ];
  for (const c of cases) {
    const d = r.decide(c.sni);
    if (d.kind !== 'route') {
      t.fail(`${c.desc}: ${d.reason}`);
      continue;
    }
    t.equal(d.route.name, c.route, `${c.desc}: route`);
    t.equal(d.route.list, lists.get(c.list), `${c.desc}: list ${c.list}`);
    t.same(
      d.route.upstreams.targets.map((x) => x.label),
      c.targets,
      `${c.desc}: group`,
    );
    t.equal(d.route.counts, stats.route(c.route), `${c.desc}: the listener's counters for the route`);
  }
  t.equal(r.routes[1]!.upstreams, r.routes[2]!.upstreams, 'routes without upstreams share the listener group');
  t.not(r.routes[0]!.upstreams, r.routes[1]!.upstreams, 'a route with upstreams has its own group');
  t.equal(r.ipLiteralsOnly, false, 'a name among the upstreams');
  // Each group has its own round robin: starting a's does not move the listener group.
  const w = r.routes[1]!.upstreams;
  r.routes[0]!.upstreams.start();
  t.same([w.start(), w.start(), w.start()], [0, 1, 0], 'round robin over the listener group, untouched by route a');
});

t.test('no default: a miss', async (t) => {
  const r = SniRoutes.compile(
    { name: 'e', allowlist: 'main', upstreams: ['10.0.0.1:1'], routes: [{ name: 'a', hosts: ['a.example'] }] },
    new LiveLists(),
    new ListenerStats('e'),
  );
  t.same(r.decide('b.example'), { kind: 'miss', reason: 'route_no_host' }, 'unknown name');
  t.same(r.decide(null), { kind: 'miss', reason: 'route_no_host' }, 'no SNI');
  t.equal(r.ipLiteralsOnly, true, 'IP literals only');
});

t.test('compile refuses what the config check refuses', async (t) => {
  t.throws(
    () =>
      SniRoutes.compile(
        { name: 'e', allowlist: 'main', upstreams: [], routes: [{ name: 'a', hosts: ['a.example'] }] },
        new LiveLists(),
        new ListenerStats('e'),
      ),
    /routes\[0\]\.upstreams: required/,
    'a route with no upstreams when the listener has none',
  );
  t.throws(
    () =>
      SniRoutes.compile(
        { name: 'e', allowlist: 'main', upstreams: ['10.0.0.1:1'], routes: [{ name: 'a', hosts: ['a.*.example'] }] },
        new LiveLists(),
        new ListenerStats('e'),
      ),
    { code: 'IPGATE_ROUTES' },
    'a bad host',
  );
});
