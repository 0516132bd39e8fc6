/**
 * What one kept-alive HTTP/1.1 client connection holds on ipgate's heap: the objects that live as
 * long as the connection does, and so die in the old generation when it closes (bench/README.md
 * "What a connection leaves in the old generation"). Not timed.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/conn-heap.js
 *     [--main other/dist/src/main.js] [--node /path/to/node] [--conns 1000] [--top 20] [--tcp]
 *
 * `--tcp`: the same for a TCP listener's connection (a long-lived one: a database client's,
 * a WebSocket's through a TCP listener): each connection sends 4 bytes, reads them back from an
 * echo backend in this process and stays open.
 *
 * ipgate (an HTTP listener, an allowlist that admits 127.0.0.1, a backend in this process, every
 * wait between requests at 10 minutes) runs with `--heapsnapshot-signal=SIGUSR2`. This process
 * opens and closes 2,000 connections of one request each (warm-up), takes a heap snapshot (V8 runs
 * a full collection before one, so a snapshot holds only what is alive), opens `--conns`
 * connections that each make one request and stay open, and takes a second. Printed: the
 * difference of the two snapshots' self sizes divided by `--conns`, in all and per kind of node
 * (type and constructor, as DevTools groups them).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { arg } from './args';
import { freePort, waitPort } from './ports';

const ROOT = path.resolve(__dirname, '../../..');

const MAIN = arg('--main', path.join(ROOT, 'dist/src/main.js'));
const NODE = arg('--node', process.execPath);
const CONNS = Number(arg('--conns', '1000'));
const TOP = Number(arg('--top', '20'));
const TCP = process.argv.includes('--tcp');

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A new connection that writes `send` and stays open: resolves with the socket once `answer` says
 * the reply is complete (true), rejects when it says the reply is wrong (false) or the connection
 * closes first.
 */
function oneConnection(port: number, send: string, answer: (got: string) => boolean | undefined): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let got = '';
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      const done = answer(got);
      if (done === true) resolve(s);
      else if (done === false) reject(new Error(`unexpected answer: ${got}`));
    });
    s.on('error', reject);
    s.on('close', () => reject(new Error(`closed before the answer: ${got}`)));
    s.write(send);
  });
}

/** One keep-alive GET; complete once the 200's body is in. */
const oneRequest = (port: number): Promise<net.Socket> =>
  oneConnection(port, 'GET / HTTP/1.1\r\nHost: bench\r\n\r\n', (got) => {
    if (got.endsWith('\r\n\r\nok')) return true;
    if (got.length > 4096 || (got.includes('\r\n\r\n') && !got.startsWith('HTTP/1.1 200'))) return false;
    return undefined;
  });

/** A TCP connection through the listener: 4 bytes out, complete once they are echoed back. */
const oneEcho = (port: number): Promise<net.Socket> =>
  oneConnection(port, 'ping', (got) => (got === 'ping' ? true : 'ping'.startsWith(got) ? undefined : false));

async function connections(port: number, n: number): Promise<net.Socket[]> {
  const one = TCP ? oneEcho : oneRequest;
  const out: net.Socket[] = [];
  for (let i = 0; i < n; i += 50) out.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, () => one(port)))));
  return out;
}

/** SIGUSR2, then wait for the snapshot file to appear in `dir` and stop growing; renamed to `name`. */
async function snapshot(pid: number, dir: string, name: string): Promise<string> {
  const before = new Set(fs.readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 600; i++) {
    await sleep(200);
    const f = fs.readdirSync(dir).find((x) => x.endsWith('.heapsnapshot') && !before.has(x));
    if (f === undefined) continue;
    let size = -1;
    for (;;) {
      await sleep(500);
      const now = fs.statSync(path.join(dir, f)).size;
      if (now === size && now > 0) break;
      size = now;
    }
    fs.renameSync(path.join(dir, f), path.join(dir, name));
    return path.join(dir, name);
  }
  throw new Error('no heap snapshot after 120 s');
}

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** Self size per `type:name` (objects by constructor, closures by function name, the rest by type). */
function sizes(file: string): Map<string, { bytes: number; count: number }> {
  const s = JSON.parse(fs.readFileSync(file, 'utf8')) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const [ty, nm, sz] = [fields.indexOf('type'), fields.indexOf('name'), fields.indexOf('self_size')];
  const named = new Set(['object', 'closure', 'native', 'hidden']);
  const out = new Map<string, { bytes: number; count: number }>();
  for (let i = 0; i < s.nodes.length; i += fields.length) {
    const type = types[s.nodes[i + ty]!]!;
    const key = named.has(type) ? `${type}:${s.strings[s.nodes[i + nm]!]!.slice(0, 60)}` : type;
    const e = out.get(key) ?? { bytes: 0, count: 0 };
    e.bytes += s.nodes[i + sz]!;
    e.count++;
    out.set(key, e);
  }
  return out;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-conn-heap-'));
  const echoed = new Set<net.Socket>();
  const backend = TCP
    ? net.createServer((s) => {
        echoed.add(s);
        s.on('close', () => echoed.delete(s));
        s.on('error', () => s.destroy());
        s.pipe(s);
      })
    : http.createServer({ keepAliveTimeout: 600_000 }, (_q, r) => r.end('ok'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const [listen, admin] = [await freePort(), await freePort()];
  const minutes = 600_000;
  const config = {
    logging: { level: 'error', format: 'json', access: false },
    admin: { listen: `127.0.0.1:${admin}` },
    store: { type: 'memory' },
    allowlists: { list: ['127.0.0.0/8'] },
    listeners: [
      {
        name: TCP ? 'tcp' : 'http',
        mode: TCP ? 'tcp' : 'http',
        listen: `127.0.0.1:${listen}`,
        allowlist: 'list',
        upstreams: [`127.0.0.1:${(backend.address() as net.AddressInfo).port}`],
        timeouts: { idleMs: minutes },
        ...(TCP ? {} : { http: { keepAliveTimeoutMs: minutes } }),
      },
    ],
  };
  fs.writeFileSync(path.join(dir, 'ipgate.json'), JSON.stringify(config));
  const child = spawn(NODE, ['--heapsnapshot-signal=SIGUSR2', MAIN, '--config', path.join(dir, 'ipgate.json')], {
    cwd: dir,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    await waitPort(listen);
    for (let i = 0; i < 2000; i += 500) for (const s of await connections(listen, 500)) s.destroy();
    await sleep(500);
    const a = await snapshot(child.pid!, dir, 'before.heapsnapshot');
    const kept = await connections(listen, CONNS);
    await sleep(500);
    const b = await snapshot(child.pid!, dir, 'after.heapsnapshot');
    for (const s of kept) s.destroy();
    const [before, after] = [sizes(a), sizes(b)];
    const rows = [...new Set([...before.keys(), ...after.keys()])].map((k) => ({
      key: k,
      bytes: ((after.get(k)?.bytes ?? 0) - (before.get(k)?.bytes ?? 0)) / CONNS,
      count: ((after.get(k)?.count ?? 0) - (before.get(k)?.count ?? 0)) / CONNS,
    }));
    const total = rows.reduce((sum, r) => sum + r.bytes, 0);
    const kind = TCP ? 'TCP' : 'kept HTTP/1.1';
    console.log(`${path.relative(ROOT, MAIN)} node ${execVersion()}: ${CONNS} ${kind} connections, ${total.toFixed(0)} bytes each`);
    console.log('| bytes a connection | nodes a connection | kind |\n|---|---|---|');
    for (const r of rows.sort((x, y) => y.bytes - x.bytes).slice(0, TOP))
      console.log(`| ${r.bytes.toFixed(1)} | ${r.count.toFixed(2)} | ${r.key} |`);
  } finally {
    child.kill('SIGKILL');
    if (backend instanceof http.Server) backend.closeAllConnections();
    for (const s of echoed) s.destroy();
    backend.close();
    if (!process.env.BENCH_KEEP) fs.rmSync(dir, { recursive: true, force: true });
  }
}

function execVersion(): string {
  return execFileSync(NODE, ['--version'], { encoding: 'utf8' }).trim();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
