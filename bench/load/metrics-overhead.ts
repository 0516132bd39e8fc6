/**
 * Load test: the cost of metrics + access logs on the TCP and HTTP paths, on vs off, in one run on
 * one machine. Results and how to read them: bench/README.md "Metrics and access logs".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/metrics-overhead.js
 *   BENCH_SECONDS=10 BENCH_ROUNDS=3 BENCH_TCP_CONCURRENCY=32 BENCH_HTTP_CONNECTIONS=50 node dist/bench/load/metrics-overhead.js
 *
 * ipgate runs as the compiled binary with two listeners: `edge` (tcp) and `web`
 * (http), allowlist 127.0.0.0/8, to a backend in its own process (TCP: answers `pong` and closes;
 * HTTP: `200 ok`, keep-alive).
 *   on:  logging.access true (JSON lines to a file, as a container runtime would store them), admin
 *        API on, /metrics scraped every second during the run (a Prometheus at 1 s, 15x the usual rate).
 *   off: logging.access false, no admin API, no scrapes.
 * The plain per-listener counters (ListenerStats) are always counted: they are the data path's own
 * state (self-checks and /readyz read them); their cost is in bench/micro/metrics.ts (1-80 ns).
 *
 * BENCH_PAIRED=1 BENCH_MODES=off,on,log: instead of rounds one gate at a time, `off` and each mode
 * run at the same time under identical loads (pairRound), with an off-vs-off control.
 *
 * The number bench/README.md states (the deployed pod, everything on, against the same pod without
 * metrics and logs, one scrape per 30 s phase as the chart's ServiceMonitor; ~25 minutes with its control pairs):
 *   BENCH_PAIRED=1 BENCH_BASELINE=probed BENCH_MODES=on BENCH_SCRAPE_INTERVAL_MS=30000 BENCH_SECONDS=30 \
 *   BENCH_TCP_RATE=300 BENCH_HTTP_RATE=1000 BENCH_ROUNDS=10 node dist/bench/load/metrics-overhead.js
 *
 * BENCH_TCP_RATE=500 BENCH_HTTP_RATE=1500 (with BENCH_PAIRED=1): open loop instead of closed. Each
 * gate is offered the same fixed rate (TCP connections started on a 10 ms schedule; HTTP via
 * `hey -q`, 20 connections), below what either saturates at, so the CPU per operation compared is
 * what the feature adds at a given load. Closed loop compares two saturated gates, where CPU per
 * operation also moves with how many events each loop turn batches (bench/README.md).
 *
 * Load: TCP, a Node driver in this process keeping BENCH_TCP_CONCURRENCY connections in flight
 * (connect, send `ping`, read `pong`, close; sources rotate over 127.0.0.2-.61); HTTP, wrk (1 thread,
 * BENCH_HTTP_CONNECTIONS keep-alive connections). Rounds alternate off/on so drift on a shared
 * machine hits both; the medians are reported. Besides throughput, ipgate's CPU time per connection
 * or request is read from /proc/<pid>/stat (utime + stime): on a loaded machine it is the steadier
 * measure of what the feature costs. It is the sum over ipgate's process tree: with the admin API on
 * (every mode but `off` and `log`) ipgate runs as a primary (admin API) and one cluster worker
 * (listeners) by default, `admin.separateProcess`; BENCH_SEPARATE_ADMIN=0 sets it to false in every
 * gate (one process, the admin API next to the data path), =1 to true.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { freePort, waitPort } from './ports';
import { descendants } from './proc';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TCP_CONCURRENCY = Number(process.env.BENCH_TCP_CONCURRENCY ?? 32);
const HTTP_CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS ?? 50);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
/** What the scraper fetches: /metrics; /healthz separates the admin request from the metrics work. */
const SCRAPE_PATH = process.env.BENCH_SCRAPE_PATH ?? '/metrics';
/** Scrape interval (the "on" configuration: every second, 15x Prometheus' usual 15 s). */
const SCRAPE_INTERVAL_MS = Number(process.env.BENCH_SCRAPE_INTERVAL_MS ?? 1000);
/** Open loop (BENCH_PAIRED=1 only): offered connections/s and requests/s per gate; unset = closed loop. */
const TCP_RATE = process.env.BENCH_TCP_RATE === undefined ? null : Number(process.env.BENCH_TCP_RATE);
const HTTP_RATE = process.env.BENCH_HTTP_RATE === undefined ? null : Number(process.env.BENCH_HTTP_RATE);
/** hey's connections for the open-loop HTTP load (each sends HTTP_RATE / HEY_CONNECTIONS requests/s). */
const HEY_CONNECTIONS = 20;
const ROOT = path.resolve(__dirname, '../../..');
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

const BACKEND = `
const net = require('node:net'), http = require('node:http');
const t = net.createServer((s) => { s.on('error', () => {}); s.once('data', () => s.end('pong')); }).listen(0, '127.0.0.1', () => {
  const h = http.createServer((q, r) => r.end('ok\\n')); h.keepAliveTimeout = 60000;
  h.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ tcp: t.address().port, http: h.address().port }) + '\\n'));
});`;

/** admin.separateProcess for every gate: unset = ipgate's default. */
const SEPARATE_ADMIN = process.env.BENCH_SEPARATE_ADMIN === undefined ? undefined : process.env.BENCH_SEPARATE_ADMIN !== '0';

/** utime + stime of `pid` and its descendants (the primary and its workers), seconds. */
function cpuSeconds(pid: number): number {
  let ticks = 0;
  for (const id of [pid, ...descendants(pid)]) {
    try {
      const f = fs.readFileSync(`/proc/${id}/stat`, 'utf8');
      const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // exited between the listing and the read
    }
  }
  return ticks / CLK_TCK;
}

interface Scrape {
  path: string;
  intervalMs: number;
}
interface Gate {
  child: ChildProcess;
  tcp: number;
  http: number;
  admin: number | null;
  scrape: Scrape | null;
  logFile: string;
  stop(): Promise<void>;
}

/** `admin`: the admin API up, never scraped, no access log: the part of "on" that is neither (bench/README.md). */
/** `probed`: admin API up and asked /healthz every PROBE_INTERVAL_MS, as the chart's kubelet probes do; no scrape, no log. */
type Mode = 'off' | 'on' | 'log' | 'metrics' | 'admin' | 'probed';
/** The kubelet's default probe period (the chart's liveness/readiness probes hit the admin port). */
const PROBE_INTERVAL_MS = 10_000;
const MODES = (process.env.BENCH_MODES ?? 'off,on').split(',') as Mode[];
/** BENCH_PAIRED: what each mode is paired with (`probed` = the chart's deployment without metrics and logs). */
const BASELINE = (process.env.BENCH_BASELINE ?? 'off') as Mode;

async function startGate(mode: Mode, backend: { tcp: number; http: number }, dir: string, tag = ''): Promise<Gate> {
  const access = mode === 'on' || mode === 'log';
  const scrape: Scrape | null =
    mode === 'on' || mode === 'metrics'
      ? { path: SCRAPE_PATH, intervalMs: SCRAPE_INTERVAL_MS }
      : mode === 'probed'
        ? { path: '/healthz', intervalMs: PROBE_INTERVAL_MS }
        : null;
  const [tcp, http, admin] = [await freePort(), await freePort(), scrape !== null || mode === 'admin' ? await freePort() : null];
  const config = {
    logging: { level: 'info', access },
    admin: {
      listen: admin === null ? null : `127.0.0.1:${admin}`,
      ...(SEPARATE_ADMIN === undefined ? {} : { separateProcess: SEPARATE_ADMIN }),
    },
    store: { type: 'memory' },
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [
      { name: 'edge', mode: 'tcp', listen: `127.0.0.1:${tcp}`, allowlist: 'main', upstreams: [`127.0.0.1:${backend.tcp}`] },
      { name: 'web', mode: 'http', listen: `127.0.0.1:${http}`, allowlist: 'main', upstreams: [`127.0.0.1:${backend.http}`] },
    ],
  };
  const file = path.join(dir, `ipgate-${mode}${tag}.yaml`);
  fs.writeFileSync(file, YAML.stringify(config));
  const logFile = path.join(dir, `ipgate-${mode}${tag}.log`);
  const out = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/main.js'), '--config', file], { stdio: ['ignore', out, 'inherit'] });
  fs.closeSync(out);
  await waitPort(tcp);
  await waitPort(http);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    tcp,
    http,
    admin,
    scrape,
    logFile,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Keep `concurrency` TCP connections in flight for `seconds`; returns completed connections. */
async function tcpLoad(port: number, seconds: number, concurrency: number): Promise<number> {
  const deadline = Date.now() + seconds * 1000;
  let done = 0;
  let failed = 0;
  let src = 0;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + (src++ % 60)}` });
      s.once('connect', () => s.write('ping'));
      s.once('data', () => {
        done++;
        s.destroy();
        resolve();
      });
      s.once('error', () => {
        failed++;
        s.destroy();
        resolve();
      });
      s.once('close', () => resolve());
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) await one();
    }),
  );
  if (failed > done / 100) throw new Error(`tcp load: ${failed} failed of ${done + failed}`);
  return done;
}

/**
 * Open loop: start `rate` connections per second (on a 10 ms schedule) for `seconds`, whatever
 * the gate's speed; at most 4x the rate per second in flight (a stalled gate cannot pile up an
 * unbounded backlog). Returns completed connections.
 */
async function tcpPaced(port: number, seconds: number, rate: number): Promise<number> {
  const started = Date.now();
  const deadline = started + seconds * 1000;
  let issued = 0;
  let inFlight = 0;
  let done = 0;
  let failed = 0;
  let src = 0;
  const one = (): void => {
    inFlight++;
    const s = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + (src++ % 60)}` });
    let counted = false;
    const end = (ok: boolean): void => {
      if (counted) return;
      counted = true;
      inFlight--;
      if (ok) done++;
      else failed++;
      s.destroy();
    };
    s.once('connect', () => s.write('ping'));
    s.once('data', () => end(true));
    s.once('error', () => end(false));
    s.once('close', () => end(false));
  };
  while (Date.now() < deadline) {
    const due = Math.floor(((Date.now() - started) / 1000) * rate);
    while (issued < due && inFlight < rate * 4) {
      issued++;
      one();
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  while (inFlight > 0) await new Promise((r) => setTimeout(r, 10));
  if (failed > done / 100) throw new Error(`tcp load: ${failed} failed of ${done + failed}`);
  return done;
}

/** hey at a fixed total rate (open loop); resolves with the 200 responses. */
function heyPaced(port: number, seconds: number, rate: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const q = Math.max(1, Math.round(rate / HEY_CONNECTIONS));
    const child = spawn('hey', ['-z', `${seconds}s`, '-q', String(q), '-c', String(HEY_CONNECTIONS), `http://127.0.0.1:${port}/`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => {
      const m = /\[200\]\s+(\d+) responses/.exec(out);
      if (code !== 0 || !m) return reject(new Error(`hey failed (${code}):\n${out}`));
      if (/Error distribution:\s*\[/.test(out)) return reject(new Error(`hey saw errors:\n${out}`));
      if (/\[[013-9]\d\d\]/.test(out.slice(out.indexOf('Status code distribution')))) return reject(new Error(`hey saw errors:\n${out}`));
      resolve(Number(m[1]));
    });
  });
}

/** wrk in the background (the scrape loop keeps running); resolves with the requests completed. */
function wrk(port: number, seconds: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', ['-t1', `-c${HTTP_CONNECTIONS}`, `-d${seconds}s`, '--timeout', '10s', `http://127.0.0.1:${port}/`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.once('exit', (code) => {
      const m = /(\d+) requests in/.exec(out);
      if (code !== 0 || !m) return reject(new Error(`wrk failed (${code}):\n${out}`));
      if (/Non-2xx/.test(out)) return reject(new Error(`wrk saw errors:\n${out}`));
      if (/Socket errors/.test(out)) console.warn(`wrk: ${/Socket errors.*/.exec(out)![0]}`);
      resolve(Number(m[1]));
    });
  });
}

/**
 * Scrape SCRAPE_PATH every SCRAPE_INTERVAL_MS while `work` runs (the "on" and "metrics" configurations).
 * The first scrape comes half an interval in (half the phase when the interval is longer), not at
 * the phase's first instant: a phase as long as the interval then holds exactly one scrape, the
 * deployed rate (with the chart's 30 s: BENCH_SECONDS=30 BENCH_SCRAPE_INTERVAL_MS=30000).
 */
async function withScrapes<T>(g: Gate, work: () => Promise<T>): Promise<{ result: T; scrapes: number }> {
  const { admin, scrape } = g;
  if (admin === null || scrape === null) return { result: await work(), scrapes: 0 };
  let scrapes = 0;
  let stop = false;
  const pause = async (ms: number): Promise<void> => {
    // Sliced, so a long interval does not hold the run open after the work is done.
    for (let waited = 0; waited < ms && !stop; waited += 100) await new Promise((res) => setTimeout(res, 100));
  };
  const loop = (async () => {
    await pause(Math.min(scrape.intervalMs, SECONDS * 1000) / 2);
    while (!stop) {
      try {
        const r = await fetch(`http://127.0.0.1:${admin}${scrape.path}`);
        await r.text();
        if (r.status === 200) scrapes++;
      } catch (err) {
        if (!stop) throw err;
      }
      await pause(scrape.intervalMs);
    }
  })();
  const result = await work();
  stop = true;
  await loop;
  return { result, scrapes };
}

/**
 * During the warm-up: one scrape (or probe), as a pod in service has answered many, so the measured
 * ones are not the process's first (its cold code paths cost 2-4x a later scrape).
 */
async function warmScrape(g: Gate): Promise<void> {
  if (g.admin === null || g.scrape === null) return;
  const r = await fetch(`http://127.0.0.1:${g.admin}${g.scrape.path}`);
  await r.text();
}

interface Sample {
  tcpRate: number;
  tcpCpuUs: number;
  httpRate: number;
  httpCpuUs: number;
  logLines: number;
  scrapes: number;
}

async function round(mode: Mode, backend: { tcp: number; http: number }, dir: string): Promise<Sample> {
  const g = await startGate(mode, backend, dir);
  try {
    const pid = g.child.pid!;
    await tcpLoad(g.tcp, WARMUP, TCP_CONCURRENCY);
    await wrk(g.http, WARMUP);
    await warmScrape(g);
    let cpu0 = cpuSeconds(pid);
    const tcp = await withScrapes(g, () => tcpLoad(g.tcp, SECONDS, TCP_CONCURRENCY));
    const tcpCpu = cpuSeconds(pid) - cpu0;
    cpu0 = cpuSeconds(pid);
    const http = await withScrapes(g, () => wrk(g.http, SECONDS));
    const httpCpu = cpuSeconds(pid) - cpu0;
    await g.stop();
    const logLines = fs
      .readFileSync(g.logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"msg":"access"')).length;
    return {
      tcpRate: tcp.result / SECONDS,
      tcpCpuUs: (tcpCpu * 1e6) / tcp.result,
      httpRate: http.result / SECONDS,
      httpCpuUs: (httpCpu * 1e6) / http.result,
      logLines,
      scrapes: tcp.scrapes + http.scrapes,
    };
  } finally {
    if (g.child.exitCode === null) g.child.kill('SIGKILL');
  }
}

/**
 * BENCH_PAIRED=1: two gates at the same time, `off` and `mode`, each under its own identical load
 * (a TCP driver each, a wrk each), so whatever the shared machine does to CPU speed during the
 * window hits both (a pure CPU loop here varies by up to 40% from one run to the next). Returns
 * [off, mode]; `mode` may be `off` too (the A/A control: the noise floor of the method).
 */
async function pairRound(mode: Mode, backend: { tcp: number; http: number }, dir: string, swap: boolean): Promise<[Sample, Sample]> {
  const gates = swap
    ? [await startGate(mode, backend, dir, '-b'), await startGate(BASELINE, backend, dir, '-a')].reverse()
    : [await startGate(BASELINE, backend, dir, '-a'), await startGate(mode, backend, dir, '-b')];
  try {
    const both = <T>(f: (g: Gate) => Promise<T>): Promise<T[]> => Promise.all(gates.map(f));
    await both((g) => tcpLoad(g.tcp, WARMUP, TCP_CONCURRENCY));
    await both((g) => wrk(g.http, WARMUP));
    await both(warmScrape);
    let cpu0 = gates.map((g) => cpuSeconds(g.child.pid!));
    const tcp = await both((g) =>
      withScrapes(g, () => (TCP_RATE === null ? tcpLoad(g.tcp, SECONDS, TCP_CONCURRENCY) : tcpPaced(g.tcp, SECONDS, TCP_RATE))),
    );
    const tcpCpu = gates.map((g, k) => cpuSeconds(g.child.pid!) - cpu0[k]!);
    cpu0 = gates.map((g) => cpuSeconds(g.child.pid!));
    const http = await both((g) =>
      withScrapes(g, () => (HTTP_RATE === null ? wrk(g.http, SECONDS) : heyPaced(g.http, SECONDS, HTTP_RATE))),
    );
    const httpCpu = gates.map((g, k) => cpuSeconds(g.child.pid!) - cpu0[k]!);
    await both((g) => g.stop());
    const out = gates.map(
      (g, k): Sample => ({
        tcpRate: tcp[k]!.result / SECONDS,
        tcpCpuUs: (tcpCpu[k]! * 1e6) / tcp[k]!.result,
        httpRate: http[k]!.result / SECONDS,
        httpCpuUs: (httpCpu[k]! * 1e6) / http[k]!.result,
        scrapes: tcp[k]!.scrapes + http[k]!.scrapes,
        logLines: fs
          .readFileSync(g.logFile, 'utf8')
          .split('\n')
          .filter((l) => l.includes('"msg":"access"')).length,
      }),
    );
    return [out[0]!, out[1]!];
  } finally {
    for (const g of gates) if (g.child.exitCode === null) g.child.kill('SIGKILL');
  }
}

async function paired(backend: { tcp: number; http: number }, dir: string): Promise<void> {
  const modes = MODES.includes(BASELINE) ? MODES : ([BASELINE, ...MODES] as Mode[]); // baseline vs itself: the control
  const ratios = new Map<Mode, { tcp: number[]; http: number[] }>(modes.map((m) => [m, { tcp: [], http: [] }]));
  for (let i = 0; i < ROUNDS; i++) {
    for (const mode of modes) {
      const [off, other] = await pairRound(mode, backend, dir, i % 2 === 1);
      const r = ratios.get(mode)!;
      r.tcp.push(other.tcpCpuUs / off.tcpCpuUs - 1);
      r.http.push(other.httpCpuUs / off.httpCpuUs - 1);
      console.log(
        `pair ${i + 1} ${BASELINE} vs ${mode.padEnd(7)}: tcp ${off.tcpCpuUs.toFixed(0)} / ${other.tcpCpuUs.toFixed(0)} us CPU/conn ` +
          `(${off.tcpRate.toFixed(0)} / ${other.tcpRate.toFixed(0)} conn/s), http ${off.httpCpuUs.toFixed(1)} / ${other.httpCpuUs.toFixed(1)} us CPU/req ` +
          `(${off.httpRate.toFixed(0)} / ${other.httpRate.toFixed(0)} req/s), access lines ${other.logLines}, scrapes ${other.scrapes}`,
      );
    }
  }
  const f = (x: number): string => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
  const cell = (xs: number[]): string => {
    const s = [...xs].sort((a, b) => a - b);
    return `${f(median(s))} (${f(s[0]!)}..${f(s[s.length - 1]!)})`;
  };
  console.log(
    `\nnode ${process.version}, ${os.cpus().length} CPUs, load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}; ` +
      `${ROUNDS} simultaneous pairs of ${SECONDS} s per mode; ` +
      `${TCP_RATE === null ? 'closed loop' : `open loop: ${TCP_RATE} conn/s and ${HTTP_RATE ?? 'closed-loop'} req/s offered per gate`}; ipgate CPU per operation (process tree), mode vs ${BASELINE} in the same pair: median (range); ` +
      `admin.separateProcess ${SEPARATE_ADMIN ?? 'default'}`,
  );
  console.log(`| mode vs ${BASELINE} | TCP CPU/connection | HTTP CPU/request |`);
  console.log('|---|---|---|');
  for (const mode of modes)
    console.log(
      `| ${mode === BASELINE ? `${mode} (A/A control)` : mode} | ${cell(ratios.get(mode)!.tcp)} | ${cell(ratios.get(mode)!.http)} |`,
    );
}

/** The median (an even count: the mean of the two middle values; until 2026-11-30 the upper one). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

async function main(): Promise<void> {
  if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0) throw new Error('needs wrk (apt-get install wrk)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-bench-metrics-'));
  const backendProc = spawn(process.execPath, ['-e', BACKEND], { stdio: ['ignore', 'pipe', 'inherit'] });
  const backend = await new Promise<{ tcp: number; http: number }>((resolve) => {
    backendProc.stdout!.once('data', (c: Buffer) => resolve(JSON.parse(c.toString()) as { tcp: number; http: number }));
  });
  const results: Record<Mode, Sample[]> = { off: [], on: [], log: [], metrics: [], admin: [], probed: [] };
  if (process.env.BENCH_PAIRED === '1') {
    try {
      await paired(backend, dir);
    } finally {
      backendProc.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    return;
  }
  try {
    for (let i = 0; i < ROUNDS; i++) {
      // The order rotates per round, so no mode always runs first (a cold page cache, a backend
      // that just started) or right after the same neighbour.
      const order = MODES.map((_, k) => MODES[(k + i) % MODES.length]!);
      for (const mode of order) {
        const s = await round(mode, backend, dir);
        results[mode].push(s);
        console.log(
          `round ${i + 1} ${mode.padEnd(7)}: tcp ${s.tcpRate.toFixed(0)} conn/s (${s.tcpCpuUs.toFixed(0)} us CPU/conn), ` +
            `http ${s.httpRate.toFixed(0)} req/s (${s.httpCpuUs.toFixed(1)} us CPU/req), access lines ${s.logLines}, scrapes ${s.scrapes}`,
        );
      }
    }
  } finally {
    backendProc.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const m = (mode: Mode, k: keyof Sample): number => median(results[mode].map((s) => s[k]));
  const pct = (off: number, on: number, lowerIsBetter: boolean): string => {
    const d = lowerIsBetter ? (on - off) / off : (off - on) / off;
    return `${d >= 0 ? '+' : ''}${(d * 100).toFixed(1)}%`;
  };
  console.log(
    `\nnode ${process.version}, ${os.cpus().length} CPUs, load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}; ` + `${ROUNDS} rounds of ${SECONDS} s per mode, medians; admin.separateProcess ${SEPARATE_ADMIN ?? 'default'}`,
  );
  const others = MODES.filter((x) => x !== 'off');
  console.log(`| path | measure | off | ${others.map((o) => `${o} | cost (paired: median, range)`).join(' | ')} |`);
  console.log(`|---|---|---|${others.map(() => '---|---').join('|')}|`);
  const rows: [string, string, keyof Sample, boolean, number][] = [
    ['TCP', 'connections/s', 'tcpRate', false, 0],
    ['TCP', 'ipgate CPU us/connection', 'tcpCpuUs', true, 0],
    ['HTTP', 'requests/s', 'httpRate', false, 0],
    ['HTTP', 'ipgate CPU us/request', 'httpCpuUs', true, 1],
  ];
  for (const [p, what, k, lower, digits] of rows) {
    const off = m('off', k);
    // Paired: each round's mode against that round's off, which ran next to it; the median of
    // those is steadier on a shared machine than the ratio of the two medians.
    const paired = (o: Mode): string => {
      const d = results[o]
        .map((s, r) => {
          const x = results.off[r]![k];
          return (lower ? s[k] - x : x - s[k]) / x;
        })
        .sort((u, v) => u - v);
      const f = (x: number): string => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
      return `${f(median(d))} (${f(d[0]!)}..${f(d[d.length - 1]!)})`;
    };
    console.log(
      `| ${p} | ${what} | ${off.toFixed(digits)} | ${others.map((o) => `${m(o, k).toFixed(digits)} | ${pct(off, m(o, k), lower)}; ${paired(o)}`).join(' | ')} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
