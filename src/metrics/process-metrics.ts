/**
 * Node process metrics under the standard names (`process_*`, `nodejs_*`, as prom-client's
 * `collectDefaultMetrics` publishes them, with its HELP and TYPE), so generic Node.js dashboards
 * and alerts work unchanged; read at scrape time at a cost that does not grow with the number of
 * connections.
 *
 * prom-client's own collectors are not used: several of them walk every libuv handle
 * (`process._getActiveHandles()`, twice), list `/proc/self/fd`, parse `/proc/self/status` line by
 * line and read the event-loop histogram seven times (its standard deviation alone walks Node's
 * HDR histogram twice: ~2.3 ms). Measured with 1,000 open sockets: ~18 ms of the event loop per
 * scrape, and it grows with every connection (bench/README.md "Metrics and access logs"). Here
 * every value is O(1) in connections:
 *
 * - CPU: `process.cpuUsage()`; resident memory, heap, external: `process.memoryUsage()`;
 *   virtual memory and data segment: the `VmSize` / `VmData` lines of `/proc/self/status`
 *   (one read, two `indexOf`s).
 * - Open fds: the size `stat(2)` reports for `/proc/self/fd` (Linux >= 6.2 reports the count
 *   there); older kernels report 0, and then the directory is listed as prom-client does.
 * - Max fds: `/proc/self/limits`, read once (prom-client does the same).
 * - Event-loop delay: `monitorEventLoopDelay` (10 ms resolution); min, max, mean and p50/p90/p99
 *   per scrape, then reset. The standard deviation (`nodejs_eventloop_lag_stddev_seconds`) is not
 *   published (the walk above). Its timer is most of an idle process's CPU: ~10 ms per second here
 *   (bench/README.md "At the deployed scrape rate"), the price of seeing a 10 ms stall.
 * - GC: a `PerformanceObserver` counting durations into a FixedHistogram per kind (no label
 *   hashing per GC).
 * - Not published: prom-client's `nodejs_active_handles` / `_requests` / `_resources` (and their
 *   `_total`s: the handle walk); `ipgate_connections_active` is the count an operator watches.
 *
 * The aggregators are prom-client's for the same metrics. In a cluster every process's series
 * carry a `worker` label (cluster.ts), so each process keeps its own.
 */
import fs from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver, constants as perf, type PerformanceEntry } from 'node:perf_hooks';
import v8 from 'node:v8';
import type { Registry } from 'prom-client';
import { FixedHistogram } from './fixed-histogram';
import type { Labels, Sample } from './published';
import { histogramSamples, Published } from './published';

/** Values read within this many ms belong to one scrape (the collectors run back to back). */
const FRESH_MS = 250;

/** prom-client's GC buckets, seconds. */
const GC_BUCKETS: readonly number[] = [0.001, 0.01, 0.1, 1, 2, 5];
const GC_KINDS: ReadonlyArray<readonly [number, string]> = [
  [perf.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [perf.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [perf.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [perf.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
];

/** `Max open files` soft limit from /proc/self/limits, or null (no procfs). */
export function readMaxFds(text: string): number | null {
  const at = text.indexOf('Max open files');
  if (at < 0) return null;
  const end = text.indexOf('\n', at);
  const m = /^Max open files\s+(\d+|unlimited)/.exec(text.slice(at, end < 0 ? undefined : end));
  if (m === null) return null;
  return m[1] === 'unlimited' ? null : Number(m[1]);
}

/** Bytes of a `Name:   1234 kB` line of /proc/self/status, or null. */
export function statusKb(text: string, name: string): number | null {
  const at = text.indexOf(`\n${name}:`);
  if (at < 0) return null;
  let i = at + name.length + 2;
  while (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9) i++;
  let v = 0;
  let digits = 0;
  for (let c = text.charCodeAt(i); c >= 48 && c <= 57; c = text.charCodeAt(++i)) {
    v = v * 10 + (c - 48);
    digits++;
  }
  return digits === 0 ? null : v * 1024;
}

/** Open file descriptors of this process, or null (no procfs). */
export function openFds(): number | null {
  try {
    const size = fs.statSync('/proc/self/fd').size;
    if (size > 0) return size;
    return fs.readdirSync('/proc/self/fd').length - 1; // minus the fd readdir itself held open
  } catch {
    return null;
  }
}

function readOrNull(file: string): string | null {
  try {
    return fs.readFileSync(file, 'latin1');
  } catch {
    return null;
  }
}

/** What `registerProcessMetrics` keeps running; `stop()` ends the monitors (tests, shutdown). */
interface ProcessMetricsHandle {
  stop(): void;
}

/**
 * The names registered below, for the cluster merge (cluster.ts labels these per process); a
 * histogram by its registry name, without `_bucket` / `_sum` / `_count`. The unit test checks that
 * this list and the registry agree.
 */
export const PROCESS_METRIC_NAMES: ReadonlySet<string> = new Set([
  'process_cpu_user_seconds_total',
  'process_cpu_system_seconds_total',
  'process_cpu_seconds_total',
  'process_start_time_seconds',
  'process_resident_memory_bytes',
  'process_virtual_memory_bytes',
  'process_heap_bytes',
  'nodejs_heap_size_total_bytes',
  'nodejs_heap_size_used_bytes',
  'nodejs_external_memory_bytes',
  'nodejs_heap_space_size_total_bytes',
  'nodejs_heap_space_size_used_bytes',
  'nodejs_heap_space_size_available_bytes',
  'process_open_fds',
  'process_max_fds',
  'nodejs_eventloop_lag_seconds',
  'nodejs_eventloop_lag_min_seconds',
  'nodejs_eventloop_lag_max_seconds',
  'nodejs_eventloop_lag_mean_seconds',
  'nodejs_eventloop_lag_p50_seconds',
  'nodejs_eventloop_lag_p90_seconds',
  'nodejs_eventloop_lag_p99_seconds',
  'nodejs_gc_duration_seconds',
  'nodejs_version_info',
]);

/**
 * Register the process metrics in `registry`, with `labels` on every series (e.g.
 * `{ worker: '2' }`; bounded: one label set per process).
 */
export function registerProcessMetrics(registry: Registry, labels?: Labels): ProcessMetricsHandle;
/**
 * @deprecated The names are the standard ones whatever `prefix` says (an `ipgate_` prefix hid them
 * from generic dashboards and alerts); call `registerProcessMetrics(registry, labels)`.
 */
export function registerProcessMetrics(registry: Registry, prefix: string, labels: Labels): ProcessMetricsHandle;
export function registerProcessMetrics(
  registry: Registry,
  prefixOrLabels: string | Labels = {},
  maybeLabels: Labels = {},
): ProcessMetricsHandle {
  const labels = typeof prefixOrLabels === 'string' ? maybeLabels : prefixOrLabels;
  const gauge = (
    name: string,
    help: string,
    aggregator: 'sum' | 'omit' | 'first' | 'average' | 'min' | 'max',
    value: () => number | null,
    type: 'gauge' | 'counter' = 'gauge',
  ): void => {
    new Published({
      name,
      help,
      type,
      aggregator,
      collect: (out: Sample[]) => {
        const v = value();
        if (v !== null) out.push({ labels, value: v });
      },
    }).register(registry);
  };

  // CPU: one getrusage per metric (three per scrape; each is a syscall of a few microseconds).
  gauge('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', 'sum', () => process.cpuUsage().user / 1e6, 'counter');
  gauge(
    'process_cpu_system_seconds_total',
    'Total system CPU time spent in seconds.',
    'sum',
    () => process.cpuUsage().system / 1e6,
    'counter',
  );
  gauge(
    'process_cpu_seconds_total',
    'Total user and system CPU time spent in seconds.',
    'sum',
    () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    },
    'counter',
  );
  const startTime = Math.round((Date.now() - process.uptime() * 1000) / 1000);
  gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', 'omit', () => startTime);

  // Memory: one memoryUsage() and one /proc/self/status read per scrape, shared by the six gauges
  // below (re-read when older than FRESH_MS, so a scrape reads them once).
  let memAt = -Infinity;
  let mem = process.memoryUsage();
  let status: string | null = null;
  const memory = (): NodeJS.MemoryUsage => {
    const now = performance.now();
    if (now - memAt > FRESH_MS) {
      memAt = now;
      mem = process.memoryUsage();
      status = readOrNull('/proc/self/status');
    }
    return mem;
  };
  gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', 'sum', () => memory().rss);
  gauge('process_virtual_memory_bytes', 'Virtual memory size in bytes.', 'sum', () => {
    memory();
    return status === null ? null : statusKb(status, 'VmSize');
  });
  // `VmData`, the data segment, is what prom-client reads for this one too.
  gauge('process_heap_bytes', 'Process heap size in bytes.', 'sum', () => {
    memory();
    return status === null ? null : statusKb(status, 'VmData');
  });
  gauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.', 'sum', () => memory().heapTotal);
  gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', 'sum', () => memory().heapUsed);
  gauge('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.', 'sum', () => memory().external);
  for (const [field, what] of [
    ['space_size', 'total'],
    ['space_used_size', 'used'],
    ['space_available_size', 'available'],
  ] as const) {
    new Published({
      name: `nodejs_heap_space_size_${what}_bytes`,
      help: `Process heap space size ${what} from Node.js in bytes.`,
      type: 'gauge',
      aggregator: 'sum',
      collect: (out) => {
        for (const s of v8.getHeapSpaceStatistics())
          out.push({ labels: { ...labels, space: s.space_name.replace(/_space$/, '') }, value: s[field] });
      },
    }).register(registry);
  }

  gauge('process_open_fds', 'Number of open file descriptors.', 'sum', openFds);
  const limits = readOrNull('/proc/self/limits');
  const maxFds = limits === null ? null : readMaxFds(limits);
  gauge('process_max_fds', 'Maximum number of open file descriptors.', 'sum', () => maxFds);

  // Event-loop delay. `_seconds` is prom-client's: the delay of one setImmediate queued at the
  // previous scrape (the value lags one scrape, as prom-client's does).
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let lastLag = 0;
  const measureLag = (start: bigint): void => {
    lastLag = Number(process.hrtime.bigint() - start) / 1e9;
  };
  gauge('nodejs_eventloop_lag_seconds', 'Lag of event loop in seconds.', 'average', () => {
    setImmediate(measureLag, process.hrtime.bigint());
    return lastLag;
  });
  // min/max are O(1); mean and each percentile one walk of the histogram. Read together once per
  // scrape (FRESH_MS), then the histogram is reset for the next interval.
  const lag = { min: 0, max: 0, mean: 0, p50: 0, p90: 0, p99: 0 };
  let lagAt = -Infinity;
  const readDelay = (): typeof lag => {
    const now = performance.now();
    if (now - lagAt <= FRESH_MS) return lag;
    lagAt = now;
    if (delay.count === 0) {
      lag.min = lag.max = lag.mean = lag.p50 = lag.p90 = lag.p99 = 0;
    } else {
      lag.min = delay.min / 1e9;
      lag.max = delay.max / 1e9;
      lag.mean = delay.mean / 1e9;
      lag.p50 = delay.percentile(50) / 1e9;
      lag.p90 = delay.percentile(90) / 1e9;
      lag.p99 = delay.percentile(99) / 1e9;
    }
    delay.reset();
    return lag;
  };
  gauge('nodejs_eventloop_lag_min_seconds', 'The minimum recorded event loop delay.', 'min', () => readDelay().min);
  gauge('nodejs_eventloop_lag_max_seconds', 'The maximum recorded event loop delay.', 'max', () => readDelay().max);
  gauge('nodejs_eventloop_lag_mean_seconds', 'The mean of the recorded event loop delays.', 'average', () => readDelay().mean);
  gauge('nodejs_eventloop_lag_p50_seconds', 'The 50th percentile of the recorded event loop delays.', 'average', () => readDelay().p50);
  gauge('nodejs_eventloop_lag_p90_seconds', 'The 90th percentile of the recorded event loop delays.', 'average', () => readDelay().p90);
  gauge('nodejs_eventloop_lag_p99_seconds', 'The 99th percentile of the recorded event loop delays.', 'average', () => readDelay().p99);

  // GC durations per kind.
  const gcByKind = new Map<number, FixedHistogram>(GC_KINDS.map(([k]) => [k, new FixedHistogram(GC_BUCKETS)]));
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      if (kind !== undefined) gcByKind.get(kind)?.observe(entry.duration / 1000);
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  const gcName = 'nodejs_gc_duration_seconds';
  new Published({
    name: gcName,
    help: 'Garbage collection duration by kind, one of major, minor, incremental or weakcb.',
    type: 'histogram',
    aggregator: 'sum',
    collect: (out) => {
      for (const [k, kind] of GC_KINDS) {
        const h = gcByKind.get(k)!;
        if (h.count > 0) histogramSamples(out, gcName, { ...labels, kind }, h);
      }
    },
  }).register(registry);

  const [major, minor, patch] = process.version.slice(1).split('.').map(Number);
  new Published({
    name: 'nodejs_version_info',
    help: 'Node.js version info.',
    type: 'gauge',
    aggregator: 'first',
    collect: (out) => out.push({ labels: { ...labels, version: process.version, major: major!, minor: minor!, patch: patch! }, value: 1 }),
  }).register(registry);

  return {
    stop: () => {
      delay.disable();
      observer.disconnect();
    },
  };
}
