/**
 * What an operator reads about each HTTP request (issue "Operations"), on every engine: the access
 * line's host, user agent, upstream status and time, and request id; the X-Request-ID a backend
 * receives (a trusted proxy's kept, anyone else's replaced); upgraded requests name their
 * upstream; and the per-upstream series (responses by class, failures, response time).
 */
import http from 'node:http';
import type net from 'node:net';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { deadPort, listenLoopback } from '../helpers/http';
import { connect, readAll, readUntil, waitFor } from '../helpers/net';

const ENGINES = ['relay'] as const;
type Line = Record<string, unknown>;

interface Seen {
  requestId: string | undefined;
  url: string | undefined;
}

async function backend(t: Test, seen: Seen[]): Promise<number> {
  const server = http.createServer((req, res) => {
    seen.push({ requestId: req.headers['x-request-id'] as string | undefined, url: req.url });
    res.statusCode = req.url === '/missing' ? 404 : 200;
    res.end('ok\n');
  });
  server.on('upgrade', (req, socket: net.Socket) => {
    seen.push({ requestId: req.headers['x-request-id'] as string | undefined, url: req.url });
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    socket.on('data', (d: Buffer) => socket.write(d));
    socket.on('end', () => socket.end()); // node:http server sockets are half-open: close with the client
    socket.on('error', () => undefined);
  });
  return listenLoopback(t, server);
}

function lines(g: Started): Line[] {
  return g.logs.lines.filter((l) => l.msg === 'access' && l.kind === 'http');
}

async function line(g: Started, pred: (l: Line) => boolean): Promise<Line> {
  let found: Line | undefined;
  await waitFor(() => (found = lines(g).find(pred)) !== undefined, 10_000, 'access line');
  return found!;
}

for (const engine of ENGINES) {
  t.test(`${engine}: access line fields, X-Request-ID, upgrades, per-upstream series`, async (t) => {
    const seen: Seen[] = [];
    const port = await backend(t, seen);
    const dead = await deadPort();
    const g = await startIpgate(
      {
        logging: { denialSummaryIntervalMs: 0 },
        allowlists: { main: ['127.0.0.0/8', '198.51.100.0/24'] },
        listeners: [
          {
            name: 'web',
            mode: 'http',
            listen: '127.0.0.1:0',
            allowlist: 'main',
            upstreams: [`127.0.0.1:${port}`],
            http: { engine, trustedProxies: ['127.0.0.9/32'] },
          },
          { name: 'down', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${dead}`], http: { engine } },
        ],
      },
      'info',
    );
    t.teardown(() => g.app.shutdown(0));
    const send = async (path: string, from: string, headers: string, listener = 'web'): Promise<string> => {
      const c = await connect({ port: g.port(listener), localAddress: from });
      c.write(`GET ${path} HTTP/1.1\r\nHost: app.example\r\nUser-Agent: probe/1.0\r\n${headers}Connection: close\r\n\r\n`);
      return (await readAll(c)).toString();
    };
    t.match(await send('/plain', '127.0.0.5', 'X-Request-ID: forged-by-client\r\n'), /^HTTP\/1\.1 200 /);
    t.match(await send('/viaproxy', '127.0.0.9', 'X-Request-ID: abc-123\r\nX-Forwarded-For: 198.51.100.7\r\n'), /^HTTP\/1\.1 200 /);
    t.match(await send('/missing', '127.0.0.5', ''), /^HTTP\/1\.1 404 /);
    t.match(await send('/x', '127.0.0.5', '', 'down'), /^HTTP\/1\.1 502 /);

    const plain = await line(g, (l) => l.path === '/plain');
    t.equal(plain.host, 'app.example', 'host');
    t.equal(plain.userAgent, 'probe/1.0', 'user agent');
    t.equal(plain.upstreamStatus, 200, 'upstream status');
    t.type(plain.upstreamMs, 'number', 'upstream time');
    t.match(plain.requestId, /^[0-9a-f]{32}$/, 'a generated request id');
    t.not(plain.requestId, 'forged-by-client', "a client's own id is replaced");
    t.equal(seen.find((s) => s.url === '/plain')?.requestId, plain.requestId, 'the backend got the logged id');
    const proxied = await line(g, (l) => l.path === '/viaproxy');
    t.equal(proxied.requestId, 'abc-123', "a trusted proxy's id is kept");
    t.equal(seen.find((s) => s.url === '/viaproxy')?.requestId, 'abc-123', 'and forwarded');
    const failed = await line(g, (l) => l.listener === 'down');
    t.equal(failed.status, 502, 'ipgate answered 502');
    t.equal(failed.upstreamStatus, null, 'no upstream status when ipgate answered');
    t.equal(failed.upstreamMs, null, 'no upstream time either');

    // An upgrade names its upstream.
    const c = await connect({ port: g.port() });
    c.write('GET /ws HTTP/1.1\r\nHost: app.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    await readUntil(c, '\r\n\r\n');
    c.write('ping');
    await readUntil(c, 'ping');
    c.destroy();
    const up = await line(g, (l) => l.path === '/ws');
    t.equal(up.upstream, `127.0.0.1:${port}`, 'an upgraded request logs its upstream');
    t.equal(up.status, 101);
    t.match(up.requestId, /^[0-9a-f]{32}$/);

    const text = await g.app.metrics.registry.metrics();
    const target = `listener="web",upstream="127.0.0.1:${port}"`;
    t.match(text, new RegExp(`ipgate_upstream_responses_total\\{${target},code_class="2xx"\\} 2\\n`), '2xx per upstream');
    t.match(text, new RegExp(`ipgate_upstream_responses_total\\{${target},code_class="4xx"\\} 1\\n`), '4xx per upstream');
    t.match(text, new RegExp(`ipgate_upstream_responses_total\\{${target},code_class="1xx"\\} 1\\n`), 'the 101 per upstream');
    t.match(text, new RegExp(`ipgate_upstream_response_seconds_count\\{${target}\\} 4\\n`), 'response time per upstream');
    t.match(
      text,
      new RegExp(`ipgate_upstream_failures_total\\{listener="down",upstream="127.0.0.1:${dead}",reason="upstream_refused"\\} 1\\n`),
      'failures per upstream',
    );
  });
}
