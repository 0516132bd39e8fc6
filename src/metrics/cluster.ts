/**
 * One `/metrics` for several worker processes (node:cluster; docs/architecture.md "Several workers per pod share
 * one store and one metrics endpoint").
 *
 * Each process builds its own `Metrics` with the sources it has: a worker publishes its listeners
 * (and its own process metrics), the primary the store, the lists, the admin API and its process
 * metrics. On a scrape the primary asks every worker for `workerMetricsJson()` over IPC (the
 * caller's transport: `process.send` / `worker.on('message')`), then answers with
 * `clusterExposition(primary, workersJson)`.
 *
 * Merge rules (prom-client's AggregatorRegistry.aggregate, plus two of ours):
 * - Counters and histograms are summed per label set (`ipgate_connections_accepted_total{listener}`
 *   is the pod's total); gauges such as `ipgate_connections_active` are summed too.
 * - Metrics the primary owns (PRIMARY_OWNED: allowlist entries/version/reloads, admin requests,
 *   build info) are taken from the primary only: a worker that applied a list version a moment
 *   later must not add a second `ipgate_allowlist_version_info` series.
 * - Process metrics (`process_*`, `nodejs_*`: PROCESS_METRIC_NAMES) are labelled with the process
 *   they describe, `worker="primary"` or `worker="<id>"` (node:cluster's worker id, the `worker`
 *   field of that process's log lines), so each process keeps its own series. Merged, they would
 *   mean little: prom-client sums `process_max_fds` and `process_open_fds` across processes,
 *   averages away one worker's event-loop stall, and omits `process_start_time_seconds`, so a
 *   restarted worker would not show. Per process, the generic alerts work as written (open fds
 *   against max fds, lag per process, restarts); `sum by (pod)` gives the pod's CPU and memory.
 *   The label is bounded by the processes: `workers` + 1, and a new id per restarted worker.
 *   Series that already carry `worker` (Metrics option processLabels) are left as they are.
 */
import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { exposition } from './exposition';
import type { Metrics } from './metrics';
import { PRIMARY_OWNED } from './metrics';
import { PROCESS_METRIC_NAMES } from './process-metrics';
import type { MetricJson } from './published';

/**
 * A process's metrics for the merge: plain JSON, safe to send over IPC (structured clone), its
 * process metrics labelled `worker` (in a worker, by default, node:cluster's id for it).
 */
export async function workerMetricsJson(metrics: Metrics, worker: string | number | undefined = cluster.worker?.id): Promise<MetricJson[]> {
  const json = await (metrics.registry.getMetricsAsJSON() as unknown as Promise<MetricJson[]>);
  return worker === undefined ? json : json.map((m) => labelProcess(m, String(worker)));
}

/** Merge the primary's metrics with every worker's (see the rules above) into one registry. */
export function aggregateClusterMetrics(primary: readonly MetricJson[], workers: readonly (readonly MetricJson[])[]): Registry {
  const sets: MetricJson[][] = [primary.map(perProcess)];
  for (const w of workers) sets.push(w.filter((m) => !PRIMARY_OWNED.has(m.name)).map(perProcess));
  return AggregatorRegistry.aggregate(sets as unknown as Parameters<typeof AggregatorRegistry.aggregate>[0]);
}

/** The text exposition of the whole pod: what the primary's `/metrics` answers. */
export async function clusterExposition(primary: Metrics, workers: readonly (readonly MetricJson[])[]): Promise<string> {
  const own = await workerMetricsJson(primary, 'primary');
  return exposition(aggregateClusterMetrics(own, workers));
}

function labelProcess(m: MetricJson, worker: string): MetricJson {
  if (!PROCESS_METRIC_NAMES.has(m.name)) return m;
  return { ...m, values: m.values.map((v) => (v.labels.worker !== undefined ? v : { ...v, labels: { worker, ...v.labels } })) };
}

/** Series labelled per process stay per process, even where prom-client would omit the metric. */
function perProcess(m: MetricJson): MetricJson {
  if (m.aggregator !== 'omit' || m.values.length === 0) return m;
  if (!m.values.every((v) => v.labels.worker !== undefined)) return m;
  return { ...m, aggregator: 'sum' };
}
