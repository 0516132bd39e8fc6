/**
 * Instructions per short TCP connection and per MiB of a bulk stream through a TCP listener with
 * PROXY v2 out, counted by valgrind (callgrind): noise-free on a shared machine, where CPU-seconds
 * drift 2x between minutes. Results: bench/README.md "TCP relay: one socket contract".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/tcp-instructions.js
 *     [--main other/dist/src/main.js] [--node /path/to/node] [--sockets net|raw] [--inbound-proxy v2]
 *     [--conns 2000] [--warmup 6000] [--concurrency 8] [--bulk-mib 200] [--bulk-warmup-mib 64]
 *     [--node-flags "--predictable --random-seed=1 --hash-seed=1"]   (V8 made deterministic: see README)
 *   BENCH_KEEP=1 keeps the callgrind output (callgrind_annotate).
 *
 * ipgate (the build's main.js, or --main) runs under `valgrind --tool=callgrind --instr-atstart=no`
 * with one TCP listener (allowlist admits 127.0.0.0/8, `outboundProxyProtocol: v2`) in front of a
 * backend in this process; `--sockets net` sets IPGATE_TCP_HANDLES=0 (net.Socket on both sides),
 * `raw` (default) leaves the libuv-handle path on. This process is the client (not under valgrind):
 *
 * `--inbound-proxy v2`: the listener requires an inbound PROXY header from 127.0.0.0/8
 * (`proxyProtocol.mode: required`, compare.ts's tcp-ppin) and each short connection's first write
 * is a PROXY v2 header (TCP4 127.0.0.2:40000 -> 127.0.0.1:443) followed by its 100 bytes.
 *
 * - short: `--warmup` connections uninstrumented (so V8 has optimised the path), then
 *   instrumentation on (`callgrind_control -i on`) for `--conns` more, `--concurrency` at a time;
 *   each connects, writes 100 bytes, reads the backend's 100-byte answer, ends, waits for close.
 *   The backend checks the PROXY v2 signature and the 100 bytes before answering.
 * - bulk: one connection that sends `--bulk-warmup-mib` uninstrumented, then `--bulk-mib` with
 *   instrumentation on (counted by the backend, which discards them), client to backend.
 *
 * Printed: instructions per connection and per MiB, for the whole process (every thread: GC and
 * JIT helpers included).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { arg } from './args';
import { freePort, waitPort } from './ports';

const ROOT = path.resolve(__dirname, '../../..');

const MAIN = arg('--main', path.join(ROOT, 'dist/src/main.js'));
const NODE = arg('--node', process.execPath);
const SOCKETS = arg('--sockets', 'raw');
const CONNS = Number(arg('--conns', '2000'));
const WARMUP = Number(arg('--warmup', '6000'));
const CONCURRENCY = Number(arg('--concurrency', '8'));
const BULK_MIB = Number(arg('--bulk-mib', '200'));
const BULK_WARMUP_MIB = Number(arg('--bulk-warmup-mib', '64'));
const INBOUND = arg('--inbound-proxy', 'none');
if (INBOUND !== 'none' && INBOUND !== 'v2') throw new Error(`--inbound-proxy: "${INBOUND}": none or v2`);
/** `--node-flags "--flag ..."`: V8/Node flags for ipgate (`--predictable`: JIT and GC off threads, same every run). */
const NODE_FLAGS = arg('--node-flags', '')
  .split(' ')
  .filter((f) => f !== '');

const SIG = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');
const REQUEST = Buffer.alloc(100, 0x71);
/** What a short connection writes first: the request, after a PROXY v2 header with --inbound-proxy v2. */
const FIRST =
  INBOUND === 'v2'
    ? Buffer.concat([SIG, Buffer.from([0x21, 0x11, 0x00, 0x0c, 127, 0, 0, 2, 127, 0, 0, 1, 0x9c, 0x40, 0x01, 0xbb]), REQUEST])
    : REQUEST;
const ANSWER = Buffer.alloc(100, 0x61);
const MIB = 1024 * 1024;

/** The backend: short connections get their 100 bytes answered; a bulk one is counted. */
class Backend {
  bulkBytes = 0;
  private bulkWaiter: { bytes: number; resolve: () => void } | null = null;
  readonly server = net.createServer((s) => this.accept(s));

  private accept(s: net.Socket): void {
    let buf: Buffer = Buffer.alloc(0);
    let header = -1;
    let isBulk = false;
    s.on('error', () => s.destroy());
    s.on('data', (d: Buffer) => {
      if (header === -1) {
        buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
        if (buf.length < 16) return;
        if (!buf.subarray(0, 12).equals(SIG)) {
          process.stderr.write('backend: no PROXY v2 header\n');
          process.exit(1);
        }
        header = 16 + buf.readUInt16BE(14);
        if (buf.length < header) {
          header = -1;
          return;
        }
        d = buf.subarray(header);
        buf = Buffer.alloc(0);
      }
      // The bulk connection announces itself with a first byte of 'B'.
      if (buf.length === 0 && d.length > 0 && d[0] === 0x42) isBulk = true;
      if (isBulk) {
        this.bulkBytes += d.length;
        const w = this.bulkWaiter;
        if (w !== null && this.bulkBytes >= w.bytes) {
          this.bulkWaiter = null;
          w.resolve();
        }
        return;
      }
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      if (buf.length >= REQUEST.length) {
        if (!buf.subarray(0, REQUEST.length).equals(REQUEST)) {
          process.stderr.write(`backend: request bytes changed\n`);
          process.exit(1);
        }
        buf = Buffer.alloc(0);
        s.end(ANSWER);
      }
    });
  }

  /** Resolve once the bulk connection has brought `bytes` in all. */
  bulkReached(bytes: number): Promise<void> {
    if (this.bulkBytes >= bytes) return Promise.resolve();
    return new Promise((resolve) => (this.bulkWaiter = { bytes, resolve }));
  }
}

/** One short connection: 100 bytes out, 100 back (checked), end, close. */
function short(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let got = 0;
    s.once('connect', () => s.write(FIRST));
    s.on('data', (d: Buffer) => {
      got += d.length;
      if (got === ANSWER.length) s.end();
    });
    s.once('error', reject);
    s.once('close', () => (got === ANSWER.length ? resolve() : reject(new Error(`short connection: ${got} bytes back`))));
  });
}

async function shorts(port: number, n: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next++ < n) await short(port);
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** Write `mib` MiB of 64 KiB chunks with backpressure. */
async function pump(s: net.Socket, mib: number): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, 0x62);
  for (let i = 0; i < mib * 16; i++) {
    if (!s.write(chunk)) await new Promise((r) => s.once('drain', r));
  }
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-tcp-instr-'));
  const listen = await freePort();
  const backend = new Backend();
  await new Promise<void>((r) => backend.server.listen(0, '127.0.0.1', r));
  const backendPort = (backend.server.address() as net.AddressInfo).port;
  const config = {
    logging: { level: 'warn', format: 'json', access: false },
    admin: { listen: null },
    store: { type: 'memory' },
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [
      {
        name: 'tcp',
        mode: 'tcp',
        listen: `127.0.0.1:${listen}`,
        allowlist: 'main',
        upstreams: [`127.0.0.1:${backendPort}`],
        outboundProxyProtocol: 'v2',
        ...(INBOUND === 'v2' ? { proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.0/8'] } } : {}),
        // Under valgrind a busy event loop can run the connect timer before the connect's completion.
        timeouts: { connectMs: 120_000, idleMs: 600_000 },
      },
    ],
  };
  const file = path.join(dir, 'ipgate.json');
  fs.writeFileSync(file, JSON.stringify(config));
  const out = path.join(dir, 'callgrind.out');
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (SOCKETS === 'net') env.IPGATE_TCP_HANDLES = '0';
  else delete env.IPGATE_TCP_HANDLES;
  const child = spawn(
    'valgrind',
    ['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}`, NODE, ...NODE_FLAGS, MAIN, '--config', file],
    { stdio: ['ignore', 'ignore', 'pipe'], env },
  );
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  // The backend's checks exit this process: never leave ipgate running under valgrind.
  process.once('exit', () => child.kill('SIGKILL'));
  const control = (on: boolean): void => {
    execFileSync('callgrind_control', ['-i', on ? 'on' : 'off', String(child.pid)], { stdio: 'ignore' });
  };
  /** Dump the counters so far and zero them: the short and bulk parts are read apart. */
  const dump = (): number => {
    const before = new Set(fs.readdirSync(dir));
    execFileSync('callgrind_control', ['-d', String(child.pid)], { stdio: 'ignore' });
    const added = fs.readdirSync(dir).filter((f) => !before.has(f) && f.startsWith('callgrind.out'));
    if (added.length !== 1) throw new Error(`callgrind dump: ${added.join(', ') || 'no file'}`);
    const text = fs.readFileSync(path.join(dir, added[0]!), 'utf8');
    const m = /^totals:\s+(\d+)/m.exec(text) ?? /^summary:\s+(\d+)/m.exec(text);
    if (!m) throw new Error(`no totals in ${added[0]}`);
    return Number(m[1]);
  };
  try {
    const exited = new Promise<never>((_r, reject) => child.once('exit', (code) => reject(new Error(`ipgate exited (${code})`))));
    exited.catch(() => undefined);
    await Promise.race([waitPort(listen, 300_000), exited]);
    await shorts(listen, WARMUP);
    dump(); // zero what start-up and the warm-up counted (instrumentation was off, but be sure)
    control(true);
    const t0 = Date.now();
    await shorts(listen, CONNS);
    control(false);
    const shortMs = Date.now() - t0;
    const shortIr = dump();

    const bulk = net.connect({ host: '127.0.0.1', port: listen });
    bulk.on('error', (e) => {
      throw e;
    });
    await new Promise((r) => bulk.once('connect', r));
    if (INBOUND === 'v2') bulk.write(FIRST.subarray(0, FIRST.length - REQUEST.length));
    bulk.write('B');
    await pump(bulk, BULK_WARMUP_MIB);
    await backend.bulkReached(1 + BULK_WARMUP_MIB * MIB);
    dump();
    control(true);
    const t1 = Date.now();
    await pump(bulk, BULK_MIB);
    await backend.bulkReached(1 + (BULK_WARMUP_MIB + BULK_MIB) * MIB);
    control(false);
    const bulkMs = Date.now() - t1;
    const bulkIr = dump();
    bulk.destroy();

    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await gone;
    const version = execFileSync(NODE, ['--version']).toString().trim();
    process.stdout.write(
      `${path.relative(ROOT, MAIN) || MAIN} node ${version} ${NODE_FLAGS.join(' ')} sockets ${SOCKETS}` +
        `${INBOUND === 'v2' ? ', PROXY v2 in' : ''}: ` +
        `short ${(shortIr / CONNS).toFixed(0)} instructions/connection (${CONNS} after ${WARMUP}, ${shortMs} ms); ` +
        `bulk ${(bulkIr / BULK_MIB).toFixed(0)} instructions/MiB (${BULK_MIB} MiB after ${BULK_WARMUP_MIB}, ${bulkMs} ms)\n`,
    );
  } catch (e) {
    child.kill('SIGKILL');
    process.stderr.write(err.slice(-2000));
    throw e;
  } finally {
    backend.server.close();
    if (process.env.BENCH_KEEP === undefined) fs.rmSync(dir, { recursive: true, force: true });
    else process.stderr.write(`kept ${dir}\n`);
  }
}

void main().catch((e: unknown) => {
  process.stderr.write(`${String(e)}\n`);
  process.exit(1);
});
