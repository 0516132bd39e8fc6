/**
 * TCP listeners on libuv handles (src/transport/raw-socket.ts). The relay's behaviour (PROXY
 * headers, half-close, backpressure, timeouts, large reads) is the TCP path suites', run on handles
 * by default and on net.Sockets by tcp-sockets.test.ts. This file checks what is specific to
 * handles: that they are in use on the Node running the tests (CI: Node 20 and the image's Node 24;
 * if Node's bindings change, the first test fails instead of ipgate silently falling back), when
 * they are not used, and that resets and floods from either side close only their connection and
 * leave no handle behind.
 */
import fs from 'node:fs';
import net from 'node:net';
import t, { type Test } from 'tap';
import { encodeProxyV2, encodeProxyV2Local } from '../../src/proxy-protocol/encoder';
import { RawSocket, rawSocketsAvailable, rawSocketsWanted } from '../../src/transport/raw-socket';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, connect, readAll, readLine, readUntil, stalledPort, waitFor } from '../helpers/net';

async function server(t: Test, onConn: (s: net.Socket) => void, host = '127.0.0.1'): Promise<number> {
  // allowHalfOpen, so a test sees the FIN ('end') apart from the close; every socket is closed
  // before the server, whose close() would otherwise wait for the half-open ones.
  const open = new Set<net.Socket>();
  const s = net.createServer({ allowHalfOpen: true }, (c) => {
    open.add(c);
    c.once('close', () => open.delete(c));
    onConn(c);
  });
  await new Promise<void>((r) => s.listen(0, host, r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        for (const c of open) c.destroy();
        s.close(() => r());
      }),
  );
  return (s.address() as net.AddressInfo).port;
}

async function gate(t: Test, upstream: string, extra: Record<string, unknown> = {}): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8', '::1/128'] },
      listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [upstream], ...extra }],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

function openFds(): number {
  return fs.readdirSync('/proc/self/fd').length;
}

t.test('handles are in use on this Node for a TCP listener with an IP upstream', async (t) => {
  t.ok(rawSocketsAvailable, `tcp_wrap / stream_wrap bindings usable on ${process.version}`);
  t.ok(rawSocketsWanted(), 'not turned off (IPGATE_TCP_HANDLES unset)');
  const up = await server(t, (s) => s.end('hello from upstream'));
  const g = await gate(t, `127.0.0.1:${up}`, { outboundProxyProtocol: 'none' });
  t.equal(g.app.listeners[0]!.rawSockets, true, 'listener accepts handles');
  const c = await connect({ port: g.port(), localAddress: '127.0.0.9' });
  t.equal((await readAll(c)).toString(), 'hello from upstream', 'relayed');
  await waitFor(() => g.app.listeners[0]!.stats.closed.get('ok') === 1, 5000, 'connection closed ok');
  t.equal(g.app.listeners[0]!.stats.active, 0, 'no connection left active');
});

t.test('an upstream given by name keeps net.Sockets (a handle connects to an address)', async (t) => {
  const up = await server(t, (s) => s.end('by name'), 'localhost');
  const g = await gate(t, `localhost:${up}`, { outboundProxyProtocol: 'none' });
  t.equal(g.app.listeners[0]!.rawSockets, false, 'listener keeps net.Sockets');
  const c = await connect({ port: g.port() });
  t.equal((await readAll(c)).toString(), 'by name', 'relayed');
});

t.test('an IPv6 upstream on handles', async (t) => {
  const up = await server(t, (s) => s.once('data', (d) => s.end(`v6 got ${d.length}`)), '::1');
  const g = await gate(t, `[::1]:${up}`, { outboundProxyProtocol: 'none' });
  t.equal(g.app.listeners[0]!.rawSockets, true);
  const c = await connect({ port: g.port() });
  c.write('12345');
  t.equal((await readAll(c)).toString(), 'v6 got 5');
});

t.test('a client reset mid-stream closes its connection and the upstream, and nothing else', async (t) => {
  // The upstream's side ends (FIN or reset: its server is allowHalfOpen, so 'end' is the signal).
  const upstreamEnded: Promise<number>[] = [];
  const up = await server(t, (s) => {
    const i = upstreamEnded.length;
    upstreamEnded.push(
      new Promise((r) => {
        s.once('end', () => r(i));
        s.once('close', () => r(i));
      }),
    );
    s.on('error', () => undefined);
    s.write(Buffer.alloc(64 * 1024, 1)); // some bytes in flight towards the client
  });
  const g = await gate(t, `127.0.0.1:${up}`, { outboundProxyProtocol: 'none' });
  const victim = await connect({ port: g.port(), localAddress: '127.0.0.20' });
  const bystander = await connect({ port: g.port(), localAddress: '127.0.0.21' });
  await readUntil(victim, Buffer.alloc(1, 1));
  await waitFor(() => upstreamEnded.length === 2, 5000, 'both upstream connections open');
  victim.resetAndDestroy();
  await Promise.race(upstreamEnded);
  t.pass('an upstream connection was ended after the reset');
  bystander.write('still here');
  t.ok(!bystander.destroyed, 'the other connection is untouched');
  await waitFor(() => g.app.listeners[0]!.stats.active === 1, 5000, 'one connection left');
  const settled = await Promise.race([Promise.all(upstreamEnded).then(() => 'both'), new Promise((r) => setTimeout(r, 200, 'one'))]);
  t.equal(settled, 'one', 'the other upstream connection stays open');
  bystander.resetAndDestroy();
  await waitFor(() => g.app.listeners[0]!.stats.active === 0, 5000, 'all closed');
});

t.test('an upstream reset mid-stream closes the client and counts upstream_reset', async (t) => {
  const up = await server(t, (s) => {
    s.on('error', () => undefined);
    s.write('partial');
    setTimeout(() => s.resetAndDestroy(), 20);
  });
  const g = await gate(t, `127.0.0.1:${up}`, { outboundProxyProtocol: 'none' });
  const c = await connect({ port: g.port() });
  c.on('error', () => undefined);
  const got = await readAll(c);
  t.equal(got.toString(), 'partial', 'what the upstream sent before the reset arrived');
  await waitFor(() => g.app.listeners[0]!.stats.upstreamErrors.get('upstream_reset') === 1, 5000, 'upstream_reset counted');
  t.equal(g.app.listeners[0]!.stats.closed.get('upstream_reset'), 1, 'closed with that result');
});

t.test('500 concurrent short connections, resets among them: all accounted for, no handle left open', async (t) => {
  const up = await server(t, (s) => {
    s.on('error', () => undefined);
    s.once('data', (d) => s.end(d));
  });
  const g = await gate(t, `127.0.0.1:${up}`, { outboundProxyProtocol: 'none' });
  const before = openFds();
  const results = await Promise.all(
    Array.from({ length: 500 }, async (_, i) => {
      const c = net.connect({ port: g.port(), host: '127.0.0.1', localAddress: `127.0.1.${1 + (i % 200)}` });
      c.on('error', () => undefined);
      await new Promise((r) => c.once('connect', r));
      if (i % 10 === 0) {
        c.resetAndDestroy();
        return 'reset';
      }
      c.write(`msg ${i}`);
      const back = await readAll(c);
      return back.toString() === `msg ${i}` ? 'ok' : `bad: ${back.toString()}`;
    }),
  );
  t.equal(results.filter((r) => r === 'ok').length, 450, 'every other connection echoed its own bytes');
  const l = g.app.listeners[0]!;
  await waitFor(() => l.stats.active === 0, 10_000, 'no connection left active');
  // A client reset before the accept may be gone by then (no peer address): not counted, as on
  // net.Sockets. Every accepted one is closed and counted under a result.
  t.ok(l.stats.accepted >= 450 && l.stats.accepted <= 500, `accepted ${l.stats.accepted} of 500 (450 never reset)`);
  const closedTotal = [...l.stats.closed.values()].reduce((a, b) => a + b, 0);
  t.equal(closedTotal, l.stats.accepted, `every accepted connection closed with a result (${JSON.stringify([...l.stats.closed])})`);
  await waitFor(() => openFds() <= before + 2, 5000, `open fds back to ~${before} (now ${openFds()})`);
  t.pass(`open fds ${openFds()} (before ${before})`);
});

t.test('drain: stopAccepting closes the port and open relays finish', async (t) => {
  let upSocket: net.Socket | null = null;
  const up = await server(t, (s) => {
    upSocket = s;
    s.on('error', () => undefined);
  });
  const g = await gate(t, `127.0.0.1:${up}`, { outboundProxyProtocol: 'none' });
  const c = await connect({ port: g.port() });
  await waitFor(() => upSocket !== null, 5000, 'upstream connected');
  g.app.listeners[0]!.stopAccepting();
  await t.rejects(connect({ port: g.port() }), 'new connections refused');
  upSocket!.end('finished after drain started');
  t.equal((await readAll(c)).toString(), 'finished after drain started', 'open relay completed');
  await closed(c);
});

t.test('closed while its upstream is still connecting: the connect timer goes with it, nothing counted as an upstream error', async (t) => {
  const stalled = await stalledPort(); // connects to it hang (test/helpers/net.ts)
  t.teardown(stalled.cleanup);
  const port = stalled.port;
  const g = await gate(t, `127.0.0.1:${port}`, { timeouts: { connectMs: 500 } });
  const l = g.app.listeners[0]!;
  const c = await connect({ port: g.port() });
  await waitFor(() => l.stats.active === 1, 5000, 'accepted');
  await new Promise((r) => setTimeout(r, 100)); // dialling now
  l.destroyAll('drain');
  await closed(c, 5000);
  await new Promise((r) => setTimeout(r, 700)); // past the connect timeout
  t.equal(l.stats.closed.get('drain'), 1, 'closed with the drain result');
  t.same([...l.stats.upstreamErrors], [], 'no upstream error counted');
});

/**
 * A backend that reads the outbound PROXY v2 header (PROXY command, TCP4 or TCP6) byte by byte as
 * it arrives, answers `src sport dst dport\n` (or `bad header`), then echoes what follows.
 */
async function proxyV2Reporter(t: Test): Promise<number> {
  return server(t, (s) => {
    let got = Buffer.alloc(0);
    let done = false;
    s.on('error', () => s.destroy());
    s.on('data', (d: Buffer) => {
      if (done) {
        s.write(d);
        return;
      }
      got = Buffer.concat([got, d]);
      if (got.length < 16) return;
      const need = 16 + got.readUInt16BE(14);
      if (got.length < need) return;
      done = true;
      const fam = got[13];
      if (
        !got.subarray(0, 12).equals(Buffer.from('0d0a0d0a000d0a515549540a', 'hex')) ||
        got[12] !== 0x21 ||
        (fam !== 0x11 && fam !== 0x21)
      ) {
        s.end('bad header\n');
        return;
      }
      const v6 = fam === 0x21;
      const n = v6 ? 16 : 4;
      const addr = (at: number): string =>
        v6
          ? Array.from({ length: 8 }, (_, i) => got.readUInt16BE(at + 2 * i).toString(16)).join(':')
          : Array.from(got.subarray(at, at + 4)).join('.');
      const ports = 16 + 2 * n;
      s.write(`${addr(16)} ${got.readUInt16BE(ports)} ${addr(16 + n)} ${got.readUInt16BE(ports + 2)}\n`);
      if (got.length > need) s.write(got.subarray(need));
    });
  });
}

t.test("the outbound PROXY header: the destination the client connected to, or the inbound header's", async (t) => {
  const up = await proxyV2Reporter(t);
  const trusted = { mode: 'optional', trustedSources: ['127.0.0.2/32'] };
  const v4 = await gate(t, `127.0.0.1:${up}`, { outboundProxyProtocol: 'v2', proxyProtocol: trusted });
  t.equal(v4.app.listeners[0]!.rawSockets, true, 'listener accepts handles');
  const cases: Array<[string, string, Buffer | null, (client: net.Socket) => string]> = [
    ["no inbound header: our socket's address", '127.0.0.9', null, (c) => `127.0.0.9 ${c.localPort} 127.0.0.1 ${v4.port()}`],
    [
      'an inbound header: its addresses',
      '127.0.0.2',
      encodeProxyV2({ address: '127.0.0.77', port: 4000 }, { address: '203.0.113.9', port: 8443 }),
      () => '127.0.0.77 4000 203.0.113.9 8443',
    ],
    ["an inbound LOCAL header: our socket's", '127.0.0.2', encodeProxyV2Local(), (c) => `127.0.0.2 ${c.localPort} 127.0.0.1 ${v4.port()}`],
  ];
  for (const [name, from, header, expect] of cases) {
    const c = await connect({ port: v4.port(), localAddress: from });
    c.write(header === null ? 'ping' : Buffer.concat([header, Buffer.from('ping')]));
    t.equal(await readLine(c), expect(c), name);
    t.equal((await readUntil(c, 'ping')).toString(), 'ping', `${name}: bytes after it relayed`);
    c.destroy();
  }
  const v6 = await gate(t, `127.0.0.1:${up}`, { outboundProxyProtocol: 'v2', listen: '[::1]:0' });
  const c = await connect({ port: v6.port(), host: '::1' });
  c.write('ping');
  t.equal(await readLine(c), `0:0:0:0:0:0:0:1 ${c.localPort} 0:0:0:0:0:0:0:1 ${v6.port()}`, 'IPv6 listener, no inbound header');
  c.destroy();
});

t.test('bytes a stage keeps across reads stay intact while other connections read (one read buffer for all handles)', async (t) => {
  // The PROXY stage keeps a partial header until the rest arrives; meanwhile other connections'
  // reads land in the same read buffer, so what it keeps must be a copy.
  const up = await proxyV2Reporter(t);
  const g = await gate(t, `127.0.0.1:${up}`, {
    outboundProxyProtocol: 'v2',
    proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.0/8'] },
  });
  const header = (i: number): Buffer => encodeProxyV2({ address: `127.0.1.${i}`, port: 5000 + i }, { address: '127.0.0.1', port: 443 });
  const kept: net.Socket[] = [];
  for (let i = 1; i <= 10; i++) {
    const c = await connect({ port: g.port() });
    // Up to the source address's third byte: the rest (its last byte, the destination, the ports) later.
    c.write(header(i).subarray(0, 19));
    kept.push(c);
  }
  // Connections that read while the first ten wait: each full header, 4 KiB of payload, echoed.
  for (let j = 1; j <= 10; j++) {
    const c = await connect({ port: g.port() });
    const payload = Buffer.alloc(4096, 0x30 + j);
    c.write(Buffer.concat([header(100 + j), payload]));
    t.equal(await readLine(c), `127.0.1.${100 + j} ${5100 + j} 127.0.0.1 443`, `reader ${j}: its header`);
    t.ok((await readUntil(c, payload)).equals(payload), `reader ${j}: its payload echoed`);
    c.destroy();
  }
  for (let i = 1; i <= 10; i++) {
    const c = kept[i - 1]!;
    c.write(Buffer.concat([header(i).subarray(19), Buffer.from(`after-${i}`)]));
    t.equal(await readLine(c), `127.0.1.${i} ${5000 + i} 127.0.0.1 443`, `kept ${i}: the header read in two parts`);
    t.equal((await readUntil(c, `after-${i}`)).toString(), `after-${i}`, `kept ${i}: bytes after it`);
    c.destroy();
  }
});

t.test('writes that wait in the kernel and writes taken at once, on many sockets: every byte arrives, in order', async (t) => {
  // RawSocket reuses the request object of a write the kernel took whole (raw-socket.ts
  // spareWriteReq); one whose write waits belongs to that write until it completes. A mix-up
  // would complete one socket's write on another: its queued count would never drain and the
  // slow connection would stall, or the bytes would arrive out of order.
  let release: (() => void) | null = null;
  const released = new Promise<void>((r) => {
    release = r;
  });
  const received: Buffer[] = [];
  const up = await server(t, (c) => {
    c.once('data', (first) => {
      if (first[0] === 0x41 /* A: the slow reader */) {
        received.push(first);
        c.pause();
        void released.then(() => {
          c.on('data', (d) => received.push(d));
          c.resume();
        });
      } else {
        c.write(first);
        c.on('data', (d) => c.write(d)); // B: echo at once
      }
    });
  });
  const g = await gate(t, `127.0.0.1:${up}`);
  const slow = await connect({ port: g.port() });
  const total = 16 * 1024 * 1024;
  const pattern = Buffer.alloc(total);
  for (let i = 0; i < total; i += 4) pattern.writeUInt32BE(i, i);
  pattern[0] = 0x41;
  slow.write(pattern); // far more than the socket buffers hold: ipgate's writes upstream wait
  // Meanwhile: 20 connections, 20 echoed round trips each.
  for (let j = 0; j < 20; j++) {
    const c = await connect({ port: g.port() });
    for (let k = 0; k < 20; k++) {
      const msg = `B-${j}-${k};`;
      c.write(msg);
      t.equal((await readUntil(c, msg)).toString(), msg, `echo ${j}/${k}`);
    }
    c.destroy();
  }
  release!();
  await waitFor(() => received.reduce((n, b) => n + b.length, 0) >= total, 20_000, 'all 16 MiB at the slow reader');
  t.ok(Buffer.concat(received).equals(pattern), "the slow connection's bytes intact and in order");
  slow.destroy();
});

/** A RawSocket connected to `port` (resolves once connected). */
function rawConnect(port: number): Promise<RawSocket> {
  return new Promise((resolve, reject) => {
    const s = RawSocket.connect('127.0.0.1', port, 4, (err) => (err === null ? resolve(s) : reject(new Error(err))));
  });
}

/** What a server socket received, whether it saw a FIN, and any error (a reset is ECONNRESET). */
function watchPeer(c: net.Socket): { bytes: () => Buffer; ended: Promise<void>; error: () => string | null } {
  const got: Buffer[] = [];
  let error: string | null = null;
  c.on('data', (d: Buffer) => got.push(d));
  c.on('error', (e: NodeJS.ErrnoException) => {
    error = e.code ?? e.message;
  });
  const ended = new Promise<void>((r) => c.once('end', () => r()));
  return { bytes: () => Buffer.concat(got), ended, error: () => error };
}

/** Reads `raw` from now on: what it read so far, and when the peer's FIN came. */
function readRaw(raw: RawSocket): { bytes: () => Buffer; ended: Promise<void> } {
  const got: Buffer[] = [];
  raw.onData = (d) => got.push(d);
  const ended = new Promise<void>((r) => {
    raw.onEnd = () => r();
  });
  raw.resume();
  return { bytes: () => Buffer.concat(got), ended };
}

t.test("end() after the peer's FIN with nothing queued closes the socket: the peer reads every byte, then a clean FIN", async (t) => {
  // raw-socket.ts RawSocket.end: close(2) sends the FIN a shutdown would have, so the socket is
  // closed at once (no shutdown request, no callback from it); onFinish is still called, once.
  let peer: ReturnType<typeof watchPeer> | null = null;
  const port = await server(t, (c) => {
    peer = watchPeer(c);
    c.end('from the peer'); // its bytes, then its FIN
  });
  const raw = await rawConnect(port);
  const reading = readRaw(raw);
  await reading.ended;
  t.equal(reading.bytes().toString(), 'from the peer', "the peer's bytes before its FIN");
  let finished = 0;
  let hooks = 0;
  raw.onFinish = () => finished++;
  raw.onClose(() => hooks++);
  t.equal(raw.write(Buffer.from('the reply')), true, 'a short write is taken at once');
  t.equal(raw.pendingBytes, 0, 'nothing queued');
  raw.end();
  t.equal(raw.destroyed, true, 'closed by end() itself');
  t.equal(raw.writeFinished, true, 'its FIN counts as sent');
  t.equal(finished, 1, 'onFinish called once, from end()');
  t.equal(hooks, 0, 'the close hooks wait for a microtask');
  await waitFor(() => hooks === 1, 5_000, 'the close hook');
  await peer!.ended;
  t.equal(peer!.bytes().toString(), 'the reply', 'the peer read every byte written before end()');
  t.equal(peer!.error(), null, 'a FIN, not a reset');
  raw.end();
  raw.destroy();
  await new Promise<void>((r) => setImmediate(r));
  t.equal(finished, 1, 'a second end() or destroy() calls nothing again');
  t.equal(hooks, 1, 'the close hook ran once');
});

t.test('end() with nothing queued while the peer still sends: its FIN goes out, reads go on (half-close)', async (t) => {
  // raw-socket.ts RawSocket.end: the shutdown request goes without a completion callback, so the
  // FIN counts as sent at once (onFinish from end()); the socket stays open for the peer's bytes.
  let peer: (ReturnType<typeof watchPeer> & { socket: net.Socket }) | null = null;
  const port = await server(t, (c) => {
    peer = { ...watchPeer(c), socket: c };
  });
  const raw = await rawConnect(port);
  const reading = readRaw(raw);
  let finished = 0;
  raw.onFinish = () => finished++;
  t.equal(raw.write(Buffer.from('request')), true, 'taken at once');
  raw.end();
  t.equal(finished, 1, 'onFinish called once, from end()');
  t.equal(raw.writeFinished, true, 'the FIN counts as sent');
  t.equal(raw.destroyed, false, 'still open: the peer has not ended');
  await waitFor(() => peer !== null, 5_000, 'the peer');
  await peer!.ended;
  t.equal(peer!.bytes().toString(), 'request', 'the peer read the bytes, then the FIN');
  peer!.socket.end('answer after your FIN');
  await reading.ended;
  t.equal(reading.bytes().toString(), 'answer after your FIN', 'bytes after our FIN still arrive');
  t.equal(raw.destroyed, false, "end() and the peer's FIN do not close it: the owner does");
  t.equal(finished, 1, 'onFinish not called again');
  t.equal(peer!.error(), null, 'no reset');
  raw.destroy();
});

t.test("end() after the peer's FIN with writes still queued: the FIN follows them (shutdown), nothing is lost", async (t) => {
  let peer: (ReturnType<typeof watchPeer> & { socket: net.Socket }) | null = null;
  const port = await server(t, (c) => {
    c.pause(); // read nothing until the test says so: ipgate's writes queue
    peer = { ...watchPeer(c), socket: c };
    c.end(); // its FIN first
  });
  const raw = await rawConnect(port);
  await readRaw(raw).ended;
  const total = 8 * 1024 * 1024;
  const pattern = Buffer.alloc(total);
  for (let i = 0; i < total; i += 4) pattern.writeUInt32BE(i, i);
  let finished = 0;
  raw.onFinish = () => finished++;
  t.equal(raw.write(pattern), false, 'more than the socket buffers hold: queued');
  t.ok(raw.pendingBytes > 0, `${raw.pendingBytes} bytes queued`);
  raw.end();
  t.equal(raw.destroyed, false, 'not closed while writes are queued');
  t.equal(raw.writeFinished, false, 'the FIN waits for them');
  peer!.socket.resume();
  await peer!.ended;
  await waitFor(() => finished === 1, 5_000, 'onFinish after the queued writes');
  t.ok(peer!.bytes().equals(pattern), 'every queued byte, in order, before the FIN');
  t.equal(peer!.error(), null, 'no reset');
  raw.destroy();
});

t.test("close hooks: a hook that destroys another socket runs that socket's hooks too, each once", async (t) => {
  const port = await server(t, () => undefined);
  const a = await rawConnect(port);
  const b = await rawConnect(port);
  const ran: string[] = [];
  a.onClose(() => {
    ran.push('a');
    b.destroy();
  });
  b.onClose(() => ran.push('b'));
  a.destroy();
  a.destroy();
  t.same(ran, [], 'nothing runs inside destroy()');
  await waitFor(() => ran.length === 2, 5_000, 'both hooks');
  await new Promise<void>((r) => setImmediate(r));
  t.same(ran, ['a', 'b'], "a's hook, then b's (destroyed by it), each once");
  let late = 0;
  a.onClose(() => late++);
  t.equal(late, 0, 'a hook added after the close is not run inside onClose()');
  await waitFor(() => late === 1, 5_000, 'a hook added after the close');
  t.equal(late, 1, 'it runs in a microtask, once');
});
