/**
 * The per-client limits' config (src/schema/edge.ts, src/config/validate-limits.ts): every bad
 * value is refused with its field and value; each limit only where it applies; `exempt` names a
 * defined allowlist; the defaults filled in.
 */
import t from 'tap';
import { buildConfig } from '../../../src/config/load';
import { problemsOf } from '../../helpers/config-problems';

const base = (listener: Record<string, unknown>, routes?: unknown[]): Record<string, unknown> => ({
  store: { type: 'memory' },
  admin: { listen: null },
  allowlists: { main: ['127.0.0.0/8'], ops: ['10.0.0.0/8'] },
  listeners: [
    {
      name: 'web',
      mode: 'http',
      listen: '127.0.0.1:0',
      allowlist: 'main',
      upstreams: ['127.0.0.1:9'],
      ...listener,
      ...(routes !== undefined ? { routes } : {}),
    },
  ],
});

const cases: { name: string; raw: Record<string, unknown>; field: string; says: RegExp }[] = [
  {
    name: 'a rate not in nginx form',
    raw: base({ limits: { requests: { rate: '10/s' } } }),
    field: 'listeners[0].limits.requests.rate',
    says: /10\/s/,
  },
  {
    name: 'a rate per hour (nginx knows r/s and r/m only)',
    raw: base({ limits: { requests: { rate: '10r/h' } } }),
    field: 'listeners[0].limits.requests.rate',
    says: /10r\/h/,
  },
  {
    name: 'a status other than 429 or 503',
    raw: base({ limits: { requests: { rate: '1r/s', status: 418 } } }),
    field: 'listeners[0].limits.requests.status',
    says: /418/,
  },
  {
    name: 'a negative burst',
    raw: base({ limits: { requests: { rate: '1r/s', burst: -1 } } }),
    field: 'listeners[0].limits.requests.burst',
    says: /-1/,
  },
  {
    name: 'perClient 0',
    raw: base({ limits: { concurrent: { perClient: 0 } } }),
    field: 'listeners[0].limits.concurrent.perClient',
    says: /0/,
  },
  {
    name: 'an unknown key (a misspelt option)',
    raw: base({ limits: { requests: { rate: '1r/s', brust: 5 } } }),
    field: 'listeners[0].limits.requests',
    says: /brust/,
  },
  {
    name: 'an exempt name that is no allowlist',
    raw: base({ limits: { requests: { rate: '1r/s', exempt: ['ops', 'monitoring'] } } }),
    field: 'listeners[0].limits.requests.exempt[1]',
    says: /monitoring.*no such allowlist \(defined: main, ops/,
  },
  {
    name: "a route's exempt name that is no allowlist",
    raw: base({}, [{ name: 'api', hosts: ['a'], limits: { concurrent: { perClient: 1, exempt: ['nope'] } } }]),
    field: 'listeners[0].routes[0].limits.concurrent.exempt[0]',
    says: /nope/,
  },
  {
    name: 'a connection rate on an HTTP listener',
    raw: base({ limits: { connectionRate: { rate: '1r/s' } } }),
    field: 'listeners[0].limits.connectionRate',
    says: /TCP listeners only/,
  },
  {
    name: 'a request rate on a TCP listener',
    raw: base({ mode: 'tcp', limits: { requests: { rate: '1r/s' } } }),
    field: 'listeners[0].limits.requests',
    says: /HTTP listeners only/,
  },
  {
    name: "a TCP route's limits",
    raw: base({ mode: 'tcp' }, [{ name: 'sni', hosts: ['a.example'], limits: { concurrent: { perClient: 1 } } }]),
    field: 'listeners[0].routes[0].limits',
    says: /HTTP routes only/,
  },
];

for (const c of cases) {
  t.test(`refused: ${c.name}`, async (t) => {
    const problems = problemsOf(c.raw);
    const p = problems.find((x) => x.startsWith(c.field));
    t.ok(p, `a problem names ${c.field} (got ${JSON.stringify(problems)})`);
    t.match(p ?? '', c.says);
  });
}

t.test('the defaults: burst 0, delay 0, no nodelay, 429, no exemption, 100,000 clients', async (t) => {
  const config = buildConfig(base({ limits: { requests: { rate: '30r/m' }, concurrent: { perClient: 5 } } }));
  const l = config.listeners[0]!.limits!;
  t.same(l.requests, { rate: '30r/m', burst: 0, delay: 0, nodelay: false, status: 429, exempt: [], maxClients: 100_000 });
  t.same(l.concurrent, { perClient: 5, status: 429, exempt: [], maxClients: 100_000 });
  t.equal(l.connectionRate, null);
  t.same(problemsOf(base({ mode: 'tcp', limits: { connectionRate: { rate: '5r/s', burst: 10 }, concurrent: { perClient: 3 } } })), []);
});
