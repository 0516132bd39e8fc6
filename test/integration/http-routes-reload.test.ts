/**
 * Routes reload live (docs/routes-and-sni.md "Reload"), with the compiled binary, two workers and
 * real nginx backends: a config file change adds and removes routes while a client loop keeps
 * requesting a route that stays (none of its requests may fail); a bad file is refused (a line per
 * problem, /readyz says so) and the old routes are still served; a listener change that needs a
 * restart is refused with that message; SIGHUP reloads; GET /v1/routes and POST /v1/explain follow
 * the routes in force. WebSocket tunnels open in both workers are re-decided by each reload: moved
 * to a narrower list, the refused client's tunnel is cut; moved to a store list, an edit of that
 * list through the admin API cuts the client it drops (issue 27 item 4).
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { request as adminRequest, TOKEN } from '../helpers/admin-api';
import { killAtTeardown, logLines, spawnIpgate, tmpDir } from '../helpers/ipgate';
import { freePort, waitFor } from '../helpers/net';
import { missing } from '../helpers/peers';
import { listenLoopback } from '../helpers/http';
import { threeBackends } from '../helpers/routes';
import { createHttpEcho, wsFrame } from '../../src/echo/echo-server';
import { closed, connect } from '../helpers/net';
import { wsHandshake, WsReader } from '../helpers/websocket';
import type net from 'node:net';

const skip = missing('nginx');

/** One request on a new connection (spread over the workers by round robin). */
function get(
  port: number,
  host: string,
  path: string,
  from = '127.0.0.3',
  agent: http.Agent | false = false,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, localAddress: from, agent, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `n` requests on fresh connections: their statuses (every worker answers some). */
async function statuses(port: number, host: string, p: string, n = 6): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await get(port, host, p)).status);
  return out;
}

t.test('routes follow the config file in every worker; bad changes are refused; SIGHUP reloads', { skip }, async (t) => {
  const ports = await threeBackends(t);
  const port = await freePort();
  const adminPort = await freePort();
  const dir = tmpDir('ipgate-routes-reload-');
  fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
  const file = path.join(dir, 'config.yaml');
  const stable = { name: 'stable', hosts: ['stable.example.com'], upstreams: [`127.0.0.1:${ports.a}`] };
  const config = (routes: unknown[], listen = `127.0.0.1:${port}`): string =>
    YAML.stringify({
      workers: 2,
      logging: { level: 'info', access: false },
      store: { type: 'memory' },
      admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token') },
      allowlists: { everyone: ['127.0.0.0/8'], few: ['127.0.0.5/32'] },
      listeners: [{ name: 'edge', mode: 'http', listen, allowlist: 'everyone', upstreams: [`127.0.0.1:${ports.c}`], routes }],
    });
  // Written whole then renamed (as a ConfigMap volume swaps its files): the poll never reads half a file.
  const put = (text: string): void => {
    fs.writeFileSync(`${file}.tmp`, text);
    fs.renameSync(`${file}.tmp`, file);
  };
  const old = { name: 'old', hosts: ['old.example.com'], upstreams: [`127.0.0.1:${ports.b}`] };
  fs.writeFileSync(file, config([stable, old]));
  const g = spawnIpgate(['run', '--config', file]);
  killAtTeardown(t, g);
  await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 30_000, 'primary ready');
  t.equal(g.child.exitCode, null, g.stderr());
  const api = (m: string, u: string, body?: unknown): ReturnType<typeof adminRequest> =>
    adminRequest(`http://127.0.0.1:${adminPort}`, m, u, body === undefined ? {} : { body });

  t.same(await statuses(port, 'old.example.com', '/'), [200, 200, 200, 200, 200, 200], 'old route served by every worker');
  t.same(
    await statuses(port, 'new.example.com', '/x'),
    [404, 404, 404, 404, 404, 404],
    'no route for the new host yet (and no default route): 404',
  );
  const before = await api('GET', '/v1/routes');
  t.equal(before.status, 200);
  t.same(
    before.json.listeners[0].routes.map((r: { name: string }) => r.name),
    ['stable', 'old'],
  );

  // A client loop on the stable route, on one keep-alive connection and on fresh ones, during the reloads.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  t.teardown(() => agent.destroy());
  let loop = true;
  const failures: string[] = [];
  let done = 0;
  const looping = (async () => {
    while (loop) {
      try {
        const r = await get(port, 'stable.example.com', `/n${done}`, '127.0.0.3', done % 2 === 0 ? agent : false);
        if (r.status !== 200 || !r.body.startsWith('A|')) failures.push(`${r.status} ${r.body.trim()}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
      done++;
    }
  })();

  // Reload 1 (file change): "old" removed, "new" added with its own allowlist.
  put(config([stable, { name: 'new', hosts: ['new.example.com'], upstreams: [`127.0.0.1:${ports.b}`], allowlist: 'few' }]));
  await waitFor(async () => (await statuses(port, 'old.example.com', '/')).every((s) => s === 404), 5000, 'old route gone in every worker');
  await waitFor(
    async () => (await statuses(port, 'new.example.com', '/')).every((s) => s === 403),
    5000,
    'new route (its allowlist) in every worker',
  );
  t.equal((await get(port, 'new.example.com', '/y', '127.0.0.5')).status, 200, 'the new route admits its list');
  const after = await api('GET', '/v1/routes');
  t.same(
    after.json.listeners[0].routes.map((r: { name: string }) => r.name),
    ['stable', 'new'],
  );
  t.not(after.json.version, before.json.version, 'the version changed');
  t.match(after.json.listeners[0].routes[1], {
    allowlist: 'few',
    allowlistInherited: false,
    upstreams: [`127.0.0.1:${ports.b}`],
    upstreamsInherited: false,
  });
  // (log lines reach stdout through the logger's buffer: waited for)
  await waitFor(
    () => logLines(g.stdout()).some((l) => l.msg === 'routes reloaded' && l.routesVersion === after.json.version),
    5000,
    'reload logged with its version',
  );

  // Reload 2: a bad file (a route with an encoded path, an unknown allowlist): refused, routes stay.
  put(config([stable, { name: 'bad', hosts: ['bad.example.com'], paths: [{ path: '/a/../b', match: 'prefix' }], allowlist: 'nope' }]));
  await waitFor(
    () => logLines(g.stdout()).some((l) => l.level === 'error' && /config change refused/.test(String(l.msg))),
    5000,
    'refusal logged',
  );
  const lines = logLines(g.stdout()).filter((l) => l.level === 'error' && /config change refused/.test(String(l.msg)));
  t.ok(
    lines.some((l) => /routes\[1\].*paths\[0\]\.path: "\/a\/\.\.\/b"/.test(String(l.msg))),
    'names the path and quotes it',
  );
  t.ok(
    lines.some((l) => /routes\[1\]\.allowlist: "nope"/.test(String(l.msg))),
    'names the allowlist and quotes it',
  );
  t.same(await statuses(port, 'new.example.com', '/', 4), [403, 403, 403, 403], 'the routes in force stay');
  const ready = await api('GET', '/readyz');
  t.match(
    ready.json.checks.find((c: { name: string }) => c.name === 'config'),
    { status: 'warn', message: /"nope"/ },
    '/readyz shows the refusal',
  );
  t.equal((await api('GET', '/v1/routes')).json.version, after.json.version, 'version unchanged');

  // Reload 3: a listen change needs a restart: refused with that message, routes stay.
  put(config([stable, old], `127.0.0.1:${await freePort()}`));
  await waitFor(
    () => logLines(g.stdout()).some((l) => l.level === 'error' && /routes change refused.*needs a restart/.test(String(l.msg))),
    5000,
    'restart refusal logged',
  );
  t.same(await statuses(port, 'old.example.com', '/', 4), [404, 404, 404, 404], 'still the routes in force (no "old")');
  t.match(
    (await api('GET', '/readyz')).json.checks.find((c: { name: string }) => c.name === 'config'),
    { message: /listen.*needs a restart/ },
  );

  // Back to a good file: applied, the refusal cleared.
  put(config([stable, old]));
  await waitFor(async () => (await statuses(port, 'old.example.com', '/', 4)).every((s) => s === 200), 5000, 'old back');
  t.equal(
    (await api('GET', '/readyz')).json.checks.some((c: { name: string }) => c.name === 'config'),
    false,
    'refusal cleared',
  );

  // SIGHUP alone reloads: the file is then changed with its size, inode and mtime kept, so the
  // stat poll cannot see it. First a version the poll does apply, written with a whole-second
  // mtime (exactly restorable); then the same bytes but one letter, in place, that mtime put back.
  const rereads = (trigger: string): number =>
    logLines(g.stdout()).filter((l) => l.msg === 'config file re-read' && l.trigger === trigger).length;
  const MTIME = 1_700_000_000;
  fs.writeFileSync(`${file}.tmp`, config([stable, { ...old, name: 'olw' }]));
  fs.utimesSync(`${file}.tmp`, MTIME, MTIME);
  fs.renameSync(`${file}.tmp`, file);
  await waitFor(async () => (await api('GET', '/v1/routes')).json.listeners[0].routes[1].name === 'olw', 5000, 'the poll applied "olw"');
  const st = fs.statSync(file);
  const text = config([stable, { ...old, name: 'olx' }]);
  t.equal(Buffer.byteLength(text), st.size, 'same size');
  const fd = fs.openSync(file, 'r+'); // in place, no truncation: the size never changes
  fs.writeSync(fd, text, 0, 'utf8');
  fs.futimesSync(fd, MTIME, MTIME);
  fs.closeSync(fd);
  const now = fs.statSync(file);
  t.same([now.mtimeMs, now.size, now.ino], [st.mtimeMs, st.size, st.ino], 'the poll sees the same stat: only the signal can reload');
  g.child.kill('SIGHUP');
  await waitFor(async () => (await api('GET', '/v1/routes')).json.listeners[0].routes[1].name === 'olx', 5000, 'SIGHUP reload');
  await waitFor(() => rereads('signal') === 1, 5000, 'the re-read by the signal logged');
  t.equal(g.child.exitCode, null, 'the primary survives SIGHUP');
  t.same(await statuses(port, 'old.example.com', '/', 4), [200, 200, 200, 200], 'workers survive SIGHUP and serve the reloaded route');

  // Explain follows the routes in force.
  const ex = await api('POST', '/v1/explain', { listener: 'edge', peer: '127.0.0.3', host: 'old.example.com', path: '/z' });
  t.match(ex.json, {
    decision: 'allow',
    route: { name: 'olx', host: 'old.example.com', hostMatch: 'exact', path: null },
    allowlist: 'everyone',
  });

  loop = false;
  await looping;
  t.ok(done > 20, `${done} requests on the stable route during the reloads`);
  t.same(failures, [], 'none of them failed');
});

t.test(
  "tunnels in every worker follow the reload: a narrower list cuts the client it refuses; a store list's edit reaches them",
  async (t) => {
    const echo = createHttpEcho();
    const echoPort = await listenLoopback(t, echo);
    const port = await freePort();
    const adminPort = await freePort();
    const dir = tmpDir('ipgate-tunnel-reload-');
    fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
    const file = path.join(dir, 'config.yaml');
    const config = (list: string): string =>
      YAML.stringify({
        workers: 2,
        logging: { level: 'info', access: false },
        store: { type: 'file', path: path.join(dir, 'allowlists.json') },
        admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token') },
        allowlists: {
          everyone: { source: 'config', entries: ['127.0.0.0/8'] },
          few: { source: 'config', entries: ['127.0.0.3/32', '127.0.0.4/32'] },
          partners: { source: 'store', entries: ['127.0.0.3/32', '127.0.0.4/32', '127.0.0.5/32'] },
        },
        listeners: [
          {
            name: 'edge',
            mode: 'http',
            listen: `127.0.0.1:${port}`,
            allowlist: 'everyone',
            upstreams: [`127.0.0.1:${echoPort}`],
            routes: [{ name: 'www', hosts: ['www.example.com'], allowlist: list }],
          },
        ],
      });
    const put = (text: string): void => {
      fs.writeFileSync(`${file}.tmp`, text);
      fs.renameSync(`${file}.tmp`, file);
    };
    fs.writeFileSync(file, config('everyone'));
    const g = spawnIpgate(['run', '--config', file]);
    killAtTeardown(t, g);
    await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 30_000, 'primary ready');
    t.equal(g.child.exitCode, null, g.stderr());

    // Three tunnels on new connections (the workers take turns): from .2, .3 and .4.
    const tunnels = new Map<string, { socket: net.Socket; reader: WsReader }>();
    for (const from of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) {
      const socket = await connect({ port, localAddress: from });
      t.teardown(() => socket.destroy());
      const reader = new WsReader(socket);
      socket.write(wsHandshake('/ws', '', 'www.example.com').text);
      t.match(await reader.head(), /^HTTP\/1\.1 101 /, `tunnel from ${from}`);
      await reader.messages(1);
      tunnels.set(from, { socket, reader });
    }
    const echoes = async (from: string, text: string): Promise<void> => {
      const tun = tunnels.get(from)!;
      tun.socket.write(wsFrame(1, Buffer.from(text), true));
      const [m] = await tun.reader.messages(1);
      t.equal(m!.payload.toString(), text, `the tunnel from ${from} echoes "${text}"`);
    };
    const from = async (source: string, n = 6): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await get(port, 'www.example.com', '/', source)).status);
      return out;
    };

    // Reload 1: www moves to the config list `few` (.3, .4).
    put(config('few'));
    await waitFor(async () => (await from('127.0.0.2')).every((s) => s === 403), 10_000, 'www decided by `few` in every worker');
    await closed(tunnels.get('127.0.0.2')!.socket, 5000);
    t.pass('the tunnel from 127.0.0.2 is cut by the reload');
    await echoes('127.0.0.3', 'after reload 1');
    await echoes('127.0.0.4', 'after reload 1');

    // Reload 2: www moves to the store list `partners` (.3, .4, .5): nothing more cut.
    put(config('partners'));
    await waitFor(async () => (await from('127.0.0.5')).every((s) => s === 200), 10_000, 'www decided by `partners` in every worker');
    await echoes('127.0.0.4', 'after reload 2');

    // The store list edited through the admin API: .4 dropped.
    const api = (m: string, u: string, o: Parameters<typeof adminRequest>[3] = {}): ReturnType<typeof adminRequest> =>
      adminRequest(`http://127.0.0.1:${adminPort}`, m, u, o);
    const cur = await api('GET', '/v1/allowlists/partners');
    const edit = await api('PUT', '/v1/allowlists/partners', {
      headers: { 'if-match': cur.headers.etag! },
      body: { entries: [{ cidr: '127.0.0.3/32' }, { cidr: '127.0.0.5/32' }] },
    });
    t.equal(edit.status, 200, 'partners edited');
    await closed(tunnels.get('127.0.0.4')!.socket, 5000);
    t.pass('the tunnel from 127.0.0.4, admitted before reload 2, is cut by the edit of the list www moved to');
    await echoes('127.0.0.3', 'after the edit');
  },
);
