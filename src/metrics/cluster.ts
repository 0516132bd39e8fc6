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
import { performance } from 'node:perf_hooks';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { aTurn, exposition, SLICE_MS } from './exposition';
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

/**
 * Samples in one IPC message of a worker's metrics. The channel writes each message as JSON in one
 * piece on the worker's event loop: with 1,000 routes a worker's metrics were 6.2 MB of JSON, 41 ms
 * of `JSON.stringify` on Node 20 after 33 ms of `getMetricsAsJSON`, one stall of the traffic that
 * worker carries per scrape (bench/README.md "A scrape in slices of a millisecond"). 1,000 samples
 * are ~0.7 ms of it.
 */
export const PART_SAMPLES = 1000;

/**
 * `workerMetricsJson`, sent in parts: the metrics are read as a scrape reads them (a route's
 * series a step, yielding to the event loop once it has held it for SLICE_MS), and every
 * `partSamples` samples go out through `sendPart`; the rest is returned, for the message that ends
 * the reply. A metric may be cut between two parts: `joinMetricParts` puts it back together.
 */
export async function workerMetricsInParts(
  metrics: Metrics,
  sendPart: (json: MetricJson[]) => void,
  worker: string | number | undefined = cluster.worker?.id,
  sliceMs = SLICE_MS,
  partSamples = PART_SAMPLES,
): Promise<MetricJson[]> {
  const registry = metrics.registry as unknown as { _defaultLabels?: Record<string, unknown> };
  // Default labels are added by prom-client's getMetricsAsJSON: that path, in one message.
  if (registry._defaultLabels !== undefined && Object.keys(registry._defaultLabels).length > 0) return workerMetricsJson(metrics, worker);
  const label = (m: MetricJson): MetricJson => (worker === undefined ? m : labelProcess(m, String(worker)));
  let part: MetricJson[] = [];
  let inPart = 0;
  let slice = performance.now();
  const flush = (): void => {
    if (part.length > 0) sendPart(part);
    part = [];
    inPart = 0;
  };
  for (const m of metrics.registry.getMetricsAsArray() as unknown as Stepped[]) {
    if (typeof m.collectSteps !== 'function') {
      const got = label((await m.get()) as MetricJson);
      part.push(got);
      inPart += got.values.length;
    } else {
      // The generator pushes into `buf`; what it pushed goes into the part as a piece of the
      // metric when the part is full, and at the end (a metric without samples still goes out).
      const buf: MetricJson['values'] = [];
      const head = { name: m.name, help: m.help, type: m.type, aggregator: m.aggregator };
      let pieces = 0;
      for (const _ of m.collectSteps(buf)) {
        if (inPart + buf.length >= partSamples) {
          part.push(label({ ...head, values: buf.splice(0) }));
          pieces++;
          flush();
        }
        if (performance.now() - slice >= sliceMs) slice = await aTurn();
      }
      if (buf.length > 0 || pieces === 0) {
        inPart += buf.length;
        part.push(label({ ...head, values: buf.splice(0) }));
      }
    }
    if (inPart >= partSamples) flush();
    if (performance.now() - slice >= sliceMs) slice = await aTurn();
  }
  return part;
}

/** A worker's reply put back together from its parts, in order (see workerMetricsInParts). */
export function joinMetricParts(parts: readonly (readonly MetricJson[])[]): MetricJson[] {
  const out: MetricJson[] = [];
  for (const part of parts) {
    for (const m of part) {
      const last = out[out.length - 1];
      // A metric's name is unique in a registry: the same name twice in a row is one metric cut in two.
      if (last !== undefined && last.name === m.name) for (const v of m.values) last.values.push(v);
      else out.push(m);
    }
  }
  return out;
}

/** What workerMetricsInParts reads of a registered metric (Published has the steps). */
interface Stepped {
  name: string;
  help: string;
  type: string;
  aggregator: MetricJson['aggregator'];
  get(): Promise<unknown> | unknown;
  collectSteps?(out: MetricJson['values']): Iterable<unknown>;
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
