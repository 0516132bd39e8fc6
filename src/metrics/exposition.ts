/**
 * The Prometheus text exposition (format 0.0.4) of a prom-client Registry, the same bytes as
 * `Registry.metrics()` writes (test/unit/metrics/exposition.test.ts holds the two equal), built in
 * one pass without the per-sample arrays, `Object.entries` pairs and regular expressions of
 * prom-client's writer.
 *
 * Why: a scrape runs on the event loop of the process that forwards traffic. With 100 routes the
 * exposition is ~5,000 lines (three histograms per route), and prom-client's writer took 12-15 ms
 * of CPU per scrape (30-37 ms of wall time under load), a stall every request in flight waits out:
 * compare.ts scrapes once a second, as a tight Prometheus would, and that scrape alone took ipgate's
 * p99 from ~4 ms to 17-21 ms on Node 20 (bench/README.md "A scrape's stall, and the floor of a Node
 * HTTP proxy"). It also yields to the event loop between metrics (SLICE_MS).
 *
 * Only what ipgate registers takes the fast path: the 0.0.4 format, no default labels, no
 * exemplars. Anything else (an OpenMetrics registry, default labels set) is handed to prom-client.
 */
import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';

interface Value {
  value: number;
  labels?: Record<string, unknown>;
  metricName?: string;
  sharedLabels?: Record<string, unknown>;
}

interface Got {
  name: string;
  help: string;
  type: string;
  values?: Value[];
}

interface Gettable {
  get(): Got | Promise<Got>;
  getForPromString?(): Got | Promise<Got>;
}

const PROMETHEUS_0_0_4 = 'text/plain; version=0.0.4; charset=utf-8';
/** A sample without labels (prom-client's default, `{}`). */
const NONE: Record<string, unknown> = Object.freeze({});

/**
 * The longest a scrape holds the event loop at once, milliseconds: it yields between metrics when a
 * slice is used up (one metric's collect and text is at most ~1.5 ms: 100 routes' duration histogram
 * on Node 20), so a scrape delays the requests in flight by one slice, not by the whole exposition.
 * Each metric is read in one piece; metrics are read a few milliseconds apart, as prom-client's
 * collectors are.
 */
const SLICE_MS = 1;

/** What `Registry.metrics()` would answer for `registry`. */
export async function exposition(registry: Registry): Promise<string> {
  const r = registry as unknown as { contentType: string; _defaultLabels?: Record<string, unknown> };
  if (r.contentType !== PROMETHEUS_0_0_4 || (r._defaultLabels !== undefined && Object.keys(r._defaultLabels).length > 0))
    return registry.metrics();
  const list = registry.getMetricsAsArray() as unknown as Gettable[];
  let out = '';
  let slice = performance.now();
  for (let i = 0; i < list.length; i++) {
    const m = list[i]!;
    const got = await (typeof m.getForPromString === 'function' ? m.getForPromString() : m.get());
    if (i > 0) out += '\n\n';
    out += metricText(got);
    // Requests waiting on this event loop get a turn at least every SLICE_MS of a scrape.
    if (performance.now() - slice >= SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      slice = performance.now();
    }
  }
  return `${out}\n`;
}

function metricText(m: Got): string {
  const name = escapeString(m.name);
  let out = `# HELP ${name} ${escapeString(m.help)}\n# TYPE ${name} ${m.type}`;
  const values = m.values ?? [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    let labels = flattenLabels(v.labels ?? NONE, v.sharedLabels ?? null);
    if (v.sharedLabels !== undefined) {
      const flatShared = flattenLabels(v.sharedLabels, null);
      if (flatShared !== '') labels = labels === '' ? flatShared : `${labels},${flatShared}`;
    }
    out += `\n${v.metricName ?? name}${labels === '' ? '' : `{${labels}}`} ${valueText(v.value)}`;
  }
  return out;
}

/** `a="x",b="y"` in the labels' own order, leaving out the names in `exclude`. */
function flattenLabels(labels: Record<string, unknown>, exclude: Record<string, unknown> | null): string {
  let out = '';
  const keys = Object.keys(labels);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    if (exclude !== null && Object.hasOwn(exclude, k)) continue;
    const v = labels[k];
    const text = typeof v === 'string' ? escapeLabelValue(v) : `${v as string}`;
    out += out === '' ? `${k}="${text}"` : `,${k}="${text}"`;
  }
  return out;
}

function escapeString(s: string): string {
  return s.indexOf('\\') < 0 && s.indexOf('\n') < 0 ? s : s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

function escapeLabelValue(s: string): string {
  return s.indexOf('\\') < 0 && s.indexOf('\n') < 0 && s.indexOf('"') < 0 ? s : escapeString(s).replace(/"/g, '\\"');
}

function valueText(v: number): string {
  if (Number.isNaN(v)) return 'Nan';
  if (!Number.isFinite(v)) return v < 0 ? '-Inf' : '+Inf';
  return `${v}`;
}
