/**
 * `workers: 1` (the default) and where the admin API runs, with the compiled binary over real
 * sockets. With the admin API on, ipgate runs as a primary (store, admin API, /metrics) and one
 * cluster worker (the listeners), so an admin request never shares a V8 isolate with the data path
 * (bench/README.md "Admin API in its own process (workers: 1)"): the primary has exactly one child,
 * the listeners log from it, TCP and HTTP are served through it, an admin write is in force in the
 * worker when the API acknowledges it, /metrics, /readyz's self-checks and /v1/connections report
 * the worker's state, /v1/explain its listeners, and SIGTERM drains it and exits 0. `admin.separateProcess: false` and `admin.listen: null` run one process.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createHttpEcho, createTcpEcho } from '../../src/echo/echo-server';
import { request as adminRequest, TOKEN } from '../helpers/admin-api';
import { request as httpRequest } from '../helpers/http';
import { childPids, logLines, spawnIpgate, tmpDir, type Spawned } from '../helpers/ipgate';
import { closed, connect, freePort, readLine, readUntil, waitFor } from '../helpers/net';

async function backends(t: Test): Promise<{ tcp: number; http: number }> {
  const tcp = createTcpEcho();
  const web = createHttpEcho();
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        web.closeAllConnections();
        web.close(() => tcp.close(() => r()));
      }),
  );
  return { tcp: (tcp.address() as net.AddressInfo).port, http: (web.address() as net.AddressInfo).port };
}

interface Gate {
  g: Spawned;
  pid: number;
  tcp: number;
  http: number;
  /** Admin API base URL, or null when it is off. */
  admin: string | null;
  api: (method: string, url: string, body?: unknown, headers?: Record<string, string>) => ReturnType<typeof adminRequest>;
  logs: () => Record<string, unknown>[];
  log: (msg: string) => Record<string, unknown> | undefined;
}

/** ipgate with a TCP and an HTTP listener enforcing `main` (127.0.0.3 only); `admin` merges into the admin section (null: no admin API). */
async function startGate(
  t: Test,
  admin: Record<string, unknown> | null,
  extra: Record<string, unknown> = {},
  more: Record<string, unknown>[] = [],
): Promise<Gate> {
  const backend = await backends(t);
  const [tcp, http, adminPort] = [await freePort(), await freePort(), await freePort()];
  const dir = tmpDir('ipgate-admin-process-');
  fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
  const g = spawnIpgate(['run'], {
    // bufferBytes 0: every log line is written at once, so the test sees access lines without waiting.
    logging: { level: 'info', access: true, bufferBytes: 0 },
    store: { type: 'file', path: path.join(dir, 'allowlists.json') },
    // The primary + worker model is what this file tests: opted in (one process is the default).
    admin:
      admin === null
        ? { listen: null }
        : { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token'), separateProcess: true, ...admin },
    allowlists: { main: ['127.0.0.3/32'] },
    listeners: [
      {
        name: 'tcp',
        mode: 'tcp',
        listen: `127.0.0.1:${tcp}`,
        allowlist: 'main',
        upstreams: [`127.0.0.1:${backend.tcp}`],
        outboundProxyProtocol: 'v1',
      },
      { name: 'web', mode: 'http', listen: `127.0.0.1:${http}`, allowlist: 'main', upstreams: [`127.0.0.1:${backend.http}`] },
      ...more,
    ],
    ...extra,
  });
  const pid = g.child.pid!;
  t.teardown(async () => {
    if (g.child.exitCode !== null) return;
    for (const c of childPids(pid))
      try {
        process.kill(c, 'SIGKILL');
      } catch {
        /* gone */
      }
    g.child.kill('SIGKILL');
    await g.exited;
  });
  await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 20_000, 'ready');
  if (g.child.exitCode !== null) throw new Error(`ipgate exited ${g.child.exitCode}: ${g.stdout()} ${g.stderr()}`);
  const base = admin === null ? null : `http://127.0.0.1:${adminPort}`;
  const logs = (): Record<string, unknown>[] => logLines(g.stdout());
  return {
    g,
    pid,
    tcp,
    http,
    admin: base,
    logs,
    log: (msg) => logs().find((l) => l.msg === msg),
    api: (m, u, body, headers) => {
      if (base === null) throw new Error('no admin API');
      return adminRequest(base, m, u, { ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) });
    },
  };
}

/** A TCP stream from `from`, admitted: the echo's greeting names the client. */
async function stream(port: number, from: string): Promise<net.Socket> {
  const s = await connect({ port, localAddress: from });
  const line = await readLine(s);
  if (!line.includes(`client=${from}:`)) throw new Error(`unexpected echo line ${line}`);
  return s;
}

/** True when a TCP connection from `from` is closed without the echo's greeting (denied). */
async function tcpDenied(port: number, from: string): Promise<boolean> {
  const s = await connect({ port, localAddress: from });
  let data = '';
  s.on('data', (c: Buffer) => (data += c.toString()));
  await closed(s);
  return data === '';
}

/** HTTP status of one request from `from`, and the client the echo backend was told (X-Real-IP). */
async function get(port: number, from: string): Promise<{ status: number; client: unknown }> {
  const r = await httpRequest({ port, localAddress: from });
  return { status: r.status, client: r.status === 200 ? r.json().client : null };
}

function metric(text: string, name: string, labels: string): number | null {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? null : Number(line.slice(line.lastIndexOf(' ') + 1));
}

function listenerPids(gate: Gate): unknown[] {
  return gate
    .logs()
    .filter((l) => l.msg === 'listening')
    .map((l) => l.pid);
}

/** SIGTERM with a stream open: the listeners stop accepting, the stream is still served, exit 0 once it ends. */
async function drainsOnSigterm(t: Test, gate: Gate): Promise<void> {
  const open = await stream(gate.tcp, '127.0.0.3');
  gate.g.child.kill('SIGTERM');
  await waitFor(() => /"msg":"stopping/.test(gate.g.stdout()), 5000, 'stopping logged');
  await waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect(gate.tcp, '127.0.0.1');
        s.once('error', () => resolve(true));
        s.once('connect', () => {
          s.destroy();
          resolve(false);
        });
      }),
    5000,
    'listener closed',
  );
  open.write('still here\n');
  t.equal((await readUntil(open, 'still here\n')).toString(), 'still here\n', 'the open stream is served while draining');
  t.equal(gate.g.child.exitCode, null, 'still running while a stream is open');
  open.end();
  t.equal(await gate.g.exited, 0, 'exit 0 after the drain');
  t.equal(gate.g.stderr(), '', 'nothing on stderr');
}

t.test('workers: 1 with the admin API (default): a primary and one worker that holds the listeners', async (t) => {
  const gate = await startGate(t, {});
  const kids = childPids(gate.pid);
  t.equal(kids.length, 1, `the primary has exactly one child process (${kids.join(', ')})`);
  const worker = kids[0]!;
  t.match(
    fs.readFileSync(`/proc/${worker}/cmdline`, 'utf8').split('\0'),
    [process.execPath, /main\.js$/],
    'the child is a node process running ipgate',
  );

  const starting = gate.log('starting workers');
  t.match(
    starting,
    { pid: gate.pid, workers: 1, reason: 'admin API in its own process', scheduling: 'none' },
    'the start-up log names the model and why',
  );
  t.match(gate.log('admin API listening'), { pid: gate.pid }, 'the admin API is in the primary');
  t.same(listenerPids(gate), [worker, worker], 'both listeners are bound in the worker');
  t.ok(
    gate
      .logs()
      .filter((l) => l.msg === 'listening')
      .every((l) => l.worker === 1),
    'worker lines carry worker: 1',
  );
  t.equal(gate.log('running as one process'), undefined);

  // TCP and HTTP through the worker: its access lines name the client.
  for (let i = 0; i < 3; i++) (await stream(gate.tcp, '127.0.0.3')).destroy();
  for (let i = 0; i < 4; i++)
    t.same(await get(gate.http, '127.0.0.3'), { status: 200, client: '127.0.0.3' }, `HTTP request ${i} forwarded`);
  await waitFor(() => gate.logs().filter((l) => l.msg === 'access').length >= 7, 5000, 'access lines');
  const access = gate.logs().filter((l) => l.msg === 'access');
  t.same([...new Set(access.map((l) => l.pid))], [worker], 'every access line comes from the worker');

  // /metrics (served by the primary) reports the worker's counters.
  await waitFor(
    async () => metric((await gate.api('GET', '/metrics')).text, 'ipgate_connections_active', 'listener="tcp"') === 0,
    5000,
    'streams closed',
  );
  const text = (await gate.api('GET', '/metrics')).text;
  t.equal(metric(text, 'ipgate_connections_accepted_total', 'listener="tcp"'), 3, 'TCP connections accepted by the worker');
  t.equal(
    metric(text, 'ipgate_http_requests_total', 'listener="web",method="GET",status="200",code_class="2xx",protocol="h1"'),
    4,
    'HTTP requests answered by the worker',
  );
  const ready = await gate.api('GET', '/readyz');
  t.equal(ready.status, 200);
  t.match(JSON.stringify(ready.json.checks), /1 worker\(s\) listening/);
});

t.test('workers: 1 with the admin API: a write is in force in the worker when the API acknowledges it', async (t) => {
  const gate = await startGate(t, {});
  t.equal(childPids(gate.pid).length, 1, 'two processes');
  const from = '127.0.0.5';
  // No waiting between the acknowledgement and the next connection: acked means applied. Several
  // rounds, both directions, TCP and HTTP.
  for (let i = 0; i < 5; i++) {
    t.ok(await tcpDenied(gate.tcp, from), `round ${i}: TCP from ${from} denied before the add`);
    t.equal((await get(gate.http, from)).status, 403, `round ${i}: HTTP from ${from} denied before the add`);
    const add = await gate.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: `${from}/32` }] });
    t.equal(add.status, 200, add.text);
    const live = await stream(gate.tcp, from);
    t.equal((await get(gate.http, from)).status, 200, `round ${i}: HTTP admitted right after the ack`);
    const cut = closed(live);
    const rm = await gate.api('DELETE', `/v1/allowlists/main/entries/${encodeURIComponent(`${from}/32`)}`);
    t.equal(rm.status, 200, rm.text);
    t.ok(await tcpDenied(gate.tcp, from), `round ${i}: TCP denied right after the removal's ack`);
    t.equal((await get(gate.http, from)).status, 403, `round ${i}: HTTP denied right after the removal's ack`);
    await cut;
  }
  t.pass('the live stream of the removed client was cut each time (revokeLive in the worker)');
  // PUT (replace) the same way.
  const put = await gate.api('PUT', '/v1/allowlists/main', { entries: [{ cidr: '127.0.0.6/32' }] }, { 'if-match': '*' });
  t.equal(put.status, 200, put.text);
  t.ok(await tcpDenied(gate.tcp, '127.0.0.3'), 'a client the replacement dropped is denied at once');
  (await stream(gate.tcp, '127.0.0.6')).destroy();
  t.pass('a client the replacement added is admitted at once');
});

t.test('workers: 1 with the admin API: the acknowledgement waits for the worker', async (t) => {
  // On loopback the IPC message reaches the worker before the client's next connection anyway, so
  // the test above would pass even if the primary acknowledged without waiting. Here the worker is
  // stopped (SIGSTOP) while the write is made: the API must not answer until it runs again and
  // applies it. (The primary replaces a worker silent for APPLY_TIMEOUT_MS, 5 s; this stays well below.)
  const gate = await startGate(t, {});
  const [worker] = childPids(gate.pid);
  process.kill(worker!, 'SIGSTOP');
  let answered = false;
  const add = gate.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: '127.0.0.7/32' }] }).finally(() => (answered = true));
  try {
    // A bounded window for a negative: the primary alone answers a write in a few ms.
    await new Promise((r) => setTimeout(r, 500));
    t.notOk(answered, 'no acknowledgement while the worker cannot apply the change');
  } finally {
    process.kill(worker!, 'SIGCONT');
  }
  const r = await add;
  t.equal(r.status, 200, r.text);
  (await stream(gate.tcp, '127.0.0.7')).destroy();
  t.pass('admitted right after the acknowledgement');
  t.same(childPids(gate.pid), [worker], 'the same worker (not replaced)');
});

t.test("workers: 1 with the admin API: /readyz, /v1/explain and /v1/connections report the worker's listeners", async (t) => {
  // The primary has no listeners: the self-checks and the connections come from the worker over
  // IPC, explain decides from the config and the primary's lists.
  const pp = await freePort();
  const gate = await startGate(t, {}, {}, [
    {
      name: 'pp',
      mode: 'tcp',
      listen: `127.0.0.1:${pp}`,
      allowlist: 'main',
      upstreams: ['127.0.0.1:9'],
      proxyProtocol: { mode: 'optional', trustedSources: ['192.0.2.0/24'] },
    },
  ]);
  t.equal(childPids(gate.pid).length, 1, 'two processes');

  // A PROXY header from a peer outside trustedSources is refused in the worker; /readyz says so.
  const s = await connect({ port: pp, localAddress: '127.0.0.3' });
  s.write('PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n');
  await closed(s);
  const ready = await gate.api('GET', '/readyz');
  t.equal(ready.status, 200, 'a warning does not make ipgate unready');
  const untrusted = (ready.json.checks as Array<{ name: string; status: string; message: string }>).find(
    (c) => c.name === 'proxy_untrusted.pp',
  );
  t.match(
    untrusted,
    { status: 'warn', message: /listener pp: in the last 60 s 1 connection\(s\) from peers outside proxyProtocol\.trustedSources refused/ },
    "the worker's PROXY trust self-check is in the primary's /readyz",
  );

  // explain: the listener's config and the current list, including a write made after start.
  const explain = (peer: string): ReturnType<Gate['api']> => gate.api('POST', '/v1/explain', { listener: 'tcp', peer });
  t.match((await explain('127.0.0.3')).json, { listener: 'tcp', client: '127.0.0.3', decision: 'allow', entry: { cidr: '127.0.0.3/32' } });
  t.match((await explain('127.0.0.9')).json, { decision: 'deny', reason: 'not_allowlisted' });
  t.equal((await gate.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: '127.0.0.9/32' }] })).status, 200);
  t.match((await explain('127.0.0.9')).json, { decision: 'allow', entry: { cidr: '127.0.0.9/32' } }, 'explain follows the write');
  t.match(
    (await gate.api('POST', '/v1/explain', { listener: 'pp', peer: '192.0.2.1', proxyHeader: 'PROXY TCP4 127.0.0.9 127.0.0.1 5555 80' }))
      .json,
    { client: '127.0.0.9', via: 'proxy-v1', peerTrusted: true, decision: 'allow' },
    'PROXY trust from the listener config',
  );
  t.equal((await explain('::1')).status, 200, 'an IPv6 peer is explained too');
  t.equal((await gate.api('POST', '/v1/explain', { listener: 'nope', peer: '127.0.0.3' })).status, 404, 'an unknown listener is 404');

  // connections: a live stream in the worker, with its derived client.
  const open = await stream(gate.tcp, '127.0.0.3');
  const page = (await gate.api('GET', '/v1/connections?listener=tcp')).json as {
    total: number;
    connections: Array<Record<string, unknown>>;
  };
  t.equal(page.total, 1, 'one live connection on tcp');
  t.match(page.connections[0], { listener: 'tcp', worker: 1, via: 'socket', admitted: true, client: /^127\.0\.0\.3:\d+$/ });
  t.equal((await gate.api('GET', '/v1/connections?listener=nope')).status, 404);
  open.destroy();
  await waitFor(async () => ((await gate.api('GET', '/v1/connections')).json as { total: number }).total === 0, 5000, 'connection gone');
});

t.test('workers: 1 with the admin API: SIGTERM to the primary drains the worker and exits 0', async (t) => {
  const gate = await startGate(t, {}, { shutdown: { drainTimeoutMs: 10_000 } });
  const worker = childPids(gate.pid);
  t.equal(worker.length, 1);
  await drainsOnSigterm(t, gate);
  t.throws(() => process.kill(worker[0]!, 0), 'the worker is gone too');
  t.ok(
    gate.logs().some((l) => l.msg === 'stopped' && l.pid === gate.pid),
    'the primary logged "stopped"',
  );
});

t.test('admin.separateProcess: false: one process serves the listeners and the admin API', async (t) => {
  const gate = await startGate(t, { separateProcess: false }, { shutdown: { drainTimeoutMs: 10_000 } });
  t.same(childPids(gate.pid), [], 'no child process');
  t.match(gate.log('running as one process'), { pid: gate.pid, workers: 1, reason: 'admin.separateProcess: false' });
  t.equal(gate.log('starting workers'), undefined);
  t.same(listenerPids(gate), [gate.pid, gate.pid], 'the listeners are in the one process');
  t.match(gate.log('admin API listening'), { pid: gate.pid });

  (await stream(gate.tcp, '127.0.0.3')).destroy();
  t.same(await get(gate.http, '127.0.0.3'), { status: 200, client: '127.0.0.3' });
  t.ok(await tcpDenied(gate.tcp, '127.0.0.5'));
  const add = await gate.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: '127.0.0.5/32' }] });
  t.equal(add.status, 200, add.text);
  (await stream(gate.tcp, '127.0.0.5')).destroy();
  t.equal((await get(gate.http, '127.0.0.5')).status, 200, 'admitted right after the ack');
  await waitFor(
    async () => metric((await gate.api('GET', '/metrics')).text, 'ipgate_connections_active', 'listener="tcp"') === 0,
    5000,
    'streams closed',
  );
  const text = (await gate.api('GET', '/metrics')).text;
  t.equal(metric(text, 'ipgate_connections_accepted_total', 'listener="tcp"'), 3);
  t.equal(metric(text, 'ipgate_http_requests_total', 'listener="web",method="GET",status="200",code_class="2xx",protocol="h1"'), 2);
  await drainsOnSigterm(t, gate);
});

t.test('admin.listen: null: one process (nothing to separate)', async (t) => {
  const gate = await startGate(t, null, { shutdown: { drainTimeoutMs: 10_000 } });
  t.same(childPids(gate.pid), [], 'no child process');
  t.match(gate.log('running as one process'), { pid: gate.pid, workers: 1, reason: 'no admin API (admin.listen: null)' });
  t.equal(gate.log('starting workers'), undefined);
  t.same(listenerPids(gate), [gate.pid, gate.pid]);
  (await stream(gate.tcp, '127.0.0.3')).destroy();
  t.same(await get(gate.http, '127.0.0.3'), { status: 200, client: '127.0.0.3' });
  t.ok(await tcpDenied(gate.tcp, '127.0.0.4'));
  await drainsOnSigterm(t, gate);
});
