/**
 * Instructions per denied HTTP request, counted by valgrind (callgrind): noise-free on a shared
 * machine, where CPU-seconds drift 2x between minutes. Results: bench/README.md "Denials
 * at a fraction of the work".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/denied-instructions.js
 *     [--main other/dist/src/main.js] [--node /path/to/node] [--requests 4000] [--warmup 30000]
 *     [--connections 50] [--pipeline 1] [--access on|off] [--allowed] [--node-flags "--v8-flag ..."]
 *     [--per-connection N] (each client connection's last request, its Nth, says `Connection: close`:
 *                          1 is a new connection for every request; default: kept alive)
 *     [--env "NAME=VALUE ..."]   (ipgate's environment only: another malloc by LD_PRELOAD, MALLOC_ARENA_MAX)
 *     [--tls]             (the listener terminates TLS, the client keeps TLS connections: HTTPS keep-alive)
 *     [--stat]            (no valgrind: user and system microseconds per request from /proc)
 *     [--cpu-prof DIR]    (no valgrind: a V8 CPU profile of ipgate into DIR)
 *     [--alloc]           (no valgrind: JS heap bytes allocated per request, exact: alloc-probe.ts)
 *     [--alloc-sample N]  (with --alloc: also a sampling heap profile every N bytes, per function)
 *     [--gc-share]        (valgrind: also the collector's share of the instructions, see gcShare())
 *   BENCH_KEEP=1 keeps the callgrind output (callgrind_annotate); BENCH_WRAP="cmd" runs ipgate
 *   under cmd in --stat mode. BENCH_DUMP_INSTR=1: callgrind counts per instruction
 *   (`--dump-instr=yes`), and BENCH_STDOUT=FILE keeps ipgate's stdout: with `--node-flags
 *   "--perf-basic-prof --print-opt-code --print-opt-code-filter=NAME"` the cost of each instruction
 *   of one optimised function lines up with V8's listing of it (bench/README.md "The tail at
 *   saturation, and where an allowed request's head costs (issue 31)").
 *
 * ipgate (the build's main.js, or --main) runs under `valgrind --tool=callgrind --instr-atstart=no`
 * with the same job as compare.ts's http-denied workload (1,000-CIDR allowlist that excludes
 * 127.0.0.1, admin API on, logging at warn); this process is the client (not under valgrind): it
 * sends `--warmup` keep-alive GETs uninstrumented (so V8 has optimised the path), then turns
 * instrumentation on (`callgrind_control -i on`), sends `--requests` more over `--connections`
 * connections (each one request at a time, as wrk; `--pipeline N`: N requests per write), turns it
 * off and reads the total. Every response is checked (403, or 200 with `--allowed`, which uses an
 * allowlist that admits 127.0.0.1 and a backend in this process). Printed: instructions per
 * request for the whole process (every thread: GC helpers included).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import tls from 'node:tls';
import path from 'node:path';
import { arg } from './args';
import { freePort, waitPort } from './ports';

const ROOT = path.resolve(__dirname, '../../..');

const MAIN = arg('--main', path.join(ROOT, 'dist/src/main.js'));
const NODE = arg('--node', process.execPath);
const REQUESTS = Number(arg('--requests', '4000'));
const WARMUP = Number(arg('--warmup', '30000'));
const CONNECTIONS = Number(arg('--connections', '50'));
const PIPELINE = Number(arg('--pipeline', '1'));
const PER_CONNECTION = Number(arg('--per-connection', '0'));
const ACCESS = arg('--access', 'off') === 'on';
const ALLOWED = process.argv.includes('--allowed');
/**
 * `--tls`: the listener terminates TLS (a self-signed ECDSA P-256 certificate made by the openssl
 * CLI, compare.ts's https-keepalive job) and each client connection is a TLS one, kept alive: the
 * handshakes fall in the warm-up, the measured requests are HTTPS keep-alive ones (but for
 * reconnections after http.maxRequestsPerConnection, as with wrk).
 */
const TLS = process.argv.includes('--tls');
/** `--cpu-prof DIR`: no valgrind; ipgate writes a V8 CPU profile of the whole run into DIR instead. */
const CPU_PROF = arg('--cpu-prof', '');
/** `--stat`: no valgrind; user and system CPU microseconds per request from /proc (noisy, but splits the two). */
const STAT = process.argv.includes('--stat');
/** `--node-flags "--flag ..."`: V8/Node flags for ipgate (an A/B of a flag on one build). */
/**
 * `--alloc`: no valgrind; ipgate runs with alloc-probe.ts preloaded, which opens its window after
 * the warm-up and closes it after the measured requests: JS heap bytes allocated per request
 * (exact, see alloc-probe.ts) and the collector's main-thread pauses per 10,000 requests.
 */
const ALLOC = process.argv.includes('--alloc');
const ALLOC_SAMPLE = Number(arg('--alloc-sample', '0'));
/** `--gc-share`: callgrind per thread; GC instructions / all instructions (see gcShare()). */
const GC_SHARE = process.argv.includes('--gc-share');
const NODE_FLAGS = arg('--node-flags', '')
  .split(' ')
  .filter((f) => f !== '');
/** `--env "NAME=VALUE ..."`: environment for ipgate only (e.g. LD_PRELOAD of another malloc, MALLOC_ARENA_MAX). */
const IPGATE_ENV: Record<string, string> = Object.fromEntries(
  arg('--env', '')
    .split(' ')
    .filter((e) => e.includes('='))
    .map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
);

function cpuTicks(pid: number): [number, number] {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [Number(f[11]), Number(f[12])];
}

/** 1,000 CIDRs from 10.0.0.0/8 upwards, never 127.0.0.1 (denied), plus 127.0.0.1/32 when allowed. */
function cidrs(allowLoopback: boolean): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < 999; i++) out.push(`10.${(i >> 8) & 255}.${i & 255}.0/24`);
  out.splice(500, 0, allowLoopback ? '127.0.0.1/32' : '11.0.0.0/24');
  return out;
}

/**
 * One client's loop: `n` requests, `pipeline` per write, each response read whole; a new connection
 * when ipgate closes one (http.maxRequestsPerConnection), as wrk reconnects.
 */
async function drive(port: number, n: number, expect: number): Promise<void> {
  let left = n;
  while (left > 0) left = await connection(port, left, expect);
}

/** One connection: requests until `n` are answered or ipgate closes it; resolves with those left. */
function connection(port: number, n: number, expect: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = TLS ? tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }) : net.connect({ host: '127.0.0.1', port });
    const req = `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
    const last = `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`;
    let left = n;
    /** Requests this connection may still send (--per-connection), or Infinity. */
    let mine = PER_CONNECTION > 0 ? PER_CONNECTION : Number.POSITIVE_INFINITY;
    let inFlight = 0;
    let buf = '';
    const send = (): void => {
      const k = Math.min(PIPELINE, left, mine);
      if (k === 0) {
        s.end();
        return;
      }
      inFlight = k;
      mine -= k;
      s.write(mine === 0 ? req.repeat(k - 1) + last : req.repeat(k));
    };
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      buf += d;
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const status = Number(buf.slice(9, 12));
        const m = /content-length: *(\d+)/i.exec(buf.slice(0, end));
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (buf.length < total) return;
        if (status !== expect) {
          s.destroy();
          reject(new Error(`status ${status}, expected ${expect}: ${buf.slice(0, end)}`));
          return;
        }
        buf = buf.slice(total);
        left--;
        if (--inFlight === 0) send();
      }
    });
    s.once(TLS ? 'secureConnect' : 'connect', send);
    s.once('error', reject);
    s.once('close', () => resolve(left));
  });
}

async function load(port: number, total: number, expect: number): Promise<void> {
  const per = Math.floor(total / CONNECTIONS);
  await Promise.all(Array.from({ length: CONNECTIONS }, () => drive(port, per, expect)));
}

/** Resolves once `file` exists (the probe writes it when its window is open or closed). */
async function fileAppears(file: string, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!fs.existsSync(file)) {
    if (Date.now() > until) throw new Error(`${file} did not appear in ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The collector's instructions out of callgrind's per-thread files (--separate-threads=yes), each
 * summed from callgrind_annotate's inclusive costs of entry points that do not nest in one another:
 * on the main thread (file -01) `Heap::CollectGarbage` (every pause: scavenges, mark-compacts,
 * the finalisation of incremental marking) and `IncrementalMarking::Step` (marking between
 * pauses); on V8's worker threads the collector's jobs (parallel scavenge, concurrent marking,
 * sweeping, ArrayBuffer sweeping, clearing, evacuation, unmapping). The workers' other work
 * (TurboFan and wasm compilation) is not the collector's. Returns [collector, total].
 */
const MAIN_GC = /\bv8::internal::(Heap::CollectGarbage|IncrementalMarking::Step)\(/;
const WORKER_GC =
  /\bv8::internal::(ScavengerCollector::JobTask::Run|ConcurrentMarking::JobTask\w*::Run|Sweeper::\w*Job\w*::Run|\(anonymous namespace\)::\w*(Clearing|Evacuation|Updating)\w*Job\w*::Run|MemoryAllocator::Unmapper::UnmapFreeMemoryJob::Run|MinorMarkSweep\w*::\w*Job\w*::Run)\(|ArrayBufferSweeper::RequestSweep|cppgc::internal::\(anonymous namespace\)::ConcurrentSweepTask::Run\(/;

function gcShare(out: string): [number, number] {
  const dir = path.dirname(out);
  const base = path.basename(out);
  let gc = 0;
  let total = 0;
  for (const f of fs.readdirSync(dir).filter((n) => n.startsWith(`${base}-`))) {
    const file = path.join(dir, f);
    const raw = fs.readFileSync(file, 'utf8');
    const m = /^totals:\s+(\d+)/m.exec(raw) ?? /^summary:\s+(\d+)/m.exec(raw);
    total += m ? Number(m[1]) : 0;
    const roots = f.endsWith('-01') ? MAIN_GC : WORKER_GC;
    const text = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 256 << 20 }).toString();
    for (const line of text.split('\n')) {
      const hit = /^\s*([\d,]+)\s/.exec(line);
      if (hit && roots.test(line)) gc += Number(hit[1]!.replace(/,/g, ''));
    }
  }
  return [gc, total];
}

/** An ECDSA P-256 certificate and key for 127.0.0.1, self-signed (the client does not verify it). */
function selfSigned(dir: string): { cert: string; key: string } {
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  const args = 'req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1'.split(' ');
  execFileSync('openssl', [...args, '-keyout', key, '-out', cert], { stdio: 'ignore' });
  return { cert, key };
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-instr-'));
  const [listen, admin] = [await freePort(), await freePort()];
  const backend = http.createServer({ keepAliveTimeout: 60_000 }, (_q, r) => r.end('ok'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const backendPort = (backend.address() as net.AddressInfo).port;
  const config = {
    logging: { level: 'warn', format: 'json', access: ACCESS },
    admin: { listen: `127.0.0.1:${admin}` },
    store: { type: 'memory' },
    allowlists: { list: cidrs(ALLOWED) },
    listeners: [
      {
        name: 'http',
        mode: 'http',
        listen: `127.0.0.1:${listen}`,
        allowlist: 'list',
        upstreams: [`127.0.0.1:${backendPort}`],
        ...(TLS ? { tls: { certificates: [selfSigned(dir)] } } : {}),
      },
    ],
  };
  const file = path.join(dir, 'ipgate.json');
  fs.writeFileSync(file, JSON.stringify(config));
  const out = path.join(dir, 'callgrind.out');
  const wrap = process.env.BENCH_WRAP ? process.env.BENCH_WRAP.split(' ') : [];
  const probeOut = path.join(dir, 'alloc.json');
  const argv = STAT
    ? [...wrap, NODE, ...NODE_FLAGS, MAIN, '--config', file]
    : ALLOC
      ? [NODE, ...NODE_FLAGS, '--expose-gc', '-r', path.join(ROOT, 'dist/bench/load/alloc-probe.js'), MAIN, '--config', file]
      : CPU_PROF !== ''
        ? [NODE, ...NODE_FLAGS, '--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`, MAIN, '--config', file]
        : [
            'valgrind',
            '--tool=callgrind',
            '--instr-atstart=no',
            ...(process.env.BENCH_DUMP_INSTR ? ['--dump-instr=yes'] : []),
            ...(GC_SHARE ? ['--separate-threads=yes'] : []),
            `--callgrind-out-file=${out}`,
            NODE,
            ...NODE_FLAGS,
            MAIN,
            '--config',
            file,
          ];
  const child = spawn(argv[0]!, argv.slice(1), {
    stdio: ['ignore', process.env.BENCH_STDOUT ? fs.openSync(process.env.BENCH_STDOUT, 'w') : 'ignore', 'pipe'],
    env: {
      ...process.env,
      ...IPGATE_ENV,
      IPGATE_ADMIN_TOKEN: 'bench-admin-token-0123456789',
      IPGATE_ALLOC_PROBE_OUT: probeOut,
      IPGATE_ALLOC_PROBE_SAMPLE: String(ALLOC_SAMPLE),
    },
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const expect = ALLOWED ? 200 : 403;
  try {
    const exited = new Promise<never>((_r, reject) => child.once('exit', (code) => reject(new Error(`ipgate exited (${code})`))));
    exited.catch(() => undefined);
    await Promise.race([waitPort(listen, 300_000), exited]);
    await load(listen, WARMUP, expect);
    if (STAT) {
      const [u0, s0] = cpuTicks(child.pid!);
      const t0 = Date.now();
      await load(listen, REQUESTS, expect);
      const [u1, s1] = cpuTicks(child.pid!);
      const per = (t: number): string => ((t * 10_000) / REQUESTS).toFixed(1);
      process.stdout.write(
        `${path.relative(ROOT, MAIN) || MAIN} ${ALLOWED ? 'allowed' : 'denied'} pipeline ${PIPELINE}: ` +
          `${REQUESTS} requests in ${Date.now() - t0} ms, user ${per(u1 - u0)} us + system ${per(s1 - s0)} us per request\n`,
      );
      child.kill('SIGTERM');
      return;
    }
    if (ALLOC) {
      child.kill('SIGUSR2');
      await fileAppears(`${probeOut}.open`, 60_000);
      await load(listen, REQUESTS, expect);
      child.kill('SIGUSR2');
      await fileAppears(probeOut, 120_000);
      const r = JSON.parse(fs.readFileSync(probeOut, 'utf8')) as {
        allocated: number;
        gcs: Record<string, { n: number; us: number }>;
        sampled: Array<[string, number]> | null;
      };
      const sent = Math.floor(REQUESTS / CONNECTIONS) * CONNECTIONS;
      const pauses = Object.entries(r.gcs)
        .map(([k, g]) => `${k} ${((g.n * 10_000) / sent).toFixed(1)} x ${(g.n > 0 ? g.us / g.n / 1000 : 0).toFixed(2)} ms`)
        .join(', ');
      process.stdout.write(
        `${path.relative(ROOT, MAIN) || MAIN} node ${execFileSync(NODE, ['--version']).toString().trim()} ` +
          `${NODE_FLAGS.join(' ')} ${ALLOWED ? 'allowed' : 'denied'} pipeline ${PIPELINE} access ${ACCESS ? 'on' : 'off'}: ${sent} requests, ` +
          `${(r.allocated / sent).toFixed(0)} bytes/request allocated; collections per 10k requests: ${pauses}\n`,
      );
      if (r.sampled !== null) {
        const sum = r.sampled.reduce((a, [, b]) => a + b, 0);
        for (const [where, bytes] of r.sampled.slice(0, 40)) {
          process.stdout.write(`  ${((bytes / sum) * (r.allocated / sent)).toFixed(0).padStart(6)} B/req  ${where}\n`);
        }
      }
      const gone = new Promise((res) => child.once('exit', res));
      child.kill('SIGTERM');
      await gone;
      return;
    }
    if (CPU_PROF !== '') {
      await load(listen, REQUESTS, expect);
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGINT');
      await gone;
      return;
    }
    execFileSync('callgrind_control', ['-i', 'on', String(child.pid)], { stdio: 'ignore' });
    const t0 = Date.now();
    await load(listen, REQUESTS, expect);
    execFileSync('callgrind_control', ['-i', 'off', String(child.pid)], { stdio: 'ignore' });
    const ms = Date.now() - t0;
    const sent = Math.floor(REQUESTS / CONNECTIONS) * CONNECTIONS;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await gone;
    let ir: number;
    let share = '';
    if (GC_SHARE) {
      const [gc, total] = gcShare(out);
      ir = total;
      share = `, collector ${((gc / total) * 100).toFixed(1)} % (${(gc / sent).toFixed(0)}/request)`;
    } else {
      const text = fs.readFileSync(out, 'utf8');
      const m = /^totals:\s+(\d+)/m.exec(text) ?? /^summary:\s+(\d+)/m.exec(text);
      if (!m) throw new Error(`no totals in ${out}`);
      ir = Number(m[1]);
    }
    process.stdout.write(
      `${path.relative(ROOT, MAIN) || MAIN} node ${execFileSync(NODE, ['--version']).toString().trim()} ` +
        `${NODE_FLAGS.join(' ')} ${ALLOWED ? 'allowed' : 'denied'} pipeline ${PIPELINE} access ${ACCESS ? 'on' : 'off'}: ${sent} requests, ` +
        `${(ir / sent).toFixed(0)} instructions/request${share} (${ms} ms instrumented)\n`,
    );
  } catch (e) {
    child.kill('SIGKILL');
    process.stderr.write(err.slice(-2000));
    throw e;
  } finally {
    backend.close();
    if (process.env.BENCH_KEEP === undefined) fs.rmSync(dir, { recursive: true, force: true });
    else process.stderr.write(`kept ${dir}\n`);
  }
}

void main().catch((e: unknown) => {
  process.stderr.write(`${String(e)}\n`);
  process.exit(1);
});
