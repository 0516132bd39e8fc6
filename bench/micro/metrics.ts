/**
 * Micro-benchmark of per-connection counting and logging: what the data path pays per connection
 * or request for metrics and the access log, against what prom-client's own API would cost there.
 * Results and how to read them: bench/README.md "Metrics and access logs".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/micro/metrics.js
 *
 * Each case is warmed up, then timed over RUNS runs of ITERATIONS calls; the table shows the median
 * ns/op and the min..max spread. Also: the time to produce one scrape (text) with 8 listeners, and
 * with 100 routes by ipgate's writer and by prom-client's.
 */
import fs from 'node:fs';
import pino from 'pino';
import { Counter, Histogram, Registry } from 'prom-client';
import { FixedHistogram, HTTP_DURATION_BUCKETS } from '../../src/metrics/fixed-histogram';
import { ListenerStats, methodIndex } from '../../src/metrics/listener-stats';
import { requestHeadBytes } from '../../src/forward/http/request-size';
import { Metrics } from '../../src/metrics/metrics';
import { ListenerAccessLog } from '../../src/access-log/access-log';
import type { Connection } from '../../src/connection/connection';
import { BlockWriter, createLogger } from '../../src/log';

const WARMUP = 200_000;
const ITERATIONS = 500_000;
const RUNS = 7;

const stats = new ListenerStats('edge');
const hist = new FixedHistogram(HTTP_DURATION_BUCKETS);
const registry = new Registry();
const counter = new Counter({ name: 'x_total', help: 'x', labelNames: ['listener', 'reason'], registers: [registry] });
const child = counter.labels('edge', 'not_allowlisted');
const promHist = new Histogram({
  name: 'y_seconds',
  help: 'y',
  labelNames: ['listener'],
  buckets: [...HTTP_DURATION_BUCKETS],
  registers: [registry],
});
const promHistChild = promHist.labels('edge');

// The access line as the data path writes it, with the process logger's options (src/log.ts):
// (a) to a destination that only keeps the byte count: pino's serialisation alone;
// (b) to /dev/null with a write(2) per line (sonic-boom sync): an upper bound, as production's
//     async destination batches lines written in the same event-loop turn.
let written = 0;
const counting = {
  write(s: string): void {
    written += s.length;
  },
};
const options: pino.LoggerOptions = {
  level: 'info',
  base: { pid: process.pid },
  timestamp: pino.stdTimeFunctions.isoTime,
  formatters: { level: (label) => ({ level: label }) },
};
const log = pino(options, counting).child({ listener: 'edge', kind: 'tcp' });
const devNull = pino(options, pino.destination({ dest: '/dev/null', sync: true })).child({ listener: 'edge', kind: 'tcp' });
const debugOff = pino({ level: 'info' }, counting).child({ listener: 'edge', kind: 'tcp' });
// (c) the data path's own call: ListenerAccessLog with the process logger (createLogger), whose
//     info lines are built as text since 2026-11-29 19:00 UTC, and (d) the same call through pino
//     (a logger the text path does not take: pino's object walk, as before).
//     (e) the default destination: the line written field by field into a BlockWriter's block
//     (64 KiB blocks to /dev/null).
const textLog = new ListenerAccessLog('edge', 'tcp', createLogger({ level: 'info', format: 'json' }, counting), null);
const pinoLog = new ListenerAccessLog('edge', 'tcp', pino({ ...options, mixin: () => ({}) }, counting), null);
const block = new BlockWriter(fs.openSync('/dev/null', 'w'), 65_536, 1000);
const blockLog = new ListenerAccessLog(
  'edge',
  'tcp',
  createLogger({ level: 'info', format: 'json' }, block as unknown as pino.DestinationStream),
  null,
);
const fakeConn = {
  id: 1,
  clientAddress: '203.0.113.195',
  clientPort: 56324,
  via: 'proxy-v2',
  peerAddress: '10.0.0.7',
  result: null,
  entry: { cidr: '203.0.113.0/24' },
  onRevoke: null,
  upstream: '10.1.2.3:8080',
  socket: { bytesRead: 1234, bytesWritten: 56789 },
  startedAt: Date.now(),
} as unknown as Connection;

let sinkN = 0;
let v = 0;
const classes = new Map<string, number>();
const head = {
  method: 'GET',
  url: '/api/v1/orders?page=2',
  rawHeaders: [
    'Host',
    'app.example.com',
    'User-Agent',
    'curl/8.5.0',
    'Accept',
    '*/*',
    'Accept-Encoding',
    'gzip, deflate, br',
    'Accept-Language',
    'en-GB,en;q=0.9',
    'Cookie',
    'session=0123456789abcdef0123456789abcdef',
    'X-Forwarded-For',
    '198.51.100.7',
    'Connection',
    'keep-alive',
  ],
};
const CASES: [string, () => void][] = [
  [
    'plain counter: stats.accepted++',
    () => {
      stats.accepted++;
    },
  ],
  [
    'Map bump: ListenerStats.bump(denied, reason)',
    () => {
      ListenerStats.bump(stats.denied, 'not_allowlisted');
    },
  ],
  [
    'FixedHistogram.observe',
    () => {
      v = (v + 0.0007) % 0.3;
      hist.observe(v);
    },
  ],
  // What HttpForwarder.record paid per request before issue 32 (a status-class Map bump with a
  // string key and the duration), and what it pays now (method and exact status as one number
  // key, duration, request and response size), with the request head's size.
  [
    'request record, before: class bump + duration',
    () => {
      v = (v + 0.0007) % 0.3;
      ListenerStats.bump(classes, '2xx');
      hist.observe(v);
    },
  ],
  [
    'request record: RequestCounts.record (method, status, sizes)',
    () => {
      v = (v + 0.0007) % 0.3;
      stats.http.record(methodIndex(head.method), 200, v, 420 + (sinkN++ & 255), 1800);
    },
  ],
  [
    'request head size: requestHeadBytes (8 headers)',
    () => {
      sinkN += requestHeadBytes(head);
    },
  ],
  [
    'prom-client counter.inc({labels}, 1)',
    () => {
      counter.inc({ listener: 'edge', reason: 'not_allowlisted' }, 1);
    },
  ],
  [
    'prom-client counter child .inc()',
    () => {
      child.inc();
    },
  ],
  [
    'prom-client histogram.observe({labels}, v)',
    () => {
      v = (v + 0.0007) % 0.3;
      promHist.observe({ listener: 'edge' }, v);
    },
  ],
  [
    'prom-client histogram child .observe(v)',
    () => {
      v = (v + 0.0007) % 0.3;
      promHistChild.observe(v);
    },
  ],
  [
    'access line: serialisation only',
    () => {
      log.info(
        {
          conn: sinkN++,
          client: '203.0.113.195',
          clientPort: 56324,
          via: 'proxy-v2',
          peer: '10.0.0.7',
          decision: 'allow',
          entry: '203.0.113.0/24',
          result: 'ok',
          upstream: '10.1.2.3:8080',
          bytesIn: 1234,
          bytesOut: 56789,
          durationMs: 42,
        },
        'access',
      );
    },
  ],
  [
    'access line, sync write(2) to /dev/null',
    () => {
      devNull.info(
        {
          conn: sinkN++,
          client: '203.0.113.195',
          clientPort: 56324,
          via: 'proxy-v2',
          peer: '10.0.0.7',
          decision: 'allow',
          entry: '203.0.113.0/24',
          result: 'ok',
          upstream: '10.1.2.3:8080',
          bytesIn: 1234,
          bytesOut: 56789,
          durationMs: 42,
        },
        'access',
      );
    },
  ],
  [
    'access line: ListenerAccessLog.connection, text-built',
    () => {
      (fakeConn as { id: number }).id = sinkN++;
      textLog.connection(fakeConn, 1234, 56789);
    },
  ],
  [
    'access line: ListenerAccessLog.connection, field by field into a BlockWriter',
    () => {
      (fakeConn as { id: number }).id = sinkN++;
      blockLog.connection(fakeConn, 1234, 56789);
    },
  ],
  [
    'access line: ListenerAccessLog.connection, via pino',
    () => {
      (fakeConn as { id: number }).id = sinkN++;
      pinoLog.connection(fakeConn, 1234, 56789);
    },
  ],
  [
    'denial at info level: isLevelEnabled("debug")',
    () => {
      if (debugOff.isLevelEnabled('debug')) sinkN++;
    },
  ],
];

async function measure(fn: () => void, iterations = ITERATIONS, warmup = WARMUP): Promise<{ median: number; min: number; max: number }> {
  // The BlockWriter's full blocks are written by the event loop: let it drain them between runs.
  const drain = (): Promise<void> => new Promise((resolve) => block.flush(() => resolve()));
  for (let k = 0; k < warmup; k++) fn();
  await drain();
  const perOp: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const start = process.hrtime.bigint();
    for (let k = 0; k < iterations; k++) fn();
    perOp.push(Number(process.hrtime.bigint() - start) / iterations);
    await drain();
  }
  perOp.sort((a, b) => a - b);
  return { median: perOp[Math.floor(RUNS / 2)]!, min: perOp[0]!, max: perOp[RUNS - 1]! };
}

/**
 * The median wall time of one scrape over 200, after 50 to warm up, and its size; to the bytes the
 * admin API sends (a string built by `+=` is a tree of pieces until something reads it whole).
 */
async function timeScrape(name: string, scrape: () => Promise<string>): Promise<void> {
  let bytes = 0;
  const times: number[] = [];
  for (let k = 0; k < 50; k++) await scrape();
  for (let k = 0; k < 200; k++) {
    const t0 = process.hrtime.bigint();
    bytes = Buffer.from(await scrape(), 'utf8').length;
    times.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  times.sort((a, b) => a - b);
  console.log(`${name.padEnd(50)} ${times[100]!.toFixed(0).padStart(8)} us/scrape (${bytes} bytes)`);
}

/**
 * A scrape's longest hold of the event loop: a setImmediate ticker runs beside it and the longest gap
 * between two ticks is the longest the scrape (or a collection during it) kept other work waiting.
 * Median over 50 scrapes after 30, with the median wall time of a scrape.
 */
async function holdDuringScrape(name: string, scrape: () => Promise<string>): Promise<void> {
  for (let k = 0; k < 30; k++) await scrape();
  const holds: number[] = [];
  const walls: number[] = [];
  for (let k = 0; k < 50; k++) {
    let last = performance.now();
    let longest = 0;
    let on = true;
    const tick = (): void => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
      if (on) setImmediate(tick);
    };
    setImmediate(tick);
    const t0 = performance.now();
    await scrape();
    walls.push(performance.now() - t0);
    on = false;
    await new Promise<void>((resolve) => setImmediate(resolve));
    holds.push(longest);
  }
  holds.sort((a, b) => a - b);
  walls.sort((a, b) => a - b);
  console.log(
    `${name.padEnd(50)} longest hold ${holds[25]!.toFixed(2)} ms (max ${holds[49]!.toFixed(2)}), scrape ${walls[25]!.toFixed(1)} ms wall`,
  );
}

/** A Metrics with one HTTP listener whose `n` routes all saw traffic (three histograms per route). */
function routedMetrics(n: number): Metrics {
  const routed = new Metrics({ version: 'bench' });
  const edge = new ListenerStats('edge');
  routed.addListener(edge, 'http');
  for (let r = 0; r < n; r++) {
    const route = edge.httpRoute(`route-${r}`);
    for (let i = 0; i < 5; i++) route.record(methodIndex(i % 2 === 0 ? 'GET' : 'POST'), 200 + (i % 3) * 100, 0.001 * i, 100 * i, 1000 * i);
  }
  return routed;
}

async function main(): Promise<void> {
  const rows: string[] = [];
  for (const [name, fn] of CASES) {
    const r = await measure(fn);
    rows.push(`${name.padEnd(50)} ${r.median.toFixed(1).padStart(8)} ns/op   (${r.min.toFixed(1)}..${r.max.toFixed(1)})`);
  }
  console.log(rows.join('\n'));

  // One scrape: 8 listeners with a realistic spread of labels, plus process metrics.
  const m = new Metrics({ version: 'bench' });
  for (let i = 0; i < 8; i++) {
    const s = new ListenerStats(`l${i}`);
    for (const r of ['ok', 'denied', 'pp_timeout', 'upstream_refused', 'revoked']) ListenerStats.bump(s.closed, r);
    for (const r of ['v1/ok', 'v2/ok', 'none/none', 'v2/pp_untrusted']) ListenerStats.bump(s.proxyHeader, r);
    for (let k = 0; k < 1000; k++) s.httpDuration.observe(k / 1000);
    m.addListener(s, i % 2 === 0 ? 'tcp' : 'http');
  }
  await timeScrape('one scrape, 8 listeners + process metrics', () => m.scrape());
  // One scrape of a listener with 100 routes that all saw traffic (three histograms per route:
  // ~5,000 lines), ipgate's writer (scrape(), src/metrics/exposition.ts) against prom-client's
  // (registry.metrics()) on the same registry (bench/README.md "A scrape's stall, and the floor of a
  // Node HTTP proxy").
  const routed = routedMetrics(100);
  await timeScrape('one scrape, 100 routes, ipgate exposition', () => routed.scrape());
  await timeScrape("one scrape, 100 routes, prom-client's writer", () => routed.registry.metrics());
  // How long a scrape keeps requests waiting (bench/README.md "A scrape in slices of a millisecond").
  for (const n of [100, 1000]) {
    const m = n === 100 ? routed : routedMetrics(n);
    await holdDuringScrape(`one scrape, ${n} routes, held`, () => m.scrape());
  }
  console.log(`checksum ${stats.accepted + hist.count + sinkN + written}`);
}

void main();
