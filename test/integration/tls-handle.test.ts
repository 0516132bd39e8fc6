/**
 * HTTPS connections after the handshake on their TLS handle (transport/tls-byte-socket.ts), and on
 * net.Socket with IPGATE_TLS_HANDLES=0, with the same assertions: curl and a Node TLS client
 * reading streamed bodies fast and slowly, pipelined requests, and a Python OpenSSL client that
 * tells a close_notify from a bare FIN and sends a record that does not decrypt. The handle's
 * counts (tlsHandleCounts) say each path ran: a socket taken over, writes held behind one in
 * flight (TLSWrap takes one write at a time), write requests reused.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import t, { type Test } from 'tap';
import { CertDir } from '../helpers/certs';
import { listenLoopback } from '../helpers/http';
import { startHttpGate, type Started } from '../helpers/ipgate';
import { waitFor } from '../helpers/net';
import { missing } from '../helpers/peers';
import { ROOT } from '../helpers/root';
import { run, type RunResult } from '../helpers/tls-nginx';
import { wsHandshake, WsReader } from '../helpers/websocket';
import { createHttpEcho, wsFrame } from '../../src/echo/echo-server';
import { tlsHandleCounts, tlsHandlesAvailable } from '../../src/transport/tls-byte-socket';

const skip = missing('openssl') || missing('curl') || missing('python3');
const END_CLIENT = path.join(ROOT, 'test/helpers/tls-end-client.py');

/** Byte `i` of every streamed body. */
function bodyByte(i: number): number {
  return (i * 7 + (i >> 9)) % 251;
}

function expectedDigest(n: number): string {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = bodyByte(i);
  return createHash('sha256').update(b).digest('hex');
}

/**
 * A backend: /big?n=N streams N bytes in chunks of 1 byte to `max` (64 KiB; a fixed
 * pseudo-random sequence), 256 KiB at a time as its socket takes them, or with `pace` one chunk
 * per turn of the event loop (small reads for the relay: writes to the client while one is in
 * flight); any other path answers `path P`.
 */
async function backend(t: Test): Promise<number> {
  const server = http.createServer((req, res) => {
    const u = new URL(req.url!, 'http://x');
    if (u.pathname !== '/big') {
      res.setHeader('content-type', 'text/plain');
      res.end(`path ${req.url}\n`);
      return;
    }
    const n = Number(u.searchParams.get('n'));
    const max = Number(u.searchParams.get('max') ?? 65536);
    const pace = u.searchParams.has('pace');
    let sent = 0;
    let seed = 7;
    // Flow control by the write callback, not `drain`: a response Node's server has queued
    // behind the connection's previous one (ipgate reuses the kept connection as soon as that
    // one's last byte arrived) does not emit `drain`, and its writes say false until it is sent.
    const pump = (): void => {
      let batch = 0;
      while (sent < n) {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        const size = Math.min(n - sent, 1 + (seed % max));
        const chunk = Buffer.alloc(size);
        for (let i = 0; i < size; i++) chunk[i] = bodyByte(sent + i);
        sent += size;
        batch += size;
        if (sent < n && (pace || batch >= 256 * 1024)) {
          res.write(chunk, () => (pace ? setImmediate(pump) : pump()));
          return;
        }
        res.write(chunk);
      }
      res.end();
    };
    res.setHeader('content-type', 'application/octet-stream');
    res.setHeader('content-length', n);
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

const certs = skip ? null : new CertDir();
const web = certs?.issue('web', { cn: 'web.test', dns: ['web.test'], kind: 'ec' });

async function gate(t: Test, upstream?: number): Promise<Started> {
  const up = upstream ?? (await backend(t));
  return startHttpGate(t, {
    upstreams: [`127.0.0.1:${up}`],
    tls: { certificates: [{ cert: web!.cert, key: web!.key, name: 'web' }] },
  });
}

/** Run `fn` with TLS connections on handles (the default) or on net.Socket. */
async function inMode(handles: boolean, fn: () => Promise<void>): Promise<void> {
  const before = process.env.IPGATE_TLS_HANDLES;
  if (handles) delete process.env.IPGATE_TLS_HANDLES;
  else process.env.IPGATE_TLS_HANDLES = '0';
  try {
    await fn();
  } finally {
    if (before === undefined) delete process.env.IPGATE_TLS_HANDLES;
    else process.env.IPGATE_TLS_HANDLES = before;
  }
}

const MODES = [
  { handles: true, name: 'on the TLS handle' },
  { handles: false, name: 'on net.Socket (IPGATE_TLS_HANDLES=0)' },
];

t.test('this Node has what the TLS handle path uses', { skip }, async (t) => {
  t.ok(tlsHandlesAvailable, `Node ${process.version}: the TLSWrap binding has readStart, writeBuffer, writev, shutdown, useUserBuffer`);
});

for (const mode of MODES) {
  t.test(`streamed bodies read fast and slowly, and pipelined requests, keep every byte in order, ${mode.name}`, { skip }, async (t) => {
    const g = await gate(t);
    const port = g.port();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-tls-handle-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    await inMode(mode.handles, async () => {
      const before = { ...tlsHandleCounts };
      const curl = (query: string, file: string, extra: string[]): Promise<RunResult> =>
        run('curl', [
          '-sS',
          '--http1.1',
          '--cacert',
          certs!.file('ca.crt'),
          '--resolve',
          `web.test:${port}:127.0.0.1`,
          ...extra,
          '-o',
          file,
          '-w',
          '%{http_code} %{size_download}',
          `https://web.test:${port}/big?${query}`,
        ]);
      const fast = 16 * 1024 * 1024;
      const slow = 3 * 1024 * 1024;
      const [a, b] = await Promise.all([
        curl(`n=${fast}`, path.join(dir, 'fast'), []),
        curl(`n=${slow}&max=2048&pace`, path.join(dir, 'slow'), ['--limit-rate', '2M']),
      ]);
      t.equal(a.stdout, `200 ${fast}`, `16 MiB read as fast as curl can: ${a.stderr}`);
      t.equal(b.stdout, `200 ${slow}`, `3 MiB in chunks of up to 2 KiB, read at 2 MB/s (the relay waits for the client): ${b.stderr}`);
      const digest = (f: string): string =>
        createHash('sha256')
          .update(fs.readFileSync(path.join(dir, f)))
          .digest('hex');
      t.equal(digest('fast'), expectedDigest(fast), "the fast body is the backend's, byte for byte");
      t.equal(digest('slow'), expectedDigest(slow), "the slow body is the backend's, byte for byte");

      // A reader that stops for a second: the kernel's buffers fill, a write to the client stays
      // in flight, and the small chunks that keep coming are held behind it.
      const stalled = 8 * 1024 * 1024;
      const stalledDigest = await new Promise<string>((resolve, reject) => {
        const s = tls.connect({
          port,
          host: '127.0.0.1',
          servername: 'web.test',
          ca: fs.readFileSync(certs!.file('ca.crt')),
          ALPNProtocols: ['http/1.1'],
        });
        const hash = createHash('sha256');
        let head = '';
        let body = 0;
        let paused = false;
        s.on('secureConnect', () => s.write(`GET /big?n=${stalled}&max=4096&pace HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n`));
        s.on('data', (d: Buffer) => {
          if (!paused) {
            paused = true;
            s.pause();
            setTimeout(() => s.resume(), 1000);
          }
          let rest = d;
          if (!head.includes('\r\n\r\n')) {
            const text = head + d.toString('latin1');
            const at = text.indexOf('\r\n\r\n');
            if (at < 0) {
              head = text;
              return;
            }
            head = text.slice(0, at + 4);
            rest = Buffer.from(text.slice(at + 4), 'latin1');
          }
          body += rest.length;
          hash.update(rest);
        });
        s.on('end', () => resolve(`${head.split('\r\n')[0]} ${body} ${hash.digest('hex')}`));
        s.on('error', reject);
      });
      t.equal(
        stalledDigest,
        `HTTP/1.1 200 OK ${stalled} ${expectedDigest(stalled)}`,
        '8 MiB in chunks of up to 4 KiB to a reader that stopped for a second: every byte, in order',
      );

      // Twenty requests in one write, sent with the client's Finished; the answers come back in
      // order on the one connection. This connection reuses the upstream connection of the
      // stalled reader's response, which found the paused-upstream bug that
      // http-pool-backpressure.test.ts now checks (here it went unanswered in 3 of ~30 runs).
      {
        const paths = Array.from({ length: 20 }, (_, i) => `/p${i}`);
        const got = await new Promise<string>((resolve, reject) => {
          const s = tls.connect({
            port,
            host: '127.0.0.1',
            servername: 'web.test',
            ca: fs.readFileSync(certs!.file('ca.crt')),
            ALPNProtocols: ['http/1.1'],
          });
          let text = '';
          s.setEncoding('latin1');
          s.on('secureConnect', () => s.write(paths.map((p) => `GET ${p} HTTP/1.1\r\nHost: web.test\r\n\r\n`).join('')));
          s.on('data', (d: string) => {
            text += d;
            if (text.includes(`path ${paths[paths.length - 1]}\n`)) {
              s.end();
              resolve(text);
            }
          });
          s.on('error', reject);
          setTimeout(() => reject(new Error(`timed out with ${JSON.stringify(text.slice(-200))}`)), 20_000).unref();
        });
        const bodies = [...got.matchAll(/\r\n\r\n(path \/p\d+)\n/g)].map((m) => m[1]);
        t.same(
          bodies,
          paths.map((p) => `path ${p}`),
          'twenty pipelined answers, in order',
        );
      }

      const after = tlsHandleCounts;
      if (mode.handles) {
        t.equal(after.taken - before.taken, 4, 'four connections taken over after their handshakes');
        t.ok(after.held > before.held, `writes were held behind one in flight and written together (${after.held - before.held})`);
        t.ok(after.reused > before.reused, `write requests were reused (${after.reused - before.reused})`);
      } else {
        t.equal(after.taken, before.taken, 'no connection taken over');
      }
    });
  });

  t.test(`ipgate's end of a TLS connection is a close_notify before its FIN, ${mode.name}`, { skip }, async (t) => {
    const g = await gate(t);
    const port = g.port();
    await inMode(mode.handles, async () => {
      const client = (request: string): Promise<{ end: string; response: string }> =>
        run('python3', [END_CLIENT, String(port), certs!.file('ca.crt'), 'web.test', '127.0.0.5', 'plain'], request).then((r) => {
          if (r.code !== 0) throw new Error(`python client failed: ${r.stderr}`);
          return JSON.parse(r.stdout) as { end: string; response: string };
        });
      const bad = await client('GET / HTTP/1.1\r\nHost: web.test\r\nno colon here\r\n\r\n');
      t.match(bad.response, /^HTTP\/1\.1 400 /, 'a malformed request: 400');
      t.equal(bad.end, 'close_notify', 'then a close_notify, not a bare FIN');
      const closing = await client('GET /c HTTP/1.1\r\nHost: web.test\r\nConnection: close\r\n\r\n');
      t.match(closing.response, /^HTTP\/1\.1 200 [\s\S]*\r\n\r\npath \/c\n$/, 'Connection: close: the whole answer');
      t.equal(closing.end, 'close_notify', 'then a close_notify');
    });
  });

  t.test(`a record that does not decrypt closes its connection only, ${mode.name}`, { skip }, async (t) => {
    const g = await gate(t);
    const port = g.port();
    await inMode(mode.handles, async () => {
      const r = await run(
        'python3',
        [END_CLIENT, String(port), certs!.file('ca.crt'), 'web.test', '127.0.0.6', 'garbage'],
        'GET /first HTTP/1.1\r\nHost: web.test\r\n\r\n',
      );
      t.equal(r.code, 0, r.stderr);
      const res = JSON.parse(r.stdout) as { end: string; response: string };
      t.match(res.response, /path \/first\n$/, 'the request before the bad record was answered');
      t.not(res.end, 'timeout', `the connection ended after the bad record (${res.end})`);
      t.not(res.end, 'close_notify', 'not as if all were well');
      const next = await run('curl', [
        '-sS',
        '--http1.1',
        '--cacert',
        certs!.file('ca.crt'),
        '--resolve',
        `web.test:${port}:127.0.0.1`,
        `https://web.test:${port}/next`,
      ]);
      t.equal(next.stdout, 'path /next\n', 'the next connection is served');
      await waitFor(
        () => g.logs.lines.some((l) => l.msg === 'access' && l.path === '/first' && l.status === 200),
        10_000,
        "the first request's access line",
      );
    });
  });

  t.test(`a WebSocket over TLS: messages both ways, and the client's close ends the tunnel, ${mode.name}`, { skip }, async (t) => {
    const echo = createHttpEcho();
    const echoPort = await listenLoopback(t, echo);
    const g = await gate(t, echoPort);
    await inMode(mode.handles, async () => {
      const before = tlsHandleCounts.taken;
      const c = tls.connect({
        port: g.port(),
        host: '127.0.0.1',
        servername: 'web.test',
        ca: fs.readFileSync(certs!.file('ca.crt')),
        ALPNProtocols: ['http/1.1'],
      });
      await new Promise<void>((resolve, reject) => {
        c.once('secureConnect', () => resolve());
        c.once('error', reject);
      });
      const hs = wsHandshake('/chat');
      c.write(hs.text);
      const r = new WsReader(c);
      t.match(await r.head(), /^HTTP\/1\.1 101 /, '101 over TLS');
      const [report] = await r.messages(1);
      t.equal((JSON.parse(report!.payload.toString()) as { headers: Record<string, string> }).headers['x-forwarded-proto'], 'https');
      c.write(wsFrame(1, Buffer.from('hello'), true));
      c.write(wsFrame(2, Buffer.alloc(300_000, 9), true));
      const [text, bin] = await r.messages(2);
      t.equal(text!.payload.toString(), 'hello', 'text echoed');
      t.ok(bin!.payload.length === 300_000 && bin!.payload.every((b) => b === 9), '300 KB binary echoed intact');
      t.equal(tlsHandleCounts.taken - before, mode.handles ? 1 : 0, mode.handles ? 'the connection was taken over' : 'not taken over');
      // The client ends its side (close_notify, FIN): the tunnel passes the FIN on, the echo
      // closes, and ipgate closes the client's connection.
      const ended = new Promise<void>((resolve) => c.once('close', () => resolve()));
      c.end();
      await ended;
      await waitFor(() => g.app.listeners[0]!.connections.size === 0, 10_000, 'the listener has no connection left');
      t.pass('the client connection closed after its FIN');
    });
  });
}
