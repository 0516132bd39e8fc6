/**
 * A reload or a list change re-decides every open connection on a routed HTTP listener (issue 27
 * item 4; docs/routes-and-sni.md "Reload"), in process over real sockets: WebSocket tunnels to the
 * built-in echo, keep-alive connections idle and with a slow response in flight, from direct
 * clients (127.0.0.x) and from a trusted proxy's clients (X-Forwarded-For). A reload that narrows
 * `www`'s list cuts what the new list refuses; a reload that moves `www` to a store list makes a
 * later edit of THAT list reach the connections admitted before it; a reload that gives a
 * connection's host and path to another route closes it (`route_removed`); with revokeLive off a
 * reload cuts only removed routes. Runs on net.Sockets too (http-sockets.test.ts).
 */
import type http from 'node:http';
import type net from 'node:net';
import t, { type Test } from 'tap';
import { createHttpEcho, wsFrame } from '../../src/echo/echo-server';
import type { Config } from '../../src/schema/config';
import { routesUpdate, routesVersion, type RouteSwapResult } from '../../src/route/routes-in-force';
import { startAdminGate, type AdminGate } from '../helpers/admin-api';
import { closed, connect, readAll, readUntil, waitFor } from '../helpers/net';
import { wsHandshake, WsReader } from '../helpers/websocket';
import { listenLoopback } from '../helpers/http';

type Routes = NonNullable<Config['listeners'][number]['routes']>;

const WWW = 'www.example.com';
const PROXY = '127.0.0.5';

/**
 * The backend: WebSocket echo (createHttpEcho's upgrade handler), and for plain requests
 * `<url>|<x-real-ip>`; a request for /slow... is answered only when the test calls release().
 */
async function backend(t: Test): Promise<{ port: number; held: () => number; release: () => void }> {
  const server = createHttpEcho();
  server.removeAllListeners('request');
  const held: Array<() => void> = [];
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const body = `${req.url ?? ''}|${String(req.headers['x-real-ip'])}\n`;
    const send = (): void => {
      res.writeHead(200, { 'content-length': Buffer.byteLength(body) }).end(body);
    };
    req.resume();
    if (req.url?.startsWith('/slow') === true) held.push(send);
    else send();
  });
  const port = await listenLoopback(t, server);
  return {
    port,
    held: () => held.length,
    release: () => {
      for (const f of held.splice(0)) f();
    },
  };
}

interface Gate {
  g: AdminGate;
  b: Awaited<ReturnType<typeof backend>>;
  /** Swap in `routes` as a config reload does (route/routes-in-force.ts). */
  reload: (routes: Routes) => RouteSwapResult;
  stat: (map: 'closed' | 'denied', key: string) => number;
}

/** `www` with `list`, and a second route on another host; `extra` routes after them. */
function routes(list: string, extra: Routes = []): Routes {
  return [{ name: 'www', hosts: [WWW], allowlist: list }, { name: 'other', hosts: ['other.example.com'] }, ...extra];
}

async function gate(t: Test, revokeLive = true): Promise<Gate> {
  const b = await backend(t);
  const g = await startAdminGate(t, {
    revokeLive,
    allowlists: {
      everyone: { source: 'config', entries: ['127.0.0.0/8', '198.51.100.0/24'] },
      few: { source: 'config', entries: ['127.0.0.3/32', '198.51.100.3/32'] },
      partners: { source: 'store', entries: ['127.0.0.0/8', '198.51.100.0/24'] },
    },
    listeners: [
      {
        name: 'edge',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'everyone',
        upstreams: [`127.0.0.1:${b.port}`],
        http: { trustedProxies: [`${PROXY}/32`] },
        routes: routes('everyone'),
      },
    ],
  });
  const reload = (next: Routes): RouteSwapResult => {
    const listeners = [{ ...g.app.config.listeners[0]!, routes: next }];
    return g.app.replaceRoutes(routesUpdate({ listeners }, routesVersion(listeners)));
  };
  const stat = (map: 'closed' | 'denied', key: string): number =>
    (g.app.listeners[0]!.stats[map] as ReadonlyMap<string, number>).get(key) ?? 0;
  return { g, b, reload, stat };
}

interface Tunnel {
  socket: net.Socket;
  reader: WsReader;
}

/** A WebSocket through ipgate from `from` (via the trusted proxy when `xff` is given), proven to echo. */
async function tunnel(t: Test, g: AdminGate, from: string, path = '/ws', xff?: string): Promise<Tunnel> {
  const socket = await connect({ port: g.port(), localAddress: from });
  t.teardown(() => socket.destroy());
  const reader = new WsReader(socket);
  socket.write(wsHandshake(path, xff === undefined ? '' : `X-Forwarded-For: ${xff}\r\n`, WWW).text);
  t.match(await reader.head(), /^HTTP\/1\.1 101 /, `tunnel from ${xff ?? from} on ${path}: 101`);
  await reader.messages(1); // the echo's report
  await echoes(t, { socket, reader }, 'hello');
  return { socket, reader };
}

async function echoes(t: Test, tun: Tunnel, text: string): Promise<void> {
  tun.socket.write(wsFrame(1, Buffer.from(text), true));
  const [m] = await tun.reader.messages(1);
  t.equal(m!.payload.toString(), text, `echoed "${text}"`);
}

/** One request on an open keep-alive socket; the response (Content-Length framed). */
async function ask(s: net.Socket, path: string, extra = '', host = WWW): Promise<string> {
  s.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${extra}\r\n`);
  const head = (await readUntil(s, '\r\n\r\n', 5000)).toString('latin1');
  const len = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
  return head + (len > 0 ? (await readUntil(s, '\n', 5000)).toString('latin1') : '');
}

/** A keep-alive connection from `from` whose latest request went to `www` (200). */
async function keepAlive(t: Test, g: AdminGate, from: string, xff?: string): Promise<net.Socket> {
  const s = await connect({ port: g.port(), localAddress: from });
  t.teardown(() => s.destroy());
  const res = await ask(s, '/first', xff === undefined ? '' : `X-Forwarded-For: ${xff}\r\n`);
  t.match(res, new RegExp(`^HTTP/1\\.1 200 [\\s\\S]*/first\\|${xff ?? from}\n$`), `keep-alive from ${xff ?? from}: 200`);
  return s;
}

/** A request for /slow sent on a new connection from `from`; resolves once the backend holds it. */
async function inFlight(t: Test, gt: Gate, from: string): Promise<net.Socket> {
  const s = await connect({ port: gt.g.port(), localAddress: from });
  t.teardown(() => s.destroy());
  const before = gt.b.held();
  s.write(`GET /slow HTTP/1.1\r\nHost: ${WWW}\r\n\r\n`);
  await waitFor(() => gt.b.held() === before + 1, 5000, 'the backend holds the slow request');
  return s;
}

/** The slow response finishes (200, its body, Connection: close), then the connection closes. */
async function finishesThenCloses(t: Test, gt: Gate, s: net.Socket, from: string): Promise<void> {
  gt.b.release();
  const res = (await readAll(s, 5000)).toString('latin1');
  t.match(res, /^HTTP\/1\.1 200 [\s\S]*\r\nconnection: close\r\n/i, 'the response in flight finishes, with connection: close');
  t.ok(res.endsWith(`\r\n\r\n/slow|${from}\n`), 'its whole body');
}

t.test(
  "a reload narrowing www's list: the refused client's tunnel, in-flight and idle connections are cut; an allowed client's go on",
  async (t) => {
    const gt = await gate(t);
    const { g } = gt;
    const cut = await tunnel(t, g, '127.0.0.2');
    const kept = await tunnel(t, g, '127.0.0.3');
    const idleCut = await keepAlive(t, g, '127.0.0.2');
    const idleKept = await keepAlive(t, g, '127.0.0.3');
    const slow = await inFlight(t, gt, '127.0.0.2');

    const r = gt.reload(routes('few'));
    t.same(r, { problems: [], closed: { edge: 3 } }, 'three connections marked: the tunnel, the idle one, the one in flight');
    await closed(cut.socket, 3000);
    t.pass('the tunnel of 127.0.0.2 is cut at once');
    await closed(idleCut, 3000);
    t.pass('its idle keep-alive connection is closed at once');
    await finishesThenCloses(t, gt, slow, '127.0.0.2');
    await echoes(t, kept, 'still here');
    t.match(
      await ask(idleKept, '/again'),
      /^HTTP\/1\.1 200 [\s\S]*\/again\|127\.0\.0\.3\n$/,
      "the allowed client's keep-alive connection is served",
    );
    t.equal(gt.stat('denied', 'revoked'), 3, 'counted as revoked');
    await waitFor(() => gt.stat('closed', 'revoked') === 3, 3000, 'three connections closed as revoked');
    t.ok(g.logs.lines.filter((l) => l.msg === 'revoked').length === 3, 'each revocation logged');
    const fresh = await connect({ port: g.port(), localAddress: '127.0.0.2' });
    t.teardown(() => fresh.destroy());
    t.match(await ask(fresh, '/new'), /^HTTP\/1\.1 403 /, 'a new request from 127.0.0.2: 403');
  },
);

t.test('www moved by a reload to a store list: an edit of that list through the admin API cuts what it no longer admits', async (t) => {
  const gt = await gate(t);
  const { g } = gt;
  const cut = await tunnel(t, g, '127.0.0.2');
  const kept = await tunnel(t, g, '127.0.0.3');
  const idleCut = await keepAlive(t, g, '127.0.0.2');
  const idleKept = await keepAlive(t, g, '127.0.0.3');

  t.same(gt.reload(routes('partners')), { problems: [], closed: { edge: 0 } }, 'the store list admits both: nothing cut by the reload');
  await echoes(t, cut, 'moved');
  const slow = await inFlight(t, gt, '127.0.0.2');

  const cur = await g.api('GET', '/v1/allowlists/partners');
  const put = await g.api('PUT', '/v1/allowlists/partners', {
    headers: { 'if-match': cur.headers.etag! },
    body: { entries: [{ cidr: '127.0.0.3/32' }, { cidr: '198.51.100.3/32' }] },
  });
  t.equal(put.status, 200, 'the store list edited');
  await closed(cut.socket, 3000);
  t.pass('the tunnel of 127.0.0.2, admitted before the reload, is cut');
  await closed(idleCut, 3000);
  t.pass('its idle keep-alive connection too');
  await finishesThenCloses(t, gt, slow, '127.0.0.2');
  await echoes(t, kept, 'still here');
  t.match(await ask(idleKept, '/again'), /^HTTP\/1\.1 200 /, "the allowed client's keep-alive connection is served");
  t.equal(gt.stat('denied', 'revoked'), 3, 'counted as revoked');
  t.match(
    g.logs.lines.filter((l) => l.msg === 'closed connections no longer allowed'),
    [{ level: 'info', listener: 'edge', list: 'partners', closed: 3 }],
    'the list change logged with the three connections it cut',
  );
});

t.test(
  "a trusted proxy's clients: their tunnels and requests in flight are re-decided by X-Forwarded-For; the proxy's idle connection stays",
  async (t) => {
    const gt = await gate(t);
    const { g } = gt;
    const cut = await tunnel(t, g, PROXY, '/ws', '198.51.100.2');
    const kept = await tunnel(t, g, PROXY, '/ws', '198.51.100.3');
    const idle = await keepAlive(t, g, PROXY, '198.51.100.2');

    t.same(gt.reload(routes('few')), { problems: [], closed: { edge: 1 } });
    await closed(cut.socket, 3000);
    t.pass('the tunnel of 198.51.100.2 is cut');
    await echoes(t, kept, 'still here');
    t.match(
      await ask(idle, '/next', 'X-Forwarded-For: 198.51.100.3\r\n'),
      /^HTTP\/1\.1 200 [\s\S]*\/next\|198\.51\.100\.3\n$/,
      "the proxy's idle connection (its latest client now refused) stays: it speaks for others too",
    );
    t.match(
      await ask(idle, '/next', 'X-Forwarded-For: 198.51.100.2\r\n'),
      /^HTTP\/1\.1 403 /,
      'and its requests for the refused client get 403',
    );

    // Moved to the store list, then the list edited: the same by X-Forwarded-For.
    t.same(gt.reload(routes('partners')), { problems: [], closed: { edge: 0 } });
    const slow = await connect({ port: g.port(), localAddress: PROXY });
    t.teardown(() => slow.destroy());
    slow.write(`GET /slow HTTP/1.1\r\nHost: ${WWW}\r\nX-Forwarded-For: 198.51.100.3\r\n\r\n`);
    await waitFor(() => gt.b.held() === 1, 5000, 'the backend holds the slow request');
    const cur = await g.api('GET', '/v1/allowlists/partners');
    await g.api('PUT', '/v1/allowlists/partners', {
      headers: { 'if-match': cur.headers.etag! },
      body: { entries: [{ cidr: '127.0.0.0/8' }] },
    });
    await closed(kept.socket, 3000);
    t.pass("the tunnel of 198.51.100.3 is cut by the store list's edit");
    await finishesThenCloses(t, gt, slow, '198.51.100.3');
  },
);

t.test(
  "a reload that gives a connection's host and path to another route closes it (route_removed); one whose path stays on www goes on",
  async (t) => {
    const gt = await gate(t);
    const { g } = gt;
    const moved = await tunnel(t, g, '127.0.0.3', '/chat/room');
    const stays = await tunnel(t, g, '127.0.0.3', '/ws');
    const chat: Routes = [{ name: 'chat', hosts: [WWW], paths: [{ path: '/chat', match: 'prefix' }], allowlist: 'everyone' }];
    t.same(
      gt.reload(routes('everyone', chat)),
      { problems: [], closed: { edge: 1 } },
      'one marked, though a route named www is still there',
    );
    await closed(moved.socket, 3000);
    t.pass('the tunnel on www.example.com/chat/room (now route chat) is closed');
    await echoes(t, stays, 'still www');
    await waitFor(() => gt.stat('closed', 'route_removed') === 1, 3000, 'closed as route_removed');
    t.equal(gt.stat('denied', 'revoked'), 0, 'not a revocation');
  },
);

t.test('revokeLive off: a reload narrowing the list cuts nothing (only removed routes close)', async (t) => {
  const gt = await gate(t, false);
  const { g } = gt;
  const tun = await tunnel(t, g, '127.0.0.2');
  const idle = await keepAlive(t, g, '127.0.0.2');
  t.same(gt.reload(routes('few')), { problems: [], closed: { edge: 0 } });
  await echoes(t, tun, 'kept');
  t.match(await ask(idle, '/next'), /^HTTP\/1\.1 403 /, 'the idle connection stays; its next request is decided by the new list');
});
