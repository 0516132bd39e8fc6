/**
 * A flood of distinct client addresses against a rate limit: ipgate's memory and the limit's
 * table, for bench/README.md "Rate limits under a flood of distinct addresses" (issue 30 item 4:
 * growth under 64 MiB for 100,000 addresses).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/process/limit-flood.js
 *   BENCH_CLIENTS=100000 BENCH_MAX_CLIENTS=100000 BENCH_PARALLEL=64 node dist/bench/process/limit-flood.js
 *
 * One ipgate process (the compiled binary, admin off: the `single` model) with an HTTP listener
 * that requires PROXY v2 from 127.0.0.1 and limits each client (1r/m, nodelay: a client's first
 * request is forwarded, the rest refused). Every connection carries a PROXY v2 header from the
 * trusted source with another client address (10.x.y.z) and one request; BENCH_PARALLEL at a
 * time. VmRSS of the ipgate process (/proc/<pid>/status) after 2,000 warm-up connections (200
 * clients), then after the flood, and after a forced idle second; the table's size and evictions
 * from the metrics endpoint are not needed: the process logs nothing per request (access log off),
 * and the limit's refusals are counted from the answers.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import YAML from 'yaml';
import { encodeProxyV2 } from '../../src/proxy-protocol/encoder';
import { freePort, waitPort } from '../load/ports';

const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 100_000);
const MAX_CLIENTS = Number(process.env.BENCH_MAX_CLIENTS ?? 100_000);
const PARALLEL = Number(process.env.BENCH_PARALLEL ?? 64);
const ROOT = path.resolve(__dirname, '../../..');
const MAIN = path.join(ROOT, 'dist/src/main.js');

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : Number.NaN;
}

const addr = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

/** One connection as client `client`: its status. */
function one(port: number, client: string): Promise<number> {
  return new Promise((resolve) => {
    const c = net.connect({ port, host: '127.0.0.1' });
    let got = '';
    c.on('connect', () => {
      c.write(encodeProxyV2({ address: client, port: 40000 }, { address: '127.0.0.1', port }));
      c.write('GET / HTTP/1.1\r\nHost: flood.example\r\nConnection: close\r\n\r\n');
    });
    c.on('data', (d: Buffer) => (got += d.toString('latin1')));
    c.on('error', () => undefined);
    c.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0)));
  });
}

async function run(port: number, clients: (i: number) => string, n: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      const s = await one(port, clients(next++));
      statuses.set(s, (statuses.get(s) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return statuses;
}

async function main(): Promise<void> {
  const backend = http.createServer((_req, res) => res.end('ok\n'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-flood-'));
  const file = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    file,
    YAML.stringify({
      logging: { level: 'warn', access: false },
      admin: { listen: null },
      store: { type: 'memory' },
      allowlists: { main: ['10.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: `127.0.0.1:${port}`,
          allowlist: 'main',
          upstreams: [`127.0.0.1:${(backend.address() as net.AddressInfo).port}`],
          proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.1/32'] },
          limits: { requests: { rate: '1r/m', burst: 0, nodelay: true, maxClients: MAX_CLIENTS } },
        },
      ],
    }),
  );
  const child = spawn(process.execPath, [MAIN, 'run', '--config', file], { stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    await waitPort(port);
    const warm = await run(port, (i) => addr(i % 200), 2000);
    const before = rssKiB(child.pid!);
    const t0 = performance.now();
    const flood = await run(port, (i) => addr(1000 + i), CLIENTS);
    const secs = (performance.now() - t0) / 1000;
    const after = rssKiB(child.pid!);
    await new Promise((r) => setTimeout(r, 1000));
    const idle = rssKiB(child.pid!);
    const again = await run(port, (i) => addr(1000 + CLIENTS - 1 - i), 1000);
    const fmt = (m: Map<number, number>): string => [...m].map(([s, n]) => `${s}: ${n}`).join(', ');
    process.stdout.write(
      `node ${process.version}, ${CLIENTS.toLocaleString('en')} distinct clients via PROXY v2, maxClients ${MAX_CLIENTS.toLocaleString('en')}, ${PARALLEL} connections at a time\n` +
        `warm-up (200 clients x 10): ${fmt(warm)}\n` +
        `flood: ${fmt(flood)} in ${secs.toFixed(1)} s (${Math.round(CLIENTS / secs)} conn/s)\n` +
        `the last 1,000 clients again: ${fmt(again)} (held in the table: refused)\n` +
        `RSS before ${(before / 1024).toFixed(1)} MiB, after ${(after / 1024).toFixed(1)} MiB, 1 s later ${(idle / 1024).toFixed(1)} MiB: growth ${((after - before) / 1024).toFixed(1)} MiB\n`,
    );
  } finally {
    child.kill('SIGKILL');
    backend.close();
  }
}

void main();
