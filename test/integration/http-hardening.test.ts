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

const ENGINES = ['relay'] as const;
type Engine = (typeof ENGINES)[number];

/** A raw backend: answers every request on a connection with `reply(head)`; records the heads. */
interface RawBackend {
  port: number;
  heads: string[];
  connections: number;
}

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
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
      }),
  );
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

async function gate(
  t: Test,
  engine: Engine,
  upstream: number,
  allow = ['127.0.0.1/32'],
  extra: Record<string, unknown> = {},
): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: { main: allow },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${upstream}`],
          http: { engine, ...extra },
        },
      ],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

for (const engine of ENGINES) {
  t.test(
    `${engine}: a denied client (denied.keepAlive false) that finishes its body after the 403, then sends more, is answered and closed`,
    async (t) => {
      const b = await rawBackend(t, (sock) => sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
      const g = await gate(t, engine, b.port, ['127.0.0.1/32'], { denied: { keepAlive: false } });
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
      const bytes = Buffer.from(
        'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /2 HTTP/1.1\r\nHost: x\r\n\r\nGET /3 HTTP/1.1\r\nHost: x\r\n\r\n',
      );
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
    },
  );

  t.test(
    `${engine}: a denied client kept alive: a body sent with its head is read past, byte by byte pipelining is answered 403 in order`,
    async (t) => {
      const b = await rawBackend(t, (sock) => sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
      const g = await gate(t, engine, b.port);
      const c = await client(g.port(), '127.0.0.2');
      c.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello');
      const first = (await readUntil(c, 'Forbidden\n')).toString();
      t.match(first, /^HTTP\/1\.1 403 /, '403');
      t.notMatch(first, /connection: close/i, 'the body came with its head: the connection stays');
      const bytes = Buffer.from('GET /2 HTTP/1.1\r\nHost: x\r\n\r\nGET /3 HTTP/1.1\r\nHost: x\r\n\r\n');
      for (let i = 0; i < bytes.length && !c.destroyed; i++) {
        c.write(bytes.subarray(i, i + 1));
        await new Promise((r) => setImmediate(r));
      }
      // A body in the same write as its head (one read): read past, the connection kept.
      c.write('POST /4 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const answers: string[] = [];
      for (let i = 0; i < 4; i++) answers.push((await readUntil(c, 'Forbidden\n')).toString());
      t.ok(
        answers.every((a) => /^HTTP\/1\.1 403 /.test(a)),
        'the four requests behind the first answered 403, in order',
      );
      t.same(
        answers.map((a) => /connection: close/i.test(a)),
        [false, false, false, true],
        'the close comes with the last answer only',
      );
      await ended(c);
      t.equal(b.heads.length, 0, 'the backend received nothing');
    },
  );

  t.test(`${engine}: a denied request whose body has not come: 403 with connection: close, what follows is never parsed`, async (t) => {
    const b = await rawBackend(t, (sock) => sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
    const g = await gate(t, engine, b.port);
    const c = await client(g.port(), '127.0.0.2');
    c.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n');
    t.match(
      (await readUntil(c, 'Forbidden\n')).toString(),
      /^HTTP\/1\.1 403 [\s\S]*connection: close\r\n/i,
      '403 with connection: close before the body',
    );
    c.write('hello');
    c.write('GET /2 HTTP/1.1\r\nHost: x\r\n\r\n');
    const rest = (await readAll(c)).toString();
    t.equal(rest, '', 'nothing more is answered');
    t.equal(b.heads.length, 0, 'the backend received nothing');
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
    t.ok(
      b.heads.every((h) => /^(POST \/up|GET \/next) HTTP\/1\.1\r\n/.test(h)),
      "the backend saw only the client's requests",
    );
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

/** A real nginx answering `/ret/...` itself (`return 200`), logging `$connection|$request|...` per request. */
async function nginxReturning(t: Test): Promise<{ port: number; log: () => string[] }> {
  const port = await freePort();
  const nginx = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  log_format hard '$connection|$connection_requests|$request|$http_x_real_ip|$http_x_forwarded_for';
  keepalive_timeout 75s;
  server {
    listen 127.0.0.1:${port};
    access_log logs/backend.log hard;
    location /ret/ { return 200 "ret $uri\\n"; }
  }
}`,
    [port],
  );
  t.teardown(() => nginx.stop());
  const file = path.join(nginx.dir, 'logs/backend.log');
  return { port, log: () => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : []) };
}

for (const engine of ENGINES) {
  t.test(
    `${engine}: an upgrade request with a body cannot desync a pooled upstream connection (real nginx)`,
    { skip: nginxSkip },
    async (t) => {
      const { port, log } = await nginxReturning(t);
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
      t.notOk(
        lines.some((l) => l.includes('SMUGGLED')),
        'no smuggled request reached nginx',
      );
      t.notOk(
        lines.some((l) => l.includes('10.9.9.9')),
        'no forged identity reached nginx',
      );
    },
  );
}

for (const engine of ENGINES) {
  t.test(
    `${engine}: a declined upgrade goes on a connection of its own, never a pooled one (real nginx)`,
    { skip: nginxSkip },
    async (t) => {
      const { port, log } = await nginxReturning(t);
      const g = await gate(t, engine, port, ['127.0.0.1/32']);
      for (let i = 0; i < 3; i++) {
        const k = await client(g.port());
        k.write(`GET /ret/plain${i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
        t.match((await readAll(k)).toString(), /^HTTP\/1\.1 200 /, 'a plain request');
        const c = await client(g.port());
        c.write(`GET /ret/up${i} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n`);
        t.match((await readAll(c)).toString(), /^HTTP\/1\.1 200 /, "the declined upgrade's answer is relayed");
      }
      await waitFor(() => log().length >= 6, 5000, 'nginx logged');
      const conn = (re: RegExp): string[] =>
        log()
          .filter((l) => re.test(l))
          .map((l) => l.split('|')[0]!);
      const plain = new Set(conn(/GET \/ret\/plain/));
      const up = conn(/GET \/ret\/up/);
      t.equal(up.length, 3, 'three upgrades reached nginx');
      t.equal(new Set(up).size, 3, 'each upgrade on its own connection');
      t.notOk(
        up.some((c) => plain.has(c)),
        'no upgrade shared a connection with a pooled request',
      );
      const all = log();
      for (const c of up) t.equal(all.filter((l) => l.startsWith(`${c}|`)).length, 1, `connection ${c} carried the upgrade only`);
    },
  );
}

// --- Degraded ------------------------------------------------------------------------------------

/** A raw backend that reads each request's Content-Length body before answering 200 (echoing the head). */
async function bodyBackend(t: Test, delayMs = 0): Promise<RawBackend> {
  const b: RawBackend = { port: 0, heads: [], connections: 0 };
  const server = net.createServer((sock) => {
    b.connections++;
    let buf = Buffer.alloc(0);
    let need = -1;
    let head = '';
    sock.on('error', () => undefined);
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (need < 0) {
          const i = buf.indexOf('\r\n\r\n');
          if (i < 0) return;
          head = buf.subarray(0, i).toString('latin1');
          buf = buf.subarray(i + 4);
          b.heads.push(head);
          const m = /\r\ncontent-length: *(\d+)/i.exec(head);
          need = m === null ? 0 : Number(m[1]);
        }
        if (buf.length < need) return;
        buf = buf.subarray(need);
        need = -1;
        const body = `${head.split('\r\n')[0]}\n`;
        const send = (): void => {
          sock.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        };
        if (delayMs > 0) setTimeout(send, delayMs);
        else send();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  b.port = (server.address() as net.AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
      }),
  );
  return b;
}

const IDENTITY_HEADERS = [
  'X-Forwarded-For',
  'X-Real-IP',
  'Forwarded',
  'X-Forwarded-Host',
  'True-Client-IP',
  'X-Client-IP',
  'X-Cluster-Client-IP',
  'CF-Connecting-IP',
  'X-Original-Forwarded-For',
  'Fastly-Client-IP',
  'X-Envoy-External-Address',
  'Client-IP',
  'X-ProxyUser-Ip',
  'X_Forwarded_For',
  'X-Real_IP',
  'x_real_ip',
  'X_Original_Forwarded_For',
  'X-My-Client',
];

for (const engine of ENGINES) {
  t.test(
    `${engine}: every client-IP header from an untrusted client is stripped (built-in, underscore spellings, stripHeaders)`,
    async (t) => {
      const b = await bodyBackend(t);
      const g = await startIpgate(
        {
          allowlists: { main: ['127.0.0.0/8'] },
          listeners: [
            {
              name: 'web',
              mode: 'http',
              listen: '127.0.0.1:0',
              allowlist: 'main',
              upstreams: [`127.0.0.1:${b.port}`],
              http: { engine, stripHeaders: ['X-My-Client'], trustedProxies: ['127.0.0.9/32'] },
            },
          ],
        },
        'warn',
      );
      t.teardown(() => g.app.shutdown(0));
      const forged = IDENTITY_HEADERS.map((h) => `${h}: 10.6.6.6\r\n`).join('');
      const c = await client(g.port(), '127.0.0.5');
      c.write(`GET /strip HTTP/1.1\r\nHost: x\r\n${forged}X-Kept: yes\r\nConnection: close\r\n\r\n`);
      t.match((await readAll(c)).toString(), /^HTTP\/1\.1 200 /);
      const head = b.heads.at(-1)!;
      t.notOk(head.includes('10.6.6.6'), 'no forged address reached the backend');
      t.match(head, /\r\nx-real-ip: 127\.0\.0\.5/i, 'X-Real-IP is ours');
      t.match(head, /\r\nx-kept: yes/i, 'other headers pass');
      // From a trusted proxy the vendor headers pass (it set them), the underscore spellings never do.
      const p = await client(g.port(), '127.0.0.9');
      p.write(
        'GET /trusted HTTP/1.1\r\nHost: x\r\nX-Original-Forwarded-For: 203.0.113.7\r\nX_Forwarded_For: 10.6.6.6\r\nX-My-Client: 203.0.113.8\r\nConnection: close\r\n\r\n',
      );
      t.match((await readAll(p)).toString(), /^HTTP\/1\.1 200 /);
      const th = b.heads.at(-1)!;
      t.match(th, /\r\nx-original-forwarded-for: 203\.0\.113\.7/i, "a trusted proxy's X-Original-Forwarded-For passes");
      t.match(th, /\r\nx-my-client: 203\.0\.113\.8/i, 'stripHeaders applies to untrusted peers only');
      t.notOk(th.includes('10.6.6.6'), 'an underscore spelling never passes');
    },
  );

  t.test(`${engine}: a request body trickled past the upstream timeout gets 504 and the connection closes`, async (t) => {
    const b = await bodyBackend(t);
    const g = await gate(t, engine, b.port, ['127.0.0.1/32'], { upstreamTimeoutMs: 300 });
    const c = await client(g.port());
    c.write('POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n');
    let stop = false;
    const timer = setInterval(() => {
      if (!stop && !c.destroyed) c.write('a');
    }, 100);
    t.teardown(() => clearInterval(timer));
    const head = await readUntil(c, '\r\n\r\n', 5000);
    t.match(head.toString(), /^HTTP\/1\.1 504 /, '504');
    t.match(head.toString(), /\r\nconnection: close\r\n/i, 'announced as the last response');
    const after = Date.now();
    await ended(c, 5000);
    stop = true;
    t.ok(Date.now() - after < 3000, 'closed at once, not after idleMs');
  });

  t.test(`${engine}: a request head completed after the 408 never goes upstream`, async (t) => {
    const b = await bodyBackend(t);
    const g = await gate(t, engine, b.port, ['127.0.0.1/32'], { requestHeaderTimeoutMs: 300 });
    const c = await client(g.port());
    c.write('GET /late HTTP/1.1\r\nHost: x\r\n');
    const res = await readUntil(c, '\r\n\r\n', 5000);
    t.match(res.toString(), /^HTTP\/1\.1 408 /, '408');
    c.write('\r\n');
    await ended(c, 8000);
    await new Promise((r) => setTimeout(r, 100));
    t.equal(b.heads.length, 0, 'the backend never saw the request');
  });

  t.test(`${engine}: garbage pipelined behind a request: that request is answered first, then 400 and close`, async (t) => {
    const b = await bodyBackend(t, 100);
    const g = await gate(t, engine, b.port);
    const c = await client(g.port());
    c.write('GET /first HTTP/1.1\r\nHost: x\r\n\r\n\x01\x02garbage\r\n\r\n');
    const res = (await readAll(c)).toString();
    t.match(res, /^HTTP\/1\.1 200 [\s\S]*GET \/first HTTP\/1\.1\n/, "the admitted request's response first");
    t.match(res, /HTTP\/1\.1 400 /, 'then 400');
    t.equal(b.heads.length, 1, 'one request upstream');
  });

  t.test(`${engine}: HTTP/0.9, HTTP/2.0 and HTTP/1.0 without Host are answered 400 and never forwarded`, async (t) => {
    const b = await bodyBackend(t);
    const g = await gate(t, engine, b.port);
    for (const raw of [
      'GET /\r\n\r\n',
      'GET / HTTP/2.0\r\nHost: x\r\n\r\n',
      'GET / HTTP/1.0\r\n\r\n',
      'GET / HTTP/3.0\r\nHost: x\r\n\r\n',
      'GET ftp://x/y HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET http://u@x/y HTTP/1.1\r\nHost: x\r\n\r\n',
      'GET y HTTP/1.1\r\nHost: x\r\n\r\n',
    ]) {
      const c = await client(g.port());
      c.write(raw);
      const res = (await readAll(c)).toString();
      t.match(res, /^HTTP\/1\.1 400 /, JSON.stringify(raw));
    }
    t.equal(b.heads.length, 0, 'nothing forwarded');
  });

  t.test(`${engine}: an absolute-form target goes upstream in origin-form with its authority as Host`, async (t) => {
    const b = await bodyBackend(t);
    const g = await gate(t, engine, b.port);
    const c = await client(g.port());
    c.write('GET http://other.example:81/p/q?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    t.match((await readAll(c)).toString(), /^HTTP\/1\.1 200 /);
    const head = b.heads.at(-1)!;
    t.match(head, /^GET \/p\/q\?x=1 HTTP\/1\.1\r\n/, 'origin-form');
    t.match(head, /\r\nhost: other\.example:81\r\n/i, 'Host is the authority');
    t.match(head, /\r\nx-forwarded-host: other\.example:81\r\n/i, 'X-Forwarded-Host agrees');
    t.notMatch(head, /\r\nhost: x\r\n/i, "the client's Host is replaced");
  });

  t.test(`${engine}: Expect: 100-continue: a denied client gets its 403 first, an allowed one 100 then the answer`, async (t) => {
    const b = await bodyBackend(t);
    const g = await gate(t, engine, b.port, ['127.0.0.1/32']);
    const d = await client(g.port(), '127.0.0.2');
    d.write('POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n');
    const first = await readUntil(d, '\r\n\r\n', 5000);
    t.match(first.toString(), /^HTTP\/1\.1 403 /, 'no 100 Continue before the 403');
    const a = await client(g.port());
    a.write('POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n');
    const cont = await readUntil(a, '\r\n\r\n', 5000);
    t.match(cont.toString(), /^HTTP\/1\.1 100 Continue\r\n/, '100 Continue to the allowed client');
    a.write('hello');
    t.match((await readAll(a)).toString(), /^HTTP\/1\.1 200 /, 'then the answer');
    t.equal(b.heads.length, 1, 'only the allowed request went upstream');
  });
}

// --- found by the randomized engine test (test/fuzz/http-engines.test.ts) -------------------------

async function gateIdle(t: Test, engine: Engine, upstream: number, idleMs: number): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.1/32'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${upstream}`],
          timeouts: { idleMs },
          http: { engine, upstreamIdleTimeoutMs: 500, keepAliveTimeoutMs: Math.min(idleMs, 1000) },
        },
      ],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

/** A raw backend that counts its open connections. */
async function countingRaw(t: Test, reply: (sock: net.Socket, head: string) => void): Promise<RawBackend & { open: () => number }> {
  let open = 0;
  const b = await rawBackend(t, (sock, head) => reply(sock, head));
  const probe = net.createServer((sock) => {
    open++;
    sock.once('close', () => {
      open--;
    });
    const up = net.connect(b.port, '127.0.0.1');
    up.on('error', () => sock.destroy());
    sock.on('error', () => up.destroy());
    sock.pipe(up);
    up.pipe(sock);
    up.once('close', () => sock.destroy());
    sock.once('close', () => up.destroy());
  });
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        probe.close(() => r());
      }),
  );
  return {
    ...b,
    port: (probe.address() as net.AddressInfo).port,
    open: () => open,
    get heads() {
      return b.heads;
    },
  } as RawBackend & { open: () => number };
}

for (const engine of ENGINES) {
  t.test(`${engine}: a denied client that stops half way through a body is closed after keepAliveTimeoutMs (finding B)`, async (t) => {
    const b = await rawBackend(t, (sock) => sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
    const g = await gateIdle(t, engine, b.port, 1000);
    const c = await client(g.port(), '127.0.0.2');
    c.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc');
    t.match((await readUntil(c, 'Forbidden\n')).toString(), /^HTTP\/1\.1 403 /);
    const at = Date.now();
    await ended(c, 5000);
    t.ok(Date.now() - at < 4000, `closed ${Date.now() - at} ms after the client went silent`);
    await waitFor(() => g.app.listeners[0]!.stats.active === 0, 5000, 'no connection left active');
  });

  t.test(`${engine}: an early upstream answer, then the client leaves: the upstream socket is closed, not held (finding C)`, async (t) => {
    const b = await countingRaw(t, (sock) => sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'));
    const g = await gateIdle(t, engine, b.port, 4000);
    const c = await client(g.port());
    c.write('POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc');
    t.match((await readUntil(c, '\r\n\r\nok')).toString(), /^HTTP\/1\.1 200 /, 'the early answer');
    c.destroy();
    await waitFor(() => b.open() === 0, 3000, 'the upstream connection closed');
    t.equal(b.open(), 0, 'no upstream socket left waiting for a body that never comes');
  });

  t.test(`${engine}: a declined upgrade whose answer the backend cuts short closes the client connection (finding D)`, async (t) => {
    const b = await rawBackend(t, (sock) => {
      sock.write('HTTP/1.1 200 OK\r\nContent-Length: 800\r\n\r\n');
      sock.end(Buffer.alloc(400, 97));
    });
    const g = await gateIdle(t, engine, b.port, 30_000);
    const c = await client(g.port());
    c.write('GET /up HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    t.match((await readUntil(c, '\r\n\r\n')).toString(), /^HTTP\/1\.1 200 /, "the declined answer's head");
    await ended(c, 3000);
    t.pass('closed: the response can never complete');
  });
}

t.test(
  'relay: a pooled socket the backend closes as a request reaches it: an idempotent bodiless request is sent again on a new connection, others get 502',
  async (t) => {
    // The backend answers the first request on each connection and closes at the second, unanswered:
    // the race between its keep-alive timeout and ipgate's reuse, made certain.
    const perConn: number[] = [];
    const b = await rawBackend(
      t,
      (sock, head) => {
        const id = ((sock as net.Socket & { id?: number }).id ??= perConn.push(0) - 1);
        perConn[id]!++;
        if (perConn[id]! > 1) {
          sock.destroy();
          return;
        }
        const body = `${head.split('\r\n')[0]}\n`;
        sock.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      },
      true,
    );
    const g = await gate(t, 'relay', b.port);
    const c = await client(g.port());
    c.write('GET /a HTTP/1.1\r\nHost: x\r\n\r\n');
    t.match((await readUntil(c, 'GET /a HTTP/1.1\n')).toString(), /^HTTP\/1\.1 200 /, 'first request');
    c.write('GET /b HTTP/1.1\r\nHost: x\r\n\r\n');
    t.match(
      (await readUntil(c, 'GET /b HTTP/1.1\n')).toString(),
      /^HTTP\/1\.1 200 /,
      'the GET on the stale socket was sent again and answered',
    );
    c.write('POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi');
    const post = (await readAll(c)).toString();
    t.match(post, /^HTTP\/1\.1 502 /, 'a request with a body is not sent twice: 502');
    t.equal(b.heads.filter((h) => h.startsWith('GET /b ')).length, 2, 'the backend saw GET /b twice: the closed attempt and the retry');
    t.equal(b.heads.filter((h) => h.startsWith('POST /c ')).length, 1, 'POST /c once');
  },
);
