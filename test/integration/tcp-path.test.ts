/**
 * The TCP path end to end over real loopback sockets: accept -> PROXY decode -> identity ->
 * allowlist -> forward (outbound PROXY header) -> the echo backend, which reports the client
 * address it learned. Distinct clients are sockets bound to distinct 127.0.0.x addresses.
 */
import net from 'node:net';
import type { Connection } from '../../src/connection/connection';
import type { PpReason } from '../../src/proxy-protocol/codes';
import t, { type Test } from 'tap';
import { createTcpEcho } from '../../src/echo/echo-server';
import { encodeProxyV1, encodeProxyV2, encodeProxyV2Local } from '../../src/proxy-protocol/encoder';
import { RawSocket } from '../../src/transport/raw-socket';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, connect, readAll, readLine, readUntil, stalledPort, waitFor } from '../helpers/net';

async function echoBackend(t: Test, host = '127.0.0.1'): Promise<number> {
  const server = createTcpEcho();
  await new Promise<void>((r) => server.listen(0, host, r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

async function gate(t: Test, listener: Record<string, unknown>, allow: string[] = ['127.0.0.1/32', '::1/128']): Promise<Started> {
  const g = await startIpgate({
    allowlists: { main: allow },
    listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', ...listener }],
  });
  t.teardown(() => g.app.shutdown(0));
  return g;
}

t.test('allowed client: the backend learns its address through an outbound PROXY header', async (t) => {
  const backend = await echoBackend(t);
  for (const version of ['v1', 'v2'] as const) {
    const g = await gate(t, { upstreams: [`127.0.0.1:${backend}`], outboundProxyProtocol: version }, ['127.0.0.3/32']);
    const c = await connect({ port: g.port(), localAddress: '127.0.0.3' });
    const line = await readLine(c);
    t.match(line, new RegExp(`^ipgate-echo client=127\\.0\\.0\\.3:${c.localPort} via=proxy-${version} peer=127\\.0\\.0\\.1:`), version);
    c.write('hello');
    const echoed = await readUntil(c, 'hello');
    t.equal(echoed.toString(), 'hello', `${version}: payload echoed`);
    c.end();
    await closed(c);
  }
});

t.test('denied client is closed and the backend receives nothing', async (t) => {
  let backendConnections = 0;
  const server = net.createServer((s) => {
    backendConnections++;
    s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const g = await gate(t, { upstreams: [`127.0.0.1:${(server.address() as net.AddressInfo).port}`] }, ['127.0.0.3/32']);
  const c = await connect({ port: g.port(), localAddress: '127.0.0.4' });
  c.write('should not arrive');
  const got = await readAll(c);
  t.equal(got.length, 0, 'nothing sent to the denied client');
  t.equal(backendConnections, 0, 'the backend was never dialled');
  await waitFor(() => g.app.listeners[0]!.stats.closed.get('denied') === 1);
  t.equal(g.app.listeners[0]!.stats.denied.get('not_allowlisted'), 1, 'denial counted by reason');
});

t.test('without an outbound header the bytes pass untouched both ways', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${backend}`] });
  const c = await connect({ port: g.port() });
  c.write('PING\n');
  const line = await readLine(c);
  // The echo saw no PROXY header: it reports the proxy's own socket as the client.
  t.match(line, /via=socket/);
  await t.equal((await readUntil(c, 'PING\n')).toString(), 'PING\n', 'payload untouched');
  c.destroy();
});

t.test('IPv6 client on ::1 and IPv4-mapped peers on a dual-stack listener', async (t) => {
  const backend = await echoBackend(t);
  const g = await startIpgate({
    allowlists: { main: ['::1/128', '127.0.0.9/32'] },
    listeners: [
      { name: 'dual', mode: 'tcp', listen: '[::]:0', allowlist: 'main', upstreams: [`127.0.0.1:${backend}`], outboundProxyProtocol: 'v2' },
    ],
  });
  t.teardown(() => g.app.shutdown(0));
  const v6 = net.connect({ host: '::1', port: g.port() });
  t.match(await readLine(v6), /^ipgate-echo client=\[::1\]:\d+ via=proxy-v2/, 'IPv6 client forwarded as IPv6');
  v6.destroy();
  // Node reports an IPv4 peer on [::] as ::ffff:127.0.0.9; ipgate must treat it as 127.0.0.9.
  const mapped = await connect({ port: g.port(), localAddress: '127.0.0.9' });
  t.match(await readLine(mapped), /^ipgate-echo client=127\.0\.0\.9:\d+ via=proxy-v2/, 'mapped peer canonicalised to IPv4');
  mapped.destroy();
  const denied = await connect({ port: g.port(), localAddress: '127.0.0.10' });
  t.equal((await readAll(denied)).length, 0, 'mapped peer not on the list is denied');
});

t.test('inbound PROXY from a trusted source: the header address is the client, checked against the allowlist', async (t) => {
  const backend = await echoBackend(t);
  for (const mode of ['optional', 'required'] as const) {
    const g = await gate(
      t,
      {
        upstreams: [`127.0.0.1:${backend}`],
        outboundProxyProtocol: 'v1',
        proxyProtocol: { mode, trustedSources: ['127.0.0.2/32'] },
      },
      ['198.51.100.0/24', '2001:db8::/32'],
    );
    const cases: Array<[string, Buffer, RegExp | null]> = [
      [
        'v1 allowed',
        encodeProxyV1({ address: '198.51.100.7', port: 4000 }, { address: '127.0.0.1', port: 80 }),
        /client=198\.51\.100\.7:4000 via=proxy-v1/,
      ],
      [
        'v2 allowed',
        encodeProxyV2({ address: '198.51.100.8', port: 4001 }, { address: '127.0.0.1', port: 80 }),
        /client=198\.51\.100\.8:4001 via=proxy-v1/,
      ],
      [
        'v2 IPv6 allowed',
        encodeProxyV2({ address: '2001:db8::5', port: 4002 }, { address: '::1', port: 80 }),
        /client=\[2001:db8::5\]:4002 via=proxy-v1/,
      ],
      ['v2 denied address', encodeProxyV2({ address: '203.0.113.1', port: 4003 }, { address: '127.0.0.1', port: 80 }), null],
      // LOCAL: the balancer's own health check; the socket address (127.0.0.2) is the client, not listed.
      ['v2 LOCAL uses the socket address', encodeProxyV2Local(), null],
    ];
    for (const [name, header, expect] of cases) {
      const c = await connect({ port: g.port(), localAddress: '127.0.0.2' });
      c.write(Buffer.concat([header, Buffer.from('after-header')]));
      if (expect === null) {
        t.equal((await readAll(c)).length, 0, `${mode}: ${name}: closed`);
        continue;
      }
      t.match(await readLine(c), expect, `${mode}: ${name}`);
      // Bytes after the header in the same segment arrive untouched.
      t.equal((await readUntil(c, 'after-header')).toString(), 'after-header', `${mode}: ${name}: bytes after the header untouched`);
      c.destroy();
    }
  }
});

t.test('a PROXY header from an untrusted peer closes the connection (pp_untrusted)', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${backend}`],
      proxyProtocol: { mode: 'optional', trustedSources: ['127.0.0.2/32'] },
    },
    ['127.0.0.0/8', '198.51.100.0/24'],
  );
  for (const header of [
    encodeProxyV1({ address: '198.51.100.7', port: 1 }, { address: '127.0.0.1', port: 2 }),
    encodeProxyV2({ address: '198.51.100.7', port: 1 }, { address: '127.0.0.1', port: 2 }),
  ]) {
    const c = await connect({ port: g.port(), localAddress: '127.0.0.5' });
    c.write(header);
    t.equal((await readAll(c)).length, 0, 'closed without forwarding');
  }
  const stats = g.app.listeners[0]!.stats;
  await waitFor(() => stats.denied.get('pp_untrusted') === 2);
  t.equal(stats.proxyHeader.get('v1/pp_untrusted'), 1);
  t.equal(stats.proxyHeader.get('v2/pp_untrusted'), 1);
  // optional mode: the same untrusted peer without a header is served as itself.
  const plain = await connect({ port: g.port(), localAddress: '127.0.0.5' });
  plain.write('hi\n');
  await readUntil(plain, 'hi\n');
  t.pass('plain connection from an untrusted peer is served in optional mode');
  plain.destroy();
});

t.test('required mode: untrusted peers and trusted peers without a header are closed', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${backend}`],
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.2/32'] },
    },
    ['127.0.0.0/8'],
  );
  const untrusted = await connect({ port: g.port(), localAddress: '127.0.0.6' });
  t.equal((await readAll(untrusted)).length, 0, 'untrusted closed');
  const noHeader = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  noHeader.write('GET / HTTP/1.1\r\n\r\n');
  t.equal((await readAll(noHeader)).length, 0, 'trusted peer without a header closed');
  const stats = g.app.listeners[0]!.stats;
  await waitFor(() => g.app.listeners[0]!.connections.size === 0);
  t.equal(stats.denied.get('pp_untrusted'), 1);
  t.equal(stats.denied.get('pp_missing'), 1);
});

t.test('malformed headers close that one connection with the reason code', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${backend}`],
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.2/32'] },
    },
    ['0.0.0.0/0'],
  );
  const bad: Array<[string, PpReason]> = [
    ['PROXY TCP4 256.1.1.1 127.0.0.1 1 2\r\n', 'pp_bad_address'],
    ['PROXY TCP4 1.1.1.1 127.0.0.1 1 65536\r\n', 'pp_bad_port'],
    [`PROXY TCP4 1.1.1.1 127.0.0.1 1 2${' '.repeat(10)}\r\n`, 'pp_bad_syntax'],
    [`PROXY UNKNOWN ${'x'.repeat(120)}\r\n`, 'pp_too_long'],
  ];
  for (const [header, reason] of bad) {
    const c = await connect({ port: g.port(), localAddress: '127.0.0.2' });
    c.write(header);
    t.equal((await readAll(c)).length, 0, `${reason}: closed`);
    await waitFor(() => (g.app.listeners[0]!.stats.denied.get(reason) ?? 0) >= 1, 5000, reason);
  }
  // ...and the listener keeps serving good clients.
  const ok = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  ok.write(Buffer.concat([encodeProxyV2({ address: '192.0.2.1', port: 9 }, { address: '127.0.0.1', port: 1 }), Buffer.from('x\n')]));
  t.match(await readLine(ok), /client=127\.0\.0\.1:\d+ via=socket/, 'served after bad ones (no outbound header configured)');
  ok.destroy();
});

t.test('a header split into one-byte segments is reassembled', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${backend}`],
      outboundProxyProtocol: 'v2',
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.2/32'] },
    },
    ['198.51.100.0/24'],
  );
  for (const header of [
    encodeProxyV1({ address: '198.51.100.1', port: 5 }, { address: '127.0.0.1', port: 6 }),
    encodeProxyV2({ address: '198.51.100.2', port: 7 }, { address: '127.0.0.1', port: 8 }),
  ]) {
    const c = await connect({ port: g.port(), localAddress: '127.0.0.2' });
    c.setNoDelay(true);
    for (const byte of header) {
      c.write(Buffer.from([byte]));
      await new Promise((r) => setImmediate(r));
    }
    t.match(await readLine(c), /client=198\.51\.100\.[12]:[57] via=proxy-v2/);
    c.destroy();
  }
});

t.test('slow-loris: a header started then silent is closed at the header timeout', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${backend}`],
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.2/32'], headerTimeoutMs: 300 },
    },
    ['0.0.0.0/0'],
  );
  const c = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  c.write('\r\n\r\n\0\r\nQUIT\n'); // the v2 signature, then nothing
  const ms = await closed(c, 5000);
  t.ok(ms >= 250 && ms < 2000, `closed after ${ms} ms (timeout 300 ms)`);
  await waitFor(() => g.app.listeners[0]!.stats.denied.get('pp_timeout') === 1);
});

t.test('a header that never completes: the reason and version label say how it ended', async (t) => {
  // The PROXY stage's answers that are not the decoder's (listener/header-stage.ts): the timer, or
  // the peer's FIN, with nothing or part of a header read.
  const backend = await echoBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${backend}`],
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.2/32'], headerTimeoutMs: 300 },
    },
    ['0.0.0.0/0'],
  );
  const rows: { description: string; send: string; fin: boolean; label: string; reason: PpReason }[] = [
    { description: 'nothing sent, then silence', send: '', fin: false, label: 'none/pp_timeout', reason: 'pp_timeout' },
    {
      description: 'part of a v1 header, then silence',
      send: 'PROXY TCP4 ',
      fin: false,
      label: 'unknown/pp_timeout',
      reason: 'pp_timeout',
    },
    { description: 'nothing sent, then FIN', send: '', fin: true, label: 'unknown/pp_missing', reason: 'pp_missing' },
    { description: 'part of a v1 header, then FIN', send: 'PROXY TCP4 ', fin: true, label: 'unknown/pp_truncated', reason: 'pp_truncated' },
  ];
  const stats = g.app.listeners[0]!.stats;
  for (const row of rows) {
    const labelBefore = stats.proxyHeader.get(row.label) ?? 0;
    const deniedBefore = stats.denied.get(row.reason) ?? 0;
    const c = await connect({ port: g.port(), localAddress: '127.0.0.2' });
    if (row.fin) c.end(row.send);
    else if (row.send !== '') c.write(row.send);
    t.equal((await readAll(c)).length, 0, `${row.description}: closed, nothing sent back`);
    await waitFor(() => stats.proxyHeader.get(row.label) === labelBefore + 1, 5000, `${row.description}: ${row.label}`);
    t.equal(stats.denied.get(row.reason), deniedBefore + 1, `${row.description}: denied as ${row.reason}`);
  }
});

t.test('500 half-sent headers at once do not stop a good client', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${backend}`],
      outboundProxyProtocol: 'v1',
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.0/8'], headerTimeoutMs: 5000 },
    },
    ['198.51.100.0/24'],
  );
  const loris: net.Socket[] = [];
  for (let i = 0; i < 500; i++) {
    const s = await connect({ port: g.port(), localAddress: `127.0.1.${(i % 250) + 1}` });
    s.on('error', () => undefined);
    s.write('PROXY TCP4 198.51.100.');
    loris.push(s);
  }
  t.teardown(() =>
    loris.forEach((s) => {
      s.destroy();
    }),
  );
  await waitFor(() => g.app.listeners[0]!.connections.size >= 500);
  const start = Date.now();
  const good = await connect({ port: g.port(), localAddress: '127.0.0.2' });
  good.write(encodeProxyV1({ address: '198.51.100.99', port: 1234 }, { address: '127.0.0.1', port: 1 }));
  t.match(await readLine(good), /client=198\.51\.100\.99:1234 via=proxy-v1/);
  t.ok(Date.now() - start < 1000, `good client served in ${Date.now() - start} ms while 500 headers hang`);
  good.destroy();
});

t.test('round robin over upstreams, failover on a refused connect, 502-equivalent close when all fail', async (t) => {
  const a = await echoBackend(t);
  const b = await echoBackend(t);
  const dead = await (async () => {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    const p = (s.address() as net.AddressInfo).port;
    await new Promise((r) => s.close(r));
    return p;
  })();
  const g = await gate(t, { upstreams: [`127.0.0.1:${a}`, `127.0.0.1:${dead}`, `127.0.0.1:${b}`], outboundProxyProtocol: 'v2' });
  const seen: string[] = [];
  for (let i = 0; i < 6; i++) {
    const c = await connect({ port: g.port() });
    t.match(await readLine(c), /via=proxy-v2/, `connection ${i} served`);
    seen.push([...g.app.listeners[0]!.connections][0]!.upstream!);
    c.destroy();
    await waitFor(() => g.app.listeners[0]!.connections.size === 0);
  }
  t.same(new Set(seen), new Set([`127.0.0.1:${a}`, `127.0.0.1:${b}`]), 'both live upstreams used, the dead one skipped');
  t.ok((g.app.listeners[0]!.stats.upstreamErrors.get('upstream_refused') ?? 0) >= 2, 'refusals counted');

  const allDead = await gate(t, { upstreams: [`127.0.0.1:${dead}`] });
  const c = await connect({ port: allDead.port() });
  t.equal((await readAll(c)).length, 0, 'client closed cleanly when no upstream answers');
  await waitFor(() => allDead.app.listeners[0]!.stats.closed.get('upstream_refused') === 1);
});

t.test('half-close: the client FIN reaches the backend while the other direction keeps flowing', async (t) => {
  // Backend: read until EOF, then answer with what it read, then close.
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('end', () => {
      setTimeout(() => s.end(`got ${Buffer.concat(chunks).length} bytes after EOF`), 50);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const g = await gate(t, { upstreams: [`127.0.0.1:${(server.address() as net.AddressInfo).port}`] });
  const c = await connect({ port: g.port(), allowHalfOpen: true });
  c.end(Buffer.alloc(100_000, 7));
  const reply = await readAll(c);
  t.equal(reply.toString(), 'got 100000 bytes after EOF');
});

t.test('idle timeout closes a stream silent in both directions', async (t) => {
  const backend = await echoBackend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${backend}`], timeouts: { idleMs: 300 } });
  const c = await connect({ port: g.port() });
  const ms = await closed(c, 5000);
  t.ok(ms >= 250 && ms < 2500, `closed after ${ms} ms`);
  await waitFor(() => g.app.listeners[0]!.stats.closed.get('idle_timeout') === 1);
});

t.test('idle timeout: traffic keeps a stream open past it, silence then closes it', async (t) => {
  // The timer is re-armed for the time left when it fires after activity (TcpForwarder.handle):
  // 8 echoes 150 ms apart span 1,050 ms, more than twice the 400 ms timeout.
  const backend = await echoBackend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${backend}`], timeouts: { idleMs: 400 } });
  const c = await connect({ port: g.port() });
  let ended = false;
  c.once('close', () => {
    ended = true;
  });
  for (let i = 0; i < 8; i++) {
    if (i > 0) await new Promise((r) => setTimeout(r, 150));
    c.write(`ping ${i}\n`);
    await readUntil(c, `ping ${i}\n`, 2000);
  }
  t.notOk(ended, 'open after 1,050 ms of traffic every 150 ms');
  t.equal(g.app.listeners[0]!.stats.closed.get('idle_timeout') ?? 0, 0, 'no idle timeout counted while active');
  const ms = await closed(c, 5000);
  t.ok(ms >= 300 && ms < 2500, `closed ${ms} ms after the last echo (idle timeout 400 ms)`);
  await waitFor(() => g.app.listeners[0]!.stats.closed.get('idle_timeout') === 1);
});

t.test('relayed connections share every socket handler: none is made per connection', async (t) => {
  // A handler made per connection is a closure and a context kept for the connection's life
  // (bench/README.md "A TCP connection's relay without closures"): the libuv-handle path installs
  // functions shared by every connection, which find their socket's peer and record in its slots.
  const backend = await echoBackend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${backend}`] });
  const clients = [await connect({ port: g.port() }), await connect({ port: g.port() })];
  for (const [i, c] of clients.entries()) {
    c.write(`hello ${i}\n`);
    await readUntil(c, `hello ${i}\n`);
  }
  const conns = [...g.app.listeners[0]!.connections];
  t.equal(conns.length, 2, 'two open connections');
  const [a, b] = conns as [Connection, Connection];
  if (!g.app.listeners[0]!.rawSockets) {
    // tcp-sockets.test.ts runs this suite again with IPGATE_TCP_HANDLES=0: the net.Socket relay
    // (netRelayPair) registers listeners, not these callback slots.
    t.notOk(a.socket instanceof RawSocket, 'net.Sockets when handles are off: the slots below are the handle path');
    for (const c of clients) c.destroy();
    return;
  }
  t.ok(a.socket instanceof RawSocket && a.upstreamSocket instanceof RawSocket, 'both sides on libuv handles');
  const sides = (c: Connection): [string, RawSocket][] => [
    ['client', c.socket as RawSocket],
    ['upstream', c.upstreamSocket as RawSocket],
  ];
  for (const [[side, sa], [, sb]] of sides(a).map((s, i) => [s, sides(b)[i]!] as const)) {
    for (const h of ['onData', 'onEnd', 'onDrain', 'onFinish', 'onError'] as const) {
      t.type(sa[h], 'function', `${side} ${h} is set`);
      t.equal(sa[h], sb[h], `${side} ${h}: one function for both connections`);
    }
    t.equal(sa.peer, side === 'client' ? a.upstreamSocket : a.socket, `${side}: its peer is the other side`);
  }
  for (const c of clients) c.destroy();
});

t.test('a reset on either side mid-stream closes the other side', async (t) => {
  // The backend keeps each connection and says when its first bytes came and when it closed.
  const conns: { socket: net.Socket; got: Promise<void>; gone: Promise<string> }[] = [];
  const server = net.createServer((s) => {
    const got = new Promise<void>((r) => s.once('data', () => r()));
    const gone = new Promise<string>((r) => {
      s.on('error', (e: NodeJS.ErrnoException) => r(e.code ?? 'error'));
      s.on('close', () => r('close'));
    });
    conns.push({ socket: s, got, gone });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const c of conns) c.socket.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const g = await gate(t, { upstreams: [`127.0.0.1:${(server.address() as net.AddressInfo).port}`] });
  const within = <T>(p: Promise<T>, what: string): Promise<T> =>
    Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within 3 s`)), 3000))]);

  // The client resets: the backend's connection closes.
  const a = await connect({ port: g.port() });
  a.write('from a');
  await waitFor(() => conns.length === 1);
  await within(conns[0]!.got, 'the backend read the client');
  a.resetAndDestroy();
  t.ok(await within(conns[0]!.gone, 'the backend connection closed'), 'a client reset closes the upstream connection');

  // The backend resets: the client closes, counted as upstream_reset.
  const b = await connect({ port: g.port() });
  b.on('error', () => undefined);
  b.write('from b');
  await waitFor(() => conns.length === 2);
  await within(conns[1]!.got, 'the backend read the client');
  const clientGone = closed(b, 3000);
  conns[1]!.socket.resetAndDestroy();
  t.ok((await clientGone) >= 0, 'an upstream reset closes the client');
  await waitFor(() => g.app.listeners[0]!.stats.closed.get('upstream_reset') === 1, 3000, 'upstream_reset counted');
});

t.test('connect timeout: an upstream that never completes the handshake closes the client', async (t) => {
  const stalled = await stalledPort(); // connects to it hang (test/helpers/net.ts)
  t.teardown(stalled.cleanup);
  const port = stalled.port;
  const g = await gate(t, { upstreams: [`127.0.0.1:${port}`], timeouts: { connectMs: 400 } });
  const c = await connect({ port: g.port() });
  const ms = await closed(c, 5000);
  t.ok(ms >= 350 && ms < 3000, `client closed after ${ms} ms (connect timeout 400 ms)`);
  await waitFor(() => g.app.listeners[0]!.stats.closed.get('upstream_timeout') === 1, 3000, 'upstream_timeout counted');
});

t.test('no Nagle on relayed sockets: a reply written in two parts is not held for a delayed ACK', async (t) => {
  // Backend: for every byte received, answer "a", then "b" 2 ms later (two small writes).
  const server = net.createServer((s) => {
    s.setNoDelay(true);
    s.on('data', () => {
      s.write('a');
      setTimeout(() => s.write('b'), 2);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const g = await gate(t, { upstreams: [`127.0.0.1:${(server.address() as net.AddressInfo).port}`] });
  const c = await connect({ port: g.port() });
  c.setNoDelay(true);
  const times: number[] = [];
  for (let i = 0; i < 12; i++) {
    const start = process.hrtime.bigint();
    c.write('x');
    await readUntil(c, 'ab');
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  // With Nagle on ipgate's client socket, "b" waits for the client's delayed ACK of "a" (~40 ms on
  // Linux) in most rounds (measured without the fix: median 48 ms). A loaded machine makes a round
  // slow now and then, never most of them by ~40 ms.
  const stalled = times.filter((ms) => ms >= 38).length;
  t.ok(stalled <= 3, `${stalled} of 12 rounds took >= 38 ms (fastest ${times[0]!.toFixed(1)} ms, median ${times[6]!.toFixed(1)} ms)`);
  c.destroy();
});
