/**
 * Cluster aggregation (src/metrics/cluster.ts): the primary's registry JSON and the workers' merged
 * into one exposition, as the primary's /metrics answers when `workers` > 1.
 */
import { EventEmitter } from 'node:events';
import t from 'tap';
import { aggregateClusterMetrics, clusterExposition, workerMetricsJson } from '../../../src/metrics/cluster';
import { ListenerStats } from '../../../src/metrics/listener-stats';
import { Metrics, type ListsSource } from '../../../src/metrics/metrics';
import type { MetricJson } from '../../../src/metrics/published';

/** A LiveLists stand-in: one list at a given version. */
function lists(version: string, entries: number): ListsSource {
  const e = new EventEmitter();
  return Object.assign(e, {
    names: () => ['main'],
    has: () => true,
    get: () => ({ version, appliedAt: 1_700_000_000_000 }),
    entries: () => new Array<unknown>(entries),
  }) as unknown as ListsSource;
}

function worker(accepted: number, active: number, durations: number[], listVersion: string | null): Metrics {
  const m = new Metrics({ processMetrics: false });
  const s = new ListenerStats('edge');
  s.accepted = accepted;
  s.active = active;
  ListenerStats.bump(s.denied, 'not_allowlisted');
  ListenerStats.bump(s.proxyHeader, 'v2/ok');
  for (const d of durations) s.httpDuration.observe(d);
  m.addListener(s, 'http');
  // A worker that applies lists too (it enforces them) must not add its own version series.
  if (listVersion !== null) m.setAllowlists(lists(listVersion, 99), null);
  return m;
}

function sample(json: MetricJson[], name: string, labels: Record<string, string | number> = {}, metricName = name): number | undefined {
  const m = json.find((x) => x.name === name);
  return m?.values.find((v) => (v.metricName ?? name) === metricName && Object.entries(labels).every(([k, want]) => String(v.labels[k]) === String(want)))?.value;
}

t.test('two workers and the primary: counters and gauges summed, primary-owned metrics from the primary', async (t) => {
  const primary = new Metrics({ processMetrics: false, version: '1.2.3' });
  primary.setAllowlists(lists('7', 3), { kind: 'file', lastRefusal: () => null });
  primary.adminRequest('/metrics', 'GET', 200);
  const w1 = await workerMetricsJson(worker(10, 2, [0.002, 0.2], '6'));
  const w2 = await workerMetricsJson(worker(5, 1, [0.002], null));
  // IPC is a structured clone: the JSON must survive it unchanged.
  t.same(structuredClone(w1), w1, 'worker JSON is plain data');

  const merged = await aggregateClusterMetrics(await workerMetricsJson(primary), [w1, w2]).getMetricsAsJSON() as unknown as MetricJson[];
  t.equal(sample(merged, 'ipgate_connections_accepted_total', { listener: 'edge' }), 15, 'accepted: summed');
  t.equal(sample(merged, 'ipgate_connections_active', { listener: 'edge' }), 3, 'active: summed');
  t.equal(sample(merged, 'ipgate_denied_total', { listener: 'edge', reason: 'not_allowlisted' }), 2);
  t.equal(sample(merged, 'ipgate_proxy_header_total', { listener: 'edge', version: 'v2', result: 'ok' }), 2);
  const bucket = 'ipgate_http_request_duration_seconds_bucket';
  t.equal(sample(merged, 'ipgate_http_request_duration_seconds', { listener: 'edge', le: 0.0025 }, bucket), 2, 'histogram buckets summed');
  t.equal(sample(merged, 'ipgate_http_request_duration_seconds', { listener: 'edge', le: '+Inf' }, bucket), 3);
  t.equal(sample(merged, 'ipgate_http_request_duration_seconds', { listener: 'edge' }, 'ipgate_http_request_duration_seconds_count'), 3);
  const versions = merged.find((m) => m.name === 'ipgate_allowlist_version_info')!.values;
  t.same(versions.map((v) => v.labels), [{ list: 'main', version: '7' }], 'one version series: the primary\'s');
  t.equal(sample(merged, 'ipgate_allowlist_entries', { list: 'main' }), 3, 'entries: the primary\'s, not summed');
  t.equal(sample(merged, 'ipgate_admin_requests_total', { route: '/metrics', method: 'GET', code_class: '2xx' }), 1);
  t.equal(sample(merged, 'ipgate_build_info', { version: '1.2.3' }), 1);
});

t.test('process metrics labelled per worker stay per worker; the text passes as one exposition', async (t) => {
  const primary = new Metrics({ processLabels: { worker: 'primary' } });
  const w1 = new Metrics({ processLabels: { worker: '1' } });
  const w2 = new Metrics({ processLabels: { worker: '2' } });
  const text = await clusterExposition(primary, [await workerMetricsJson(w1), await workerMetricsJson(w2)]);
  for (const w of ['primary', '1', '2']) {
    t.match(text, new RegExp(`^ipgate_process_start_time_seconds\\{worker="${w}"\\} \\d+`, 'm'), `start time of ${w} kept (prom-client would omit it)`);
    t.match(text, new RegExp(`^ipgate_nodejs_heap_size_used_bytes\\{worker="${w}"\\} \\d+`, 'm'), `heap of ${w}`);
  }
  t.equal(text.match(/^# TYPE ipgate_connections_accepted_total counter$/gm)?.length, 1, 'each metric once');
});

t.test('no workers: the primary alone', async (t) => {
  const primary = new Metrics({ processMetrics: false });
  const s = new ListenerStats('edge');
  s.accepted = 4;
  primary.addListener(s, 'tcp');
  const text = await clusterExposition(primary, []);
  t.match(text, /^ipgate_connections_accepted_total\{listener="edge"\} 4$/m);
});
