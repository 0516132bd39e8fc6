/**
 * Issue "Hardening": each way in or down found by attacking ipgate is reproduced here over real
 * sockets, on every HTTP engine. An exception thrown inside ipgate (these run in-process) fails
 * the test file, so "the process did not die" is asserted by the file finishing, and each case
 * also asserts what the client and the backend saw.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, connect, freePort, readAll, readUntil, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startNginx } from '../helpers/peers';

const ENGINES = ['undici', 'http-proxy', 'relay'] as const;
type Engine = (typeof ENGINES)[number];

/** A raw backend: answers every request on a connection with `reply(head)`; records the heads. */
interface RawBackend { port: number; heads: string[]; connections: number }

async function rawBackend(t: Test, reply: (sock: net.Socket, head: string) => void, bodies = false): Promise<RawBackend> {
  const b: RawBackend = { port: 0, heads: [], connections: 0 };
  const server = net.createServer((sock) => {
    b.connections++;
    let buf = '';
    let skip = 0;
    sock.on('error', () => undefined);
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const n = Math.min(skip, buf.length);
      buf = buf.slice(n);
      skip -= n;
      let i: number;
      while ((i = buf.indexOf('\r\n\r\n')) >= 0) {
        const head = buf.slice(0, i);
        buf = buf.slice(i + 4);
        b.heads.push(head);
        reply(sock, head);
        // With `bodies`, a Content-Length body is skipped (waiting for it if need be).
        const m = bodies ? /\r\ncontent-length: *(\d+)/i.exec(head) : null;
        if (m !== null) skip = Number(m[1]);
        const n = Math.min(skip, buf.length);
        buf = buf.slice(n);
        skip -= n;
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  b.port = (server.address() as net.AddressInfo).port;
  t.teardown(() => new Promise<void>((r) => { server.close(() => r()); }));
  return b;
}

/** A client socket whose write errors (EPIPE after the proxy closed) are expected, not fatal. */
async function client(port: number, localAddress?: string): Promise<net.Socket> {
  // Half-open, as the report's Python client was: it keeps sending after the proxy's FIN.
  const c = await connect({ port, allowHalfOpen: true, ...(localAddress !== undefined ? { localAddress } : {}) });
  c.on('error', () => undefined);
  return c;
}

/** The proxy ended the connection (FIN or close), whenever that happened. */
function ended(c: net.Socket, ms = 10_000): Promise<void> {
  if (c.readableEnded || c.destroyed) return Promise.resolve();
  return closed(c, ms).then(() => undefined);
}

async function gate(t: Test, engine: Engine, upstream: number, allow = ['127.0.0.1/32'], extra: Record<string, unknown> = {}): Promise<Started> {
  const g = await startIpgate({
    allowlists: { main: allow },
    listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${upstream}`],
      http: { engine, ...extra } }],
  }, 'warn');
  t.teardown(() => g.app.shutdown(0));
  return g;
}

for (const engine of ENGINES) {
  t.test(`${engine}: a denied client that finishes its body after the 403, then sends more, is answered and closed`, async (t) => {
    const b = await rawBackend(t, (sock) => sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
    const g = await gate(t, engine, b.port);
    for (const tail of ['G', 'GET / HTTP/1.1\r\nHost: x\r\n\r\n', 'garbage\r\n\r\n']) {
      const c = await client(g.port(), '127.0.0.2');
      c.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n');
      const head = await readUntil(c, '\r\n\r\n');
      t.match(head.toString(), /^HTTP\/1\.1 403 /, `403 before the body (${JSON.stringify(tail)})`);
      c.write('hello');
      await new Promise((r) => setTimeout(r, 30)); // let the body arrive on its own, as in the report
      c.write(tail);
      await ended(c);
    }
    // Byte by byte: the same denial with a pipelined request behind it.
    const c = await client(g.port(), '127.0.0.2');
    const bytes = Buffer.from('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /2 HTTP/1.1\r\nHost: x\r\n\r\nGET /3 HTTP/1.1\r\nHost: x\r\n\r\n');
    for (let i = 0; i < bytes.length && !c.destroyed; i++) {
      c.write(bytes.subarray(i, i + 1));
      await new Promise((r) => setImmediate(r));
    }
    await ended(c);
    t.equal(b.heads.length, 0, 'the backend received nothing from the denied client');
    // The listener still serves an allowed client.
    const ok = await client(g.port());
    ok.write('GET /alive HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    t.match((await readAll(ok)).toString(), /^HTTP\/1\.1 200 /, 'still serving');
  });

  t.test(`${engine}: an early backend answer before the request body, then more client bytes`, async (t) => {
    // The backend answers 413 at once, before the body, and keeps the connection (its parser,
    // like nginx's, then reads the declared body and discards it).
    const b = await rawBackend(t, (sock) => sock.write('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n'), true);
    const g = await gate(t, engine, b.port);
    const c = await client(g.port());
    c.write('POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n');
    await new Promise((r) => setTimeout(r, 50)); // the backend answers meanwhile
    c.write('0123456789');
    const head = await readUntil(c, '\r\n\r\n');
    t.match(head.toString(), /^HTTP\/1\.1 413 /, 'the early answer is relayed');
    c.write('GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nG');
    // Answered in order or closed (the relay ends the connection after an early answer).
    await ended(c, 15_000);
    for (const h of b.heads) t.notMatch(h, /^0123456789/, 'body bytes were never read as a request head');
    t.ok(b.heads.every((h) => /^(POST \/up|GET \/next) HTTP\/1\.1\r\n/.test(h)), 'the backend saw only the client\'s requests');
  });

  t.test(`${engine}: an upstream that closes after the response head (close-delimited body)`, async (t) => {
    const b = await rawBackend(t, (sock) => sock.end('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody\n'));
    const g = await gate(t, engine, b.port);
    for (let i = 0; i < 3; i++) {
      const c = await client(g.port());
      c.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const res = (await readAll(c)).toString();
      t.match(res, /^HTTP\/1\.1 200 /, 'status relayed');
      t.ok(res.includes('body\n'), 'the body up to the upstream close is relayed');
    }
  });

  t.test(`${engine}: an upstream reset in the middle of a response`, async (t) => {
    const b = await rawBackend(t, (sock) => {
      sock.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial');
      setTimeout(() => sock.resetAndDestroy(), 20);
    });
    const g = await gate(t, engine, b.port);
    for (let i = 0; i < 3; i++) {
      const c = await client(g.port());
      c.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      const res = (await readAll(c)).toString();
      t.match(res, /^HTTP\/1\.1 200 /, 'the head was relayed');
      t.notMatch(res, /HTTP\/1\.1 50\d/, 'never a second status line');
    }
  });
}

const nginxSkip = missing('nginx');

for (const engine of ENGINES) {
  t.test(`${engine}: an upgrade request with a body cannot desync a pooled upstream connection (real nginx)`, { skip: nginxSkip }, async (t) => {
    const port = await freePort();
    const nginx = await startNginx(`http {
  ${nginxHttpPreamble()}
  log_format hard '$connection|$connection_requests|$request|$http_x_real_ip|$http_x_forwarded_for';
  keepalive_timeout 75s;
  server {
    listen 127.0.0.1:${port};
    access_log logs/backend.log hard;
    location /ret/ { return 200 "ret $uri\\n"; }
  }
}`, [port]);
    t.teardown(() => nginx.stop());
    const log = (): string[] => {
      const f = path.join(nginx.dir, 'logs/backend.log');
      return fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').filter(Boolean) : [];
    };
    const g = await gate(t, engine, port, ['127.0.0.1/32']);
    const smuggled = 'GET /ret/SMUGGLED HTTP/1.1\r\nHost: x\r\nX-Real-IP: 10.9.9.9\r\nX-Forwarded-For: 10.9.9.9\r\n\r\n';
    // The length of the head ipgate would send for the next request is unknown to an attacker
    // only in detail: try a spread of lengths, as the report's attacker would.
    for (const n of [150, 200, 250, 300, 350]) {
      const c = await client(g.port());
      c.write(`GET /ret/up HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: ${n}\r\n\r\n`);
      const first = (await readAll(c)).toString();
      t.match(first, /^HTTP\/1\.1 400 /, `an upgrade with a body is refused at the proxy (${n})`);
      const d = await client(g.port());
      d.write(`POST /ret/second HTTP/1.1\r\nHost: x\r\nContent-Length: ${smuggled.length}\r\nConnection: close\r\n\r\n${smuggled}`);
      const second = (await readAll(d)).toString();
      t.match(second, /^HTTP\/1\.1 200 /, `the next request is answered (${n})`);
    }
    await waitFor(() => log().length >= 5, 5000, 'nginx logged');
    const lines = log();
    t.equal(lines.filter((l) => l.includes('POST /ret/second')).length, 5, 'nginx saw each second request as sent');
    t.notOk(lines.some((l) => l.includes('SMUGGLED')), 'no smuggled request reached nginx');
    t.notOk(lines.some((l) => l.includes('10.9.9.9')), 'no forged identity reached nginx');
  });
}

for (const engine of ENGINES) {
  t.test(`${engine}: a declined upgrade goes on a connection of its own, never a pooled one (real nginx)`, { skip: nginxSkip }, async (t) => {
    const port = await freePort();
    const nginx = await startNginx(`http {
  ${nginxHttpPreamble()}
  log_format hard '$connection|$request';
  keepalive_timeout 75s;
  server {
    listen 127.0.0.1:${port};
    access_log logs/backend.log hard;
    location /ret/ { return 200 "ret $uri\\n"; }
  }
}`, [port]);
    t.teardown(() => nginx.stop());
    const file = path.join(nginx.dir, 'logs/backend.log');
    const log = (): string[] => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);
    const g = await gate(t, engine, port, ['127.0.0.1/32']);
    for (let i = 0; i < 3; i++) {
      const k = await client(g.port());
      k.write(`GET /ret/plain${i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      t.match((await readAll(k)).toString(), /^HTTP\/1\.1 200 /, 'a plain request');
      const c = await client(g.port());
      c.write(`GET /ret/up${i} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`);
      t.match((await readAll(c)).toString(), /^HTTP\/1\.1 200 /, 'the declined upgrade\'s answer is relayed');
    }
    await waitFor(() => log().length >= 6, 5000, 'nginx logged');
    const conn = (re: RegExp): string[] => log().filter((l) => re.test(l)).map((l) => l.split('|')[0]!);
    const plain = new Set(conn(/GET \/ret\/plain/));
    const up = conn(/GET \/ret\/up/);
    t.equal(up.length, 3, 'three upgrades reached nginx');
    t.equal(new Set(up).size, 3, 'each upgrade on its own connection');
    t.notOk(up.some((c) => plain.has(c)), 'no upgrade shared a connection with a pooled request');
    const all = log();
    for (const c of up) t.equal(all.filter((l) => l.startsWith(`${c}|`)).length, 1, `connection ${c} carried the upgrade only`);
  });
}
