/**
 * The `route` label on the connection counters (docs/routes-and-sni.md "Metrics"): a listener
 * without routes publishes exactly the series it always had; a listener with routes publishes
 * each route's counts with `route` and its remainder (connections closed before a route was
 * chosen) without it, so that summing over `route` gives the listener's totals.
 */
import t from 'tap';
import { Metrics } from '../../../src/metrics/metrics';
import { ListenerStats } from '../../../src/metrics/listener-stats';

function samples(text: string, name: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`))
    .sort();
}

t.test('route labels on closed and denied counters', async (t) => {
  const m = new Metrics({ processMetrics: false });
  const plain = new ListenerStats('plain');
  const routed = new ListenerStats('edge');
  m.addListener(plain, 'tcp');
  m.addListener(routed, 'tcp');
  plain.closed.set('ok', 3);
  plain.denied.set('not_allowlisted', 1);
  // edge: 5 ok (4 on route a, 1 on b), 2 tls_timeout (no route), 1 denied on a.
  routed.closed.set('ok', 5).set('tls_timeout', 2).set('denied', 1);
  routed.denied.set('not_allowlisted', 1);
  routed.route('a').closed.set('ok', 4).set('denied', 1);
  routed.route('a').denied.set('not_allowlisted', 1);
  routed.route('b').closed.set('ok', 1);
  const text = await m.registry.metrics();
  const cases = [
    {
      desc: 'a listener without routes: its series as before',
      name: 'ipgate_connections_closed_total',
      listener: 'plain',
      want: ['ipgate_connections_closed_total{listener="plain",result="ok"} 3'],
    },
    {
      desc: 'a listener with routes: per route, and the remainder without a route label',
      name: 'ipgate_connections_closed_total',
      listener: 'edge',
      want: [
        'ipgate_connections_closed_total{listener="edge",result="tls_timeout"} 2',
        'ipgate_connections_closed_total{listener="edge",route="a",result="denied"} 1',
        'ipgate_connections_closed_total{listener="edge",route="a",result="ok"} 4',
        'ipgate_connections_closed_total{listener="edge",route="b",result="ok"} 1',
      ],
    },
    {
      desc: 'denials: a zero remainder is left out',
      name: 'ipgate_denied_total',
      listener: 'edge',
      want: ['ipgate_denied_total{listener="edge",route="a",reason="not_allowlisted"} 1'],
    },
  ];
  for (const c of cases) {
    t.same(
      samples(text, c.name).filter((l) => l.includes(`listener="${c.listener}"`)),
      [...c.want].sort(),
      c.desc,
    );
  }
});
