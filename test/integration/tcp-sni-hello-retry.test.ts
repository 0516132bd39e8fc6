/**
 * SNI routes and the HelloRetryRequest (issue 27, finding 1), over real sockets: a route's
 * allowlist is decided on the first ClientHello, and a backend that answers it with a
 * HelloRetryRequest reads a second one. Backend: real nginx with two server blocks on one port,
 * www.example.com (default) and admin.example.com (which even answers 421 when Host differs from
 * SNI), each with its own certificate, `ssl_ecdh_curve prime256v1`: a client whose first hello
 * carries only an x25519 key share gets a retry. Client: the hand-built TLS 1.3 client
 * (helpers/tls13-client.ts), which reports which certificate the server presented and what it
 * answered. 127.0.0.2 is on route www's list and not on route admin's.
 *
 * Then a raw backend (a net.Server written here) for what nginx will not do on demand: a retry
 * written one byte per read and cut into one-byte records, a second hello that never comes, a
 * backend that does not answer with a ServerHello; and it proves what reached the backend when.
 *
 * Both socket paths of a TCP listener run every case: libuv handles and net.Sockets.
 */
import net from 'node:net';
import t, { type Test } from 'tap';
import { rawSocketsAvailable } from '../../src/transport/raw-socket';
import type { Listener } from '../../src/listener/listener';
import { startIpgate, tmpDir, type Started } from '../helpers/ipgate';
import { closed, connect, freePort, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startNginx } from '../helpers/peers';
import { makeCert } from '../helpers/tls-nginx';
import {
  CCS_RECORD,
  clientHelloRecord,
  HRR_RANDOM,
  record,
  serverHelloMessage,
  tls13Handshake,
  type Tls13Options,
  type Tls13Result,
} from '../helpers/tls13-client';

const skip = missing('nginx');

/** Both socket paths of a TCP listener: libuv handles (the default) and net.Sockets. */
const PATHS = [
  { desc: 'handles', handles: true },
  { desc: 'net.Socket', handles: false },
] as const;

const WWW = 'www.example.com';
const ADMIN = 'admin.example.com';
const CLIENT = '127.0.0.2';

/** Start ipgate with IPGATE_TCP_HANDLES set for its listeners as `handles` says. */
async function ipgate(t: Test, handles: boolean, raw: Record<string, unknown>): Promise<Started> {
  const saved = process.env.IPGATE_TCP_HANDLES;
  if (!handles) process.env.IPGATE_TCP_HANDLES = '0';
  const g = await startIpgate(raw).finally(() => {
    if (saved === undefined) delete process.env.IPGATE_TCP_HANDLES;
    else process.env.IPGATE_TCP_HANDLES = saved;
  });
  t.teardown(() => g.app.shutdown(0));
  t.equal(g.app.listeners[0]!.rawSockets, handles && rawSocketsAvailable, `the listener runs on ${handles ? 'handles' : 'net.Sockets'}`);
  return g;
}

function routes(upstream: string): unknown[] {
  return [
    { name: 'www', hosts: [WWW], upstreams: [upstream], allowlist: 'open' },
    { name: 'admin', hosts: [ADMIN], upstreams: [upstream], allowlist: 'guarded' },
  ];
}

const ALLOWLISTS = { open: ['127.0.0.0/8'], guarded: ['127.0.0.9/32'] };

async function nginxBackend(t: Test): Promise<number> {
  const dir = tmpDir('ipgate-hrr-nginx-');
  const www = makeCert(dir, [WWW]);
  const admin = makeCert(dir, [ADMIN]);
  const port = await freePort();
  const nginx = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_ecdh_curve prime256v1;
  default_type text/plain;
  server {
    listen 127.0.0.1:${port} ssl default_server;
    server_name ${WWW};
    ssl_certificate ${www.cert};
    ssl_certificate_key ${www.key};
    return 200 "server=www sni=$ssl_server_name\\n";
  }
  server {
    listen 127.0.0.1:${port} ssl;
    server_name ${ADMIN};
    ssl_certificate ${admin.cert};
    ssl_certificate_key ${admin.key};
    if ($host != $ssl_server_name) { return 421; }
    return 200 "server=admin sni=$ssl_server_name\\n";
  }
}`,
    [port],
  );
  t.teardown(nginx.stop);
  return port;
}

const adminRequest = `GET / HTTP/1.1\r\nHost: ${ADMIN}\r\nConnection: close\r\n\r\n`;

/** What reached the client of admin's server block: its certificate or its page. */
function adminServed(r: Tls13Result): boolean {
  return r.certificateSubject === `CN=${ADMIN}` || r.response.includes('server=admin');
}

for (const path of PATHS)
  t.test(
    `nginx behind an SNI route: a second hello after a HelloRetryRequest must name the first's server (${path.desc})`,
    { skip },
    async (t) => {
      const nginx = await nginxBackend(t);
      const upstream = `127.0.0.1:${nginx}`;
      const g = await ipgate(t, path.handles, {
        allowlists: ALLOWLISTS,
        listeners: [{ name: 'sni', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'open', upstreams: [], routes: routes(upstream) }],
      });
      const l = g.app.listeners[0]!;
      const port = g.port('sni');
      const hs = (o: Partial<Tls13Options>): Promise<Tls13Result> => tls13Handshake({ port, localAddress: CLIENT, sni: WWW, ...o });
      const retries = (result: string): number => l.stats.sniHelloRetries.get(result) ?? 0;
      const settled = (): Promise<void> => waitFor(() => l.connections.size === 0, 10_000, 'connections closed');

      // The control: asking for admin outright from 127.0.0.2 is refused by route admin's list.
      const direct = await hs({ sni: ADMIN, keyShares: ['p256'] });
      t.notOk(adminServed(direct), 'admin asked for outright: refused (127.0.0.2 is not on its list)');
      await settled();
      t.equal(l.stats.routes.get('admin')?.denied.get('not_allowlisted'), 1, 'denied by route admin');

      await t.test('(a) a retry, then a second hello naming admin: closed before nginx sees it, counted', async (t) => {
        const r = await hs({ retry: { sni: ADMIN }, request: adminRequest });
        t.equal(r.hrr, true, 'nginx answered the x25519-only hello with a HelloRetryRequest (passed through to the client)');
        t.equal(r.secondHelloSent, true, 'the client sent its second hello, naming admin');
        t.notOk(
          adminServed(r),
          `nothing of admin reached the client (certificate ${r.certificateSubject}, response ${JSON.stringify(r.response.slice(0, 60))})`,
        );
        t.equal(r.serverHello, false, 'no ServerHello at all: the connection was closed');
        await settled();
        t.equal(retries('tls_hrr_sni_changed'), 1, 'ipgate_sni_hello_retries_total{result=tls_hrr_sni_changed}');
        t.equal(l.stats.routes.get('www')?.closed.get('tls_hrr_sni_changed'), 1, 'closed under route www with the reason');
        const text = await g.app.metrics.registry.metrics();
        t.match(text, /ipgate_sni_hello_retries_total\{listener="sni",result="tls_hrr_sni_changed"\} 1/, 'the metric');
        t.match(text, /ipgate_connections_closed_total\{listener="sni",route="www",result="tls_hrr_sni_changed"\} 1/, 'closed_total');
        const line = g.logs.find((x) => x.msg === 'access' && x.result === 'tls_hrr_sni_changed');
        t.match(
          line,
          { decision: 'reject', reason: 'tls_hrr_sni_changed', route: 'www', sni: WWW, client: CLIENT },
          'the access line: rejected, not allowed',
        );
        const why = g.logs.find((x) => x.msg === 'second ClientHello refused');
        t.match(
          why,
          { reason: 'tls_hrr_sni_changed', detail: /"www\.example\.com".*"admin\.example\.com"/ },
          'the debug line names both servers',
        );
      });

      await t.test('(b) a retry, then the same hello with a P-256 share: www served as before', async (t) => {
        const r = await hs({ alpn: ['http/1.1'] });
        t.equal(r.hrr, true, 'a HelloRetryRequest');
        t.equal(r.certificateSubject, `CN=${WWW}`, "www's certificate");
        t.equal(r.alpn, 'http/1.1', 'ALPN as offered');
        t.match(r.response, /^HTTP\/1\.1 200 [\s\S]*server=www sni=www\.example\.com/, "www's page");
        await settled();
        t.equal(retries('ok'), 1, 'retries{result=ok}');
        t.equal(l.stats.routes.get('www')?.closed.get('ok'), 1, 'closed ok');
      });

      await t.test('(c) no retry (a P-256 share at once): unchanged', async (t) => {
        const r = await hs({ keyShares: ['p256'] });
        t.equal(r.hrr, false, 'no HelloRetryRequest');
        t.equal(r.certificateSubject, `CN=${WWW}`, "www's certificate");
        t.match(r.response, /server=www/, "www's page");
        await settled();
        t.equal(retries('ok'), 1, 'no retry counted');
      });

      await t.test('(d) a second hello pipelined right after the first, before nginx answered', async (t) => {
        const bad = await hs({ pipeline: true, retry: { sni: ADMIN }, request: adminRequest });
        t.equal(bad.hrr, true, 'naming admin: nginx still answered the first with a retry (it never saw the second)');
        t.notOk(adminServed(bad), 'and nothing of admin reached the client');
        await settled();
        t.equal(retries('tls_hrr_sni_changed'), 2, 'refused as tls_hrr_sni_changed');

        const same = await hs({ pipeline: true });
        t.equal(same.hrr, true, 'naming www: a retry');
        t.equal(same.certificateSubject, `CN=${WWW}`, 'the pipelined hello went on once it checked out');
        t.match(same.response, /server=www/, 'www served');

        // No retry: the held hello goes on after nginx's ServerHello for www, where nginx refuses it.
        const late = await hs({ keyShares: ['p256'], pipeline: true, retry: { sni: ADMIN }, request: adminRequest });
        t.equal(late.hrr, false, 'a P-256 share at once: no retry');
        t.equal(late.certificateSubject, `CN=${WWW}`, "www's flight, decided by the first hello");
        t.notOk(adminServed(late), 'nothing of admin');
        t.same(late.alert, [2, 10], 'nginx read the late hello as an unexpected_message and aborted');
        await settled();
        t.equal(retries('ok'), 2, 'one more retry that checked out');
      });

      await t.test('(e) ALPN changed in the second hello: closed', async (t) => {
        for (const [first, second] of [
          [['http/1.1'], ['h2']],
          [['http/1.1'], []],
          [[], ['http/1.1']],
        ] as const) {
          const r = await hs({ alpn: [...first], retry: { alpn: [...second] } });
          t.equal(r.hrr, true, `ALPN ${JSON.stringify(first)} then ${JSON.stringify(second)}: a retry`);
          t.equal(r.serverHello, false, 'then closed');
        }
        await settled();
        t.equal(retries('tls_hrr_alpn_changed'), 3, 'retries{result=tls_hrr_alpn_changed}');
      });
    },
  );

/** A backend that records what it received; the test writes its answers. */
interface RawBackend {
  port: number;
  /** Everything received, per connection. */
  got: Buffer[];
  conns: net.Socket[];
}

async function rawBackend(t: Test): Promise<RawBackend> {
  const b: RawBackend = { port: 0, got: [], conns: [] };
  const server = net.createServer((s) => {
    const i = b.conns.push(s) - 1;
    b.got[i] = Buffer.alloc(0);
    s.on('data', (c: Buffer) => (b.got[i] = Buffer.concat([b.got[i]!, c])));
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  b.port = (server.address() as net.AddressInfo).port;
  t.teardown(() => {
    for (const s of b.conns) s.destroy();
    server.close();
  });
  return b;
}

/** The listener's newest connection. */
function newest(l: Listener): import('../../src/connection/connection').Connection {
  return [...l.connections].at(-1)!;
}

/** Bytes the client socket has received so far, as it receives them. */
function received(s: net.Socket): () => Buffer {
  let got = Buffer.alloc(0);
  s.on('data', (c: Buffer) => (got = Buffer.concat([got, c])));
  s.on('error', () => undefined);
  return () => got;
}

/** Write `bytes` one per write, each once `seen()` shows the previous one came out the other side. */
async function byteByByte(to: net.Socket, bytes: Buffer, seen: () => number, base: number): Promise<void> {
  to.setNoDelay(true);
  for (let i = 0; i < bytes.length; i++) {
    to.write(bytes.subarray(i, i + 1));
    const deadline = Date.now() + 5000;
    while (seen() < base + i + 1) {
      if (Date.now() > deadline) throw new Error(`byte ${i} did not come through ipgate`);
      await new Promise((r) => setImmediate(r));
    }
  }
}

/** A HelloRetryRequest cut into one-byte handshake records, then the compatibility CCS. */
const HRR_FRAGMENTED = Buffer.concat([record(22, serverHelloMessage(HRR_RANDOM), 0x0303, 1), CCS_RECORD]);
/** A TLS 1.3 ServerHello (not a retry) in one record. */
const SERVER_HELLO = record(22, serverHelloMessage(Buffer.alloc(32, 0x42)));

for (const path of PATHS)
  t.test(`a raw backend: fragmented retries, held bytes, timeouts (${path.desc})`, async (t) => {
    const ch1 = clientHelloRecord({ sni: WWW });
    const ch2Admin = clientHelloRecord({ sni: ADMIN }, ['p256']);
    const ch2Www = clientHelloRecord({ sni: WWW }, ['p256']);
    const b = await rawBackend(t);
    const upstream = `127.0.0.1:${b.port}`;
    const g = await ipgate(t, path.handles, {
      allowlists: ALLOWLISTS,
      listeners: [
        { name: 'sni', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'open', upstreams: [], routes: routes(upstream) },
        {
          name: 'short',
          mode: 'tcp',
          listen: '127.0.0.1:0',
          allowlist: 'open',
          upstreams: [],
          sni: { helloTimeoutMs: 500 },
          routes: routes(upstream),
        },
        {
          name: 'idle',
          mode: 'tcp',
          listen: '127.0.0.1:0',
          allowlist: 'open',
          upstreams: [],
          timeouts: { idleMs: 500 },
          routes: routes(upstream),
        },
      ],
    });
    const l = g.app.listeners.find((x) => x.name === 'sni')!;
    const retries = (x: Listener, result: string): number => x.stats.sniHelloRetries.get(result) ?? 0;
    const backendGot = async (i: number, n: number): Promise<void> =>
      waitFor(() => (b.got[i]?.length ?? 0) >= n, 5000, `backend connection ${i} got ${n} bytes`);

    let next = 0;
    const open = async (listener = 'sni'): Promise<{ s: net.Socket; got: () => Buffer; i: number }> => {
      const s = await connect({ port: g.port(listener), localAddress: CLIENT, allowHalfOpen: true });
      s.setNoDelay(true);
      return { s, got: received(s), i: next++ };
    };

    await t.test('(g) a retry written byte by byte in one-byte records, then a hello naming admin: closed, never forwarded', async (t) => {
      const c = await open();
      c.s.write(ch1);
      await backendGot(c.i, ch1.length);
      await byteByByte(b.conns[c.i]!, HRR_FRAGMENTED, () => c.got().length, 0);
      t.same(c.got(), HRR_FRAGMENTED, `the client got the retry as written (${HRR_FRAGMENTED.length} one-byte reads)`);
      c.s.write(ch2Admin);
      await closed(c.s);
      await waitFor(() => b.conns[c.i]!.destroyed || b.conns[c.i]!.readableEnded, 5000, 'the backend connection closed');
      t.same(b.got[c.i], ch1, 'the backend got the first hello and nothing else');
      t.equal(retries(l, 'tls_hrr_sni_changed'), 1, 'counted');
    });

    await t.test('(g) the same, with a hello naming www: it reaches the backend, then the relay runs', async (t) => {
      const c = await open();
      c.s.write(ch1);
      await backendGot(c.i, ch1.length);
      await byteByByte(b.conns[c.i]!, HRR_FRAGMENTED, () => c.got().length, 0);
      // Bytes right after the second hello (in the same write) wait for the backend's ServerHello.
      c.s.write(Buffer.concat([ch2Www, Buffer.from('held')]));
      await backendGot(c.i, ch1.length + ch2Www.length);
      t.same(b.got[c.i], Buffer.concat([ch1, ch2Www]), 'the second hello went on once read and checked, without what followed it');
      t.equal(retries(l, 'ok'), 1, 'retries{result=ok}');
      b.conns[c.i]!.write(SERVER_HELLO);
      await backendGot(c.i, ch1.length + ch2Www.length + 4);
      t.equal(b.got[c.i]!.subarray(-4).toString(), 'held', 'the held bytes went on after the ServerHello');
      c.s.write('more');
      await backendGot(c.i, ch1.length + ch2Www.length + 8);
      b.conns[c.i]!.write('back');
      await waitFor(() => c.got().subarray(-4).toString() === 'back', 5000, 'relayed to the client');
      t.pass('the ordinary relay runs both ways after the watch');
      c.s.destroy();
    });

    await t.test("(d) bytes pipelined after the first hello wait for the backend's ServerHello", async (t) => {
      const c = await open();
      const junk = Buffer.from('GET /admin HTTP/1.1\r\nHost: admin.example.com\r\n\r\n');
      c.s.write(Buffer.concat([ch1, junk]));
      await backendGot(c.i, ch1.length);
      // Something that went through ipgate after the junk was read: the client's own round trip.
      await waitFor(() => newest(l).socket.bytesRead === ch1.length + junk.length, 5000, 'ipgate read both');
      t.same(b.got[c.i], ch1, 'before the ServerHello the backend has the hello only');
      b.conns[c.i]!.write(SERVER_HELLO);
      await backendGot(c.i, ch1.length + junk.length);
      t.same(b.got[c.i], Buffer.concat([ch1, junk]), 'after it, the rest, untouched');
      c.s.destroy();
    });

    await t.test('timeouts and faults: each closed with its reason', async (t) => {
      // A client that never sends its second hello: sni.helloTimeoutMs (500 ms on listener short).
      const short = g.app.listeners.find((x) => x.name === 'short')!;
      const quiet = await open('short');
      quiet.s.write(ch1);
      await backendGot(quiet.i, ch1.length);
      b.conns[quiet.i]!.write(HRR_FRAGMENTED);
      await closed(quiet.s);
      await waitFor(() => retries(short, 'tls_timeout') === 1, 5000, 'tls_timeout');
      t.pass('no second hello: closed with tls_timeout, counted as a retry that failed');

      // Half a second hello, then FIN: tls_truncated.
      const half = await open();
      half.s.write(ch1);
      await backendGot(half.i, ch1.length);
      b.conns[half.i]!.write(HRR_FRAGMENTED);
      await waitFor(() => half.got().length === HRR_FRAGMENTED.length, 5000, 'retry received');
      half.s.end(ch2Www.subarray(0, 20));
      await closed(half.s);
      await waitFor(() => retries(l, 'tls_truncated') === 1, 5000, 'tls_truncated');
      t.equal(b.got[half.i]!.length, ch1.length, 'the half hello never reached the backend');

      // An alert instead of the second hello.
      const alert = await open();
      alert.s.write(ch1);
      await backendGot(alert.i, ch1.length);
      b.conns[alert.i]!.write(HRR_FRAGMENTED);
      await waitFor(() => alert.got().length === HRR_FRAGMENTED.length, 5000, 'retry received');
      alert.s.write(Buffer.from([21, 3, 3, 0, 2, 2, 47]));
      await closed(alert.s);
      await waitFor(() => retries(l, 'tls_hrr_unexpected') === 1, 5000, 'tls_hrr_unexpected');
      t.equal(b.got[alert.i]!.length, ch1.length, 'an alert after the retry: tls_hrr_unexpected, nothing forwarded');

      // A backend that does not answer with a ServerHello.
      const plain = await open();
      plain.s.write(ch1);
      await backendGot(plain.i, ch1.length);
      b.conns[plain.i]!.write('HTTP/1.1 400 Bad Request\r\n\r\n');
      await closed(plain.s);
      await waitFor(() => l.stats.closed.get('tls_bad_server_hello') === 1, 5000, 'tls_bad_server_hello');
      t.match(
        g.logs.find((x) => x.msg === 'access' && x.result === 'tls_bad_server_hello'),
        { decision: 'allow', route: 'www' },
        'plaintext from the backend: closed tls_bad_server_hello, an allowed connection the backend failed',
      );
      t.match(
        g.logs.find((x) => x.msg === "the backend's first flight is not a TLS ServerHello"),
        { level: 'warn', detail: /content type 72/ },
        'logged at warn',
      );

      // A backend that never answers: timeouts.idleMs (500 ms on listener idle).
      const idle = g.app.listeners.find((x) => x.name === 'idle')!;
      const silent = await open('idle');
      silent.s.write(Buffer.concat([ch1, ch2Admin]));
      await backendGot(silent.i, ch1.length);
      await closed(silent.s);
      await waitFor(() => idle.stats.closed.get('idle_timeout') === 1, 5000, 'idle_timeout');
      t.same(b.got[silent.i], ch1, 'a silent backend: idle_timeout; the pipelined hello never went on');

      await waitFor(() => l.connections.size === 0, 5000, 'all closed');
      const text = await g.app.metrics.registry.metrics();
      t.match(text, /ipgate_sni_hello_retries_total\{listener="short",result="tls_timeout"\} 1/, 'metric: tls_timeout');
      t.match(
        text,
        /ipgate_connections_closed_total\{listener="sni",route="www",result="tls_bad_server_hello"\} 1/,
        'metric: tls_bad_server_hello',
      );
    });
  });
