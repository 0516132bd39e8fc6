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
 * HTTP proxy"). It also yields to the event loop whenever it has held it for SLICE_MS.
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
  /**
   * A metric that can hand its samples over in steps (Published with `steps`, published.ts): each
   * step pushes some into `out` (one route's series), so the scrape can yield inside the metric.
   */
  collectSteps?(out: Value[]): Iterable<unknown>;
  name?: string;
  help?: string;
  type?: string;
}

const PROMETHEUS_0_0_4 = 'text/plain; version=0.0.4; charset=utf-8';
/** A sample without labels (prom-client's default, `{}`). */
const NONE: Record<string, unknown> = Object.freeze({});

/**
 * The longest a scrape holds the event loop at once, milliseconds: it yields when a slice is used
 * up, so a scrape delays the requests in flight by one slice, not by the whole exposition. It checks
 * the time between metrics, between the steps of a metric that has them (one route's series each),
 * and every CHUNK samples of the text of one that does not (a merged worker registry). With 1,000
 * routes one metric's collect and text was ~20 ms in one piece, and the longest hold of a scrape
 * 43-72 ms (bench/README.md "A scrape in slices of a millisecond"). A metric read in steps is read
 * across slices: each label set's series (a histogram's buckets, sum and count) within one step,
 * label sets a few milliseconds apart, as prom-client's collectors read metrics.
 */
export const SLICE_MS = 1;
/** Samples written between checks of the time, in a metric read in one piece. */
const CHUNK = 256;

/**
 * What `Registry.metrics()` would answer for `registry`. `sliceMs`: the slice (tests set 0 to
 * yield at every check).
 */
export async function exposition(registry: Registry, sliceMs = SLICE_MS): Promise<string> {
  const r = registry as unknown as { contentType: string; _defaultLabels?: Record<string, unknown> };
  if (r.contentType !== PROMETHEUS_0_0_4 || (r._defaultLabels !== undefined && Object.keys(r._defaultLabels).length > 0))
    return registry.metrics();
  const list = registry.getMetricsAsArray() as unknown as Gettable[];
  // The text in flat pieces, joined once at the end (see lines()).
  const out: string[] = [];
  // Requests waiting on this event loop get a turn at least every sliceMs of a scrape.
  let slice = performance.now();
  const due = (): boolean => performance.now() - slice >= sliceMs;
  /** The lines of `values`, CHUNK at a time, yielding between chunks when the slice is used. */
  const write = async (name: string, values: readonly Value[]): Promise<void> => {
    for (let j = 0; j < values.length; j += CHUNK) {
      out.push(lines(name, values, j, Math.min(values.length, j + CHUNK)));
      if (j + CHUNK < values.length && due()) slice = await aTurn();
    }
  };
  for (let i = 0; i < list.length; i++) {
    const m = list[i]!;
    if (i > 0) out.push('\n\n');
    if (typeof m.collectSteps === 'function') {
      const name = escapeString(m.name!);
      out.push(head(name, m.help!, m.type!));
      const values: Value[] = [];
      for (const _ of m.collectSteps(values)) {
        // A step is one label set's series: within a chunk, written without an await.
        if (values.length <= CHUNK) out.push(lines(name, values, 0, values.length));
        else await write(name, values);
        values.length = 0;
        if (due()) slice = await aTurn();
      }
      await write(name, values);
    } else {
      const got = await (typeof m.getForPromString === 'function' ? m.getForPromString() : m.get());
      const name = escapeString(got.name);
      out.push(head(name, got.help, got.type));
      await write(name, got.values ?? []);
    }
    if (due()) slice = await aTurn();
  }
  out.push('\n');
  return out.join('');
}

/** A turn of the event loop for everything else waiting; resolves with the time it ends. */
export function aTurn(): Promise<number> {
  return new Promise<number>((resolve) => setImmediate(() => resolve(performance.now())));
}

function head(name: string, help: string, type: string): string {
  return `# HELP ${name} ${escapeString(help)}\n# TYPE ${name} ${type}`;
}

/**
 * The sample lines of values[from, to), each after a newline, as one flat string: the lines are
 * joined, not appended one by one. A string grown by `+=` is a tree of ConsStrings, one node or more
 * per line, and all of a scrape's stay alive until the text is sent: with 1,000 routes (60,000
 * lines) every scavenge during the scrape copied that tree, 20-43 ms a scavenge (bench/README.md
 * "A scrape in slices of a millisecond").
 */
function lines(name: string, values: readonly Value[], from: number, to: number): string {
  const out: string[] = [];
  for (let i = from; i < to; i++) {
    const v = values[i]!;
    let labels = flattenLabels(v.labels ?? NONE, v.sharedLabels ?? null);
    if (v.sharedLabels !== undefined) {
      const flatShared = flattenLabels(v.sharedLabels, null);
      if (flatShared !== '') labels = labels === '' ? flatShared : `${labels},${flatShared}`;
    }
    out.push(`\n${v.metricName ?? name}${labels === '' ? '' : `{${labels}}`} ${valueText(v.value)}`);
  }
  return out.join('');
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
