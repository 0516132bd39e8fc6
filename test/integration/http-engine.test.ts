/**
 * The one HTTP engine (issue "One HTTP engine that owns the connection"): what moved into it from
 * node:http and http-proxy, over real loopback sockets: the pool bound and the wait for a socket,
 * a backend that closes pooled sockets at random, upstream names resolved with a cache and
 * failover across addresses, upgrades with an outbound PROXY header, and the tunnel's half-close
 * and backpressure.
 */
import dns from 'node:dns';
import net from 'node:net';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, connect, readUntil, waitFor } from '../helpers/net';
import { prng } from '../helpers/prng';
import { rawSocketsWanted } from '../../src/transport/raw-socket';

interface Backend {
  port: number;
  /** Connections accepted, and the most open at once. */
  connections: number;
  open: number;
  maxOpen: number;
  heads: string[];
  server: net.Server;
}

/**
 * A raw HTTP backend: `reply` answers each request head on a connection (`nth`: its index on that
 * connection; bodies are not expected here).
 */
async function backend(t: Test, reply: (sock: net.Socket, head: string, nth: number) => void, host = '127.0.0.1'): Promise<Backend> {
  const b: Backend = { port: 0, connections: 0, open: 0, maxOpen: 0, heads: [], server: null as unknown as net.Server };
  b.server = net.createServer((sock) => {
    b.connections++;
    b.open++;
    b.maxOpen = Math.max(b.maxOpen, b.open);
    sock.once('close', () => {
      b.open--;
    });
    sock.on('error', () => undefined);
    let buf = '';
    let nth = 0;
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      let i: number;
      while ((i = buf.indexOf('\r\n\r\n')) >= 0) {
        const head = buf.slice(0, i);
        buf = buf.slice(i + 4);
        b.heads.push(head);
        reply(sock, head, nth++);
      }
    });
  });
  await new Promise<void>((r) => b.server.listen(0, host, r));
  b.port = (b.server.address() as net.AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((r) => {
        b.server.close(() => r());
      }),
  );
  return b;
}

async function gate(t: Test, upstream: string, http: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.1/32'] },
      listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [upstream], http, ...extra }],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

/** One request on a new connection; the whole response (Content-Length framed) as text. */
async function get(port: number, path = '/', keep: net.Socket | null = null): Promise<{ text: string; sock: net.Socket }> {
  let sock = keep;
  if (sock === null) {
    sock = await connect({ port });
    sock.on('error', () => undefined); // once per socket: a kept one already has it
  }
  sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  const head = (await readUntil(sock, '\r\n\r\n')).toString('latin1');
  // Every body in this file (the backends' and ipgate's canned ones) is one line.
  const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
  const text = len > 0 ? head + (await readUntil(sock, '\n')).toString('latin1') : head;
  return { text, sock };
}

const ok = (body: string): string => `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

t.test('upstreamMaxSockets bounds the pool: 8 concurrent requests, never more than 2 upstream connections, all answered', async (t) => {
  const b = await backend(t, (sock, head) => {
    const path = head.split(' ')[1]!;
    setTimeout(() => sock.write(ok(`${path}\n`)), 60);
  });
  const g = await gate(t, `127.0.0.1:${b.port}`, { upstreamMaxSockets: 2 });
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => get(g.port(), `/r${i}`)));
  results.forEach((r, i) => {
    t.match(r.text, /^HTTP\/1\.1 200 /, `request ${i} answered`);
    t.match(r.text, `/r${i}\n`, `request ${i} got its own response`);
    r.sock.destroy();
  });
  t.ok(b.maxOpen <= 2, `at most 2 upstream connections open at once (saw ${b.maxOpen})`);
  t.equal(b.heads.length, 8, 'the backend saw each request once');
});

t.test('a request waiting for a pooled socket past upstreamTimeoutMs gets 504, and never reaches the backend', async (t) => {
  // The one socket the pool may open carries a response whose body never ends: it stays busy.
  const b = await backend(t, (sock, head) =>
    sock.write(head.startsWith('GET /held ') ? 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial' : ok('fine\n')),
  );
  const g = await gate(t, `127.0.0.1:${b.port}`, { upstreamMaxSockets: 1, upstreamTimeoutMs: 400 });
  const held = await connect({ port: g.port() });
  held.on('error', () => undefined);
  held.write('GET /held HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match((await readUntil(held, 'partial')).toString(), /^HTTP\/1\.1 200 /, 'the first response is under way');
  const at = Date.now();
  const queued = await get(g.port(), '/queued');
  t.match(queued.text, /^HTTP\/1\.1 504 /, 'the queued request: 504');
  t.ok(Date.now() - at >= 350, `answered when its upstream timeout ran out (${Date.now() - at} ms)`);
  t.match(queued.text, /\r\nconnection: close\r\n/i, 'and its connection closes');
  t.same(
    b.heads.map((h) => h.split(' ')[1]),
    ['/held'],
    'the queued request never went upstream',
  );
  t.equal(b.maxOpen, 1, 'one upstream connection');
  held.destroy();
  queued.sock.destroy();
  // The slot freed by the held exchange's end serves the next request.
  await waitFor(() => b.open === 0, 3000, 'the held upstream connection closed with its client');
  const next = await get(g.port(), '/next');
  t.match(next.text, /^HTTP\/1\.1 200 /, 'the pool serves again once the slot is free');
  next.sock.destroy();
});

t.test('a backend that closes pooled sockets at random: every idempotent bodiless request is answered 200', async (t) => {
  const rand = prng(20261202);
  // The backend drops a reused connection at a request without answering (30%): the race between
  // its keep-alive timeout and ipgate's reuse, made frequent.
  const b = await backend(t, (sock, head, nth) => {
    if (nth > 0 && rand() < 0.3) {
      sock.destroy();
      return;
    }
    sock.write(ok(`${head.split(' ')[1]!}\n`));
  });
  const g = await gate(t, `127.0.0.1:${b.port}`);
  const clients = await Promise.all([1, 2, 3].map(() => connect({ port: g.port() })));
  let answered = 0;
  for (let i = 0; i < 60; i++) {
    const c = clients[i % 3]!;
    const r = await get(g.port(), `/n${i}`, c);
    t.match(r.text, new RegExp(`^HTTP/1\\.1 200 [\\s\\S]*/n${i}\\n`), `request ${i}: 200 with its own body`);
    answered++;
  }
  clients.forEach((c) => {
    c.destroy();
  });
  t.equal(answered, 60);
  t.ok(b.connections > 3, `the backend's closes forced new upstream connections (${b.connections})`);
});

t.test('an upstream name: resolved once per TTL, and a refused address fails over to the next one', async (t) => {
  // The backend listens on 127.0.0.3 only; the name resolves to 127.0.0.2 (refused) first.
  const b = await backend(t, (sock, head) => sock.write(ok(`${head.split(' ')[1]!}\n`)), '127.0.0.3');
  let answer = [
    { address: '127.0.0.2', family: 4 },
    { address: '127.0.0.3', family: 4 },
  ];
  const asked: string[] = [];
  const real = dns.lookup;
  // The engine's cache asks dns.lookup (getaddrinfo) with {all: true}; this stands in for a
  // resolver whose answers the test controls. Other names still go to the real one.
  (dns as { lookup: unknown }).lookup = (host: string, opts: unknown, cb: (e: Error | null, a: unknown) => void): void => {
    if (host !== 'backend.test.invalid') {
      (real as unknown as (h: string, o: unknown, c: unknown) => void)(host, opts, cb);
      return;
    }
    asked.push(host);
    setImmediate(() => cb(null, answer));
  };
  t.teardown(() => {
    (dns as { lookup: unknown }).lookup = real;
  });
  const g = await gate(t, `backend.test.invalid:${b.port}`, { upstreamDnsTtlMs: 500, upstreamIdleTimeoutMs: 50 });
  for (let i = 0; i < 5; i++) {
    const r = await get(g.port(), `/a${i}`);
    t.match(r.text, /^HTTP\/1\.1 200 /, `request ${i}: answered through the second address`);
    r.sock.destroy();
    // A new upstream connection for each (the pooled one idles out after 50 ms).
    await waitFor(() => b.open === 0, 3000, 'the pooled connection idled out');
  }
  t.equal(asked.length, 1, 'five connections, one lookup within the TTL');
  t.equal(b.connections, 5, 'five upstream connections, all to the address that answers');
  answer = [{ address: '127.0.0.3', family: 4 }];
  await new Promise((r) => setTimeout(r, 550)); // the TTL is the behaviour under test
  const r = await get(g.port(), '/after-ttl');
  t.match(r.text, /^HTTP\/1\.1 200 /);
  r.sock.destroy();
  t.equal(asked.length, 2, 'asked again once the TTL passed');
});

/** A backend that reads an optional PROXY v1 line, then an upgrade request, answers 101 and echoes. */
async function upgradeBackend(t: Test): Promise<{ port: number; proxyLines: string[]; connections: number }> {
  const seen = { port: 0, proxyLines: [] as string[], connections: 0 };
  const server = net.createServer({ allowHalfOpen: true }, (sock) => {
    seen.connections++;
    sock.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d]);
      const text = buf.toString('latin1');
      if (text.startsWith('PROXY ') && !seen.proxyLines.includes(text.slice(0, text.indexOf('\r\n'))) && text.includes('\r\n')) {
        seen.proxyLines.push(text.slice(0, text.indexOf('\r\n')));
      }
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      sock.off('data', onData);
      sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
      const rest = buf.subarray(end + 4);
      if (rest.length > 0) sock.write(rest);
      // Echo, with backpressure; on the client's FIN: say goodbye and end.
      sock.on('data', (x: Buffer) => {
        if (!sock.write(x)) sock.pause();
      });
      sock.on('drain', () => sock.resume());
      sock.once('end', () => sock.end('bye\n'));
    };
    sock.on('data', onData);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  seen.port = (server.address() as net.AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
      }),
  );
  return seen;
}

async function upgrade(port: number, early = ''): Promise<net.Socket> {
  const c = await connect({ port, allowHalfOpen: true });
  c.on('error', () => undefined);
  c.write(`GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n${early}`);
  return c;
}

t.test('upgrades with an outbound PROXY header: each on its own upstream connection, the header naming its client', async (t) => {
  const b = await upgradeBackend(t);
  const g = await gate(t, `127.0.0.1:${b.port}`, {}, { outboundProxyProtocol: 'v1' });
  const c1 = await upgrade(g.port(), 'early');
  const got = (await readUntil(c1, 'early')).toString('latin1');
  t.match(got, /^HTTP\/1\.1 101 Switching Protocols\r\n/, '101 relayed');
  t.match(got, /\r\nUpgrade: echo\r\n/i, 'with its Upgrade header');
  t.match(got, /\r\n\r\nearly$/, 'bytes sent before the 101 reached the backend after the request');
  const c2 = await upgrade(g.port());
  await readUntil(c2, '\r\n\r\n');
  t.equal(b.connections, 2, 'one upstream connection per upgrade');
  t.equal(b.proxyLines.length, 2);
  for (const line of b.proxyLines) t.match(line, /^PROXY TCP4 127\.0\.0\.1 127\.0\.0\.1 \d+ \d+$/, 'the header names the client');
  t.not(b.proxyLines[0], b.proxyLines[1], 'each header names its own client connection (source port)');
  c1.destroy();
  c2.destroy();
});

t.test('a tunnel passes half-close both ways and keeps 4 MiB intact under backpressure', async (t) => {
  const b = await upgradeBackend(t);
  const g = await gate(t, `127.0.0.1:${b.port}`);
  const c = await upgrade(g.port());
  await readUntil(c, '\r\n\r\n');
  const payload = Buffer.alloc(4 * 1024 * 1024);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
  const chunks: Buffer[] = [];
  let slow = true;
  c.on('data', (d: Buffer) => {
    chunks.push(d);
    // A slow reader for the first part: the tunnel must pause the upstream, not buffer without bound.
    if (slow && chunks.length % 8 === 0) {
      c.pause();
      setTimeout(() => c.resume(), 5);
    }
  });
  const ended = new Promise<void>((r) => c.once('end', () => r()));
  c.write(payload);
  c.end(); // the client's FIN: the backend answers "bye" and ends
  await ended;
  slow = false;
  const all = Buffer.concat(chunks);
  t.equal(all.length, payload.length + 4, 'every byte echoed, then the goodbye');
  t.ok(all.subarray(0, payload.length).equals(payload), 'the echo is intact');
  t.equal(all.subarray(payload.length).toString(), 'bye\n', "data after the client's FIN still reached it (half-close)");
  await closed(c, 3000);
  await waitFor(() => g.app.listeners[0]!.stats.active === 0, 3000, 'the connection is closed on both sides');
});

t.test('a 101 to a request that asked for no upgrade is a 502, and that upstream socket is not reused', async (t) => {
  const b = await backend(t, (sock, head) => {
    if (head.startsWith('GET /switch '))
      sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: Upgrade\r\n\r\nRAW BYTES');
    else sock.write(ok('fine\n'));
  });
  const g = await gate(t, `127.0.0.1:${b.port}`);
  const r = await get(g.port(), '/switch');
  t.match(r.text, /^HTTP\/1\.1 502 /, 'the client gets 502, not the 101');
  t.notMatch(r.text, /RAW BYTES|Switching/, "nothing of the upstream's other protocol reaches the client");
  r.sock.destroy();
  const next = await get(g.port(), '/after');
  t.match(next.text, /^HTTP\/1\.1 200 [\s\S]*fine\n$/, 'the next request is answered normally');
  next.sock.destroy();
  t.equal(b.connections, 2, 'on a new upstream connection: the switched one was dropped');
});

t.test('a plaintext HTTP listener runs on libuv handles where Node has them (net.Sockets with IPGATE_TCP_HANDLES=0)', async (t) => {
  const g = await gate(t, '127.0.0.1:9');
  t.equal(g.app.listeners[0]!.rawSockets, rawSocketsWanted(), `rawSockets ${String(rawSocketsWanted())}`);
});

// The idle bounds are checked by the listener's sweep (RelayConn.check) and the pool's (SocketPool.sweep)
// against each socket's last read or write, on handles and net.Sockets alike.
const idleCases = [
  { label: 'a pooled upstream socket', extra: {} },
  { label: "a client connection's own upstream socket (outbound PROXY)", extra: { outboundProxyProtocol: 'v1' } },
];
for (const { label, extra } of idleCases) {
  t.test(`${label} idle for upstreamIdleTimeoutMs is closed, and the next request dials a new one`, async (t) => {
    const b = await backend(t, (sock) => {
      sock.write(ok('hi\n'));
    });
    const g = await gate(t, `127.0.0.1:${b.port}`, { upstreamIdleTimeoutMs: 400 }, extra);
    const first = await get(g.port());
    t.match(first.text, /^HTTP\/1\.1 200 [\s\S]*hi\n$/);
    const answeredAt = Date.now();
    t.equal(b.open, 1, 'the upstream socket stays open after the response');
    await waitFor(() => b.open === 0, 4000, 'the idle upstream socket is closed');
    const idle = Date.now() - answeredAt;
    t.ok(idle >= 300, `not before upstreamIdleTimeoutMs (closed after ${idle} ms)`);
    t.ok(idle < 2400, `soon after it (${idle} ms)`);
    const second = await get(g.port(), '/again', first.sock);
    t.match(second.text, /^HTTP\/1\.1 200 [\s\S]*hi\n$/, 'the client connection carries on');
    t.equal(b.connections, 2, 'on a new upstream connection');
    first.sock.destroy();
  });
}

t.test('a silent tunnel is closed after timeouts.idleMs; one carrying bytes is not', async (t) => {
  const b = await upgradeBackend(t);
  const g = await gate(t, `127.0.0.1:${b.port}`, { keepAliveTimeoutMs: 1000 }, { timeouts: { idleMs: 600 } });
  const silent = await upgrade(g.port());
  const busy = await upgrade(g.port());
  await readUntil(silent, '\r\n\r\n');
  await readUntil(busy, '\r\n\r\n');
  const openedAt = Date.now();
  let echoed = 0;
  busy.on('data', (d: Buffer) => {
    echoed += d.length;
  });
  const ticker = setInterval(() => busy.write('.'), 100);
  t.teardown(() => clearInterval(ticker));
  await closed(silent, 4000);
  const idle = Date.now() - openedAt;
  t.ok(idle >= 500, `the silent one lasted idleMs (closed after ${idle} ms)`);
  // Past idleMs from the start, the busy one is still relayed both ways.
  await new Promise((r) => setTimeout(r, Math.max(0, 900 - idle)));
  const before = echoed;
  await waitFor(() => echoed > before, 2000, 'the busy tunnel still echoes');
  t.notOk(busy.destroyed, 'the busy tunnel is open');
  t.ok(echoed >= 5, `bytes went both ways (${echoed} echoed)`);
  clearInterval(ticker);
  busy.destroy();
});
