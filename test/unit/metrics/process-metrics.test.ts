/**
 * ipgate's own Node process metrics (src/metrics/process-metrics.ts): the standard names, HELP and
 * TYPE of prom-client's defaults, values that are right, and a scrape whose cost does not walk the
 * handles.
 */
import fs from 'node:fs';
import net from 'node:net';
import v8 from 'node:v8';
import t from 'tap';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { openFds, PROCESS_METRIC_NAMES, readMaxFds, registerProcessMetrics, statusKb } from '../../../src/metrics/process-metrics';
import type { MetricJson } from '../../../src/metrics/published';

/** The value of one series in an exposition, or undefined. */
function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const STATUS = 'Name:\tnode\nUmask:\t0022\nVmPeak:\t 1200000 kB\nVmSize:\t 1020030 kB\nVmData:\t   55672 kB\nVmRSS:\t   52600 kB\n';
const LIMITS =
  'Limit                     Soft Limit           Hard Limit           Units     \n' +
  'Max processes             unlimited            unlimited            processes \n' +
  'Max open files            20000                1048576              files     \n';

t.test('the /proc parsers read the fields they name and nothing else', async (t) => {
  t.equal(statusKb(STATUS, 'VmSize'), 1020030 * 1024);
  t.equal(statusKb(STATUS, 'VmData'), 55672 * 1024);
  t.equal(statusKb(STATUS, 'VmRSS'), 52600 * 1024);
  t.equal(statusKb(STATUS, 'VmSwap'), null, 'a missing line is null');
  t.equal(statusKb('Name:\tnode\nVmSize:\t\n', 'VmSize'), null, 'a line without a number is null');
  t.equal(readMaxFds(LIMITS), 20000, 'the soft limit');
  t.equal(readMaxFds(LIMITS.replace('20000  ', 'unlimited')), null, 'unlimited is no number');
  t.equal(readMaxFds('Limit Soft Hard\n'), null, 'no line, no value');
  if (fs.existsSync('/proc/self/status')) {
    const real = fs.readFileSync('/proc/self/status', 'latin1');
    t.ok(statusKb(real, 'VmSize')! > 0 && statusKb(real, 'VmData')! > 0, "this process's own status parses");
  }
});

t.test('open fds: the count follows files opened and closed', { skip: !fs.existsSync('/proc/self/fd') && 'no procfs' }, async (t) => {
  const before = openFds()!;
  t.ok(before > 2, `a count (${before})`);
  const fds = Array.from({ length: 25 }, () => fs.openSync('/dev/null', 'r'));
  const during = openFds()!;
  for (const fd of fds) fs.closeSync(fd);
  const after = openFds()!;
  t.ok(during - before >= 25 && during - before <= 27, `+25 fds seen (${before} -> ${during})`);
  t.ok(Math.abs(after - before) <= 2, `back after closing (${after})`);
  t.ok(Math.abs(after - (fs.readdirSync('/proc/self/fd').length - 1)) <= 2, 'agrees with a listing of /proc/self/fd');
});

t.test('every metric the dashboard and the docs use, with sane values', async (t) => {
  const r = new Registry();
  const h = registerProcessMetrics(r);
  t.teardown(() => h.stop());
  // Let the delay monitor tick, then block the loop for 120 ms: this interval's max shows it.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const until = Date.now() + 120;
  while (Date.now() < until) {
    /* busy */
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  // Scavenges for the GC histogram: allocate four times the young generation as it is now (Node
  // 24's can be tens of MiB, more than a fixed count of small objects fills), then wait for the
  // observer's report (it comes asynchronously) for at most 2 s.
  const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
  let slots = 0;
  for (let bytes = 0; bytes < 4 * Math.max(young, 2 ** 20); bytes += 8 * 1000) slots += new Array(1000).fill(bytes).length;
  const scavenged = /^nodejs_gc_duration_seconds_count\{kind="minor"\} [1-9]\d*$/m;
  let text = await r.metrics();
  for (const until = Date.now() + 2000; !scavenged.test(text) && Date.now() < until; text = await r.metrics()) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  for (const name of [
    'process_cpu_user_seconds_total',
    'process_cpu_system_seconds_total',
    'process_cpu_seconds_total',
    'process_start_time_seconds',
    'process_resident_memory_bytes',
    'process_virtual_memory_bytes',
    'process_heap_bytes',
    'process_open_fds',
    'process_max_fds',
    'nodejs_heap_size_total_bytes',
    'nodejs_heap_size_used_bytes',
    'nodejs_external_memory_bytes',
    'nodejs_eventloop_lag_seconds',
    'nodejs_eventloop_lag_min_seconds',
    'nodejs_eventloop_lag_max_seconds',
    'nodejs_eventloop_lag_mean_seconds',
    'nodejs_eventloop_lag_p50_seconds',
    'nodejs_eventloop_lag_p90_seconds',
    'nodejs_eventloop_lag_p99_seconds',
  ]) {
    t.ok(Number.isFinite(value(text, name)), name);
  }
  t.match(text, /^# TYPE process_cpu_seconds_total counter$/m, 'CPU is a counter');
  t.match(text, /^nodejs_heap_space_size_used_bytes\{space="old"\} \d+$/m, 'heap spaces by name');
  t.match(text, /^nodejs_version_info\{version="v\d+\.\d+\.\d+",major="\d+",minor="\d+",patch="\d+"\} 1$/m, 'Node version');
  t.match(text, scavenged, `scavenges counted (after ${slots} array slots allocated)`);
  t.match(text, /^nodejs_gc_duration_seconds_bucket\{kind="minor",le="\+Inf"\} [1-9]\d*$/m, 'as a histogram');
  t.notMatch(text, /active_handles|active_requests/, 'no handle walk metrics');

  const cpu = value(text, 'process_cpu_seconds_total')!;
  t.ok(cpu >= value(text, 'process_cpu_user_seconds_total')! && cpu > 0.05, `CPU ${cpu} s (the busy loop alone was 0.12)`);
  t.ok(value(text, 'process_resident_memory_bytes')! > 10 * 2 ** 20, 'RSS in bytes');
  t.ok(value(text, 'nodejs_heap_size_used_bytes')! <= value(text, 'nodejs_heap_size_total_bytes')!, 'used <= total heap');
  const start = value(text, 'process_start_time_seconds')!;
  t.ok(Math.abs(start - (Date.now() / 1000 - process.uptime())) < 2, 'start time in epoch seconds');
  const max = value(text, 'nodejs_eventloop_lag_max_seconds')!;
  t.ok(max >= 0.1, `max delay ${max} s shows the 120 ms block`);
  const [p50, p99, min] = ['p50', 'p99', 'min'].map((k) => value(text, `nodejs_eventloop_lag_${k}_seconds`)!) as [number, number, number];
  t.ok(min <= p50 && p50 <= p99 && p99 <= max, `min ${min} <= p50 ${p50} <= p99 ${p99} <= max ${max}`);

  // The histogram is reset per scrape: the next interval no longer carries the 120 ms block.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const next = await r.metrics();
  t.ok(value(next, 'nodejs_eventloop_lag_max_seconds')! < 0.1, 'the next scrape reports its own interval');
});

t.test('a scrape does not walk the handles: cost independent of open sockets', async (t) => {
  const r = new Registry();
  const h = registerProcessMetrics(r, { worker: '1' });
  t.teardown(() => h.stop());
  let accepted = 0;
  const server = net.createServer((s) => {
    accepted++;
    s.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const sockets = await Promise.all(
    Array.from(
      { length: 200 },
      () =>
        new Promise<net.Socket>((resolve) => {
          const s = net.connect(port, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  while (accepted < sockets.length) await new Promise((resolve) => setTimeout(resolve, 5));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const p = process as unknown as {
    _getActiveHandles: () => unknown[];
    _getActiveRequests: () => unknown[];
    getActiveResourcesInfo: () => string[];
  };
  const calls = { handles: 0, requests: 0, resources: 0 };
  const orig = { h: p._getActiveHandles, q: p._getActiveRequests, r: p.getActiveResourcesInfo };
  p._getActiveHandles = () => {
    calls.handles++;
    return orig.h.call(process);
  };
  p._getActiveRequests = () => {
    calls.requests++;
    return orig.q.call(process);
  };
  p.getActiveResourcesInfo = () => {
    calls.resources++;
    return orig.r.call(process);
  };
  t.teardown(() => Object.assign(p, { _getActiveHandles: orig.h, _getActiveRequests: orig.q, getActiveResourcesInfo: orig.r }));
  const text = await r.metrics();
  t.same(calls, { handles: 0, requests: 0, resources: 0 }, 'no handle, request or resource walk');
  const fds = value(text, 'process_open_fds{worker="1"}')!;
  t.ok(fds >= 400, `the 400 socket fds are counted (${fds})`);
  t.match(text, /^process_cpu_seconds_total\{worker="1"\} /m, 'process labels on every series');
});

t.test("the standard names with prom-client's HELP, TYPE and cluster aggregator, and only the costly ones left out", async (t) => {
  const ours = new Registry();
  const h = registerProcessMetrics(ours);
  t.teardown(() => h.stop());
  const theirs = new Registry();
  collectDefaultMetrics({ register: theirs });
  const describe = async (r: Registry): Promise<Map<string, string>> =>
    new Map(((await r.getMetricsAsJSON()) as unknown as MetricJson[]).map((m) => [m.name, `${m.type} ${m.aggregator} ${m.help}`]));
  const [mine, reference] = await Promise.all([describe(ours), describe(theirs)]);
  for (const [name, what] of mine) t.equal(what, reference.get(name), `${name}: type, aggregator and HELP as prom-client's`);
  t.same([...mine.keys()].sort(), [...PROCESS_METRIC_NAMES].sort(), 'PROCESS_METRIC_NAMES is what is registered (cluster.ts labels by it)');
  const leftOut = [...reference.keys()].filter((n) => !mine.has(n)).sort();
  t.same(
    leftOut,
    [
      'nodejs_active_handles',
      'nodejs_active_handles_total',
      'nodejs_active_requests',
      'nodejs_active_requests_total',
      'nodejs_active_resources',
      'nodejs_active_resources_total',
      'nodejs_eventloop_lag_stddev_seconds',
    ],
    'left out: the handle/request/resource walks and the stddev walk of the delay histogram',
  );
  t.notOk(
    [...mine.keys()].some((n) => n.startsWith('ipgate_')),
    'no ipgate_ prefix on process metrics',
  );
});

t.test('the old (registry, prefix, labels) call still gets the standard names', async (t) => {
  const r = new Registry();
  const h = registerProcessMetrics(r, 'ipgate_', { worker: '3' });
  t.teardown(() => h.stop());
  const text = await r.metrics();
  t.match(text, /^process_resident_memory_bytes\{worker="3"\} \d+$/m, 'standard name, labels kept');
  t.notMatch(text, /^ipgate_/m, 'no ipgate_ series');
});
