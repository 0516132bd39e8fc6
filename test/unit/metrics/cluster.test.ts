/**
 * Cluster aggregation (src/metrics/cluster.ts): the primary's registry JSON and the workers' merged
 * into one exposition, as the primary's /metrics answers when `workers` > 1.
 */
import { EventEmitter } from 'node:events';
import t from 'tap';
import {
  aggregateClusterMetrics,
  clusterExposition,
  joinMetricParts,
  workerMetricsInParts,
  workerMetricsJson,
} from '../../../src/metrics/cluster';
import { ListenerStats, methodIndex } from '../../../src/metrics/listener-stats';
import { Metrics, type ListsSource } from '../../../src/metrics/metrics';
import type { MetricJson } from '../../../src/metrics/published';
import { turnsDuring } from '../../helpers/event-loop';

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
  return m?.values.find(
    (v) => (v.metricName ?? name) === metricName && Object.entries(labels).every(([k, want]) => String(v.labels[k]) === String(want)),
  )?.value;
}

t.test('two workers and the primary: counters and gauges summed, primary-owned metrics from the primary', async (t) => {
  const primary = new Metrics({ processMetrics: false, version: '1.2.3' });
  primary.setAllowlists(lists('7', 3), { kind: 'file', lastRefusal: () => null });
  primary.adminRequest('/metrics', 'GET', 200);
  const w1 = await workerMetricsJson(worker(10, 2, [0.002, 0.2], '6'));
  const w2 = await workerMetricsJson(worker(5, 1, [0.002], null));
  // IPC is a structured clone: the JSON must survive it unchanged.
  t.same(structuredClone(w1), w1, 'worker JSON is plain data');

  const merged = (await aggregateClusterMetrics(await workerMetricsJson(primary), [w1, w2]).getMetricsAsJSON()) as unknown as MetricJson[];
  t.equal(sample(merged, 'ipgate_connections_accepted_total', { listener: 'edge' }), 15, 'accepted: summed');
  t.equal(sample(merged, 'ipgate_connections_active', { listener: 'edge' }), 3, 'active: summed');
  t.equal(sample(merged, 'ipgate_denied_total', { listener: 'edge', reason: 'not_allowlisted' }), 2);
  t.equal(sample(merged, 'ipgate_proxy_header_total', { listener: 'edge', version: 'v2', result: 'ok' }), 2);
  const bucket = 'ipgate_http_request_duration_seconds_bucket';
  t.equal(sample(merged, 'ipgate_http_request_duration_seconds', { listener: 'edge', le: 0.0025 }, bucket), 2, 'histogram buckets summed');
  t.equal(sample(merged, 'ipgate_http_request_duration_seconds', { listener: 'edge', le: '+Inf' }, bucket), 3);
  t.equal(sample(merged, 'ipgate_http_request_duration_seconds', { listener: 'edge' }, 'ipgate_http_request_duration_seconds_count'), 3);
  const versions = merged.find((m) => m.name === 'ipgate_allowlist_version_info')!.values;
  t.same(
    versions.map((v) => v.labels),
    [{ list: 'main', version: '7' }],
    "one version series: the primary's",
  );
  t.equal(sample(merged, 'ipgate_allowlist_entries', { list: 'main' }), 3, "entries: the primary's, not summed");
  t.equal(sample(merged, 'ipgate_admin_requests_total', { route: '/metrics', method: 'GET', code_class: '2xx' }), 1);
  t.equal(sample(merged, 'ipgate_build_info', { version: '1.2.3' }), 1);
});

t.test('process metrics labelled per worker stay per worker; the text passes as one exposition', async (t) => {
  const primary = new Metrics({ processLabels: { worker: 'primary' } });
  const w1 = new Metrics({ processLabels: { worker: '1' } });
  const w2 = new Metrics({ processLabels: { worker: '2' } });
  const text = await clusterExposition(primary, [await workerMetricsJson(w1), await workerMetricsJson(w2)]);
  for (const w of ['primary', '1', '2']) {
    t.match(
      text,
      new RegExp(`^process_start_time_seconds\\{worker="${w}"\\} \\d+`, 'm'),
      `start time of ${w} kept (prom-client would omit it)`,
    );
    t.match(text, new RegExp(`^nodejs_heap_size_used_bytes\\{worker="${w}"\\} \\d+`, 'm'), `heap of ${w}`);
  }
  t.equal(text.match(/^# TYPE ipgate_connections_accepted_total counter$/gm)?.length, 1, 'each metric once');
});

t.test('process metrics of unlabelled processes: each labelled worker="<id>" or "primary", none merged away', async (t) => {
  // As in production: Metrics without processLabels; each worker's answer labelled by its id.
  const primary = new Metrics({ version: '1.2.3' });
  const w1 = new Metrics({});
  const w2 = new Metrics({});
  const j1 = await workerMetricsJson(w1, 1);
  const j2 = await workerMetricsJson(w2, 2);
  t.same(structuredClone(j1), j1, 'still plain data for IPC');
  const merged = (await aggregateClusterMetrics(await workerMetricsJson(primary, 'primary'), [
    j1,
    j2,
  ]).getMetricsAsJSON()) as unknown as MetricJson[];
  const series = (name: string): Record<string, string | number>[] =>
    merged.find((m) => m.name === name)?.values.map((v) => v.labels) ?? [];
  for (const name of [
    'process_start_time_seconds',
    'process_max_fds',
    'process_open_fds',
    'process_resident_memory_bytes',
    'process_cpu_seconds_total',
    'nodejs_eventloop_lag_p99_seconds',
    'nodejs_heap_size_used_bytes',
  ]) {
    t.same(
      series(name)
        .map((l) => l.worker)
        .sort(),
      ['1', '2', 'primary'],
      `${name}: one series per process`,
    );
  }
  const maxFds = merged.find((m) => m.name === 'process_max_fds')!.values;
  t.ok(
    maxFds.every((v) => v.value === maxFds[0]!.value),
    "process_max_fds is each process's limit, not a sum",
  );
  t.same(
    series('nodejs_version_info')
      .map((l) => l.worker)
      .sort(),
    ['1', '2', 'primary'],
    'the Node version per process',
  );
  t.ok(
    series('nodejs_heap_space_size_used_bytes').every((l) => l.worker !== undefined && l.space !== undefined),
    'heap spaces keep their space label too',
  );
  // Not process metrics: merged as before, no worker label.
  t.same(series('ipgate_build_info'), [{ version: '1.2.3', node: process.version }], "build info: the primary's, unlabelled");

  const text = await clusterExposition(primary, [j1, j2]);
  t.match(text, /^process_start_time_seconds\{worker="primary"\} \d+$/m, 'the exposition labels the primary');
  t.match(text, /^process_start_time_seconds\{worker="1"\} \d+$/m);
  t.match(
    text,
    /^nodejs_heap_space_size_used_bytes\{worker="2",space="old"\} \d+$/m,
    'labelled series keep their own labels, worker first',
  );
  t.notMatch(text, /^ipgate_(process|nodejs)_/m, 'no ipgate_-prefixed process metrics');
});

t.test("a worker's answer is labelled by its node:cluster id, outside a worker not at all", async (t) => {
  const m = new Metrics({});
  const json = await workerMetricsJson(m);
  t.notOk(
    json.some((x) => x.values.some((v) => v.labels.worker !== undefined)),
    'not in a cluster worker: no worker label',
  );
  const labelled = await workerMetricsJson(m, 7);
  t.ok(labelled.find((x) => x.name === 'process_cpu_seconds_total')!.values.every((v) => v.labels.worker === '7'));
  t.notOk(
    labelled.some((x) => x.name.startsWith('ipgate_') && x.values.some((v) => v.labels.worker !== undefined)),
    'only process metrics get it',
  );
});

t.test('no workers: the primary alone', async (t) => {
  const primary = new Metrics({ processMetrics: false });
  const s = new ListenerStats('edge');
  s.accepted = 4;
  primary.addListener(s, 'tcp');
  const text = await clusterExposition(primary, []);
  t.match(text, /^ipgate_connections_accepted_total\{listener="edge"\} 4$/m);
});

/** A worker with `routes` routes that all saw traffic, and its process metrics. */
function routedWorker(routes: number): Metrics {
  const m = new Metrics();
  const s = new ListenerStats('edge');
  m.addListener(s, 'http');
  for (let r = 0; r < routes; r++) {
    const route = s.httpRoute(`r${r}`);
    for (let i = 0; i <= r % 5; i++)
      route.record(methodIndex(i % 2 === 0 ? 'GET' : 'PUT'), 200 + (i % 3) * 100, 0.002 * (i + 1), 50 * i, 700 * i);
    s.upstreamAnswered(`10.0.${r >> 8}.${r & 255}:80`, 200, 0.01);
  }
  return m;
}

t.test("a worker's metrics in parts: each part bounded, put back together they are workerMetricsJson's", async (t) => {
  const m = routedWorker(120);
  const parts: MetricJson[][] = [];
  const last = await workerMetricsInParts(m, (json) => parts.push(structuredClone(json)), 3, 1, 500);
  const count = (p: readonly MetricJson[]): number => p.reduce((n, x) => n + x.values.length, 0);
  const whole = await workerMetricsJson(m, 3);
  const total = count(whole);
  t.ok(parts.length >= Math.floor(total / 500) - 1, `${parts.length} parts for ${total} samples`);
  for (const p of parts)
    t.ok(count(p) >= 500 && count(p) < 500 + 200, `a part of ${count(p)} samples: one route's series past the bound at most`);
  // Process metrics move between two reads: compare names, labels and the ipgate series' values.
  const norm = (json: MetricJson[]): MetricJson[] =>
    json.map((x) => (x.name.startsWith('ipgate_') ? x : { ...x, values: x.values.map((v) => ({ ...v, value: 0 })) }));
  const joined = joinMetricParts([...parts, last]);
  t.same(
    norm(joined).map((x) => x.name),
    norm(whole).map((x) => x.name),
    'every metric once, in the registry order',
  );
  t.same(norm(joined), norm(whole), 'the same series and values');
  t.ok(
    joined.find((x) => x.name === 'process_cpu_user_seconds_total')?.values.every((v) => v.labels.worker === '3'),
    'process metrics labelled with the worker',
  );
});

t.test('a worker in parts gives the event loop turns while it reads, and a small registry is one message', async (t) => {
  const m = routedWorker(60);
  const parts: MetricJson[][] = [];
  const { turns } = await turnsDuring(() => workerMetricsInParts(m, (json) => parts.push(json), 1, 0));
  // With a slice of 0: a turn after each route's step of the four request metrics and the upstream histogram.
  t.ok(turns >= 5 * 60, `${turns} turns`);
  const small: MetricJson[][] = [];
  const only = await workerMetricsInParts(worker(1, 0, [0.1], null), (json) => small.push(json), 1);
  t.equal(small.length, 0, 'no parts');
  t.same(only, await workerMetricsJson(worker(1, 0, [0.1], null), 1), 'all of it in the last message');
});
