/**
 * The image's entrypoint, run as the Dockerfile runs it: `tini -- node /app/dist/src/main.js run
 * --config /etc/ipgate/config.yaml`, from a copy of the image's /app layout (package.json, the
 * compiled dist/src, config/demo.yaml). SIGTERM goes to tini (PID 1 in the container), reaches
 * ipgate, which stops accepting, lets the open connection finish and exits 0: with the admin API on
 * (the chart's config: one process; with admin.separateProcess a primary and one worker) and without (one process).
 *
 * Needs tini (Debian package `tini`, the one the image installs) and `npm run build` (tap's pretest).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { ROOT } from '../helpers/helm';
import { freePort } from '../helpers/net';
import { childPids } from '../helpers/ipgate';

const TINI = '/usr/bin/tini';

/** Resolves with the first stdout JSON log line whose msg matches. */
function waitForLog(
  child: ChildProcess,
  lines: Record<string, unknown>[],
  msg: RegExp,
  timeoutMs = 15_000,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const check = (): boolean => {
      const hit = lines.find((l) => typeof l.msg === 'string' && msg.test(l.msg));
      if (hit) resolve(hit);
      return !!hit;
    };
    if (check()) return;
    const timer = setTimeout(() => reject(new Error(`no log line ${msg} within ${timeoutMs} ms; got ${JSON.stringify(lines)}`)), timeoutMs);
    child.stdout!.on('data', () => {
      if (check()) clearTimeout(timer);
    });
    child.once('exit', (code) => {
      if (!check()) {
        clearTimeout(timer);
        reject(new Error(`exited ${code} before ${msg}`));
      }
    });
  });
}

// Locally a missing tini skips with the reason; in CI it fails: .ci/run installs it.
const skip = !fs.existsSync(TINI) && !process.env.CI ? `${TINI} missing (apt-get install -y tini)` : false;

// The chart's config has the admin API on, in one process by default; with admin.separateProcess a pod
// runs a primary and one worker: tini signals the primary only, which drains the worker.
for (const variant of [
  { name: 'admin API on (one process, as in the chart)', admin: true, separate: false },
  { name: 'admin API in its own process (primary + worker, admin.separateProcess: true)', admin: true, separate: true },
  { name: 'no admin API (one process)', admin: false, separate: false },
]) {
  t.test(`SIGTERM through tini, ${variant.name}: ipgate drains the open connection and exits 0`, { skip }, async (t) => {
    if (!fs.existsSync(TINI)) throw new Error(`${TINI} missing: CI must apt-get install -y tini (the image's init)`);
    const main = path.join(ROOT, 'dist/src/main.js');
    t.ok(fs.existsSync(main), 'dist/src/main.js exists (npm run build)');

    // The image's /app and /etc/ipgate, laid out as the Dockerfile copies them.
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-image-'));
    t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
    const app = path.join(root, 'app');
    fs.mkdirSync(path.join(app, 'config'), { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(app, 'package.json'));
    fs.cpSync(path.join(ROOT, 'dist/src'), path.join(app, 'dist/src'), { recursive: true });
    fs.copyFileSync(path.join(ROOT, 'config/demo.yaml'), path.join(app, 'config/demo.yaml'));
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(app, 'node_modules'), 'dir');

    const [listenPort, echoPort, adminPort] = [await freePort(), await freePort(), await freePort()];
    const config = path.join(root, 'etc/ipgate/config.yaml');
    fs.mkdirSync(path.dirname(config), { recursive: true });
    fs.writeFileSync(
      config,
      YAML.stringify({
        logging: { level: 'info', format: 'json', access: false },
        admin: { listen: variant.admin ? `127.0.0.1:${adminPort}` : null, separateProcess: variant.separate },
        store: { type: 'memory' },
        shutdown: { drainTimeoutMs: 20_000 },
        allowlists: { local: ['127.0.0.1/32'] },
        listeners: [
          {
            name: 'tcp',
            mode: 'tcp',
            listen: `127.0.0.1:${listenPort}`,
            allowlist: 'local',
            upstreams: [`127.0.0.1:${echoPort}`],
            outboundProxyProtocol: 'v2',
          },
        ],
        echo: { tcp: `127.0.0.1:${echoPort}`, http: null },
      }),
    );

    // The Dockerfile's ENTRYPOINT + CMD.
    const child = spawn(TINI, ['--', process.execPath, path.join(app, 'dist/src/main.js'), 'run', '--config', config], {
      // TINI_SUBREAPER: tini is not PID 1 here; in the container it is.
      cwd: app,
      env: { ...process.env, NODE_ENV: 'production', TINI_SUBREAPER: '1', IPGATE_ADMIN_TOKEN: 'an-admin-token-for-the-image-test' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.teardown(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const lines: Record<string, unknown>[] = [];
    let partial = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      partial += chunk.toString();
      const parts = partial.split('\n');
      partial = parts.pop()!;
      for (const p of parts) if (p.trim()) lines.push(JSON.parse(p) as Record<string, unknown>);
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );

    await waitForLog(child, lines, /^ready$/);
    // tini -> node (ipgate) -> node (the worker, with the admin API on).
    const [ipgate] = childPids(child.pid!);
    t.ok(ipgate, 'tini runs ipgate');
    const workers = childPids(ipgate!);
    t.equal(workers.length, variant.separate ? 1 : 0, variant.separate ? 'ipgate runs one worker process' : 'ipgate runs alone');

    // An open connection through the listener: the echo answers with the client it learned.
    const client = net.connect(listenPort, '127.0.0.1');
    const greeting = await new Promise<string>((resolve, reject) => {
      client.once('data', (d) => resolve(d.toString()));
      client.once('error', reject);
      client.write('ping\n');
    });
    t.match(greeting, /^ipgate-echo client=127\.0\.0\.1:\d+ via=proxy-v2/);

    t.ok(child.kill('SIGTERM'), 'SIGTERM sent to tini (PID 1 in the container)');
    const stopping = await waitForLog(child, lines, /^stopping/);
    t.equal(stopping.signal, 'SIGTERM', 'tini forwarded SIGTERM to ipgate');

    // Draining: new connections are refused (once the listening socket is closed, which follows the
    // "stopping" line), the open one still works.
    const refusedNow = (): Promise<boolean> =>
      new Promise((resolve) => {
        const s = net.connect(listenPort, '127.0.0.1');
        s.once('connect', () => {
          s.destroy();
          resolve(false);
        });
        s.once('error', () => resolve(true));
      });
    let refused = false;
    for (let i = 0; i < 100 && !refused; i++) {
      refused = await refusedNow();
      if (!refused) await new Promise((r) => setTimeout(r, 20));
    }
    t.ok(refused, 'no new connections while draining');
    t.equal(child.exitCode, null, 'still running while a connection is open');
    const echoed = await new Promise<string>((resolve) => {
      client.once('data', (d) => resolve(d.toString()));
      client.write('still here\n');
    });
    t.equal(echoed, 'still here\n', 'the open connection is served during the drain');

    client.end();
    const { code, signal } = await exited;
    t.equal(signal, null);
    t.equal(code, 0, `exit 0 after the drain (stderr: ${stderr})`);
    t.ok(
      lines.some((l) => l.msg === 'stopped'),
      'logged "stopped"',
    );
    for (const w of workers) t.throws(() => process.kill(w, 0), 'the worker exited too');
  });
}
