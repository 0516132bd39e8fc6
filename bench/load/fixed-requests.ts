/**
 * A fixed amount of HTTP work in one process, for instruction counts (the machine's CPU time is
 * too noisy to see a few percent; valgrind's instruction count is not):
 *
 *   npx tsc -p tsconfig.json
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
 *     node dist/bench/load/fixed-requests.js [--dist /other/checkout/dist] [--requests 3000] [--routes 0|1|100]
 *
 * Starts ipgate (from this build, or `--dist`'s: A/B of two builds on the same work) with one HTTP
 * listener in front of a minimal keep-alive backend, sends `--requests` GETs one after the other on
 * one keep-alive connection, and exits. `--routes 0`: a listener without routes (the path that must
 * not change); 1 / 100: a routed listener whose traffic takes one exact route (the same tables as
 * compare.ts's http-routes-1 / http-routes-100). Logging off, no admin API.
 */
import net from 'node:net';
import path from 'node:path';

interface Args {
  dist: string;
  requests: number;
  routes: number;
}

function args(): Args {
  const a: Args = { dist: path.resolve(__dirname, '../..'), requests: 3000, routes: 0 };
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) {
    if (v[i] === '--dist') a.dist = path.resolve(v[i + 1]!);
    else if (v[i] === '--requests') a.requests = Number(v[i + 1]);
    else if (v[i] === '--routes') a.routes = Number(v[i + 1]);
    else throw new Error(`unknown option ${v[i]}`);
  }
  return a;
}

function routes(n: number): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [{ name: 'app', hosts: ['app.example.com'] }];
  for (let i = 1; i < n; i++)
    out.push({
      name: `r${i}`,
      hosts: [`h${i}.example.com`, `*.t${i}.example.com`],
      paths: [
        { path: `/api${i}`, match: 'prefix' },
        { path: '/health', match: 'exact' },
      ],
    });
  return out;
}

const RESPONSE = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nok\n');

async function main(): Promise<void> {
  const a = args();
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { startApp } = require(path.join(a.dist, 'src/app.js')) as typeof import('../../src/app');
  const { buildConfig } = require(path.join(a.dist, 'src/config/load.js')) as typeof import('../../src/config/load');
  const { createLogger } = require(path.join(a.dist, 'src/log.js')) as typeof import('../../src/log');
  // The backend: answers each request head (no bodies here) with a fixed response.
  const backend = net.createServer((s) => {
    let buf = '';
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      let i: number;
      while ((i = buf.indexOf('\r\n\r\n')) >= 0) {
        buf = buf.slice(i + 4);
        s.write(RESPONSE);
      }
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const upstream = `127.0.0.1:${(backend.address() as net.AddressInfo).port}`;
  const config = buildConfig({
    store: { type: 'memory' },
    admin: { listen: null },
    logging: { level: 'error', access: false },
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [
      {
        name: 'h',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [upstream],
        http: { maxRequestsPerConnection: 0 },
        ...(a.routes > 0 ? { routes: routes(a.routes) } : {}),
      },
    ],
  });
  const app = await startApp(config, { logger: createLogger({ level: 'error', format: 'json' }) });
  const port = app.listeners[0]!.address!.port;
  const client = net.connect({ host: '127.0.0.1', port });
  if (process.env.FIXED_DEBUG) client.on('data', (d: Buffer) => process.stderr.write(d.toString()));
  await new Promise((r) => client.once('connect', r));
  const request = Buffer.from('GET / HTTP/1.1\r\nHost: app.example.com\r\nUser-Agent: fixed\r\n\r\n');
  let done = 0;
  let buf = '';
  await new Promise<void>((resolve) => {
    client.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      // One response per request: its end is the body "ok\n" after the head.
      let i: number;
      while ((i = buf.indexOf('\r\n\r\nok\n')) >= 0) {
        buf = buf.slice(i + 7);
        if (++done === a.requests) return resolve();
        client.write(request);
      }
    });
    client.write(request);
  });
  client.destroy();
  await app.shutdown(0);
  backend.close();
  process.stdout.write(`${done} requests, routes ${a.routes}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
