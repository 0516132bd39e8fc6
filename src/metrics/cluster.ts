/**
 * One `/metrics` for several worker processes (node:cluster; DESIGN "Several workers per pod share
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
 * - Process metrics keep prom-client's aggregators (event-loop lag averaged, heap summed, version
 *   first); when every process labels them `worker` (Metrics option processLabels), each process
 *   keeps its own series, and metrics prom-client would omit (process start time) are kept.
 */
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Metrics } from './metrics';
import { PRIMARY_OWNED } from './metrics';
import type { MetricJson } from './published';

/** A worker's answer to the primary: plain JSON, safe to send over IPC (structured clone). */
export function workerMetricsJson(metrics: Metrics): Promise<MetricJson[]> {
  return metrics.registry.getMetricsAsJSON() as unknown as Promise<MetricJson[]>;
}

/** Merge the primary's metrics with every worker's (see the rules above) into one registry. */
export function aggregateClusterMetrics(primary: readonly MetricJson[], workers: readonly (readonly MetricJson[])[]): Registry {
  const sets: MetricJson[][] = [primary.map(perProcess)];
  for (const w of workers) sets.push(w.filter((m) => !PRIMARY_OWNED.has(m.name)).map(perProcess));
  return AggregatorRegistry.aggregate(sets as unknown as Parameters<typeof AggregatorRegistry.aggregate>[0]);
}

/** The text exposition of the whole pod: what the primary's `/metrics` answers. */
export async function clusterExposition(primary: Metrics, workers: readonly (readonly MetricJson[])[]): Promise<string> {
  const own = await workerMetricsJson(primary);
  return aggregateClusterMetrics(own, workers).metrics();
}

/** Series labelled per process stay per process, even where prom-client would omit the metric. */
function perProcess(m: MetricJson): MetricJson {
  if (m.aggregator !== 'omit' || m.values.length === 0) return m;
  if (!m.values.every((v) => v.labels.worker !== undefined)) return m;
  return { ...m, aggregator: 'sum' };
}
