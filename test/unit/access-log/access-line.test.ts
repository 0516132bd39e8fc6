/**
 * The access log's text-built info lines against pino's own serialisation of the same fields:
 * same keys in the same order, same values, valid JSON for any string a client can put in a path.
 */
import fs from 'node:fs';
import os from 'node:os';
import pathMod from 'node:path';
import pino from 'pino';
import t, { type Test } from 'tap';
import { ListenerAccessLog } from '../../../src/access-log/access-log';
import type { Exchange } from '../../../src/forward/http/exchange';
import type { Connection } from '../../../src/connection/connection';
import { tlsFacts } from '../../../src/connection/tls-facts';
import { BlockWriter, createLogger, levelLabel, rawLineTarget } from '../../../src/log';

const ENTRY = Object.freeze({ cidr: '10.0.0.0/8' });

/** Two access logs for one listener: the text-built lines, and pino's (a logger rawLineTarget refuses). */
function pair(mode: 'tcp' | 'http'): { fast: string[]; slow: string[]; logs: [ListenerAccessLog, ListenerAccessLog] } {
  const fast: string[] = [];
  const slow: string[] = [];
  const fastLogger = createLogger(
    { level: 'info', format: 'json' },
    {
      write: (s: string) => {
        fast.push(s);
      },
    },
  );
  const slowLogger = pino(
    {
      level: 'info',
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: levelLabel },
      mixin: () => ({}),
    },
    {
      write: (s: string) => {
        slow.push(s);
      },
    },
  );
  return { fast, slow, logs: [new ListenerAccessLog('web', mode, fastLogger, null), new ListenerAccessLog('web', mode, slowLogger, null)] };
}

function conn(over: Partial<Record<string, unknown>> = {}): Connection {
  return {
    id: 17,
    clientAddress: '10.1.2.3',
    clientPort: 40123,
    via: 'proxy-v2',
    peerAddress: '127.0.0.1',
    result: null,
    entry: ENTRY,
    decidedPerRequest: false,
    upstream: '127.0.0.1:7100',
    socket: { bytesRead: 1234, bytesWritten: 5678 },
    startedAt: Date.now() - 5,
    tls: null,
    ...over,
  } as unknown as Connection;
}

function exchange(url: string | undefined, over: Partial<Record<string, unknown>> = {}): Exchange {
  const c = conn({ decidedPerRequest: true });
  return {
    hc: { conn: c, protocol: 'h1' },
    reason: null,
    url,
    method: 'GET',
    client: '10.9.9.9',
    via: 'xff',
    entry: ENTRY,
    upstream: { label: '127.0.0.1:7180' },
    status: 200,
    upstreamStatus: 200,
    upstreamMs: 2,
    host: 'app.example',
    userAgent: 'curl/8.5.0',
    requestId: '0123456789abcdef0123456789abcdef',
    bytesOut: 800,
    startedAt: Date.now() - 3,
    ...over,
  } as unknown as Exchange;
}

function compare(t: Test, fast: string, slow: string, what: string): void {
  t.match(fast, /\n$/, `${what}: one line`);
  const a = JSON.parse(fast) as Record<string, unknown>;
  const b = JSON.parse(slow) as Record<string, unknown>;
  delete a.time;
  delete b.time;
  t.same(Object.keys(a), Object.keys(b), `${what}: the same fields in the same order`);
  t.same(a, b, `${what}: the same values`);
}

t.test('rawLineTarget: createLogger loggers and their children, not other pino loggers', async (t) => {
  const l = createLogger({ level: 'info', format: 'json' }, { write: () => {} });
  t.ok(rawLineTarget(l.child({ listener: 'a' })), 'a child of createLogger');
  t.equal(rawLineTarget(pino({ level: 'info' }, { write: () => {} })), null, 'plain pino (numeric level, epoch time)');
  t.equal(
    rawLineTarget(
      pino({ timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: levelLabel }, mixin: () => ({}) }, { write: () => {} }),
    ),
    null,
    'a mixin',
  );
});

t.test('TCP lines: text-built equals pino', async (t) => {
  // durationMs is Date.now() - startedAt at each call: one clock for both loggers.
  const realNow = Date.now;
  const fixed = realNow();
  Date.now = () => fixed;
  t.teardown(() => {
    Date.now = realNow;
  });
  const rows: Array<[string, Partial<Record<string, unknown>>]> = [
    ['allowed', {}],
    ['an upstream failure', { result: 'upstream_refused', upstream: null }],
    [
      'IPv6 client, no port',
      { clientAddress: '2001:db8::1', clientPort: null, via: 'socket', peerAddress: '2001:db8::1', entry: { cidr: '2001:db8::/32' } },
    ],
  ];
  for (const [what, over] of rows) {
    const p = pair('tcp');
    const c = conn(over);
    p.logs[0].connection(c, c.socket.bytesRead, c.socket.bytesWritten);
    p.logs[1].connection(c, c.socket.bytesRead, c.socket.bytesWritten);
    t.equal(p.fast.length, 1, `${what}: one line`);
    compare(t, p.fast[0]!, p.slow[0]!, what);
  }
});

t.test('HTTP lines: text-built equals pino, paths with anything in them stay valid JSON', async (t) => {
  const paths: Array<string | undefined> = [
    '/',
    '/a/b?c=d&e=f',
    '/q"uote',
    '/back\\slash',
    '/ctl\u0001\u001f',
    '/tab\tnew\nline',
    '/ünïcödé/😀',
    '/lone\ud800surrogate',
    'x'.repeat(300),
    undefined,
  ];
  for (const path of paths) {
    const p = pair('http');
    const ex = exchange(path);
    const now = Date.now();
    p.logs[0].request(ex, now);
    p.logs[1].request(ex, now);
    const what = JSON.stringify(path)?.slice(0, 30) ?? 'undefined';
    if (path?.includes('\ud800')) {
      // pino writes a lone surrogate raw; the text-built line escapes it (still one JSON string).
      t.equal((JSON.parse(p.fast[0]!) as { path: string }).path, path, `${what}: surrogate kept, escaped`);
      continue;
    }
    compare(t, p.fast[0]!, p.slow[0]!, what);
  }
  const p = pair('http');
  const ex = exchange('/x', { reason: 'upstream_timeout', status: 504, upstream: null });
  const now = Date.now();
  p.logs[0].request(ex, now);
  p.logs[1].request(ex, now);
  compare(t, p.fast[0]!, p.slow[0]!, 'an upstream timeout');
  const overTls = pair('http');
  const exTls = exchange('/tls', { hc: { protocol: 'h1', conn: conn({ onRevoke: () => {}, tls: TLS_FACTS }) } });
  overTls.logs[0].request(exTls, now);
  overTls.logs[1].request(exTls, now);
  compare(t, overTls.fast[0]!, overTls.slow[0]!, 'a request over TLS');
  t.same(
    (JSON.parse(overTls.fast[0]!) as { tls: unknown }).tls,
    { version: 'TLSv1.3', sni: 'app.example', cipher: 'TLS_AES_128_GCM_SHA256', resumed: true, clientCert: 'CN=ü "client", O=x' },
    'the TLS facts',
  );
  for (const [what, over] of ROUTED) {
    const r = pair('http');
    const exr = exchange('/v1/users', over);
    r.logs[0].request(exr, now);
    r.logs[1].request(exr, now);
    compare(t, r.fast[0]!, r.slow[0]!, what);
  }
  const line = (over: Partial<Record<string, unknown>>): Record<string, unknown> => {
    const r = pair('http');
    r.logs[0].request(exchange('/v1/users', over), now);
    return JSON.parse(r.fast[0]!) as Record<string, unknown>;
  };
  t.match(line(ROUTED[0]![1]), { decision: 'allow', route: 'api' }, 'a routed request names its route');
  t.match(
    line(ROUTED[1]![1]),
    { decision: 'none', route: null, result: 'route_no_path', status: 404 },
    'no route matched: route null, decision none',
  );
  t.match(
    line(ROUTED[2]![1]),
    { route: 'api', tls: { version: 'TLSv1.3', sni: 'app.example' } },
    'a routed request over TLS carries the TLS facts',
  );
  t.notOk('route' in line({}), 'a listener without routes writes no route field');
});

/** Requests on a listener with routes: matched, missed, and matched over TLS. */
const ROUTED: Array<[string, Partial<Record<string, unknown>>]> = [
  ['a routed request', { routed: true, route: { name: 'api' } }],
  ['a route miss', { routed: true, route: null, reason: 'route_no_path', status: 404, upstream: null, entry: null, upstreamStatus: 0 }],
  [
    'a routed request over TLS',
    {
      routed: true,
      route: { name: 'api' },
      hc: {
        protocol: 'h1',
        conn: conn({ onRevoke: () => {}, tls: tlsFacts('TLSv1.3', 'app.example', 'TLS_AES_128_GCM_SHA256', false, null) }),
      },
    },
  ],
];

const TLS_FACTS = tlsFacts('TLSv1.3', 'app.example', 'TLS_AES_128_GCM_SHA256', true, 'CN=ü "client", O=x');

t.test('level: nothing is written when info is off', async (t) => {
  const lines: string[] = [];
  const logger = createLogger(
    { level: 'warn', format: 'json' },
    {
      write: (s: string) => {
        lines.push(s);
      },
    },
  );
  const log = new ListenerAccessLog('web', 'tcp', logger, null);
  log.connection(conn(), 1, 2);
  log.request(exchange('/'), Date.now());
  t.equal(lines.length, 0, 'no access lines at warn');
});

t.test('HTTP lines written field by field into a BlockWriter: the bytes of the text-built line', async (t) => {
  const dir = fs.mkdtempSync(pathMod.join(os.tmpdir(), 'ipgate-access-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fd = fs.openSync(pathMod.join(dir, 'direct.log'), 'w');
  const block = new BlockWriter(fd, 65_536, 60_000);
  const text: string[] = [];
  const direct = new ListenerAccessLog(
    'web',
    'http',
    createLogger({ level: 'info', format: 'json' }, block as unknown as pino.DestinationStream),
    null,
  );
  const viaText = new ListenerAccessLog(
    'web',
    'http',
    createLogger(
      { level: 'info', format: 'json' },
      {
        write: (s: string) => {
          text.push(s);
        },
      },
    ),
    null,
  );
  t.equal((direct as unknown as { direct: unknown }).direct, block, 'the field-by-field path is the one under test');
  t.equal((viaText as unknown as { direct: unknown }).direct, null, 'and the other logger builds a string');
  const realNow = Date.now;
  const fixed = realNow();
  Date.now = () => fixed;
  t.teardown(() => {
    Date.now = realNow;
  });
  const paths: Array<string | undefined> = [
    '/',
    '/a/b?c=d&e=f',
    '/q"uote',
    '/back\\slash',
    '/ctl\u0001\u001f',
    '/tab\tnew\nline',
    '/ünïcödé/😀',
    '/lone\ud800surrogate',
    'x'.repeat(300),
    '\u00ff'.repeat(256),
    undefined,
  ];
  const rows: Array<Partial<Record<string, unknown>>> = [
    {},
    { reason: 'upstream_timeout', status: 504, upstream: null },
    { client: '2001:db8::1', via: 'proxy-v2', entry: { cidr: '2001:db8::/32' } },
    { url: '/m', method: undefined },
    { status: 0 },
    { hc: { protocol: 'h1', conn: conn({ onRevoke: () => {}, peerAddress: undefined }) } },
    { hc: { protocol: 'h1', conn: conn({ onRevoke: () => {}, tls: TLS_FACTS }) } },
    ...ROUTED.map(([, over]) => over),
  ];
  for (const p of paths)
    for (const over of rows) {
      const ex = exchange(p, over);
      direct.request(ex, fixed);
      viaText.request(ex, fixed);
    }
  await new Promise<void>((resolve) => block.flush(() => resolve()));
  block.flushSync();
  fs.closeSync(fd);
  const written = fs.readFileSync(pathMod.join(dir, 'direct.log'), 'utf8');
  t.equal(text.length, paths.length * rows.length, 'one text line per request');
  t.equal(written, text.join(''), 'the same bytes, line for line');
});

t.test('TCP lines written field by field into a BlockWriter: the bytes of the text-built line', async (t) => {
  const dir = fs.mkdtempSync(pathMod.join(os.tmpdir(), 'ipgate-access-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fd = fs.openSync(pathMod.join(dir, 'direct.log'), 'w');
  const block = new BlockWriter(fd, 65_536, 60_000);
  const text: string[] = [];
  const direct = new ListenerAccessLog(
    'edge',
    'tcp',
    createLogger({ level: 'info', format: 'json' }, block as unknown as pino.DestinationStream),
    null,
  );
  const viaText = new ListenerAccessLog(
    'edge',
    'tcp',
    createLogger(
      { level: 'info', format: 'json' },
      {
        write: (s: string) => {
          text.push(s);
        },
      },
    ),
    null,
  );
  t.equal((direct as unknown as { direct: unknown }).direct, block, 'the field-by-field path is the one under test');
  const realNow = Date.now;
  const fixed = realNow();
  Date.now = () => fixed;
  t.teardown(() => {
    Date.now = realNow;
  });
  const rows: Array<Partial<Record<string, unknown>>> = [
    {},
    { result: 'upstream_refused', upstream: null },
    { clientAddress: '2001:db8::1', clientPort: null, via: 'socket', peerAddress: '2001:db8::1', entry: { cidr: '2001:db8::/32' } },
    { socket: { bytesRead: 0, bytesWritten: 2 ** 40 } },
    { startedAt: fixed + 5 },
    { peerAddress: undefined },
    { upstream: 'upstream.example\u0000"\\' },
    { entry: { cidr: '\ud800' } },
    { id: 2 ** 53 - 1 },
  ];
  for (const over of rows) {
    const c = conn(over);
    direct.connection(c, c.socket.bytesRead, c.socket.bytesWritten);
    viaText.connection(c, c.socket.bytesRead, c.socket.bytesWritten);
  }
  await new Promise<void>((resolve) => block.flush(() => resolve()));
  block.flushSync();
  fs.closeSync(fd);
  const written = fs.readFileSync(pathMod.join(dir, 'direct.log'), 'utf8');
  t.equal(text.length, rows.length, 'one text line per connection');
  t.equal(written, text.join(''), 'the same bytes, line for line');
  for (const line of written.trimEnd().split('\n')) t.doesNotThrow(() => JSON.parse(line), 'valid JSON');
});

t.test("TCP: a second hello the handshake watch refused is a rejection; a bad ServerHello is the backend's failure", async (t) => {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger(
    { level: 'debug', format: 'json' },
    {
      write: (s: string) => {
        lines.push(JSON.parse(s) as Record<string, unknown>);
      },
    },
  );
  const log = new ListenerAccessLog('sni', 'tcp', logger, null, null, true);
  const route = { name: 'www' };
  for (const result of ['tls_hrr_sni_changed', 'tls_hrr_alpn_changed', 'tls_timeout', 'tls_bad_server_hello']) {
    const c = conn({ result, route, sni: 'www.example.com' });
    log.connection(c, 1, 2);
  }
  t.match(
    lines[0],
    {
      level: 'info',
      decision: 'reject',
      reason: 'tls_hrr_sni_changed',
      result: 'tls_hrr_sni_changed',
      route: 'www',
      sni: 'www.example.com',
    },
    'admitted by the route, then refused at the second hello: reject, at info like every rejection with the access log on',
  );
  t.match(lines[1], { decision: 'reject', reason: 'tls_hrr_alpn_changed' }, 'ALPN changed: reject');
  t.match(lines[2], { decision: 'reject', reason: 'tls_timeout' }, 'no second hello in time: reject');
  t.match(
    lines[3],
    { level: 'info', decision: 'allow', result: 'tls_bad_server_hello', route: 'www' },
    "the backend's fault: an allowed connection that failed",
  );
});
