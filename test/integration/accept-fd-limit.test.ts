/**
 * At the open-file limit: ipgate in a child process under `prlimit --nofile=128`, more connections
 * than it has descriptors for. Before, libuv accepted and reset the excess unseen (no line, no
 * metric). Now each is closed just below the limit and counted in ipgate_accept_errors_total, one
 * warn line per listener says how many, the admitted connections keep working, and the admin API
 * still answers.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import pino from 'pino';
import { AcceptErrors, fdReserve, openFileLimit } from '../../src/listener/accept-errors';
import { ListenerStats } from '../../src/metrics/listener-stats';
import { LogCapture } from '../helpers/ipgate';
import { request, TOKEN } from '../helpers/admin-api';
import { childPids, logLines, MAIN, tmpDir } from '../helpers/ipgate';
import { freePort, waitFor } from '../helpers/net';

const LIMIT = 128;
const hasPrlimit = spawnSync('prlimit', ['--version']).status === 0;

t.test('openFileLimit reads the soft limit from /proc/self/limits', async (t) => {
  const text =
    'Limit                     Soft Limit           Hard Limit           Units\nMax open files            64                   4096                 files\n';
  t.equal(openFileLimit(text), 64);
  t.equal(openFileLimit('Max open files            unlimited            unlimited            files\n'), null, 'unlimited: no guard');
  t.equal(openFileLimit('nothing here'), null);
  t.equal(fdReserve(128), 16, 'at least 16 descriptors kept free');
  t.equal(fdReserve(65536), 2048, '1/32 of a large limit');
});

t.test('AcceptErrors: the first failure logged at once, the rest of the interval in one line at its end', async (t) => {
  const stats = new ListenerStats('edge');
  const logs = new LogCapture();
  const errors = new AcceptErrors(stats, pino({ level: 'info' }, logs), 100, 200);
  t.teardown(() => errors.close());
  t.equal(errors.maxFd, 84, '100 descriptors, 16 kept free');
  t.ok(errors.admit(83), 'below the guard');
  t.notOk(errors.admit(84), 'at the guard: refused');
  for (let fd = 90; fd < 99; fd++) errors.admit(fd);
  errors.failed(-23); // ENFILE from the accept callback
  errors.failed(-105); // ENOBUFS: other
  t.same([stats.acceptErrorsEmfile, stats.acceptErrorsEnfile, stats.acceptErrorsOther], [10, 1, 1]);
  t.equal(logs.lines.length, 1, 'one line so far');
  t.match(logs.lines[0], { level: 40, count: 1, codes: { EMFILE: 1, ENFILE: 0, other: 0 }, fdLimit: 100, maxFd: 84 });
  await waitFor(() => logs.lines.length === 2, 5000, 'the end-of-interval line');
  t.match(logs.lines[1], { count: 11, codes: { EMFILE: 9, ENFILE: 1, other: 1 }, total: { EMFILE: 10, ENFILE: 1, other: 1 } });
  t.match(String(logs.lines[1]!.msg), /^accept failed: 11 connection\(s\) closed unserved since the last line \(at the open-file limit/);
  const none = new AcceptErrors(new ListenerStats('x'), pino({ level: 'silent' }), null);
  t.ok(none.admit(1_000_000), 'an unknown limit: no guard');
});

t.test(
  'more connections than descriptors: the excess is closed, counted and logged once per listener',
  { skip: hasPrlimit ? false : 'no prlimit on this machine' },
  async (t) => {
    // The backend holds every upstream connection open and echoes, so each admitted client costs
    // ipgate two descriptors for as long as the test runs.
    const held: net.Socket[] = [];
    const backend = net.createServer((s) => {
      held.push(s);
      s.pipe(s);
    });
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    t.teardown(() => {
      for (const s of held) s.destroy();
      backend.close();
    });
    const backendPort = (backend.address() as net.AddressInfo).port;

    const [tcpPort, webPort, adminPort] = [await freePort(), await freePort(), await freePort()];
    const dir = tmpDir('ipgate-accept-');
    fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
    const file = path.join(dir, 'config.yaml');
    fs.writeFileSync(
      file,
      YAML.stringify({
        logging: { level: 'info', access: false, bufferBytes: 0 },
        store: { type: 'memory' },
        // The admin API in a process of its own, whose descriptors the flood does not use up.
        admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token'), separateProcess: true },
        allowlists: { main: ['127.0.0.0/8'] },
        listeners: [
          { name: 'tcp', mode: 'tcp', listen: `127.0.0.1:${tcpPort}`, allowlist: 'main', upstreams: [`127.0.0.1:${backendPort}`] },
          { name: 'web', mode: 'http', listen: `127.0.0.1:${webPort}`, allowlist: 'main', upstreams: [`127.0.0.1:${backendPort}`] },
        ],
      }),
    );
    const child = spawn('prlimit', [`--nofile=${LIMIT}`, process.execPath, MAIN, 'run', '--config', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    t.teardown(async () => {
      if (child.exitCode !== null) return;
      for (const c of childPids(child.pid!))
        try {
          process.kill(c, 'SIGKILL');
        } catch {
          /* gone */
        }
      child.kill('SIGKILL');
      await exited;
    });
    await waitFor(() => /"msg":"ready"/.test(out) || child.exitCode !== null, 20_000, 'ready');
    t.equal(child.exitCode, null, `ipgate runs: ${err}`);

    const clients: net.Socket[] = [];
    t.teardown(() => {
      for (const c of clients) c.destroy();
    });
    const ended = new Set<net.Socket>();
    const echoed = new Set<net.Socket>();
    const open = (port: number, payload: string): net.Socket => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.on('connect', () => s.write(payload));
      s.on('data', () => echoed.add(s));
      s.on('error', () => undefined);
      s.on('close', () => ended.add(s));
      clients.push(s);
      return s;
    };
    const n = 150;
    const tcpClients = Array.from({ length: n }, () => open(tcpPort, 'ping\n'));
    // Every connection ends one of two ways: echoed (admitted, upstream connected) or closed by ipgate.
    await waitFor(() => tcpClients.every((s) => echoed.has(s) || ended.has(s)), 20_000, 'every TCP client answered or closed');
    const admitted = tcpClients.filter((s) => echoed.has(s) && !ended.has(s)).length;
    const refused = tcpClients.filter((s) => ended.has(s)).length;
    t.ok(admitted > 10, `some connections admitted and relayed (${admitted})`);
    t.ok(refused > 0 && admitted + refused === n, `the excess was closed (${refused} of ${n})`);

    const webClients = Array.from({ length: 20 }, () => open(webPort, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    await waitFor(() => webClients.every((s) => echoed.has(s) || ended.has(s)), 20_000, 'every HTTP client answered or closed');

    // The admin API lives in the primary (admin.separateProcess: true), whose descriptors are not used up.
    const scrape = await request(`http://127.0.0.1:${adminPort}`, 'GET', '/metrics', { token: null });
    t.equal(scrape.status, 200);
    const value = (listener: string, code: string): number =>
      Number(
        new RegExp(`^ipgate_accept_errors_total\\{listener="${listener}",code="${code}"\\} (\\d+)$`, 'm').exec(scrape.text)?.[1] ?? NaN,
      );
    t.equal(value('tcp', 'EMFILE'), refused, 'every closed TCP connection counted as EMFILE');
    t.equal(value('tcp', 'ENFILE'), 0);
    t.equal(value('tcp', 'other'), 0);
    t.ok(value('web', 'EMFILE') > 0, `the HTTP listener counts its own (${value('web', 'EMFILE')})`);

    const lines = logLines(out).filter((l) => typeof l.msg === 'string' && l.msg.startsWith('accept failed'));
    const tcpLines = lines.filter((l) => l.listener === 'tcp');
    t.equal(tcpLines.length, 1, 'one warn line for the TCP listener within the interval');
    t.match(
      tcpLines[0],
      { level: 'warn', codes: { EMFILE: 1 }, count: 1, fdLimit: LIMIT, maxFd: LIMIT - 16 },
      'the first failure is logged at once, with the limit',
    );
    t.match(tcpLines[0]!.msg, /at the open-file limit: raise ulimit -n/);
    t.equal(lines.filter((l) => l.listener === 'web').length, 1, 'one for the HTTP listener');
    t.notOk(/"level":"error"/.test(out), 'no error lines');
  },
);
