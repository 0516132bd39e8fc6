/**
 * SNI routing without termination on a `mode: tcp` listener with routes, over real sockets with
 * real peers: curl and openssl s_client as clients, nginx `listen ... ssl` as the TLS backends
 * (each its own certificate, answering with the SNI it got), HAProxy sending PROXY v2 before the
 * ClientHello, nginx `listen ... ssl proxy_protocol` reading ipgate's outbound header. ipgate
 * never holds a certificate: the backend's own certificate reaching the client and the backend
 * reporting the client's SNI show the hello went through untouched.
 */
import type net from 'node:net';
import tls from 'node:tls';
import { Duplex } from 'node:stream';
import t, { type Test } from 'tap';
import { liveConnections } from '../../src/admin/routes/connections';
import { rawSocketsAvailable } from '../../src/transport/raw-socket';
import { SniRoutes } from '../../src/route/sni-routes';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import { clientHello, handshake, helloBody, records, sniExt } from '../fixtures/tls/client-hello-vectors';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, connect, freePort, waitFor } from '../helpers/net';
import { missing, startHaproxy } from '../helpers/peers';
import { curlTls, readPem, sClient, startTlsBackends, type TlsBackends } from '../helpers/tls-nginx';

const skip = missing('nginx') || missing('curl') || missing('openssl');

/** Both socket paths of a TCP listener: libuv handles (the default) and net.Sockets. */
const PATHS = [
  { desc: 'handles', env: undefined },
  { desc: 'net.Socket', env: '0' },
] as const;

async function setup(t: Test, extra: { helloTimeoutMs?: number; handles?: boolean } = {}): Promise<{ g: Started; b: TlsBackends }> {
  const b = await startTlsBackends([
    { id: 'a', names: ['a.example'] },
    { id: 'b', names: ['b.example'] },
    { id: 'w', names: ['*.w.example'] },
    { id: 'default', names: ['default.example'] },
  ]);
  t.teardown(b.nginx.stop);
  const up = (id: string): string => `127.0.0.1:${b.port[id]}`;
  // IPGATE_TCP_HANDLES is read when a listener is built (raw-socket.ts rawSocketsWanted).
  const saved = process.env.IPGATE_TCP_HANDLES;
  if (extra.handles === false) process.env.IPGATE_TCP_HANDLES = '0';
  const started = startIpgate({
    allowlists: {
      all: ['127.0.0.1/32', '127.0.0.2/32', '127.0.0.3/32'],
      'a-clients': ['127.0.0.1/32', '127.0.0.2/32'],
      'b-clients': ['127.0.0.1/32', '127.0.0.3/32'],
    },
    listeners: [
      {
        name: 'sni',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'all',
        ...(extra.helloTimeoutMs !== undefined ? { sni: { helloTimeoutMs: extra.helloTimeoutMs } } : {}),
        upstreams: [up('default')],
        routes: [
          { name: 'a', hosts: ['a.example'], upstreams: [up('a')], allowlist: 'a-clients' },
          { name: 'b', hosts: ['b.example'], upstreams: [up('b')], allowlist: 'b-clients' },
          { name: 'wild', hosts: ['*.w.example'], upstreams: [up('w')] },
          { name: 'default', hosts: ['*'] }, // the listener's upstreams and allowlist
        ],
      },
      {
        name: 'strict',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'all',
        routes: [{ name: 'a', hosts: ['a.example'], upstreams: [up('a')] }],
      },
    ],
  });
  const g = await started.finally(() => {
    if (saved === undefined) delete process.env.IPGATE_TCP_HANDLES;
    else process.env.IPGATE_TCP_HANDLES = saved;
  });
  t.teardown(() => g.app.shutdown(0));
  t.equal(
    listener(g, 'sni').rawSockets,
    extra.handles !== false && rawSocketsAvailable,
    `the listener runs on ${extra.handles === false ? 'net.Sockets' : 'handles'}`,
  );
  return { g, b };
}

function listener(g: Started, name: string): import('../../src/listener/listener').Listener {
  return g.app.listeners.find((l) => l.name === name)!;
}

for (const path of PATHS)
  t.test(`routes by SNI to the backend of that name, each route with its own allowlist (${path.desc})`, { skip }, async (t) => {
    const { g, b } = await setup(t, { handles: path.env === undefined });
    const port = g.port('sni');
    const cases = [
      {
        desc: 'exact a.example from 127.0.0.2 (on a-clients): backend a',
        name: 'a.example',
        ca: 'a',
        source: '127.0.0.2',
        answer: 'backend=a sni=a.example',
      },
      {
        desc: 'exact b.example from 127.0.0.3 (on b-clients): backend b',
        name: 'b.example',
        ca: 'b',
        source: '127.0.0.3',
        answer: 'backend=b sni=b.example',
      },
      {
        desc: 'a.example from 127.0.0.3 (not on a-clients): closed, denied',
        name: 'a.example',
        ca: 'a',
        source: '127.0.0.3',
        answer: null,
      },
      {
        desc: 'b.example from 127.0.0.2 (not on b-clients): closed, denied',
        name: 'b.example',
        ca: 'b',
        source: '127.0.0.2',
        answer: null,
      },
      {
        desc: 'wildcard *.w.example: x.w.example reaches backend w, which sees x.w.example',
        name: 'x.w.example',
        ca: 'w',
        source: '127.0.0.2',
        answer: 'backend=w sni=x.w.example',
      },
      {
        desc: 'a wildcard route takes any name it covers, from any client of the listener list',
        name: 'y.w.example',
        ca: 'w',
        source: '127.0.0.3',
        answer: 'backend=w sni=y.w.example',
      },
      {
        desc: 'default.example (no route of its own) takes the default route',
        name: 'default.example',
        ca: 'default',
        source: '127.0.0.1',
        answer: 'backend=default sni=default.example',
      },
    ];
    for (const c of cases) {
      const r = await curlTls(c.name, port, b.cert[c.ca]!.cert, c.source);
      if (c.answer === null) {
        t.not(r.code, 0, `${c.desc}: curl fails (${r.stderr.trim()})`);
        t.equal(r.stdout, '', `${c.desc}: no answer`);
      } else {
        // curl verified the backend's own certificate for this name: the hello reached it untouched.
        t.equal(r.code, 0, `${c.desc}: curl succeeds (${r.stderr.trim()})`);
        t.equal(r.stdout.trim(), c.answer, c.desc);
      }
    }
    const stats = listener(g, 'sni').stats;
    await waitFor(() => listener(g, 'sni').connections.size === 0, 10_000, 'connections closed');
    t.equal(stats.routes.get('a')?.closed.get('ok'), 1, 'route a: one connection served');
    t.equal(stats.routes.get('a')?.denied.get('not_allowlisted'), 1, 'route a: one denial (127.0.0.3)');
    t.equal(stats.routes.get('b')?.denied.get('not_allowlisted'), 1, 'route b: one denial (127.0.0.2)');
    t.equal(stats.routes.get('wild')?.closed.get('ok'), 2, 'route wild: two connections');
    t.equal(stats.sniHellos.get('ok'), 7, 'seven hellos read');

    const text = await g.app.metrics.registry.metrics();
    t.match(text, /ipgate_connections_closed_total\{listener="sni",route="a",result="ok"\} 1/, 'closed_total carries the route label');
    t.match(text, /ipgate_connections_closed_total\{listener="sni",route="a",result="denied"\} 1/, 'a denial is counted under its route');
    t.match(text, /ipgate_denied_total\{listener="sni",route="b",reason="not_allowlisted"\} 1/, 'denied_total carries the route label');
    t.match(text, /ipgate_sni_hellos_total\{listener="sni",result="ok"\} 7/, 'hellos counted');
    t.notMatch(text, /ipgate_connections_closed_total\{listener="sni",result="ok"\}/, 'no route-less series for routed connections');
    t.notMatch(text, /sni="|a\.example/, 'the SNI is never a label');

    const line = g.logs.find((l) => l.msg === 'access' && l.listener === 'sni' && l.route === 'a' && l.decision === 'allow');
    t.match(
      line,
      { client: '127.0.0.2', sni: 'a.example', route: 'a', upstream: `127.0.0.1:${b.port.a}`, result: 'ok' },
      'the access line names the route and the SNI',
    );
    const denied = g.logs.find((l) => l.msg === 'access' && l.listener === 'sni' && l.decision === 'deny' && l.route === 'b');
    t.match(denied, { client: '127.0.0.2', sni: 'b.example', reason: 'not_allowlisted', result: 'denied' }, 'the denial line too');
  });

t.test('openssl s_client: the backend presents its own certificate; no SNI takes the default route', { skip }, async (t) => {
  const { g } = await setup(t);
  const cases = [
    {
      desc: 'no SNI (-noservername): the default route, empty $ssl_server_name',
      name: null,
      cn: 'default.example',
      answer: 'backend=default sni=\n',
    },
    {
      desc: 'an unknown name: the default route, which sees that name',
      name: 'other.example',
      cn: 'default.example',
      answer: 'backend=default sni=other.example\n',
    },
    { desc: 'upper case and a trailing dot: routed as a.example', name: 'A.Example.', cn: 'a.example', answer: 'backend=a sni=' },
    {
      desc: 'a deeper name under a wildcard: the wildcard route',
      name: 'deep.x.w.example',
      cn: '*.w.example',
      answer: 'backend=w sni=deep.x.w.example\n',
    },
  ];
  for (const c of cases) {
    const r = await sClient(g.port('sni'), c.name);
    t.match(r.stdout, c.answer, `${c.desc}: answer`);
    t.match(r.stderr, `CN = ${c.cn}`, `${c.desc}: certificate CN = ${c.cn} (the backend's, not ipgate's)`);
  }
  await waitFor(() => listener(g, 'sni').connections.size === 0, 10_000, 'connections closed');
  // How each ended (ok, or upstream_reset when nginx resets after its answer) is not the point here.
  const ended = [...(listener(g, 'sni').stats.routes.get('default')?.closed.values() ?? [])].reduce((a, b) => a + b, 0);
  t.equal(ended, 2, 'two connections on the default route');
});

t.test('no route and no default: closed route_no_host, counted', { skip }, async (t) => {
  const { g } = await setup(t);
  const port = g.port('strict');
  for (const [desc, name] of [
    ['unknown SNI', 'b.example'],
    ['no SNI', null],
  ] as const) {
    const r = await sClient(port, name);
    t.notMatch(r.stdout, 'backend=', `${desc}: no backend answered`);
  }
  const l = listener(g, 'strict');
  await waitFor(() => l.connections.size === 0, 10_000, 'connections closed');
  t.equal(l.stats.closed.get('route_no_host'), 2, 'closed with route_no_host');
  t.equal(l.stats.routeMisses.get('route_no_host'), 2, 'route misses counted');
  const text = await g.app.metrics.registry.metrics();
  t.match(text, /ipgate_route_misses_total\{listener="strict",reason="route_no_host"\} 2/, 'metric');
  t.match(text, /ipgate_connections_closed_total\{listener="strict",result="route_no_host"\} 2/, 'closed before a route: no route label');
  const line = g.logs.find((x) => x.msg === 'access' && x.listener === 'strict' && x.reason === 'route_no_host');
  t.match(line, { decision: 'reject', route: null, sni: 'b.example' }, 'access line: rejected, with the SNI asked for');
});

for (const path of PATHS)
  t.test(`bad hellos are closed with their reason and counted (${path.desc})`, { skip }, async (t) => {
    const { g } = await setup(t, { helloTimeoutMs: 400, handles: path.env === undefined });
    const port = g.port('sni');
    const hello = clientHello({ extensions: [sniExt('a.example')] });
    const cases: { desc: string; send: Buffer; end: boolean; reason: string }[] = [
      { desc: 'plain HTTP', send: Buffer.from('GET / HTTP/1.1\r\nHost: a.example\r\n\r\n'), end: false, reason: 'tls_not_handshake' },
      {
        desc: 'a declared hello above 16 KiB',
        send: records(handshake(helloBody(), 1, 20_000)).subarray(0, 9),
        end: false,
        reason: 'tls_too_large',
      },
      {
        desc: 'a record above 2^14 bytes',
        send: Buffer.from([22, 3, 1, 0x40, 0x01, 1, 0, 0, 10]),
        end: false,
        reason: 'tls_record_overflow',
      },
      {
        desc: 'two server names',
        send: clientHello({ extensions: [sniExt('a.example', 'b.example')] }),
        end: false,
        reason: 'tls_bad_sni',
      },
      { desc: 'an IP literal as SNI', send: clientHello({ extensions: [sniExt('127.0.0.1')] }), end: false, reason: 'tls_bad_sni' },
      { desc: 'half a hello, then FIN', send: hello.subarray(0, 20), end: true, reason: 'tls_truncated' },
      { desc: 'half a hello, then nothing (slowloris)', send: hello.subarray(0, 20), end: false, reason: 'tls_timeout' },
    ];
    const l = listener(g, 'sni');
    for (const c of cases) {
      const before = l.stats.closed.get(c.reason as never) ?? 0;
      const s = await connect({ port, allowHalfOpen: true });
      s.write(c.send);
      if (c.end) s.end();
      await closed(s);
      await waitFor(() => (l.stats.closed.get(c.reason as never) ?? 0) === before + 1, 5000, `${c.desc}: closed ${c.reason}`);
      t.pass(`${c.desc}: closed with ${c.reason}`);
    }
    for (const reason of ['tls_not_handshake', 'tls_too_large', 'tls_record_overflow', 'tls_truncated', 'tls_timeout']) {
      t.equal(l.stats.sniHellos.get(reason), 1, `${reason}: one in sniHellos`);
    }
    t.equal(l.stats.sniHellos.get('tls_bad_sni'), 2, 'tls_bad_sni: two');
    t.equal(l.stats.upstreams.size, 0, 'nothing was dialled');
    const text = await g.app.metrics.registry.metrics();
    t.match(text, /ipgate_sni_hellos_total\{listener="sni",result="tls_timeout"\} 1/, 'metric by result');
    t.match(text, /ipgate_connections_closed_total\{listener="sni",result="tls_not_handshake"\} 1/, 'closed by reason');
    const line = g.logs.find((x) => x.msg === 'access' && x.listener === 'sni' && x.reason === 'tls_timeout');
    t.match(line, { decision: 'reject', result: 'tls_timeout', route: null }, 'access line');
  });

/** A duplex over `socket` that writes its first chunk (the ClientHello) one byte per TCP read of ipgate. */
class OneByteFirstFlight extends Duplex {
  private first = true;
  constructor(
    private readonly socket: net.Socket,
    private readonly received: () => number,
  ) {
    super();
    socket.on('data', (c: Buffer) => this.push(c));
    socket.on('end', () => this.push(null));
    socket.on('error', (err) => this.destroy(err));
  }
  override _read(): void {}
  override _write(chunk: Buffer, _enc: string, cb: (err?: Error | null) => void): void {
    if (!this.first) {
      this.socket.write(chunk, cb);
      return;
    }
    this.first = false;
    void (async () => {
      for (let i = 0; i < chunk.length; i++) {
        this.socket.write(chunk.subarray(i, i + 1));
        // The next byte only once ipgate has read this one: each byte is its own read.
        const deadline = Date.now() + 5000;
        while (this.received() < i + 1) {
          if (Date.now() > deadline) throw new Error(`ipgate did not read byte ${i}`);
          await new Promise((r) => setImmediate(r));
        }
      }
      cb();
    })().catch(cb);
  }
  override _final(cb: () => void): void {
    this.socket.end(cb);
  }
}

for (const path of PATHS)
  t.test(`a ClientHello split into 1-byte TCP writes still routes (${path.desc})`, { skip }, async (t) => {
    const { g, b } = await setup(t, { handles: path.env === undefined });
    const l = listener(g, 'sni');
    const socket = await connect({ port: g.port('sni'), localAddress: '127.0.0.2' });
    socket.setNoDelay(true);
    await waitFor(() => l.connections.size === 1, 5000, 'accepted');
    const conn = [...l.connections][0]!;
    const wire = new OneByteFirstFlight(socket, () => conn.socket.bytesRead);
    const secure = tls.connect({ socket: wire as unknown as net.Socket, servername: 'a.example', ca: readPem(b.cert.a!.cert) });
    await new Promise<void>((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
    t.equal(secure.authorized, true, 'the backend for a.example presented its certificate');
    secure.write('GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n');
    let body = '';
    secure.on('data', (c: Buffer) => (body += c.toString()));
    await new Promise((r) => secure.once('end', r));
    t.match(body, 'backend=a sni=a.example', 'backend a answered');
    t.ok(conn.socket.bytesRead > 100, `ipgate read the hello byte by byte (${conn.socket.bytesRead} bytes in)`);
    t.equal(conn.route?.name, 'a', 'routed to a');
    secure.destroy();
  });

t.test(
  "HAProxy PROXY v2 before the ClientHello; ipgate's PROXY header reaches nginx ssl proxy_protocol",
  { skip: skip || missing('haproxy') },
  async (t) => {
    const b = await startTlsBackends([
      { id: 'pp', names: ['pp.example'], proxyProtocol: true },
      { id: 'plain', names: ['plain.example'] },
    ]);
    t.teardown(b.nginx.stop);
    const g = await startIpgate({
      allowlists: { main: ['127.0.0.5/32', '127.0.0.6/32'], six: ['127.0.0.6/32'] },
      listeners: [
        {
          name: 'edge',
          mode: 'tcp',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.1/32'] },
          outboundProxyProtocol: 'v2',
          routes: [
            { name: 'pp', hosts: ['pp.example'], upstreams: [`127.0.0.1:${b.port.pp}`] },
            { name: 'six', hosts: ['*.six.example'], upstreams: [`127.0.0.1:${b.port.pp}`], allowlist: 'six' },
          ],
        },
      ],
    });
    t.teardown(() => g.app.shutdown(0));
    const front = await freePort();
    const haproxy = await startHaproxy(
      `
frontend fe
  mode tcp
  bind 127.0.0.1:${front}
  default_backend be
backend be
  mode tcp
  server ipgate 127.0.0.1:${g.port()} send-proxy-v2
`,
      [front],
    );
    t.teardown(haproxy.stop);

    const r = await curlTls('pp.example', front, b.cert.pp!.cert, '127.0.0.5');
    t.equal(r.code, 0, `curl through HAProxy and ipgate (${r.stderr.trim()})`);
    t.equal(r.stdout.trim(), 'backend=pp sni=pp.example pp=127.0.0.5', "nginx sees the SNI and the real client from ipgate's PROXY header");
    // The route's allowlist decides on the client HAProxy reported, not on HAProxy's address.
    const denied = await sClient(front, 'x.six.example', '127.0.0.5');
    t.notMatch(denied.stdout, 'backend=', '127.0.0.5 is not on the route\'s list "six"');
    const ok = await sClient(front, 'x.six.example', '127.0.0.6');
    t.match(ok.stdout, 'backend=pp sni=x.six.example pp=127.0.0.6', '127.0.0.6 is');
    const l = g.app.listeners[0]!;
    await waitFor(() => l.connections.size === 0, 10_000, 'closed');
    t.equal(l.stats.proxyHeader.get('v2/ok'), 3, 'three PROXY v2 headers from HAProxy');
    t.equal(l.stats.routes.get('six')?.denied.get('not_allowlisted'), 1, "the denial is the route's");
  },
);

t.test("revocation uses the route's list; replaceRoutes closes connections whose route is gone", { skip }, async (t) => {
  const { g } = await setup(t);
  const l = listener(g, 'sni');
  const port = g.port('sni');
  // Open TLS sessions held open (keep-alive) on routes a and b, through real backends.
  const open = async (name: string, source: string): Promise<tls.TLSSocket> => {
    const raw = await connect({ port, localAddress: source });
    const s = tls.connect({ socket: raw, servername: name, rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => s.once('secureConnect', resolve).once('error', reject));
    s.on('error', () => undefined);
    return s;
  };
  const a2 = await open('a.example', '127.0.0.2');
  const b3 = await open('b.example', '127.0.0.3');
  const w2 = await open('x.w.example', '127.0.0.2');
  await waitFor(() => [...l.connections].filter((c) => c.entry !== null).length === 3, 5000, 'three admitted');
  const views = liveConnections([l], undefined, 10).connections.map((c) => ({
    client: c.client.split(':')[0],
    route: c.route,
    sni: c.sni,
  }));
  t.same(
    views,
    [
      { client: '127.0.0.2', route: 'a', sni: 'a.example' },
      { client: '127.0.0.3', route: 'b', sni: 'b.example' },
      { client: '127.0.0.2', route: 'wild', sni: 'x.w.example' },
    ],
    "GET /v1/connections shows each connection's route and SNI",
  );

  // a-clients drops 127.0.0.2: only the connection route a took from 127.0.0.2 is cut; the
  // wildcard connection from the same client (listener list "all") stays.
  await g.app.service.replace('a-clients', [{ cidr: '127.0.0.1/32' }], null, 'test');
  await closed(a2 as unknown as net.Socket);
  t.pass("route a's connection from 127.0.0.2 closed");
  t.equal(l.stats.routes.get('a')?.closed.get('revoked'), 1, 'counted as revoked under route a');
  t.equal(b3.destroyed, false, "route b's connection stays");
  t.equal(w2.destroyed, false, 'the wildcard connection from the same client stays');

  // A reload (the app's, as a config change or SIGHUP makes it: every listener compiles, then
  // swaps) without route b, and with *.w.example moved to a route of another name.
  const cfg = l.config;
  const listenersWith = (routes: typeof cfg.routes): typeof g.app.config.listeners =>
    g.app.config.listeners.map((x) => (x.name === cfg.name ? { ...x, routes } : x));
  const off = g.app.replaceRoutes(routesUpdate({ listeners: listenersWith(undefined) }, routesVersion(listenersWith(undefined))));
  t.match(off.problems, [/SNI routing turned off for TCP listener "sni".*needs a restart/], 'turning SNI routing off is refused');
  const reduced = listenersWith(cfg.routes!.filter((r) => r.name !== 'b').map((r) => (r.name === 'wild' ? { ...r, name: 'wild2' } : r)));
  const swap = g.app.replaceRoutes(routesUpdate({ listeners: reduced }, routesVersion(reduced)));
  t.same(swap.problems, [], 'the reload is applied');
  t.equal(swap.closed.sni, 2, 'two connections lost their route');
  const next = l.sniRoutes;
  await closed(b3 as unknown as net.Socket);
  await closed(w2 as unknown as net.Socket);
  t.equal(l.stats.routes.get('b')?.closed.get('route_removed'), 1, 'b: route_removed');
  t.equal(l.stats.routes.get('wild')?.closed.get('route_removed'), 1, 'wild: route_removed');
  t.same(
    l.sniRoutes!.routes.map((r) => r.name),
    ['a', 'wild2', 'default'],
    'the new routes are in force',
  );
  t.not(next, null);

  // New connections use the new table.
  const r = await sClient(port, 'b.example', '127.0.0.3');
  t.match(r.stdout, 'backend=default sni=b.example', 'b.example now takes the default route');
  const kept = await open('a.example', '127.0.0.1');
  t.equal(
    l.replaceRoutes(
      SniRoutes.compile({ name: cfg.name, allowlist: cfg.allowlist, upstreams: cfg.upstreams, routes: cfg.routes! }, l.list.owner, l.stats),
    ),
    0,
    'a reload that keeps route a closes nothing',
  );
  t.equal(kept.destroyed, false, 'the connection on route a keeps going');
  kept.destroy();
});
