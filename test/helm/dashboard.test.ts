/**
 * The Grafana dashboard ConfigMap (optional) and NOTES.txt.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ListenerStats } from '../../src/metrics/listener-stats';
import { Metrics } from '../../src/metrics/metrics';
import { LiveLists } from '../../src/store/live-lists';
import { CHART, VARIANTS, render } from '../helpers/helm';

// The metric names the metrics module publishes (issue 5); the dashboard must use only these. The
// process metrics have the standard names (process_*, nodejs_*) that every Node.js program
// publishes, so each of their queries keeps ipgate's pods only (joined on ipgate_build_info).
const METRICS = [
  'ipgate_connections_accepted_total',
  'ipgate_connections_active',
  'ipgate_denied_total',
  'ipgate_proxy_header_total',
  'ipgate_http_requests_total',
  'ipgate_http_request_duration_seconds_bucket',
  'ipgate_upstream_errors_total',
  'ipgate_allowlist_entries',
  'ipgate_allowlist_version_info',
  'ipgate_upstream_connect_seconds_bucket',
  'ipgate_bytes_total',
  'ipgate_source_nat_suspected',
  'ipgate_allowlist_reloads_total',
  'ipgate_allowlist_store_refused',
  'ipgate_build_info',
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
  'nodejs_heap_size_used_bytes',
  'nodejs_eventloop_lag_p99_seconds',
  'process_open_fds',
  'process_max_fds',
];
const METRIC_NAME = /\b(?:ipgate|process|nodejs)_[a-z0-9_]+/g;

t.test('dashboard: off by default; on, a ConfigMap the Grafana sidecar picks up', async (t) => {
  t.equal(
    render({})
      .all('ConfigMap')
      .filter((c) => c.metadata.name.endsWith('-dashboard')).length,
    0,
  );
  const cm = render(VARIANTS['dashboard on']!).one('ConfigMap', '-dashboard');
  t.equal(cm.metadata.labels!.grafana_dashboard, '1');
  const dash = JSON.parse(cm.data['ipgate.json'] as string) as { uid: string; panels: { type: string; targets?: { expr: string }[] }[] };
  t.equal(dash.uid, 'ipgate-overview');
  t.same(dash, JSON.parse(fs.readFileSync(path.join(CHART, 'files/dashboard.json'), 'utf8')), 'the file, unchanged');
});

t.test('dashboard: every panel queries known ipgate metrics, and every metric has a panel', async (t) => {
  const dash = JSON.parse(fs.readFileSync(path.join(CHART, 'files/dashboard.json'), 'utf8')) as {
    panels: { type: string; title: string; targets?: { expr: string }[] }[];
  };
  const used = new Set<string>();
  for (const p of dash.panels.filter((p) => p.type !== 'row')) {
    t.ok(p.targets && p.targets.length > 0, `${p.title} has queries`);
    for (const q of p.targets ?? []) {
      const names = q.expr.match(METRIC_NAME) ?? [];
      t.ok(names.length > 0, `${p.title}: ${q.expr}`);
      if (names.some((n) => !n.startsWith('ipgate_'))) {
        t.match(
          q.expr,
          / and on \(namespace, pod\) ipgate_build_info\{namespace=~"\$namespace"\}$/,
          `${p.title}: a standard process metric, kept to ipgate's pods`,
        );
      }
      for (const n of names) {
        t.ok(METRICS.includes(n), `${p.title}: ${n} is a published metric`);
        used.add(n);
      }
    }
  }
  t.same([...used].sort(), [...METRICS].sort());
});

t.test('dashboard: every metric it queries is one the metrics module publishes', async (t) => {
  const metrics = new Metrics({ version: 'test' });
  const stats = new ListenerStats('web');
  metrics.addListener(stats, 'http');
  metrics.setAllowlists(new LiveLists(), { kind: 'memory', lastRefusal: () => null });
  metrics.setSelfChecks({ state: () => ({ listeners: { web: { sourceNat: { suspected: false, public: true } } } }) });
  const types = new Set([...(await metrics.scrape()).matchAll(/^# TYPE (\S+) (\w+)$/gm)].map((m) => `${m[1]}`));
  for (const name of METRICS) t.ok(types.has(name.replace(/_bucket$/, '')), `${name} is published`);
});

t.test('NOTES tell how to verify that the backend sees the real client IP', async (t) => {
  const notes = render({}).notes();
  t.match(notes, /kubectl -n ipgate-system get svc edge-ipgate -o jsonpath='\{\.spec\.externalTrafficPolicy\}/);
  t.match(notes, /curl -sv http:\/\/\$NODE_IP:\$NODE_PORT\//);
  t.match(notes, /X-Real-IP/);
  t.match(notes, /ipgate doctor/);
  t.match(notes, /edge-ipgate-admin-token/);
});
