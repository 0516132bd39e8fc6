/**
 * The undici engine (`http: { engine: 'undici' }`, the default) end to end over real loopback
 * sockets, against real backends: what is specific to undici-engine.ts (identity headers as built,
 * hop-by-hop both ways, pool reuse, bound and idle close, 502 and 504 including a request still
 * queued for a pooled socket, client abort, failure after the headers, streamed bodies byte-exact
 * with backpressure, upgrades left on http-proxy, pools released at shutdown). The engine-neutral
 * guarantees (round robin with failover, the upstream timeout, a client leaving while queued, ...)
 * are test/integration/http-forward.test.ts, which runs on undici by default and again on
 * http-proxy (http-forward-http-proxy.test.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import t, { type Test } from 'tap';
import { createHttpEcho } from '../../src/echo/echo-server';
import { startIpgate, type Started } from '../helpers/ipgate';
import { connect, readAll, readUntil, waitFor } from '../helpers/net';
import { countingBackend, deadPort, request, type CountingBackend } from '../helpers/http';

async function echo(t: Test): Promise<number> {
  const server = createHttpEcho();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  return (server.address() as net.AddressInfo).port;
}

async function backend(t: Test, handler?: http.RequestListener): Promise<CountingBackend> {
  const b = await countingBackend(handler);
  t.teardown(() => b.close());
  return b;
}

async function gate(t: Test, listener: Record<string, unknown>, allow: string[] = ['127.0.0.1/32', '127.0.0.3/32']): Promise<Started> {
  const http = { engine: 'undici', ...(listener.http as Record<string, unknown> | undefined) };
  const g = await startIpgate({
    allowlists: { main: allow },
    listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', ...listener, http }],
  });
  t.teardown(() => g.app.shutdown(0));
  return g;
}

const stats = (g: Started) => g.app.listeners[0]!.stats;

async function raw(port: number, bytes: string | Buffer, localAddress = '127.0.0.1'): Promise<string> {
  const c = await connect({ port, localAddress });
  c.write(bytes);
  return (await readAll(c)).toString('latin1');
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

t.test('identity headers exactly as request-headers.ts builds them; forged ones discarded', async (t) => {
  const g = await gate(t, { upstreams: [`127.0.0.1:${await echo(t)}`], http: { forwarded: true } });
  const r = await request({
    port: g.port(), localAddress: '127.0.0.3', path: '/p?q=1',
    headers: {
      host: 'app.example:8080',
      'x-forwarded-for': '198.51.100.66', 'x-real-ip': '198.51.100.66', forwarded: 'for=198.51.100.66',
      'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https', 'x-forwarded-port': '443',
      'x-forwarded-prefix': '/evil', 'true-client-ip': '198.51.100.66', 'x-client-ip': '198.51.100.66',
    },
  });
  t.equal(r.status, 200);
  const body = r.json();
  t.equal(body.client, '127.0.0.3');
  t.equal(body.url, '/p?q=1', 'path and query untouched');
  t.same(body.headers, {
    'x-real-ip': '127.0.0.3',
    'x-forwarded-for': '127.0.0.3',
    'x-forwarded-proto': 'http',
    'x-forwarded-host': 'app.example:8080',
    'x-forwarded-port': String(g.port()),
    forwarded: 'for=127.0.0.3;proto=http;host="app.example:8080"',
    host: 'app.example:8080',
  }, 'every forwarding header is ours');
  t.equal(stats(g).httpResponses.get('2xx'), 1);
});

t.test('trusted proxy: X-Forwarded-For chain extended, per-request decision', async (t) => {
  const b = await backend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`], http: { trustedProxies: ['127.0.0.5/32'] } }, ['203.0.113.0/24']);
  const ok = await request({ port: g.port(), localAddress: '127.0.0.5', headers: { 'x-forwarded-for': '203.0.113.7', 'x-forwarded-proto': 'https' } });
  t.equal(ok.status, 200);
  const h = b.requests[0]!.headers;
  t.equal(h['x-forwarded-for'], '203.0.113.7, 127.0.0.5');
  t.equal(h['x-real-ip'], '203.0.113.7');
  t.equal(h['x-forwarded-proto'], 'https');
  const denied = await request({ port: g.port(), localAddress: '127.0.0.5', headers: { 'x-forwarded-for': '198.51.100.1' } });
  t.equal(denied.status, 403);
  t.equal(b.requests.length, 1, 'the denied request did not reach the backend');
});

t.test('denied direct client: 403, connection closed, the backend receives nothing', async (t) => {
  const b = await backend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`], http: { deniedBody: 'go away\n' } });
  const res = await raw(g.port(), 'GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n', '127.0.0.4');
  t.match(res, /^HTTP\/1\.1 403 Forbidden\r\n/);
  t.match(res, /\r\nConnection: close\r\n/i);
  t.match(res, /\r\n\r\ngo away\n$/, 'configured body, and only one response');
  t.equal(b.connections, 0, 'no upstream connection was made');
  t.equal(b.requests.length, 0);
});

t.test('keep-alive requests reuse upstream connections; the pool is bounded by upstreamMaxSockets', async (t) => {
  const b = await backend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  for (let i = 0; i < 20; i++) t.equal((await request({ port: g.port(), agent })).status, 200);
  t.equal(b.requests.length, 20);
  t.equal(b.connections, 1, '20 keep-alive requests, one upstream connection');
  t.ok(stats(g).upstreamConnect.count >= 1, 'connect time observed');

  let inFlight = 0;
  let peak = 0;
  const slow = await backend(t, (_req, res) => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    setTimeout(() => { inFlight--; res.end('ok\n'); }, 50);
  });
  const bounded = await gate(t, { upstreams: [`127.0.0.1:${slow.port}`], http: { upstreamMaxSockets: 2 } });
  const replies = await Promise.all(Array.from({ length: 8 }, () => request({ port: bounded.port() })));
  t.same(replies.map((r) => r.status), Array(8).fill(200));
  t.ok(slow.connections <= 2, `${slow.connections} upstream connections for 8 concurrent requests (max 2)`);
  t.ok(peak <= 2, `at most 2 requests at the backend at once (${peak})`);
});

t.test('upstream idle sockets are closed after upstreamIdleTimeoutMs', async (t) => {
  const b = await backend(t);
  let closedUp = 0;
  b.server.on('connection', (s: net.Socket) => s.on('close', () => closedUp++));
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`], http: { upstreamIdleTimeoutMs: 300 } });
  t.equal((await request({ port: g.port() })).status, 200);
  await waitFor(() => closedUp === 1, 3000, 'idle upstream socket closed');
  t.pass('closed');
});

t.test('client Connection: close and hop-by-hop headers are not forwarded; the pool survives', async (t) => {
  const b = await backend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  for (let i = 0; i < 5; i++) {
    const res = await raw(g.port(), 'GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=1\r\n' +
      'TE: trailers\r\nProxy-Connection: close\r\nX-End: kept\r\n\r\n');
    t.match(res, /^HTTP\/1\.1 200 /);
  }
  t.equal(b.connections, 1, '5 client connections each ending with Connection: close, one upstream connection');
  const h = b.requests[4]!.headers;
  t.equal(h.connection, 'keep-alive');
  t.equal(h['x-hop'], undefined);
  t.equal(h['keep-alive'], undefined);
  t.equal(h.te, undefined);
  t.equal(h['proxy-connection'], undefined);
  t.equal(h['x-end'], 'kept');
});

t.test('upstream Connection: close and hop-by-hop response headers do not reach or close the client', async (t) => {
  const b = await backend(t, (_req, res) => {
    res.setHeader('Connection', 'close, X-Internal');
    res.setHeader('X-Internal', 'secret');
    res.setHeader('Keep-Alive', 'timeout=1');
    res.setHeader('Set-Cookie', ['a=1', 'b=2']);
    res.end('body');
  });
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  const c = await connect({ port: g.port() });
  c.write('GET /1 HTTP/1.1\r\nHost: a\r\n\r\n');
  const first = (await readUntil(c, 'body')).toString();
  t.notMatch(first, /x-internal/i);
  t.notMatch(first, /timeout=1/i);
  t.notMatch(first, /connection: close/i);
  t.match(first, /set-cookie: a=1\r\nset-cookie: b=2/i, 'repeated headers kept as separate lines');
  c.write('GET /2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
  const second = (await readAll(c)).toString();
  t.match(second, /^HTTP\/1\.1 200 /, 'second request served on the same client connection');
  t.equal(b.connections, 2, 'the upstream closed its connection each time');
});

t.test('502 on reset and refused; ipgate keeps serving', async (t) => {
  const b = await backend(t, (req) => req.socket.destroy());
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  const r = await request({ port: g.port() });
  t.equal(r.status, 502, 'reset -> 502');
  t.equal(r.body, 'Bad Gateway\n');
  await waitFor(() => stats(g).upstreamErrors.get('upstream_reset') === 1);

  const refused = await gate(t, { upstreams: [`127.0.0.1:${await deadPort()}`] });
  const r2 = await request({ port: refused.port() });
  t.equal(r2.status, 502, 'refused -> 502');
  t.equal(stats(refused).upstreamErrors.get('upstream_refused'), 1);
  const ok = await gate(t, { upstreams: [`127.0.0.1:${(await backend(t)).port}`] });
  t.equal((await request({ port: ok.port() })).status, 200);
});

t.test('504 for a request still queued for a pooled socket', async (t) => {
  const b = await backend(t, (_req, res) => { setTimeout(() => res.end('late\n'), 1500); });
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`], http: { upstreamTimeoutMs: 400, upstreamMaxSockets: 1 } });
  const [r1, r2] = await Promise.all([request({ port: g.port() }), request({ port: g.port() })]);
  t.same([r1.status, r2.status], [504, 504]);
  t.equal((await request({ port: g.port(), path: '/after' })).status, 504, 'still answering');
});

t.test('a client aborting mid-response aborts the upstream request', async (t) => {
  let backendClosed = false;
  let backendFinished = false;
  const b = await backend(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first chunk\n');
    res.on('close', () => { backendClosed = true; backendFinished = res.writableFinished; });
  });
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  const c = await connect({ port: g.port() });
  c.write('GET /stream HTTP/1.1\r\nHost: a\r\n\r\n');
  await readUntil(c, 'first chunk');
  c.destroy();
  await waitFor(() => backendClosed, 3000, 'backend response closed');
  t.notOk(backendFinished, 'the backend\'s response was cut, not completed');
});

t.test('an upstream failing after the headers went out: the client connection is cut, no second status', async (t) => {
  const b = await backend(t, (req, res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('partial');
    setTimeout(() => req.socket.destroy(), 50);
  });
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  const res = await raw(g.port(), 'GET / HTTP/1.1\r\nHost: a\r\n\r\n');
  t.match(res, /^HTTP\/1\.1 200 /);
  t.equal(res.match(/HTTP\/1\.1/g)!.length, 1, 'one status line');
  t.match(res, /partial$/);
});

t.test('chunked request body streamed upstream byte-exact; a chunked DELETE is framed', async (t) => {
  const seen: { method: string; te: string | undefined; hash: string; len: number }[] = [];
  const b = await backend(t, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method!, te: req.headers['transfer-encoding'], hash: sha(body), len: body.length });
      res.end('ok');
    });
  });
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  const payload = randomBytes(3_000_000);
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.request({ port: g.port(), method: 'PUT', path: '/up', agent: false }, (res) => { res.resume(); resolve(res.statusCode!); });
    req.on('error', reject);
    // Written in uneven pieces with pauses: the body streams (chunked) rather than arriving whole.
    let off = 0;
    const step = (): void => {
      if (off >= payload.length) { req.end(); return; }
      const n = 1 + Math.floor(Math.random() * 200_000);
      req.write(payload.subarray(off, off + n));
      off += n;
      setImmediate(step);
    };
    step();
  });
  t.equal(status, 200);
  t.same(seen[0], { method: 'PUT', te: 'chunked', hash: sha(payload), len: payload.length }, 'byte-exact, chunked upstream');

  const smuggled = 'GET /admin HTTP/1.1\r\nHost: a\r\n\r\n';
  const chunk = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
  const res = await raw(g.port(), `DELETE /item HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunk}`);
  t.match(res, /^HTTP\/1\.1 200 /);
  await waitFor(() => seen.length >= 2);
  t.equal(seen[1]!.method, 'DELETE');
  t.equal(seen[1]!.len, smuggled.length, 'the body arrived as the DELETE body, not as a second request');
  t.equal(seen.length, 2);
});

t.test('POST with Content-Length streams through unchanged', async (t) => {
  const g = await gate(t, { upstreams: [`127.0.0.1:${await echo(t)}`] });
  const body = 'x'.repeat(200_000);
  const r = await request({ port: g.port(), method: 'POST', body, headers: { 'content-type': 'text/plain' } });
  t.equal(r.json().bodyBytes, 200_000);
});

t.test('a large streamed response reaches a slow client byte-exact, with backpressure', async (t) => {
  const payload = randomBytes(16 * 1024 * 1024);
  let backendDone = 0;
  const b = await backend(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' }); // no length: chunked
    let off = 0;
    const pump = (): void => {
      while (off < payload.length) {
        const ok = res.write(payload.subarray(off, off + 65_536));
        off += 65_536;
        if (!ok) { res.once('drain', pump); return; }
      }
      res.end(() => { backendDone = Date.now(); });
    };
    pump();
  });
  const g = await gate(t, { upstreams: [`127.0.0.1:${b.port}`] });
  const c = await connect({ port: g.port() });
  c.write('GET /big HTTP/1.1\r\nHost: a\r\n\r\n');
  // Do not read for a while: the backend must be held back, not buffered into ipgate's memory.
  c.pause();
  await new Promise((r) => setTimeout(r, 500));
  t.equal(backendDone, 0, 'backend still blocked while the client does not read');
  c.resume();
  const chunks: Buffer[] = [];
  c.on('data', (d: Buffer) => chunks.push(d));
  await waitFor(() => {
    const all = Buffer.concat(chunks);
    return all.includes('\r\n0\r\n\r\n', all.length - 7);
  }, 20_000, 'whole response');
  c.destroy();
  const all = Buffer.concat(chunks);
  const headEnd = all.indexOf('\r\n\r\n');
  t.match(all.subarray(0, headEnd).toString(), /transfer-encoding: chunked/i);
  // De-chunk.
  const parts: Buffer[] = [];
  let p = headEnd + 4;
  for (;;) {
    const eol = all.indexOf('\r\n', p);
    const n = parseInt(all.subarray(p, eol).toString(), 16);
    if (n === 0) break;
    parts.push(all.subarray(eol + 2, eol + 2 + n));
    p = eol + 2 + n + 2;
  }
  t.equal(sha(Buffer.concat(parts)), sha(payload), '16 MiB byte-exact');
});

t.test('upgrades stay on http-proxy with the undici engine', async (t) => {
  const up = net.createServer((s) => {
    s.once('data', () => {
      s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
      s.pipe(s);
    });
  });
  await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => up.close(() => r())));
  const sockets: net.Socket[] = [];
  up.on('connection', (s) => sockets.push(s));
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  const g = await gate(t, { upstreams: [`127.0.0.1:${(up.address() as net.AddressInfo).port}`] });
  const c = await connect({ port: g.port() });
  c.write('GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
  await readUntil(c, '\r\n\r\n');
  c.write('ping-through-tunnel');
  await readUntil(c, 'ping-through-tunnel');
  t.pass('tunnel echoes');
  c.destroy();
});

t.test('shutdown releases the undici pools', async (t) => {
  const b = await backend(t);
  let upstreamClosed = 0;
  b.server.on('connection', (s: net.Socket) => s.on('close', () => upstreamClosed++));
  const g = await startIpgate({
    allowlists: { main: ['127.0.0.1/32'] },
    listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${b.port}`], http: { engine: 'undici' } }],
  });
  t.equal((await request({ port: g.port() })).status, 200);
  await g.app.shutdown(0);
  await waitFor(() => upstreamClosed === 1, 3000, 'pooled upstream socket closed on shutdown');
  t.pass('released');
});
