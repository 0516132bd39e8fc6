/**
 * What one request with a long Host costs ipgate, on a routed listener with a wildcard route
 * (issue 27: the wildcard walk hashed every label suffix; bench/README.md "Long Hosts and the
 * wildcard walk"):
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/long-host.js [--main dist/src/main.js]
 *       [--host long|short] [--requests 200]
 *
 * Starts the build (`--main`, another checkout's for an A/B) with one HTTP listener (routes
 * `*.example.com` and `www.example.org`, no default, an upstream nobody listens on), sends 20
 * requests of warm-up then `--requests` requests, each on a new connection with
 * `Connection: close`, one at a time, and prints ipgate's own CPU (utime + stime of
 * /proc/<pid>/stat) per request. `long`: `a.a.a....x`, 16,001 characters (http.maxHeaderBytes is
 * raised to let it in); `short`: an unknown 16-character name. Loopback only.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : fallback;
}

const main = path.resolve(arg('main', path.join(__dirname, '../../src/main.js')));
const kind = arg('host', 'long');
const requests = Number(arg('requests', '200'));
const host = kind === 'long' ? `${'a.'.repeat(8000)}x` : 'nope.example.net';

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** utime + stime of `pid`, in ms (USER_HZ 100). */
function cpuMs(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

function once(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('error', reject);
    s.on('close', () => resolve(got.slice(0, 12)));
    s.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  });
}

async function run(): Promise<void> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-long-host-'));
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    config,
    `store: {type: memory}
admin: {listen: null}
logging: {level: error}
allowlists: {everyone: ['127.0.0.0/8']}
listeners:
  - name: edge
    mode: http
    listen: 127.0.0.1:${port}
    allowlist: everyone
    upstreams: ['127.0.0.1:9']
    http: {maxHeaderBytes: 32768}
    routes:
      - {name: tenants, hosts: ['*.example.com']}
      - {name: www, hosts: ['www.example.org']}
`,
  );
  const child = spawn(process.execPath, [main, '--config', config], { stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    for (let i = 0; ; i++) {
      try {
        await once(port);
        break;
      } catch (err) {
        if (i > 100) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    for (let i = 0; i < 20; i++) await once(port);
    const before = cpuMs(child.pid!);
    const started = Date.now();
    let answer = '';
    for (let i = 0; i < requests; i++) answer = await once(port);
    const ms = cpuMs(child.pid!) - before;
    console.log(
      `${main}: ${kind} Host (${host.length} characters), ${requests} requests: ipgate CPU ${ms} ms = ${(ms / requests).toFixed(2)} ms per request, wall ${Date.now() - started} ms, answer ${JSON.stringify(answer)}`,
    );
  } finally {
    child.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

void run();
