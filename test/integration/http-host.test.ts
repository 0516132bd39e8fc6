/**
 * The request's Host decides the route, so it decides the allowlist (issue 27, "Host
 * validation"): over real sockets, ipgate with routes www.example.com (open to 127.0.0.2),
 * admin.example.com (guarded: 127.0.0.5 only) and the default "*" (open), all to one backend, as
 * one app serving both names is. Two backends that pick what to serve by host: a Node app routing
 * by WHATWG URL and Express's trust-proxy hostname, and nginx with server_name blocks. Every Host
 * of the issue, and the rows below, is answered 400 by ipgate, or reaches a backend that serves
 * exactly what the route was chosen for; never admin to 127.0.0.2. Then: a trusted proxy's
 * X-Forwarded-Host / Forwarded host= never disagree with the routed host; a listener without
 * routes refuses the same Hosts; and POST /v1/explain agrees with the wire on each row (the same
 * status and reason code, the same forwarded host).
 */
import net from 'node:net';
import t from 'tap';
import { startAdminGate, type AdminGate } from '../helpers/admin-api';
import { serverNameBackend, urlRouterBackend, type UrlRouterReport } from '../helpers/host-backends';
import { readAll } from '../helpers/net';
import { missing } from '../helpers/peers';

const skip = missing('nginx');

/** One request, raw bytes, on its own connection from `from`; the status and the body. */
async function send(port: number, head: string, from = '127.0.0.2'): Promise<{ status: number; body: string }> {
  const s = net.connect({ host: '127.0.0.1', port, localAddress: from });
  s.on('error', () => undefined);
  s.write(Buffer.from(head, 'latin1'));
  const text = (await readAll(s, 10_000)).toString('latin1');
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0), body: text.slice(text.indexOf('\r\n\r\n') + 4) };
}

/** The request head: Host lines as given (none for []), then Connection: close. */
function head(lines: readonly string[], target = '/page', extra = ''): string {
  return `GET ${target} HTTP/1.1\r\n${lines.map((h) => `Host: ${h}\r\n`).join('')}${extra}Connection: close\r\n\r\n`;
}

const LONG_253 = `${'a.'.repeat(126)}a`;

interface Row {
  desc: string;
  /** Host header values, one line each (the wire bytes; OWS around a value is the parser's). */
  lines: string[];
  /** The request target (default /page). */
  target?: string;
  status: 400 | 403 | 200;
  /** For 200: which route's host the backend must serve, and the Host it must receive. */
  served?: 'www' | 'default';
  forwardedHost?: string;
}

const ROWS: Row[] = [
  // The issue's Hosts: each reached admin through www or the default route.
  {
    desc: 'userinfo after a port-like text (cut at the first ":", routed as www)',
    lines: ['www.example.com:x@admin.example.com'],
    status: 400,
  },
  { desc: 'userinfo (WHATWG: host admin)', lines: ['www.example.com@admin.example.com'], status: 400 },
  { desc: 'a percent-encoded letter (WHATWG decodes %61)', lines: ['%61dmin.example.com'], status: 400 },
  { desc: 'percent-encoded dots', lines: ['admin%2eexample%2ecom'], status: 400 },
  { desc: 'a percent-encoded fullwidth "a" (IDNA maps it)', lines: ['%EF%BD%81dmin.example.com'], status: 400 },
  { desc: 'two Host lines, www first (the first was routed and forwarded)', lines: ['www.example.com', 'admin.example.com'], status: 400 },
  { desc: 'two Host lines, admin first', lines: ['admin.example.com', 'www.example.com'], status: 400 },
  // Our rows.
  { desc: 'the reverse userinfo trick', lines: ['admin.example.com:x@www.example.com'], status: 400 },
  { desc: 'www itself', lines: ['www.example.com'], status: 200, served: 'www', forwardedHost: 'www.example.com' },
  { desc: 'admin itself: its own allowlist refuses 127.0.0.2', lines: ['admin.example.com'], status: 403 },
  {
    desc: 'upper case: www, forwarded lower-cased',
    lines: ['WWW.Example.COM'],
    status: 200,
    served: 'www',
    forwardedHost: 'www.example.com',
  },
  { desc: 'upper case admin is admin', lines: ['ADMIN.EXAMPLE.COM'], status: 403 },
  {
    desc: 'a trailing dot: www, forwarded without it',
    lines: ['www.example.com.'],
    status: 200,
    served: 'www',
    forwardedHost: 'www.example.com',
  },
  { desc: 'a trailing dot on admin is admin', lines: ['admin.example.com.'], status: 403 },
  { desc: 'a port', lines: ['www.example.com:8080'], status: 200, served: 'www', forwardedHost: 'www.example.com:8080' },
  { desc: 'a port out of range', lines: ['www.example.com:65536'], status: 400 },
  { desc: 'a port that is no number', lines: ['www.example.com:80x'], status: 400 },
  { desc: 'an IPv6 literal: the default route', lines: ['[::1]:8080'], status: 200, served: 'default', forwardedHost: '[::1]:8080' },
  { desc: 'an IPv6 literal with a zone id', lines: ['[fe80::1%25lo]'], status: 400 },
  { desc: 'an IPv6 literal without brackets', lines: ['::1'], status: 400 },
  { desc: 'an IPv4 literal: the default route', lines: ['127.0.0.1'], status: 200, served: 'default', forwardedHost: '127.0.0.1' },
  { desc: 'a short IPv4 form (WHATWG: 127.0.0.1; RFC 3986: a name)', lines: ['127.1'], status: 400 },
  { desc: 'a tab inside the name', lines: ['www.example.com\t.admin.example.com'], status: 400 },
  {
    desc: "tabs around the value are the field's whitespace",
    lines: ['\twww.example.com\t'],
    status: 200,
    served: 'www',
    forwardedHost: 'www.example.com',
  },
  { desc: 'a NUL (refused by the parser)', lines: ['www.example.com\0.admin.example.com'], status: 400 },
  { desc: 'comma-joined, www first', lines: ['www.example.com, admin.example.com'], status: 400 },
  { desc: 'comma-joined, admin first', lines: ['admin.example.com,www.example.com'], status: 400 },
  { desc: 'a space inside', lines: ['www.example.com admin.example.com'], status: 400 },
  { desc: 'a backslash', lines: ['admin.example.com\\www.example.com'], status: 400 },
  { desc: 'an empty Host', lines: [''], status: 400 },
  { desc: 'no Host', lines: [], status: 400 },
  { desc: 'a 253-character name: the default route', lines: [LONG_253], status: 200, served: 'default', forwardedHost: LONG_253 },
  { desc: 'a 254-character name', lines: [`${LONG_253}b`], status: 400 },
  { desc: 'a 16 KB name of one-letter labels', lines: [`${'a.'.repeat(8000)}x`], status: 400 },
  {
    desc: 'absolute form: the authority picks the route (admin)',
    lines: ['www.example.com'],
    target: 'http://admin.example.com/page',
    status: 403,
  },
  {
    desc: 'absolute form: the authority in normal form',
    lines: ['admin.example.com'],
    target: 'http://WWW.example.com./page',
    status: 200,
    served: 'www',
    forwardedHost: 'www.example.com',
  },
  { desc: 'absolute form with userinfo', lines: ['www.example.com'], target: 'http://www.example.com@admin.example.com/page', status: 400 },
  {
    desc: 'absolute form with a percent-encoded authority',
    lines: ['www.example.com'],
    target: 'http://%61dmin.example.com/page',
    status: 400,
  },
  {
    desc: 'absolute form: a second Host line is still refused',
    lines: ['www.example.com', 'www.example.com'],
    target: 'http://www.example.com/page',
    status: 400,
  },
];

const ROUTES = (upstream: number): Record<string, unknown>[] => [
  { name: 'www', hosts: ['www.example.com'], upstreams: [`127.0.0.1:${upstream}`] },
  { name: 'admin', hosts: ['admin.example.com'], upstreams: [`127.0.0.1:${upstream}`], allowlist: 'admins' },
  { name: 'default', hosts: ['*'], upstreams: [`127.0.0.1:${upstream}`] },
];

t.test('Host: 400, or the backend serves what the route was chosen for', { skip }, async (t) => {
  const node = await urlRouterBackend(t);
  const nginx = await serverNameBackend(t);
  const http = { maxHeaderBytes: 32_768, trustedProxies: ['127.0.0.9/32'], forwarded: true };
  const g: AdminGate = await startAdminGate(t, {
    allowlists: { everyone: ['127.0.0.0/8'], admins: ['127.0.0.5/32'] },
    listeners: [
      {
        name: 'node',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'everyone',
        upstreams: [`127.0.0.1:${node}`],
        http,
        routes: ROUTES(node),
      },
      {
        name: 'nginx',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'everyone',
        upstreams: [`127.0.0.1:${nginx}`],
        http,
        routes: ROUTES(nginx),
      },
      { name: 'plain', mode: 'http', listen: '127.0.0.1:0', allowlist: 'everyone', upstreams: [`127.0.0.1:${node}`], http },
    ],
  });
  const stats = (name: string) => g.app.listeners.find((l) => l.name === name)!.stats;

  t.test("a Node app routing by WHATWG URL and by Express's trust-proxy hostname", async (t) => {
    for (const row of ROWS) {
      const r = await send(g.port('node'), head(row.lines, row.target));
      t.equal(r.status, row.status, `${row.desc}: ${row.status}`);
      if (r.status !== 200) continue;
      const seen = JSON.parse(r.body) as UrlRouterReport;
      t.not(seen.url, 'admin.example.com', `${row.desc}: the app (WHATWG URL) did not serve admin`);
      t.not(seen.express.toLowerCase().replace(/\.$/, ''), 'admin.example.com', `${row.desc}: the app (Express) did not serve admin`);
      if (row.served === 'www') t.equal(seen.url, 'www.example.com', `${row.desc}: served www`);
      t.equal(seen.host, row.forwardedHost, `${row.desc}: Host forwarded as decided`);
      t.equal(seen.xForwardedHost, row.forwardedHost, `${row.desc}: X-Forwarded-Host agrees`);
    }
  });

  t.test('nginx choosing a server_name block', async (t) => {
    for (const row of ROWS) {
      const r = await send(g.port('nginx'), head(row.lines, row.target));
      t.equal(r.status, row.status, `${row.desc}: ${row.status}`);
      if (r.status !== 200) continue;
      const [, block, host] = r.body.trim().split('|');
      t.not(block, 'admin', `${row.desc}: nginx did not serve its admin block`);
      t.equal(block, row.served, `${row.desc}: nginx served the ${row.served ?? '?'} block`);
      t.equal(host, row.forwardedHost!.replace(/:\d+$/, ''), `${row.desc}: nginx's $host`);
    }
  });

  t.test('each refusal is counted with its reason', async (t) => {
    const errors = stats('node').httpClientErrors;
    t.equal(errors.get('host_repeated'), 3, 'host_repeated: two Host lines (twice), and beside an absolute-form target');
    t.equal(errors.get('host_missing'), 1, 'host_missing');
    t.equal(errors.get('host_too_long'), 2, 'host_too_long: 254 characters, 16 KB');
    t.ok((errors.get('host_invalid') ?? 0) >= 18, `host_invalid: ${errors.get('host_invalid')}`);
    const text = await g.app.metrics.registry.metrics();
    t.match(text, /ipgate_http_client_errors_total\{listener="node",reason="host_repeated"\} 3/, 'in ipgate_http_client_errors_total');
  });

  t.test("a trusted proxy's X-Forwarded-Host and Forwarded host= never disagree with the routed host", async (t) => {
    const forged =
      'X-Forwarded-For: 127.0.0.2\r\nX-Forwarded-Host: admin.example.com\r\nForwarded: for=127.0.0.2;host=admin.example.com;proto=https\r\n';
    const r = await send(g.port('node'), head(['www.example.com'], '/page', forged), '127.0.0.9');
    t.equal(r.status, 200, 'the client (127.0.0.2 by X-Forwarded-For) is allowed on www');
    const seen = JSON.parse(r.body) as UrlRouterReport;
    t.equal(seen.xForwardedHost, 'www.example.com', "X-Forwarded-Host is the routed host, not the proxy's");
    t.equal(seen.express, 'www.example.com', 'Express with trust proxy serves www');
    t.equal(
      seen.forwarded,
      'for=127.0.0.2;proto=https, for=127.0.0.9;proto=http;host=www.example.com',
      "the proxy's Forwarded element keeps its for/proto, loses its host",
    );
    const n = await send(g.port('nginx'), head(['www.example.com'], '/page', forged), '127.0.0.9');
    t.match(n.body, /^nginx\|www\|www\.example\.com\|/, 'nginx (which routes by Host) agrees');
    const admin = await send(
      g.port('node'),
      head(['admin.example.com'], '/page', 'X-Forwarded-For: 127.0.0.2\r\nX-Forwarded-Host: www.example.com\r\n'),
      '127.0.0.9',
    );
    t.equal(admin.status, 403, 'naming www in X-Forwarded-Host does not move an admin request to www');
    // Without routes no host decided anything: the trusted proxy's X-Forwarded-Host is kept (as
    // its X-Forwarded-Proto is; docs/routes-and-sni.md).
    const plain = await send(
      g.port('plain'),
      head(['origin.internal'], '/page', 'X-Forwarded-For: 127.0.0.2\r\nX-Forwarded-Host: shop.example.com\r\n'),
      '127.0.0.9',
    );
    t.equal(
      (JSON.parse(plain.body) as UrlRouterReport).xForwardedHost,
      'shop.example.com',
      "a listener without routes keeps a trusted proxy's X-Forwarded-Host",
    );
  });

  t.test('a listener without routes refuses the same Hosts (as nginx does everywhere)', async (t) => {
    for (const row of ROWS.filter((r) => r.status === 400)) {
      t.equal((await send(g.port('plain'), head(row.lines, row.target))).status, 400, row.desc);
    }
    const ok = await send(g.port('plain'), head(['WWW.Example.COM.:8080']));
    t.equal(ok.status, 200);
    t.equal((JSON.parse(ok.body) as UrlRouterReport).host, 'www.example.com:8080', 'the Host forwarded in normal form');
  });

  t.test('POST /v1/explain agrees with the wire: the same status, reason and host', async (t) => {
    // The wire's bytes the explain body cannot carry are left out: a NUL (the parser refuses it
    // before any Host check), the field's surrounding whitespace (the parser strips it), a value
    // longer than the body schema allows.
    const rows = ROWS.filter((r) => !/NUL|tabs around|16 KB/.test(r.desc));
    const errors = stats('node').httpClientErrors;
    for (const row of rows) {
      const before = new Map(errors);
      const wire = await send(g.port('node'), head(row.lines, row.target));
      const reason = [...errors].find(([k, v]) => v !== (before.get(k) ?? 0))?.[0] ?? null;
      const body = { listener: 'node', peer: '127.0.0.2', path: row.target ?? '/page', headers: { Host: row.lines } };
      const ex = await g.api('POST', '/v1/explain', { body });
      if (row.lines.length === 0 && row.target === undefined) {
        // Explain is told no Host: it asks for one (400 on "host"); the wire's no-Host request is host_missing.
        t.equal(ex.status, 400, `${row.desc}: explain asks for a host`);
        t.equal(ex.json.field, 'host');
        t.equal(reason, 'host_missing', `${row.desc}: the wire's reason`);
        continue;
      }
      t.equal(ex.status, 200, `${row.desc}: explain answers`);
      const status = ex.json.decision === 'allow' ? 200 : ex.json.decision === 'deny' ? 403 : ex.json.status;
      t.equal(status, wire.status, `${row.desc}: explain says ${String(ex.json.decision)} (${String(status)}), the wire ${wire.status}`);
      if (wire.status === 400) t.equal(ex.json.reason, reason, `${row.desc}: the same reason (${String(reason)})`);
      if (wire.status === 200)
        t.equal(ex.json.host, (JSON.parse(wire.body) as UrlRouterReport).host, `${row.desc}: the host explain names is the one forwarded`);
    }
    const single = await g.api('POST', '/v1/explain', {
      body: { listener: 'node', peer: '127.0.0.2', host: 'www.example.com@admin.example.com' },
    });
    t.match(
      single.json,
      { decision: 'bad_request', reason: 'host_invalid', status: 400, detail: /character "@"/ },
      '"host" is checked as the Host line',
    );
    const plain = await g.api('POST', '/v1/explain', {
      body: { listener: 'plain', peer: '127.0.0.2', headers: { host: ['a.example', 'b.example'] } },
    });
    t.match(plain.json, { decision: 'bad_request', reason: 'host_repeated' }, 'a listener without routes: the same check');
    const untold = await g.api('POST', '/v1/explain', { body: { listener: 'plain', peer: '127.0.0.2' } });
    t.match(untold.json, { decision: 'allow' }, 'a listener without routes, told no Host: decided as before');
  });
});
