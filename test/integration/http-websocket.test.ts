/**
 * WebSocket (and other upgrades) through an HTTP listener, over real sockets: the handshake is
 * done by hand (RFC 6455) against the built-in echo, which reports the identity headers it saw in
 * its first message.
 */
import http from 'node:http';
import type net from 'node:net';
import t, { type Test } from 'tap';
import { createHttpEcho, wsAccept, wsFrame } from '../../src/echo/echo-server';
import { encodeProxyV1 } from '../../src/proxy-protocol/encoder';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, connect, readAll, waitFor } from '../helpers/net';
import { deadPort, listenLoopback } from '../helpers/http';
import { wsHandshake as handshake, WsReader as Reader } from '../helpers/websocket';

async function echo(t: Test): Promise<http.Server> {
  const server = createHttpEcho();
  await listenLoopback(t, server);
  return server;
}
const portOf = (s: net.Server): number => (s.address() as net.AddressInfo).port;

async function gate(t: Test, listener: Record<string, unknown>, allow = ['127.0.0.3/32']): Promise<Started> {
  const g = await startIpgate({
    allowlists: { main: allow },
    listeners: [
      {
        name: 'ws',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        ...listener,
        // IPGATE_TEST_HTTP_ENGINE=relay: the relay hands upgrades to the node:http path (http-websocket-relay.test.ts).
        ...(process.env.IPGATE_TEST_HTTP_ENGINE !== undefined
          ? { http: { engine: process.env.IPGATE_TEST_HTTP_ENGINE, ...((listener.http as Record<string, unknown> | undefined) ?? {}) } }
          : {}),
      },
    ],
  });
  t.teardown(() => g.app.shutdown(0));
  return g;
}

t.test('WebSocket echo through ipgate: 101, identity headers at the backend, messages both ways', async (t) => {
  const g = await gate(t, { upstreams: [`127.0.0.1:${portOf(await echo(t))}`], http: { forwarded: true } });
  const c = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  const hs = handshake('/chat', 'X-Forwarded-For: 198.51.100.66\r\nX-Real-IP: 198.51.100.66\r\n');
  c.write(hs.text);
  const r = new Reader(c);
  const head = await r.head();
  t.match(head, /^HTTP\/1\.1 101 /);
  t.match(head, new RegExp(`sec-websocket-accept: ${wsAccept(hs.key).replace(/[+/]/g, '\\$&')}\r\n`, 'i'), 'backend accept key relayed');
  const [first] = await r.messages(1);
  const report = JSON.parse(first!.payload.toString()) as { client: string; url: string; headers: Record<string, string> };
  t.equal(report.client, '127.0.0.3', 'X-Real-IP is the client');
  t.equal(report.url, '/chat');
  t.equal(report.headers['x-forwarded-for'], '127.0.0.3', 'forged X-Forwarded-For discarded');
  t.equal(report.headers['x-forwarded-proto'], 'http');
  t.equal(report.headers['x-forwarded-host'], 'ws.example');
  t.equal(report.headers['x-forwarded-port'], String(g.port()));
  t.equal(report.headers.forwarded, 'for=127.0.0.3;proto=http;host=ws.example');

  c.write(wsFrame(1, Buffer.from('hello'), true));
  c.write(wsFrame(2, Buffer.alloc(70_000, 7), true));
  const [text, bin] = await r.messages(2);
  t.equal(text!.payload.toString(), 'hello', 'text echoed');
  t.equal(bin!.payload.length, 70_000, 'large binary echoed');
  t.equal(g.app.listeners[0]!.stats.httpUpgrades, 1);
  c.destroy();
  await waitFor(() => g.app.listeners[0]!.connections.size === 0);
});

t.test('upgrade in the same segment as a PROXY v1 header: the PROXY source is the client', async (t) => {
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${portOf(await echo(t))}`],
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.2/32'] },
    },
    ['198.51.100.0/24'],
  );
  const c = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  c.write(
    Buffer.concat([
      encodeProxyV1({ address: '198.51.100.8', port: 5000 }, { address: '192.0.2.1', port: 80 }),
      Buffer.from(handshake().text),
    ]),
  );
  const r = new Reader(c);
  t.match(await r.head(), /^HTTP\/1\.1 101 /);
  const [first] = await r.messages(1);
  t.equal((JSON.parse(first!.payload.toString()) as { client: string }).client, '198.51.100.8');
  c.destroy();
});

t.test('denied upgrade: 403, the backend sees no connection', async (t) => {
  const server = await echo(t);
  let backendConnections = 0;
  server.on('connection', () => backendConnections++);
  const g = await gate(t, { upstreams: [`127.0.0.1:${portOf(server)}`] });
  const c = await connect({ port: g.port(), localAddress: '127.0.0.4' });
  c.write(handshake().text);
  const res = (await readAll(c)).toString();
  t.match(res, /^HTTP\/1\.1 403 Forbidden\r\n/);
  t.equal(backendConnections, 0);
});

t.test('denied upgrade behind a trusted proxy: 403 by X-Forwarded-For', async (t) => {
  const g = await gate(t, { upstreams: [`127.0.0.1:${portOf(await echo(t))}`], http: { trustedProxies: ['127.0.0.2/32'] } }, [
    '198.51.100.0/24',
  ]);
  const ok = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  ok.write(handshake('/', 'X-Forwarded-For: 198.51.100.4\r\n').text);
  t.match(await new Reader(ok).head(), /^HTTP\/1\.1 101 /, 'allowed client behind the proxy upgraded');
  ok.destroy();
  const no = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  no.write(handshake('/', 'X-Forwarded-For: 198.51.100.4, 203.0.113.9\r\n').text);
  t.match((await readAll(no)).toString(), /^HTTP\/1\.1 403 /, 'the rightmost untrusted address decides');
});

t.test('a client reset closes the upstream tunnel (http-proxy would only half-close it)', async (t) => {
  // A backend that accepts the upgrade and never ends its side on its own (HTTP server sockets
  // are half-open capable): only a destroyed tunnel reaches it as a close.
  const server = http.createServer();
  const upstreamSockets: net.Socket[] = [];
  server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
    upstreamSockets.push(socket);
    socket.on('error', () => undefined);
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Accept: ${wsAccept(String(req.headers['sec-websocket-key']))}\r\n\r\n`,
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        upstreamSockets.forEach((s) => {
          s.destroy();
        });
        server.close(() => r());
      }),
  );
  const g = await gate(t, { upstreams: [`127.0.0.1:${portOf(server)}`] });
  const c = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  c.write(handshake().text);
  await new Reader(c).head();
  await waitFor(() => upstreamSockets.length === 1);
  const up = upstreamSockets[0]!;
  // The backend keeps talking: into a destroyed tunnel its writes fail (RST, EPIPE) and its socket
  // closes; into a half-closed one (http-proxy: proxySocket.end() on the client's error) they
  // would keep succeeding forever.
  const talk = setInterval(() => {
    if (!up.destroyed) up.write(wsFrame(1, Buffer.from('tick')));
  }, 20);
  t.teardown(() => clearInterval(talk));
  c.resetAndDestroy(); // abrupt: a TCP RST, no close frame
  await waitFor(() => up.destroyed, 3000, 'backend socket closed');
  t.pass('backend saw the tunnel close');
});

t.test('revocation cuts an open WebSocket within 1 s', async (t) => {
  const g = await gate(t, { upstreams: [`127.0.0.1:${portOf(await echo(t))}`] });
  const c = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  c.write(handshake().text);
  await new Reader(c).head();
  const start = Date.now();
  g.app.lists.apply('main', [], 'v2');
  await closed(c, 3000);
  t.ok(Date.now() - start < 1000, `closed in ${Date.now() - start} ms`);
  await waitFor(() => g.app.listeners[0]!.stats.denied.get('revoked') === 1);
});

t.test('upgrade to a dead upstream: 502', async (t) => {
  const g = await gate(t, { upstreams: [`127.0.0.1:${await deadPort()}`] });
  const c = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  c.write(handshake().text);
  t.match((await readAll(c)).toString(), /^HTTP\/1\.1 502 /);
});

t.test('an upstream that refuses the upgrade: its answer is relayed', async (t) => {
  const server = http.createServer((_req, res) => res.end('plain'));
  server.on('upgrade', (_req, socket: net.Socket) =>
    socket.end('HTTP/1.1 426 Upgrade Required\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope'),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const g = await gate(t, { upstreams: [`127.0.0.1:${portOf(server)}`] });
  const c = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  c.write(handshake().text);
  const res = (await readAll(c)).toString();
  t.match(res, /^HTTP\/1\.1 426 /);
  t.match(res, /nope$/);
  // Recorded as the upstream's answer (and its timer stopped), not as a request without response.
  await waitFor(() => g.app.listeners[0]!.connections.size === 0);
  t.equal(g.app.listeners[0]!.stats.httpResponses.get('4xx'), 1, 'counted as 4xx');
  t.equal(g.app.listeners[0]!.stats.httpResponses.get('none'), undefined);
});
