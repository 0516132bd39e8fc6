/**
 * ingress-nginx's rate-limiting annotations through the import (src/import/limits.ts): each row
 * an Ingress's annotations and the route `limits` ipgate gets, through the loader `check-config`
 * uses; what cannot be carried reported by name. The behaviour of an imported config over sockets:
 * test/integration/import-limits.test.ts.
 */
import t from 'tap';
import { buildConfig } from '../../../src/config/load';
import { convertIngressNginx } from '../../../src/import/ingress-nginx';
import { limitIngress } from '../../helpers/limit-ingress';

const P = 'nginx.ingress.kubernetes.io/';

const rows: Array<{ ann: Record<string, string>; limits?: Record<string, unknown>; exempt?: string[]; unconverted?: string[] }> = [
  {
    ann: { 'limit-rps': '10' },
    limits: { requests: { rate: '10r/s', burst: 50, delay: 0, nodelay: true, status: 503, exempt: [], maxClients: 100_000 } },
  },
  {
    ann: { 'limit-rpm': '30', 'limit-burst-multiplier': '2' },
    limits: { requests: { rate: '30r/m', burst: 60, delay: 0, nodelay: true, status: 503, exempt: [], maxClients: 100_000 } },
  },
  {
    ann: { 'limit-connections': '4' },
    limits: { concurrent: { perClient: 4, status: 503, exempt: [], maxClients: 100_000 } },
  },
  {
    ann: { 'limit-rps': '5', 'limit-connections': '2', 'limit-whitelist': '10.0.0.0/8, 192.168.1.7' },
    limits: {
      requests: { rate: '5r/s', burst: 25, delay: 0, nodelay: true, status: 503, exempt: ['ns-api-limit-exempt'], maxClients: 100_000 },
      concurrent: { perClient: 2, status: 503, exempt: ['ns-api-limit-exempt'], maxClients: 100_000 },
    },
    exempt: ['10.0.0.0/8', '192.168.1.7/32'],
  },
  {
    ann: { 'limit-rps': '10', 'limit-rpm': '60' },
    limits: { requests: { rate: '60r/m', burst: 300, delay: 0, nodelay: true, status: 503, exempt: [], maxClients: 100_000 } },
    unconverted: [`${P}limit-rps`],
  },
  { ann: { 'limit-rps': '0' } },
  { ann: { 'limit-rps': 'ten' }, unconverted: [`${P}limit-rps`] },
  {
    ann: { 'limit-rps': '1', 'limit-whitelist': '10.0.0.0/33' },
    limits: { requests: { rate: '1r/s', burst: 5, delay: 0, nodelay: true, status: 503, exempt: [], maxClients: 100_000 } },
    unconverted: [`${P}limit-whitelist`],
  },
  { ann: { 'limit-rate-after': '100' }, unconverted: [`${P}limit-rate-after`] },
];

for (const row of rows) {
  t.test(`${JSON.stringify(row.ann)}`, async (t) => {
    const r = convertIngressNginx({ ingresses: [limitIngress(row.ann)], services: [], configMap: null, servicesFrom: 'file' });
    t.same(
      r.report.unconverted.map((f) => f.item),
      row.unconverted ?? [],
      'unconverted, by name',
    );
    const c = buildConfig({ ...r.config!, store: { type: 'memory' }, admin: { listen: null } } as never);
    const route = c.listeners[0]!.routes![0]!;
    t.same(route.limits, row.limits, 'the route limits, through the loader check-config uses');
    if (row.exempt !== undefined)
      t.same(
        c.allowlists['ns-api-limit-exempt']!.entries.map((e) => e.cidr),
        row.exempt,
        'limit-whitelist as the allowlist the limits exempt',
      );
    else t.notOk('ns-api-limit-exempt' in c.allowlists, 'no exempt list');
  });
}
