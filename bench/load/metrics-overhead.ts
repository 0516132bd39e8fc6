/**
 * Load test: the cost of metrics + access logs on the TCP and HTTP paths, on vs off, in one run on
 * one machine. Results and how to read them: bench/README.md "Metrics and access logs".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/metrics-overhead.js
 *   BENCH_SECONDS=10 BENCH_ROUNDS=3 BENCH_TCP_CONCURRENCY=32 BENCH_HTTP_CONNECTIONS=50 node dist/bench/load/metrics-overhead.js
 *
 * ipgate runs as the compiled binary (one process) with two listeners: `edge` (tcp) and `web`
 * (http), allowlist 127.0.0.0/8, to a backend in its own process (TCP: answers `pong` and closes;
 * HTTP: `200 ok`, keep-alive).
 *   on:  logging.access true (JSON lines to a file, as a container runtime would store them), admin
 *        API on, /metrics scraped every second during the run (a Prometheus at 1 s, 15x the usual rate).
 *   off: logging.access false, no admin API, no scrapes.
 * The plain per-listener counters (ListenerStats) are always counted: they are the data path's own
 * state (self-checks and /readyz read them); their cost is in bench/micro/metrics.ts (1-80 ns).
 *
 * Load: TCP, a Node driver in this process keeping BENCH_TCP_CONCURRENCY connections in flight
 * (connect, send `ping`, read `pong`, close; sources rotate over 127.0.0.2-.61); HTTP, wrk (1 thread,
 * BENCH_HTTP_CONNECTIONS keep-alive connections). Rounds alternate off/on so drift on a shared
 * machine hits both; the medians are reported. Besides throughput, ipgate's CPU time per connection
 * or request is read from /proc/<pid>/stat (utime + stime): on a loaded machine it is the steadier
 * measure of what the feature costs.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TCP_CONCURRENCY = Number(process.env.BENCH_TCP_CONCURRENCY ?? 32);
const HTTP_CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS ?? 50);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const ROOT = path.resolve(__dirname, '../../..');
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

const BACKEND = `
const net = require('node:net'), http = require('node:http');
const t = net.createServer((s) => { s.on('error', () => {}); s.once('data', () => s.end('pong')); }).listen(0, '127.0.0.1', () => {
  const h = http.createServer((q, r) => r.end('ok\\n')); h.keepAliveTimeout = 60000;
  h.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ tcp: t.address().port, http: h.address().port }) + '\\n'));
});`;

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}

async function waitPort(port: number, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('connect', () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} not listening`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function cpuSeconds(pid: number): number {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

interface Gate { child: ChildProcess; tcp: number; http: number; admin: number | null; scraped: boolean; logFile: string; stop(): Promise<void> }

/** `admin`: the admin API up, never scraped, no access log: the part of "on" that is neither (bench/README.md). */
type Mode = 'off' | 'on' | 'log' | 'metrics' | 'admin';
const MODES = (process.env.BENCH_MODES ?? 'off,on').split(',') as Mode[];

async function startGate(mode: Mode, backend: { tcp: number; http: number }, dir: string): Promise<Gate> {
  const access = mode === 'on' || mode === 'log';
  const scraped = mode === 'on' || mode === 'metrics';
  const [tcp, http, admin] = [await freePort(), await freePort(), scraped || mode === 'admin' ? await freePort() : null];
  const config = {
    logging: { level: 'info', access },
    admin: { listen: admin === null ? null : `127.0.0.1:${admin}` },
    store: { type: 'memory' },
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [
      { name: 'edge', mode: 'tcp', listen: `127.0.0.1:${tcp}`, allowlist: 'main', upstreams: [`127.0.0.1:${backend.tcp}`] },
      { name: 'web', mode: 'http', listen: `127.0.0.1:${http}`, allowlist: 'main', upstreams: [`127.0.0.1:${backend.http}`] },
    ],
  };
  const file = path.join(dir, `ipgate-${mode}.yaml`);
  fs.writeFileSync(file, YAML.stringify(config));
  const logFile = path.join(dir, `ipgate-${mode}.log`);
  const out = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/main.js'), '--config', file], { stdio: ['ignore', out, 'inherit'] });
  fs.closeSync(out);
  await waitPort(tcp);
  await waitPort(http);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return { child, tcp, http, admin, scraped, logFile, stop: async () => { child.kill('SIGTERM'); await exited; } };
}

/** Keep `concurrency` TCP connections in flight for `seconds`; returns completed connections. */
async function tcpLoad(port: number, seconds: number, concurrency: number): Promise<number> {
  const deadline = Date.now() + seconds * 1000;
  let done = 0;
  let failed = 0;
  let src = 0;
  const one = (): Promise<void> => new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + (src++ % 60)}` });
    s.once('connect', () => s.write('ping'));
    s.once('data', () => { done++; s.destroy(); resolve(); });
    s.once('error', () => { failed++; s.destroy(); resolve(); });
    s.once('close', () => resolve());
  });
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (Date.now() < deadline) await one();
  }));
  if (failed > done / 100) throw new Error(`tcp load: ${failed} failed of ${done + failed}`);
  return done;
}

/** wrk in the background (the scrape loop keeps running); resolves with the requests completed. */
function wrk(port: number, seconds: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', ['-t1', `-c${HTTP_CONNECTIONS}`, `-d${seconds}s`, '--timeout', '10s', `http://127.0.0.1:${port}/`], { stdio: ['ignore', 'pipe', 'inherit'] });
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

/** Scrape /metrics every second while `work` runs (the "on" configuration). */
async function withScrapes<T>(admin: number | null, work: () => Promise<T>): Promise<{ result: T; scrapes: number }> {
  if (admin === null) return { result: await work(), scrapes: 0 };
  let scrapes = 0;
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      try {
        const r = await fetch(`http://127.0.0.1:${admin}/metrics`);
        await r.text();
        if (r.status === 200) scrapes++;
      } catch (err) {
        if (!stop) throw err;
      }
      await new Promise((res) => setTimeout(res, 1000));
    }
  })();
  const result = await work();
  stop = true;
  await loop;
  return { result, scrapes };
}

interface Sample { tcpRate: number; tcpCpuUs: number; httpRate: number; httpCpuUs: number; logLines: number; scrapes: number }

async function round(mode: Mode, backend: { tcp: number; http: number }, dir: string): Promise<Sample> {
  const g = await startGate(mode, backend, dir);
  try {
    const pid = g.child.pid!;
    await tcpLoad(g.tcp, WARMUP, TCP_CONCURRENCY);
    await wrk(g.http, WARMUP);
    let cpu0 = cpuSeconds(pid);
    const tcp = await withScrapes(g.scraped ? g.admin : null, () => tcpLoad(g.tcp, SECONDS, TCP_CONCURRENCY));
    const tcpCpu = cpuSeconds(pid) - cpu0;
    cpu0 = cpuSeconds(pid);
    const http = await withScrapes(g.scraped ? g.admin : null, () => wrk(g.http, SECONDS));
    const httpCpu = cpuSeconds(pid) - cpu0;
    await g.stop();
    const logLines = fs.readFileSync(g.logFile, 'utf8').split('\n').filter((l) => l.includes('"msg":"access"')).length;
    return { tcpRate: tcp.result / SECONDS, tcpCpuUs: (tcpCpu * 1e6) / tcp.result, httpRate: http.result / SECONDS,
      httpCpuUs: (httpCpu * 1e6) / http.result, logLines, scrapes: tcp.scrapes + http.scrapes };
  } finally {
    if (g.child.exitCode === null) g.child.kill('SIGKILL');
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0) throw new Error('needs wrk (apt-get install wrk)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-bench-metrics-'));
  const backendProc = spawn(process.execPath, ['-e', BACKEND], { stdio: ['ignore', 'pipe', 'inherit'] });
  const backend = await new Promise<{ tcp: number; http: number }>((resolve) => {
    backendProc.stdout!.once('data', (c: Buffer) => resolve(JSON.parse(c.toString()) as { tcp: number; http: number }));
  });
  const results: Record<Mode, Sample[]> = { off: [], on: [], log: [], metrics: [], admin: [] };
  try {
    for (let i = 0; i < ROUNDS; i++) {
      for (const mode of MODES) {
        const s = await round(mode, backend, dir);
        results[mode].push(s);
        console.log(`round ${i + 1} ${mode.padEnd(7)}: tcp ${s.tcpRate.toFixed(0)} conn/s (${s.tcpCpuUs.toFixed(0)} us CPU/conn), ` +
          `http ${s.httpRate.toFixed(0)} req/s (${s.httpCpuUs.toFixed(1)} us CPU/req), access lines ${s.logLines}, scrapes ${s.scrapes}`);
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
  console.log(`\nnode ${process.version}, ${os.cpus().length} CPUs, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}; ` +
    `${ROUNDS} rounds of ${SECONDS} s per mode, medians`);
  const others = MODES.filter((x) => x !== 'off');
  console.log(`| path | measure | off | ${others.map((o) => `${o} | cost`).join(' | ')} |`);
  console.log(`|---|---|---|${others.map(() => '---|---').join('|')}|`);
  const rows: [string, string, keyof Sample, boolean, number][] = [
    ['TCP', 'connections/s', 'tcpRate', false, 0], ['TCP', 'ipgate CPU us/connection', 'tcpCpuUs', true, 0],
    ['HTTP', 'requests/s', 'httpRate', false, 0], ['HTTP', 'ipgate CPU us/request', 'httpCpuUs', true, 1],
  ];
  for (const [p, what, k, lower, digits] of rows) {
    const off = m('off', k);
    console.log(`| ${p} | ${what} | ${off.toFixed(digits)} | ${others.map((o) => `${m(o, k).toFixed(digits)} | ${pct(off, m(o, k), lower)}`).join(' | ')} |`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
