/**
 * Two builds of ipgate side by side in one process, in alternating rounds: whole TCP connections
 * (accept, allowlist, dial, relay a few bytes, close, access line) through a listener WITHOUT
 * routes, to check that adding the SNI stages left that path's cost where it was
 * (docs/routes-and-sni.md "TCP listeners with routes"). With `proxy=v2` every connection first
 * sends a PROXY v2 header, with the payload in the same write as a balancer does, to a listener
 * that requires one from loopback: the PROXY stage's path (listener/header-stage.ts, gather.ts). Separate runs on this shared machine drift
 * more than the change could cost (bench/README.md); alternating rounds in one process and the
 * median of the per-round CPU ratios do not.
 *
 *   npx tsc -p tsconfig.json                       # the new build: dist/src
 *   (git archive BASE | tar -x -C /tmp/base; link node_modules; npx tsc -p tsconfig.json there)
 *   node dist/bench/ab/tcp-listener-paths.js /tmp/base/dist/src dist/src [rounds=21] [conns=400] [proxy=off|v2]
 *
 * Instruction counts instead (deterministic enough to resolve what CPU time on a loaded VM
 * cannot), one build at a time, `conns` connections after start-up; run with 0 and with N and
 * take the difference over N:
 *
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null node dist/bench/ab/tcp-listener-paths.js --single ROOT/dist/src N [proxy=off|v2]
 *
 * Each round: `conns` connections from one client, 8 at a time, each writing 64 bytes and reading
 * them back from an echo backend; CPU = process.cpuUsage() over the round (client, ipgate and echo
 * backend all in this process: the same for both builds, so the ratio shows the difference).
 */
/* eslint-disable @typescript-eslint/no-require-imports */
import net from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { encodeProxyV2 } from '../../src/proxy-protocol/encoder';

interface Build {
  startApp: (
    config: unknown,
    o: { logger: unknown },
  ) => Promise<{ listeners: { address: net.AddressInfo | null }[]; shutdown(ms?: number): Promise<void> }>;
  buildConfig: (raw: unknown) => unknown;
  createLogger: (c: { level: string; format: string }, d: unknown) => unknown;
}

function load(root: string): Build {
  const r = path.resolve(root);
  return {
    startApp: (require(`${r}/app.js`) as { startApp: Build['startApp'] }).startApp,
    buildConfig: (require(`${r}/config/load.js`) as { buildConfig: Build['buildConfig'] }).buildConfig,
    createLogger: (require(`${r}/log.js`) as { createLogger: Build['createLogger'] }).createLogger,
  };
}

const PAYLOAD = Buffer.alloc(64, 0x61);
/** proxy=v2: what each connection writes first (a client the allowlist admits). */
const WITH_HEADER = Buffer.concat([encodeProxyV2({ address: '127.0.0.9', port: 40000 }, { address: '127.0.0.1', port: 443 }), PAYLOAD]);

type Proxy = 'off' | 'v2';

function proxyArg(arg: string | undefined): Proxy {
  if (arg === undefined || arg === 'off' || arg === 'v2') return arg ?? 'off';
  process.stderr.write(`proxy: "${arg}": off or v2\n`);
  process.exit(2);
}

/** The listener under test: PROXY v2 required from loopback, or no PROXY stage at all. */
function listenerConfig(up: number, proxy: Proxy): Record<string, unknown> {
  return {
    name: 'tcp',
    mode: 'tcp',
    listen: '127.0.0.1:0',
    allowlist: 'main',
    upstreams: [`127.0.0.1:${up}`],
    ...(proxy === 'v2' ? { proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.0/8'] } } : {}),
  };
}

function one(port: number, first: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let got = 0;
    s.on('connect', () => s.write(first));
    s.on('data', (c: Buffer) => {
      got += c.length;
      if (got >= PAYLOAD.length) s.end();
    });
    s.on('error', reject);
    s.on('close', () => resolve());
  });
}

async function round(port: number, conns: number, first: Buffer): Promise<number> {
  const before = process.cpuUsage();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next++ < conns) await one(port, first);
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  const d = process.cpuUsage(before);
  return (d.user + d.system) / conns;
}

async function single(root: string, conns: number, proxy: Proxy): Promise<void> {
  const echoMod = require(`${path.resolve(root)}/echo/echo-server.js`) as { createTcpEcho(): net.Server };
  const echo = echoMod.createTcpEcho();
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const up = (echo.address() as net.AddressInfo).port;
  const b = load(root);
  const config = b.buildConfig({
    store: { type: 'memory' },
    admin: { listen: null },
    logging: { level: 'info' },
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [listenerConfig(up, proxy)],
  });
  const app = await b.startApp(config, {
    logger: b.createLogger({ level: 'info', format: 'json' }, new Writable({ write: (_c, _e, cb) => cb() })),
  });
  if (conns > 0) await round(app.listeners[0]!.address!.port, conns, proxy === 'v2' ? WITH_HEADER : PAYLOAD);
  await app.shutdown(0);
  echo.close();
}

async function main(): Promise<void> {
  if (process.argv[2] === '--single') {
    await single(process.argv[3]!, Number(process.argv[4] ?? 0), proxyArg(process.argv[5]));
    return;
  }
  const [baseRoot, newRoot, roundsArg, connsArg, proxyText] = process.argv.slice(2);
  if (baseRoot === undefined || newRoot === undefined) {
    process.stderr.write('usage: node dist/bench/ab/tcp-listener-paths.js BASE/dist/src NEW/dist/src [rounds] [conns] [proxy=off|v2]\n');
    process.exit(2);
  }
  const rounds = Number(roundsArg ?? 21);
  const conns = Number(connsArg ?? 400);
  const proxy = proxyArg(proxyText);
  const first = proxy === 'v2' ? WITH_HEADER : PAYLOAD;
  const echoMod = require(`${path.resolve(newRoot)}/echo/echo-server.js`) as { createTcpEcho(): net.Server };
  const echo = echoMod.createTcpEcho();
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const up = (echo.address() as net.AddressInfo).port;
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const ports: Record<string, number> = {};
  const apps: { shutdown(ms?: number): Promise<void> }[] = [];
  for (const [name, root] of [
    ['base', baseRoot],
    ['new', newRoot],
  ] as const) {
    const b = load(root);
    const config = b.buildConfig({
      store: { type: 'memory' },
      admin: { listen: null },
      logging: { level: 'info' },
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [listenerConfig(up, proxy)],
    });
    const app = await b.startApp(config, { logger: b.createLogger({ level: 'info', format: 'json' }, sink) });
    apps.push(app);
    ports[name] = app.listeners[0]!.address!.port;
  }
  // Warm both up (JIT), then alternate.
  for (let i = 0; i < 3; i++) for (const name of ['base', 'new']) await round(ports[name]!, conns, first);
  const ratios: number[] = [];
  const per: Record<string, number[]> = { base: [], new: [] };
  for (let i = 0; i < rounds; i++) {
    const order = i % 2 === 0 ? ['base', 'new'] : ['new', 'base'];
    const r: Record<string, number> = {};
    for (const name of order) r[name] = await round(ports[name]!, conns, first);
    per.base!.push(r.base!);
    per.new!.push(r.new!);
    ratios.push(r.new! / r.base!);
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const q = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)]!;
  process.stdout.write(
    `CPU per connection (us, proxy ${proxy}, median of ${rounds} rounds of ${conns}): base ${median(per.base!).toFixed(1)}, new ${median(per.new!).toFixed(1)}\n`,
  );
  process.stdout.write(
    `new/base per round: median ${median(ratios).toFixed(3)} (quartiles ${q(ratios, 0.25).toFixed(3)} .. ${q(ratios, 0.75).toFixed(3)})\n`,
  );
  for (const a of apps) await a.shutdown(0);
  echo.close();
}

void main();
