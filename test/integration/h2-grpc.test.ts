/**
 * gRPC end to end through ipgate (docs/http-engines.md "gRPC"): a @grpc/grpc-js client over TLS
 * (ALPN h2) to a TLS listener whose route speaks HTTP/2 to its upstream (`upstreamProtocol: h2c`,
 * or `h2` with the CA to trust), a @grpc/grpc-js server behind. Unary, server-streaming,
 * bidirectional calls, a trailers-only error status, cancellation, a deadline, a 10 MiB message,
 * the allowlist per call, the identity headers upstream, one shared upstream connection, keepalive
 * pings both ways, RST_STREAM both ways. Messages are raw bytes (no protobuf needed: a service
 * definition with identity serialisers).
 */
import fs from 'node:fs';
import http2 from 'node:http2';
import type net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import t, { type Test } from 'tap';
import { CertDir } from '../helpers/certs';
import { startIpgate, type Started } from '../helpers/ipgate';
import { waitFor } from '../helpers/net';
import { missing } from '../helpers/peers';

const skip = missing('openssl');
const certs = skip ? null : new CertDir();
const front = certs?.issue('front', { cn: 'grpc.test', dns: ['grpc.test', 'plain.test'], kind: 'ec' });
const back = certs?.issue('back', { cn: 'localhost', dns: ['localhost'], kind: 'ec' });
if (certs !== null) certs.ca('other');

const id = (b: Buffer): Buffer => b;
const method = (name: string, requestStream: boolean, responseStream: boolean): grpc.MethodDefinition<Buffer, Buffer> => ({
  path: `/test.Echo/${name}`,
  requestStream,
  responseStream,
  requestSerialize: id,
  requestDeserialize: id,
  responseSerialize: id,
  responseDeserialize: id,
});
const SERVICE = {
  Unary: method('Unary', false, false),
  Fail: method('Fail', false, false),
  Slow: method('Slow', false, false),
  Stream: method('Stream', false, true),
  Bidi: method('Bidi', true, true),
} as const;
const MAX = 16 * 1024 * 1024;
const OPTIONS = { 'grpc.max_receive_message_length': MAX, 'grpc.max_send_message_length': MAX };

interface Backend {
  port: number;
  seen: grpc.Metadata[];
  cancelled: () => number;
  deadlines: number[];
}

async function grpcServer(t: Test, tls = false): Promise<Backend> {
  const seen: grpc.Metadata[] = [];
  const deadlines: number[] = [];
  let cancelled = 0;
  const server = new grpc.Server(OPTIONS);
  server.addService(SERVICE as unknown as grpc.ServiceDefinition, {
    Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      seen.push(call.metadata);
      const md = new grpc.Metadata();
      md.set('x-seen-bytes', String(call.request.length));
      call.sendMetadata(md);
      cb(null, call.request);
    },
    Fail: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      cb({ code: grpc.status.NOT_FOUND, details: 'no such thing' }, null);
    },
    Slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      const d = call.getDeadline();
      deadlines.push(d instanceof Date ? d.getTime() : d);
      call.on('cancelled', () => cancelled++);
      const timer = setTimeout(() => cb(null, Buffer.from('late')), 5000);
      call.on('cancelled', () => clearTimeout(timer));
    },
    Stream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      const n = call.request.readUInt32BE(0);
      for (let i = 0; i < n; i++) call.write(Buffer.from(`message ${i}`));
      const md = new grpc.Metadata();
      md.set('x-end', 'yes');
      call.end(md);
    },
    Bidi: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', (b: Buffer) => call.write(Buffer.concat([Buffer.from('echo:'), b])));
      call.on('end', () => call.end());
    },
  });
  const creds = tls
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: fs.readFileSync(back!.cert), private_key: fs.readFileSync(back!.key) }])
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', creds, (err, p) => (err !== null ? reject(err) : resolve(p))),
  );
  t.teardown(() => new Promise<void>((r) => server.tryShutdown(() => r())));
  return { port, seen, cancelled: () => cancelled, deadlines };
}

async function gate(
  t: Test,
  upstream: string,
  extra: Record<string, unknown> = {},
  lists: Record<string, unknown> = { main: ['127.0.0.0/8'] },
): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: lists,
      listeners: [
        {
          name: 'edge',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [upstream],
          tls: { certificates: [{ cert: front!.cert, key: front!.key }] },
          http: { upstreamProtocol: 'h2c', ...extra },
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

type EchoClient = grpc.Client &
  Record<
    keyof typeof SERVICE,
    (...args: unknown[]) => grpc.ClientUnaryCall & grpc.ClientReadableStream<Buffer> & grpc.ClientDuplexStream<Buffer, Buffer>
  >;
const Client = grpc.makeGenericClientConstructor(SERVICE as unknown as grpc.ServiceDefinition, 'Echo');

function client(t: Test, port: number, opts: Record<string, unknown> = {}): EchoClient {
  const creds = grpc.credentials.createSsl(fs.readFileSync(certs!.file('ca.crt')));
  const c = new Client(`127.0.0.1:${port}`, creds, {
    ...OPTIONS,
    'grpc.ssl_target_name_override': 'grpc.test',
    'grpc.default_authority': 'grpc.test',
    ...opts,
  }) as unknown as EchoClient;
  t.teardown(() => c.close());
  return c;
}

function unary(
  c: EchoClient,
  name: 'Unary' | 'Fail' | 'Slow',
  req: Buffer,
  options: grpc.CallOptions = {},
): Promise<{ err: grpc.ServiceError | null; res: Buffer | null; md: grpc.Metadata | null }> {
  return new Promise((resolve) => {
    let md: grpc.Metadata | null = null;
    const call = c[name](req, new grpc.Metadata(), options, (err: grpc.ServiceError | null, res: Buffer | null) =>
      resolve({ err, res, md }),
    );
    call.on('metadata', (m: grpc.Metadata) => {
      md = m;
    });
  });
}

t.test(
  'unary, server-streaming, bidirectional, a trailers-only error; identity headers upstream; one upstream connection',
  { skip },
  async (t) => {
    const b = await grpcServer(t);
    const g = await gate(t, `127.0.0.1:${b.port}`);
    const c = client(t, g.port());
    const r = await unary(c, 'Unary', Buffer.from('hello'));
    t.equal(r.err, null, 'unary: OK');
    t.equal(r.res?.toString(), 'hello', 'unary: the message echoed');
    t.equal(r.md?.get('x-seen-bytes')[0], '5', 'unary: the response metadata (headers) came through');
    const md = b.seen[0]!;
    t.equal(md.get('x-real-ip')[0], '127.0.0.1', 'the gRPC server sees the client in X-Real-IP');
    t.equal(md.get('x-forwarded-proto')[0], 'https');
    t.match(String(md.get(':authority')[0] ?? 'grpc.test'), /grpc\.test/, 'the authority is the one routed');

    const messages: string[] = [];
    let trailer: grpc.Metadata | null = null;
    const n = Buffer.alloc(4);
    n.writeUInt32BE(50);
    const stream = c.Stream(n);
    stream.on('data', (m: Buffer) => messages.push(m.toString()));
    stream.on('status', (s: grpc.StatusObject) => {
      trailer = s.metadata;
    });
    await new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    t.equal(messages.length, 50, 'server-streaming: 50 messages');
    t.equal(messages[49], 'message 49');
    await waitFor(() => trailer !== null, 5000, 'the status');
    t.equal(trailer!.get('x-end')[0], 'yes', 'server-streaming: the trailing metadata came through as trailers');

    const bidi = c.Bidi();
    const echoed: string[] = [];
    bidi.on('data', (m: Buffer) => echoed.push(m.toString()));
    for (const w of ['a', 'b', 'c']) bidi.write(Buffer.from(w));
    bidi.end();
    await new Promise<void>((resolve, reject) => {
      bidi.on('end', resolve);
      bidi.on('error', reject);
    });
    t.same(echoed, ['echo:a', 'echo:b', 'echo:c'], 'bidirectional: each message echoed');

    const f = await unary(c, 'Fail', Buffer.from('x'));
    t.equal(f.err?.code, grpc.status.NOT_FOUND, 'a trailers-only error: grpc-status NOT_FOUND');
    t.equal(f.err?.details, 'no such thing', 'and its grpc-message');

    t.equal(g.app.listeners[0]!.stats.upstreamConnect.count, 1, 'every call went over one shared upstream connection');
    await waitFor(() => g.logs.lines.filter((l) => l.msg === 'access' && l.protocol === 'h2').length >= 4, 5000, 'access lines');
    t.match(
      g.logs.find((l) => l.msg === 'access' && l.path === '/test.Echo/Unary'),
      { protocol: 'h2', status: 200, upstream: `127.0.0.1:${b.port}` },
    );
  },
);

t.test('a 10 MiB message each way under flow control', { skip }, async (t) => {
  const b = await grpcServer(t);
  const g = await gate(t, `127.0.0.1:${b.port}`);
  const c = client(t, g.port());
  const big = Buffer.alloc(10 * 1024 * 1024);
  for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i);
  const r = await unary(c, 'Unary', big);
  t.equal(r.err, null, 'OK');
  t.ok(r.res?.equals(big), '10 MiB echoed intact');
});

t.test('cancellation (RST_STREAM to the upstream) and a deadline (grpc-timeout passed on)', { skip }, async (t) => {
  const b = await grpcServer(t);
  const g = await gate(t, `127.0.0.1:${b.port}`);
  const c = client(t, g.port());
  const call = c.Slow(Buffer.from('x'), new grpc.Metadata(), {}, () => undefined);
  await waitFor(() => b.deadlines.length === 1, 5000, 'the call reached the server');
  t.equal(b.deadlines[0], Infinity, 'no deadline: none upstream');
  call.cancel();
  await waitFor(() => b.cancelled() === 1, 5000, 'the server saw the cancellation');
  t.pass("the client's CANCEL reached the server as a reset");
  const started = Date.now();
  const r = await unary(c, 'Slow', Buffer.from('y'), { deadline: Date.now() + 300 });
  t.equal(r.err?.code, grpc.status.DEADLINE_EXCEEDED, "the client's deadline: DEADLINE_EXCEEDED");
  t.ok(Date.now() - started < 3000, 'well before the server would have answered');
  await waitFor(() => b.deadlines.length === 2, 5000, 'the second call reached the server');
  t.ok(Number.isFinite(b.deadlines[1]) && b.deadlines[1]! <= started + 1000, 'the server got the deadline (grpc-timeout passed on)');
  await waitFor(() => b.cancelled() === 2, 5000, 'and gave up at it');
});

t.test('the allowlist per call: a denied client gets PERMISSION_DENIED (403), nothing reaches the server', { skip }, async (t) => {
  const b = await grpcServer(t);
  const g = await gate(t, `127.0.0.1:${b.port}`, {}, { main: ['127.0.0.5/32'] });
  const denied = client(t, g.port());
  const r = await unary(denied, 'Unary', Buffer.from('x'));
  t.equal(r.err?.code, grpc.status.PERMISSION_DENIED, 'HTTP 403 is PERMISSION_DENIED to a gRPC client');
  t.equal(b.seen.length, 0, 'nothing reached the server');
  t.equal(g.app.listeners[0]!.stats.denied.get('not_allowlisted'), 1, 'counted as a denial');
});

t.test('upstreamProtocol h2: TLS to the gRPC server verified against upstreamCA; a wrong CA is 502 (UNAVAILABLE)', { skip }, async (t) => {
  const b = await grpcServer(t, true);
  const g = await gate(t, `localhost:${b.port}`, { upstreamProtocol: 'h2', upstreamCA: certs!.file('ca.crt') });
  const r = await unary(client(t, g.port()), 'Unary', Buffer.from('over tls'));
  t.equal(r.err, null, 'OK over TLS to the upstream');
  t.equal(r.res?.toString(), 'over tls');
  const wrong = await gate(t, `localhost:${b.port}`, { upstreamProtocol: 'h2', upstreamCA: certs!.file('other.crt') });
  const w = await unary(client(t, wrong.port()), 'Unary', Buffer.from('x'));
  t.equal(w.err?.code, grpc.status.UNAVAILABLE, 'a certificate the CA does not vouch for: 502, UNAVAILABLE');
  t.equal(b.seen.length, 1, 'the second call never reached the server');
});

t.test('an HTTP/1.1 request to an HTTP/2-only route is answered 505 (h2_required)', { skip }, async (t) => {
  const b = await grpcServer(t);
  const g = await gate(t, `127.0.0.1:${b.port}`);
  const res = await new Promise<string>((resolve) => {
    const s = require('node:tls').connect(
      { port: g.port(), host: '127.0.0.1', servername: 'grpc.test', ALPNProtocols: ['http/1.1'], rejectUnauthorized: false },
      () => {
        s.write('POST /test.Echo/Unary HTTP/1.1\r\nhost: grpc.test\r\ncontent-length: 0\r\n\r\n');
      },
    );
    let out = '';
    s.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\r\n\r\n')) {
        resolve(out);
        s.destroy();
      }
    });
  });
  t.match(res, /^HTTP\/1\.1 505 /, '505');
  t.equal(b.seen.length, 0, 'nothing reached the server');
});

t.test("keepalive pings: the client's are answered, ipgate pings a busy upstream connection", { skip }, async (t) => {
  // A plain HTTP/2 upstream that counts PINGs and streams a response slowly.
  let pings = 0;
  const up = http2.createServer();
  up.on('session', (s) => s.on('ping', () => pings++));
  up.on('stream', (st) => {
    st.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    st.on('wantTrailers', () => st.sendTrailers({ 'grpc-status': '0' }));
    let i = 0;
    const tick = setInterval(() => {
      const m = Buffer.alloc(5 + 4);
      m.writeUInt32BE(4, 1);
      m.write('tick', 5);
      st.write(m);
      if (++i === 15) {
        clearInterval(tick);
        st.end();
      }
    }, 200);
    st.on('close', () => clearInterval(tick));
  });
  await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => up.close(() => r())));
  const g = await gate(t, `127.0.0.1:${(up.address() as net.AddressInfo).port}`, { upstreamPingIntervalMs: 1000 });
  const c = client(t, g.port(), {
    'grpc.keepalive_time_ms': 500,
    'grpc.keepalive_timeout_ms': 1000,
    'grpc.keepalive_permit_without_calls': 1,
  });
  const n = Buffer.alloc(4);
  const s = c.Stream(n);
  let got = 0;
  s.on('data', () => got++);
  const status = await new Promise<grpc.StatusObject>((resolve) => s.on('status', resolve));
  t.equal(status.code, grpc.status.OK, 'a 3-second stream with client pings every 500 ms ends OK');
  t.equal(got, 15, 'every message');
  t.ok(pings >= 1, `ipgate pinged the upstream connection while it was busy (${pings})`);
  t.equal(
    g.app.listeners[0]!.stats.closed.get('h2_control_flood') ?? 0,
    0,
    "the client's keepalive pings are within the control-frame budget",
  );
});

t.test('RST_STREAM from the upstream reaches the client with its code', { skip }, async (t) => {
  const up = http2.createServer();
  up.on('stream', (st) => {
    st.on('error', () => undefined); // its own reset, below
    st.respond({ ':status': 200, 'content-type': 'application/grpc' });
    st.write(Buffer.from([0, 0, 0, 0, 1, 0x61]));
    setTimeout(() => st.close(http2.constants.NGHTTP2_REFUSED_STREAM), 100);
  });
  await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => up.close(() => r())));
  const g = await gate(t, `127.0.0.1:${(up.address() as net.AddressInfo).port}`);
  const s = http2.connect(`https://127.0.0.1:${g.port()}`, { ca: fs.readFileSync(certs!.file('ca.crt')), servername: 'grpc.test' });
  t.teardown(() => s.destroy());
  s.on('error', () => undefined);
  const req = s.request({
    ':method': 'POST',
    ':path': '/test.Echo/Unary',
    ':authority': 'grpc.test',
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  req.on('error', () => undefined);
  req.resume();
  await new Promise((r) => req.on('close', r));
  t.equal(req.rstCode, http2.constants.NGHTTP2_REFUSED_STREAM, "the client's stream is reset with the upstream's code");
});
