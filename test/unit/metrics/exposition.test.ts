/**
 * src/metrics/exposition.ts against its oracle: prom-client's own `Registry.metrics()` must write the
 * same bytes for the same registry (ipgate's Metrics with every source it publishes, the workers'
 * merged registry, prom-client's own metric types, label values that need escaping), and a scrape
 * of 100 routed series must cost a bounded, small amount of time (the reason it exists).
 */
import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry as PromRegistry } from 'prom-client';
import t from 'tap';
import { aggregateClusterMetrics, workerMetricsJson } from '../../../src/metrics/cluster';
import { exposition } from '../../../src/metrics/exposition';
import { ListenerStats, methodIndex } from '../../../src/metrics/listener-stats';
import { Metrics } from '../../../src/metrics/metrics';
import { Published } from '../../../src/metrics/published';
import { turnsDuring } from '../../helpers/event-loop';

/** ipgate's Metrics for one HTTP listener with `routes` routes that all saw traffic, and a TCP listener. */
function busyMetrics(routes: number, processMetrics: boolean): Metrics {
  const m = new Metrics({ processMetrics });
  const http = new ListenerStats('edge');
  const tcp = new ListenerStats('db');
  m.addListener(http, 'http');
  m.addListener(tcp, 'tcp');
  for (let r = 0; r < routes; r++) {
    const route = http.httpRoute(`r${r}`);
    for (let i = 0; i <= r % 7; i++)
      route.record(methodIndex(i % 2 === 0 ? 'GET' : 'POST'), 200 + (i % 3) * 100, 0.0004 * (i + 1), 100 * i, 1000 * i);
  }
  http.upstreamAnswered('10.0.0.1:80', 200, 0.01);
  http.upstreamFailed('10.0.0.2:80', 'upstream_refused');
  return m;
}

t.test('ipgate Metrics: the same text as prom-client writes', async (t) => {
  for (const routes of [0, 1, 100]) {
    const m = busyMetrics(routes, true);
    // Process metrics change between two reads (CPU, memory): compare a registry without them too.
    const still = busyMetrics(routes, false);
    t.equal(await exposition(still.registry), await still.registry.metrics(), `${routes} routes, no process metrics`);
    const text = await exposition(m.registry);
    t.match(text, /^# HELP process_cpu_user_seconds_total /m, 'process metrics are in the fast path too');
    t.equal(text.endsWith('\n') && !text.endsWith('\n\n'), true, 'one newline at the end');
    // With them: the values move between two reads; names, labels and order must not.
    const norm = (s: string): string => s.replace(/^((?:process|nodejs)_\S*) .*$/gm, '$1 N');
    t.equal(norm(await m.scrape()), norm(await m.registry.metrics()), `${routes} routes, with process metrics (scrape())`);
  }
});

t.test('the workers merged: the same text as prom-client writes', async (t) => {
  const workers = await Promise.all([1, 2].map((id) => workerMetricsJson(busyMetrics(3 * id, false), id)));
  const primary = await workerMetricsJson(new Metrics({ processMetrics: false }), 'primary');
  const merged = aggregateClusterMetrics(primary, workers);
  const text = await exposition(merged);
  t.equal(text, await merged.metrics());
  t.match(text, /ipgate_http_requests_total\{listener="edge",route="r1",method="POST",status="300",code_class="3xx",protocol="h1"\} 2/);
});

t.test("prom-client's own metric types, values and labels that need escaping", async (t) => {
  const reg = new PromRegistry();
  const c = new Counter({ name: 'odd_total', help: 'help with \\ backslash\nand newline', labelNames: ['a', 'b'], registers: [reg] });
  c.inc({ a: 'quote " here', b: 'back\\slash' });
  c.inc({ a: 'new\nline', b: '' }, 2.5);
  c.inc({ a: 'plain', b: 'x' }, 1e21);
  const g = new Gauge({ name: 'g', help: 'g', labelNames: ['n'], registers: [reg] });
  g.set({ n: '1' }, Number.NaN);
  g.set({ n: '2' }, Number.POSITIVE_INFINITY);
  g.set({ n: '3' }, Number.NEGATIVE_INFINITY);
  g.set({ n: '4' }, -0.000001);
  new Gauge({ name: 'empty', help: 'no values', registers: [reg] });
  const h = new Histogram({ name: 'h_seconds', help: 'h', labelNames: ['x'], buckets: [0.1, 1], registers: [reg] });
  h.observe({ x: 'a' }, 0.5);
  h.observe(3);
  new Published({
    name: 'pub',
    help: 'published',
    type: 'gauge',
    collect: (out) => {
      out.push({ labels: {}, value: 1 });
      out.push({ labels: { le: 0.25, n: 3 }, value: 2, metricName: 'pub_other' });
      out.push({ labels: { a: 'x' }, value: 3, sharedLabels: { a: 'x', s: 'y"' } } as never);
    },
  }).register(reg as never);
  t.equal(await exposition(reg as never), await reg.metrics());
  t.match(await exposition(reg as never), /odd_total\{a="quote \\" here",b="back\\\\slash"\} 1/);
});

t.test('registries the fast path does not handle go to prom-client', async (t) => {
  const reg = new PromRegistry();
  new Counter({ name: 'c_total', help: 'c', registers: [reg] }).inc();
  reg.setDefaultLabels({ pod: 'p-1' });
  t.equal(await exposition(reg as never), await reg.metrics());
  t.match(await exposition(reg as never), /c_total\{pod="p-1"\} 1/);
  const om = new (PromRegistry as unknown as new (contentType: string) => PromRegistry)(PromRegistry.OPENMETRICS_CONTENT_TYPE);
  new Counter({ name: 'd_total', help: 'd', registers: [om] }).inc();
  t.equal(await exposition(om as never), await om.metrics());
  t.match(await exposition(om as never), /# EOF\n$/);
});

t.test('100 routes: a scrape costs less than prom-client writing it', async (t) => {
  const m = busyMetrics(100, false);
  // CPU time, not wall time (a loaded machine deschedules either); the median of 30 taken in turns,
  // so a burst of load elsewhere weighs on both (a best-of-N let one lucky prom-client run decide).
  const cpuMs = async (f: () => Promise<string>): Promise<number> => {
    const c0 = process.cpuUsage();
    await f();
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / 1000;
  };
  const scrapes = { ours: () => exposition(m.registry), theirs: () => m.registry.metrics() };
  for (let i = 0; i < 5; i++) for (const f of Object.values(scrapes)) await f();
  const runs = { ours: [] as number[], theirs: [] as number[] };
  for (let i = 0; i < 30; i++) {
    runs.ours.push(await cpuMs(scrapes.ours));
    runs.theirs.push(await cpuMs(scrapes.theirs));
  }
  const median = (xs: number[]): number => xs.sort((a, b) => a - b)[xs.length >> 1]!;
  const ours = median(runs.ours);
  const theirs = median(runs.theirs);
  t.comment(`100 routes: exposition ${ours.toFixed(2)} ms, prom-client ${theirs.toFixed(2)} ms of CPU (median of 30, in turns)`);
  t.ok(ours < theirs * 0.8, `faster than prom-client by a fifth at least (${ours.toFixed(2)} against ${theirs.toFixed(2)} ms)`);
});

t.test('a long scrape yields to the event loop between metrics', async (t) => {
  const m = busyMetrics(300, false);
  await exposition(m.registry); // compiled once
  let turns = 0;
  let longest = 0;
  let last = performance.now();
  let done = false;
  const tick = (): void => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    turns++;
    if (!done) setImmediate(tick);
  };
  setImmediate(tick);
  const t0 = performance.now();
  const text = await exposition(m.registry);
  const total = performance.now() - t0;
  done = true;
  t.equal(text, await m.registry.metrics(), 'the same text, yields or not');
  t.comment(`300 routes: ${total.toFixed(1)} ms in all, ${turns} turns of the loop, longest hold ${longest.toFixed(1)} ms`);
  t.ok(turns >= 2, `other work ran during the scrape (${turns} turns)`);
  t.ok(longest < total, `no single hold as long as the whole scrape (${longest.toFixed(1)} of ${total.toFixed(1)} ms)`);
});

/** A scrape of `registry` with the given slice, and how many turns of the event loop ran during it. */
async function scrapeTurns(registry: Parameters<typeof exposition>[0], sliceMs: number): Promise<{ turns: number; text: string }> {
  const { turns, result } = await turnsDuring(() => exposition(registry, sliceMs));
  return { turns, text: result };
}

t.test("a metric with a series per route is written in steps: the loop gets turns inside it, and the text is prom-client's", async (t) => {
  const routes = 40;
  const m = busyMetrics(routes, false);
  const stepped = await scrapeTurns(m.registry, 0);
  t.equal(stepped.text, await m.registry.metrics(), 'the same text, written in steps');
  // With a slice of 0 the scrape yields at every check: after each metric, and after each label set
  // (the listener's, then each route's) of the four request metrics.
  const metrics = m.registry.getMetricsAsArray().length;
  t.ok(stepped.turns >= metrics + 4 * routes, `${stepped.turns} turns for ${metrics} metrics and 4 x ${routes} route steps`);
  const duration = m.registry.getSingleMetric('ipgate_http_request_duration_seconds') as unknown as {
    collectSteps(out: unknown[]): Iterable<unknown>;
  };
  let n = 0;
  for (const _ of duration.collectSteps([])) n++;
  t.equal(n, routes, 'one step per route (the listener has no series of its own without unrouted requests)');
});

t.test('a merged registry (read in one piece per metric) still yields every few hundred samples', async (t) => {
  const workers = await Promise.all([1, 2].map((id) => workerMetricsJson(busyMetrics(60, false), id)));
  const primary = await workerMetricsJson(new Metrics({ processMetrics: false }), 'primary');
  const merged = aggregateClusterMetrics(primary, workers);
  const metrics = merged.getMetricsAsArray().length;
  const { turns, text } = await scrapeTurns(merged, 0);
  t.equal(text, await merged.metrics(), 'the same text');
  const samples = text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
  t.ok(turns > metrics + Math.floor(samples / 256) - 8, `${turns} turns for ${metrics} metrics and ${samples} samples`);
});
