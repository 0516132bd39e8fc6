/**
 * `workers: 2` over real sockets with the compiled binary: both workers serve the shared listener;
 * an admin write is acknowledged only after every worker applied it (the next connection from a
 * removed client is refused by whichever worker accepts it, a live stream of that client is cut);
 * /metrics adds the workers up; a killed worker is replaced; SIGTERM to the primary drains every
 * worker and the whole tree exits.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { request, TOKEN } from '../helpers/admin-api';
import { childPids, killAtTeardown, spawnIpgate, tmpDir, type Spawned } from '../helpers/ipgate';
import { closed, connect, freePort, readLine, waitFor } from '../helpers/net';
import { tcpEcho } from '../helpers/echo';

interface Cluster {
  g: Spawned;
  port: number;
  admin: string;
  api: (method: string, url: string, body?: unknown) => ReturnType<typeof request>;
}

async function startCluster(t: Test, extra: Record<string, unknown> = {}): Promise<Cluster> {
  const echo = await tcpEcho(t);
  const port = await freePort();
  const adminPort = await freePort();
  const dir = tmpDir('ipgate-workers-');
  fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
  const g = spawnIpgate(['run'], {
    workers: 2,
    logging: { level: 'info', access: false },
    store: { type: 'file', path: path.join(dir, 'allowlists.json') },
    admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token') },
    allowlists: { main: ['127.0.0.3/32', '127.0.0.4/32'] },
    listeners: [
      {
        name: 'tcp',
        mode: 'tcp',
        listen: `127.0.0.1:${port}`,
        allowlist: 'main',
        upstreams: [`127.0.0.1:${echo}`],
        outboundProxyProtocol: 'v1',
      },
    ],
    ...extra,
  });
  killAtTeardown(t, g);
  await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 20_000, 'primary ready');
  if (g.child.exitCode !== null) throw new Error(`ipgate exited: ${g.stdout()} ${g.stderr()}`);
  const admin = `http://127.0.0.1:${adminPort}`;
  return { g, port, admin, api: (m, u, body) => request(admin, m, u, body === undefined ? {} : { body }) };
}

/** Open a stream from `from` and read the echo's greeting line (proves it was admitted). */
async function stream(port: number, from: string): Promise<net.Socket> {
  const s = await connect({ port, localAddress: from });
  const line = await readLine(s);
  if (!line.includes(`client=${from}:`)) throw new Error(`unexpected echo line ${line}`);
  return s;
}

/** True when a connection from `from` is closed without the echo's greeting (denied). */
async function denied(port: number, from: string): Promise<boolean> {
  const s = await connect({ port, localAddress: from });
  let data = '';
  s.on('data', (c: Buffer) => (data += c.toString()));
  await closed(s);
  return data === '';
}

t.test('two workers share the listener and report through one /metrics', async (t) => {
  const c = await startCluster(t);
  t.equal(childPids(c.g.child.pid!).length, 2, 'two worker processes');
  // Under SCHED_RR the primary accepts and passes each handle on: the workers take them as
  // RawSockets all the same (listener.ts acceptHandles).
  // (The workers' log lines may reach the pipe after the primary's "ready".)
  const onHandles = (): number =>
    c.g
      .stdout()
      .split('\n')
      .filter((l) => l.includes('"msg":"listening"') && l.includes('"sockets":"handles"')).length;
  await waitFor(() => onHandles() === 2, 5000, 'both workers log "sockets":"handles"');
  t.pass('both workers relay on libuv handles');
  const socks: net.Socket[] = [];
  for (let i = 0; i < 20; i++) socks.push(await stream(c.port, '127.0.0.3'));
  for (const s of socks) s.destroy();
  const ready = await c.api('GET', '/readyz', undefined);
  t.equal(ready.status, 200);
  t.match(JSON.stringify(ready.json.checks), /2 worker\(s\) listening/);
  await waitFor(
    async () => /ipgate_connections_active\{listener="tcp"\} 0/.test((await c.api('GET', '/metrics')).text),
    5000,
    'connections closed',
  );
  const metrics = (await c.api('GET', '/metrics')).text;
  const accepted = /ipgate_connections_accepted_total\{listener="tcp"\} (\d+)/.exec(metrics);
  t.ok(accepted, 'accepted counter present');
  t.equal(Number(accepted?.[1]), 20, 'both workers summed: 20 accepted');
});

t.test('an admin write is acknowledged after every worker applied it; live streams of removed clients are cut', async (t) => {
  const c = await startCluster(t);
  const live = await stream(c.port, '127.0.0.3');
  const cut = closed(live);
  const r = await c.api('DELETE', '/v1/allowlists/main/entries/127.0.0.3%2F32');
  t.equal(r.status, 200, r.text);
  // Acknowledged means applied everywhere: no new connection from the removed client gets through,
  // whichever worker accepts it (round robin: 20 connections reach both).
  for (let i = 0; i < 20; i++) t.ok(await denied(c.port, '127.0.0.3'), `connection ${i} refused`);
  await cut;
  t.pass('the live stream of the removed client was closed (revokeLive in the worker)');
  const kept = await stream(c.port, '127.0.0.4');
  kept.destroy();
  const add = await c.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: '127.0.0.5/32' }] });
  t.equal(add.status, 200, add.text);
  for (let i = 0; i < 10; i++) (await stream(c.port, '127.0.0.5')).destroy();
  t.pass('an added client is admitted by every worker right after the acknowledgement');
});

t.test('a killed worker is replaced and the new one enforces the current lists', async (t) => {
  const c = await startCluster(t);
  const r = await c.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: '127.0.0.6/32' }] });
  t.equal(r.status, 200, r.text);
  const before = childPids(c.g.child.pid!);
  process.kill(before[0]!, 'SIGKILL');
  await waitFor(
    () => {
      const now = childPids(c.g.child.pid!);
      return now.length === 2 && !now.includes(before[0]!);
    },
    10_000,
    'replacement worker',
  );
  await waitFor(async () => (await c.api('GET', '/readyz')).status === 200, 10_000, 'ready again');
  // The primary's log is written in blocks (logging.flushIntervalMs, 1 s): wait for the line.
  await waitFor(() => /worker exited: replacing it/.test(c.g.stdout()), 5000, 'the replacement logged');
  for (let i = 0; i < 10; i++) (await stream(c.port, '127.0.0.6')).destroy();
  t.pass('the replacement admits a client added before it started');
});

t.test('SIGTERM to the primary drains every worker, then the tree exits 0', async (t) => {
  const c = await startCluster(t, { shutdown: { drainTimeoutMs: 10_000 } });
  const workers = childPids(c.g.child.pid!);
  const open = await stream(c.port, '127.0.0.3');
  c.g.child.kill('SIGTERM');
  await waitFor(() => /stopping: workers drain/.test(c.g.stdout()), 5000, 'drain started');
  // New connections are refused while the open one drains.
  await waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect(c.port, '127.0.0.1');
        s.once('error', () => resolve(true));
        s.once('connect', () => {
          s.destroy();
          resolve(false);
        });
      }),
    5000,
    'listener closed',
  );
  t.equal(c.g.child.exitCode, null, 'still draining while a connection is open');
  open.write('bye\n');
  open.end();
  t.equal(await c.g.exited, 0);
  for (const pid of workers) t.throws(() => process.kill(pid, 0), 'worker gone');
});
