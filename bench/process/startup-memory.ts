/**
 * Start-up time and idle memory of each process model at `workers: 1` (no load: a few seconds of
 * idle processes). Results: bench/README.md "Admin API in its own process (workers: 1)".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/process/startup-memory.js
 *   BENCH_ROUNDS=7 BENCH_IDLE_MS=3000 node dist/bench/process/startup-memory.js
 *
 * Models (BENCH_MODELS, default `separate,single,no-admin`): `separate` (admin API on,
 * admin.separateProcess true, the default: a primary and one worker), `single` (admin API on,
 * separateProcess false: one process), `no-admin` (admin.listen null: one process), `default` (admin
 * API on, separateProcess not set: what the build does by default; BENCH_MAIN=<other
 * checkout>/dist/src/main.js measures an older build). The config has a TCP and an HTTP listener,
 * a memory store and an allowlist of one entry. Start-up: from spawn to the `ready` log line
 * (logging.bufferBytes 0, so the line is written when it is logged). Memory: VmRSS from /proc/<pid>/status of the process and each
 * descendant, BENCH_IDLE_MS after `ready`. The models rotate within each round; medians.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { descendants } from '../load/proc';
import { freePort } from '../load/ports';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 2000);
const ROOT = path.resolve(__dirname, '../../..');
const MAIN = process.env.BENCH_MAIN ?? path.join(ROOT, 'dist/src/main.js');

type Model = 'separate' | 'single' | 'no-admin' | 'default';
const MODELS = (process.env.BENCH_MODELS ?? 'separate,single,no-admin').split(',') as Model[];

interface Sample {
  startupMs: number;
  rssKiB: number[];
}

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

async function sample(model: Model, dir: string): Promise<Sample> {
  const [tcp, http, admin] = [await freePort(), await freePort(), await freePort()];
  const file = path.join(dir, `${model}.yaml`);
  fs.writeFileSync(
    file,
    YAML.stringify({
      logging: { level: 'info', access: true, bufferBytes: 0 },
      admin:
        model === 'no-admin'
          ? { listen: null }
          : { listen: `127.0.0.1:${admin}`, ...(model === 'default' ? {} : { separateProcess: model === 'separate' }) },
      store: { type: 'memory' },
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        { name: 'edge', mode: 'tcp', listen: `127.0.0.1:${tcp}`, allowlist: 'main', upstreams: ['127.0.0.1:9'] },
        { name: 'web', mode: 'http', listen: `127.0.0.1:${http}`, allowlist: 'main', upstreams: ['127.0.0.1:9'] },
      ],
    }),
  );
  const t0 = performance.now();
  const child = spawn(process.execPath, [MAIN, '--config', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    const startupMs = await new Promise<number>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (c: Buffer) => {
        out += c.toString();
        if (/"msg":"ready"/.test(out)) resolve(performance.now() - t0);
      });
      child.once('exit', (code) => reject(new Error(`${model}: exited ${code} before ready:\n${out}`)));
    });
    child.stdout!.resume();
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const pids = [child.pid!, ...descendants(child.pid!)];
    return { startupMs, rssKiB: pids.map(rssKiB) };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

async function main(): Promise<void> {
  if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} missing: npx tsc -p tsconfig.json`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-startup-'));
  const samples = new Map<Model, Sample[]>(MODELS.map((m) => [m, []]));
  for (let i = 0; i < ROUNDS; i++) {
    for (let k = 0; k < MODELS.length; k++) {
      const model = MODELS[(i + k) % MODELS.length]!;
      const s = await sample(model, dir);
      samples.get(model)!.push(s);
      console.log(
        `round ${i + 1} ${model.padEnd(8)}: ready after ${s.startupMs.toFixed(0)} ms; VmRSS ${s.rssKiB.map((k) => `${(k / 1024).toFixed(1)} MiB`).join(' + ')}`,
      );
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
  const mib = (k: number): string => (k / 1024).toFixed(1);
  console.log(
    `\n${MAIN}; node ${process.version}, ${os.cpus().length} CPUs, load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}; ` + `${ROUNDS} rounds, medians (range); VmRSS ${IDLE_MS} ms after ready`,
  );
  console.log('| model | processes | start-up to ready, ms | VmRSS first process, MiB | VmRSS worker, MiB | VmRSS total, MiB |');
  console.log('|---|---|---|---|---|---|');
  for (const model of MODELS) {
    const ss = samples.get(model)!;
    const range = (xs: number[], f: (x: number) => string): string => `${f(median(xs))} (${f(Math.min(...xs))}-${f(Math.max(...xs))})`;
    const first = ss.map((s) => s.rssKiB[0]!);
    const worker = ss.map((s) => s.rssKiB[1] ?? NaN);
    const total = ss.map((s) => s.rssKiB.reduce((a, b) => a + b, 0));
    console.log(
      `| ${model} | ${ss[0]!.rssKiB.length} | ${range(
        ss.map((s) => s.startupMs),
        (x) => x.toFixed(0),
      )} | ${range(first, mib)} | ` + `${Number.isNaN(worker[0]!) ? '-' : range(worker, mib)} | ${range(total, mib)} |`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
