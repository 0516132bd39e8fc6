/**
 * The HTTP policy (src/forward/http/http-policy.ts) decides a request without a socket: these
 * tests open no socket. A Connection is a record of what the listener learned (its socket field
 * is never read by the policy), a request head is the engine's parsed head.
 */
import t from 'tap';
import pino from 'pino';
import { validateEntry, type AllowEntry } from '../../../../src/allowlist/entry';
import { parseConfig } from '../../../../src/config/load';
import { CannedResponses } from '../../../../src/forward/http/canned';
import { HttpConn } from '../../../../src/forward/http/exchange';
import { HttpPolicy, type RequestFacts } from '../../../../src/forward/http/http-policy';
import { parseUpstreams, UpstreamGroup } from '../../../../src/upstream/upstream-group';
import { Connection, type ClientSocket } from '../../../../src/connection/connection';
import { ListenerStats } from '../../../../src/metrics/listener-stats';
import { routesVersion } from '../../../../src/route/routes-in-force';
import { LiveLists } from '../../../../src/store/live-lists';

const NO_SOCKET = {} as ClientSocket; // never read by the policy

function entries(...cidrs: (string | { cidr: string; action: 'deny' })[]): AllowEntry[] {
  return cidrs.map((c) => {
    const v = validateEntry(typeof c === 'string' ? { cidr: c } : c);
    if (!v.ok) throw new Error(v.message);
    return v.entry;
  });
}

interface Setup {
  policy: HttpPolicy;
  lists: LiveLists;
  stats: ListenerStats;
  canned: CannedResponses;
}

function setup(listener: string, lists = new LiveLists()): Setup {
  const config = parseConfig(`
allowlists:
  main: [127.0.0.1/32]
  admins: [127.0.0.1/32]
listeners:
${listener}
`);
  const lc = config.listeners[0]!;
  const stats = new ListenerStats(lc.name);
  const canned = new CannedResponses(lc.http.deniedBody);
  const policy = new HttpPolicy({
    config: lc,
    list: lists.get(lc.allowlist),
    stats,
    log: pino({ level: 'silent' }),
    canned,
    group: new UpstreamGroup(parseUpstreams(lc.upstreams)),
    access: null,
  });
  if (lc.routes !== undefined) policy.routes = policy.compileRoutes(lc.routes, routesVersion([lc]));
  return { policy, lists, stats, canned };
}

const PLAIN = `
  - name: web
    mode: http
    listen: 127.0.0.1:0
    allowlist: main
    upstreams: ["127.0.0.1:9000"]
    http: {trustedProxies: [10.0.0.0/8]}`;

const ROUTED = `
  - name: web
    mode: http
    listen: 127.0.0.1:0
    allowlist: main
    upstreams: ["127.0.0.1:9000"]
    routes:
      - name: admin
        hosts: [admin.example]
        allowlist: admins
        upstreams: ["127.0.0.1:9001"]
      - name: www
        hosts: [www.example]
        paths: [{path: /app, match: prefix}]`;

function open(s: Setup, client: string, trusted = false): HttpConn {
  const conn = new Connection(1, 'web', NO_SOCKET, client, 40000, '127.0.0.1', 8080);
  const hc = new HttpConn(conn, trusted || s.policy.trusts(client));
  s.policy.open(hc);
  return hc;
}

function head(url: string, headers: Record<string, string> = {}, method = 'GET'): RequestFacts {
  return { method, url, rawHeaders: Object.entries({ Host: 'www.example', ...headers }).flat(), upgrade: false };
}

t.test('a listener without routes', async (t) => {
  const s = setup(PLAIN);
  s.lists.apply('main', entries('127.0.0.1/32', { cidr: '127.0.0.9/32', action: 'deny' }, '127.0.0.8/29'), '1');

  const allowed = s.policy.admit(open(s, '127.0.0.1'), head('/x', { 'X-Forwarded-For': '6.6.6.6' }), null)!;
  t.equal(allowed.verdict, 'forward', 'an allowlisted client is forwarded');
  t.equal(allowed.ex!.entry!.cidr, '127.0.0.1/32', 'with the entry that admitted it');
  t.equal(allowed.headers!['x-real-ip'], '127.0.0.1', 'X-Real-IP is the client');
  t.equal(allowed.headers!['x-forwarded-for'], '127.0.0.1', "an untrusted peer's X-Forwarded-For is dropped, ours set");
  t.equal(allowed.group!.targets[0]!.label, '127.0.0.1:9000', "the listener's upstream group");
  t.equal(allowed.path, null, 'the target goes as sent');

  const denied = s.policy.admit(open(s, '127.0.0.2'), head('/x', { Accept: 'application/json' }), null)!;
  t.equal(denied.verdict, 'answer', 'a client outside the list is answered');
  t.equal(denied.ex, null, 'the quick form: no Exchange for a connection refused as a whole');
  t.equal(denied.answer, s.canned.forbiddenJson, '403 as JSON for Accept: application/json');
  t.equal(s.stats.denied.get('not_allowlisted'), 1, 'counted once, not_allowlisted');

  const byEntry = s.policy.admit(open(s, '127.0.0.9'), head('/x'), null)!;
  t.equal(byEntry.answer, s.canned.forbiddenText, '403 as text otherwise');
  t.equal(s.stats.denied.get('denied_by_entry'), 1, 'a deny entry that decides is counted as denied_by_entry');
  t.equal(s.stats.httpRequests, 3, 'every request counted');
});

t.test('a trusted proxy: the client comes from X-Forwarded-For, per request', async (t) => {
  const s = setup(PLAIN);
  s.lists.apply('main', entries('192.0.2.1/32'), '1');
  const hc = open(s, '10.0.0.5');
  t.ok(hc.trusted, 'the peer is in http.trustedProxies');
  const a = s.policy.admit(hc, head('/', { 'X-Forwarded-For': '198.51.100.7, 192.0.2.1' }), null)!;
  t.equal(a.verdict, 'forward', 'the rightmost untrusted address decides, and it is allowed');
  t.equal(a.ex!.client, '192.0.2.1', 'the client');
  t.equal(a.ex!.via, 'xff', 'learned from X-Forwarded-For');
  t.equal(a.headers!['x-forwarded-for'], '198.51.100.7, 192.0.2.1, 10.0.0.5', 'the chain is extended with our peer');
  const b = s.policy.admit(hc, head('/', { 'X-Forwarded-For': '192.0.2.2' }), null)!;
  t.equal(b.verdict, 'answer', 'the next request on the same connection, for another client, is refused');
  t.not(b.ex, null, 'not a quick denial: the connection speaks for many clients');
  t.equal(b.closeAfterAnswer, false, "a trusted proxy's connection stays open after a 403");
});

t.test('routes: host and path pick the route, whose list decides', async (t) => {
  const s = setup(ROUTED);
  s.lists.apply('main', entries('127.0.0.0/24'), '1');
  s.lists.apply('admins', entries('127.0.0.1/32'), '1');
  const hc = open(s, '127.0.0.2');
  t.ok(hc.routed, 'every request is routed');
  const www = s.policy.admit(hc, head('/app/x'), null)!;
  t.equal(www.verdict, 'forward', 'www: the listener list admits .2');
  t.equal(www.ex!.route!.name, 'www', 'route www');
  const admin = s.policy.admit(hc, head('/', { Host: 'admin.example' }), null)!;
  t.equal(admin.verdict, 'answer', 'admin: its own list refuses .2, on the same connection');
  t.equal(admin.answer!.status, 403, '403');
  t.equal(admin.ex!.route!.name, 'admin', 'decided by route admin');
  const noPath = s.policy.admit(hc, head('/other'), null)!;
  t.equal(noPath.answer!.status, 404, 'a path no route of the host serves: 404');
  t.equal(noPath.ex!.reason, 'route_no_path', 'route_no_path');
  const noHost = s.policy.admit(hc, head('/', { Host: 'nobody.example' }), null)!;
  t.equal(noHost.ex!.reason, 'route_no_host', 'no route for the host');
  const normal = s.policy.admit(hc, head('/app/a/%2e%2e/b'), null)!;
  t.equal(normal.path, '/app/b', 'the upstream gets the normal form the route was chosen by');
  const bad = s.policy.admit(hc, head('/app/%2F'), null)!;
  t.equal(bad.answer!.status, 400, 'a path that cannot be matched safely: 400');
  const params = s.policy.admit(hc, head('/app;x=1/'), null)!;
  t.equal(params.ex!.reason, 'route_path_params', "';' parameters: route_path_params");
  t.equal(params.answer!.status, 400, "';' parameters: 400, as explain says (not a 404)");
  const okAdmin = s.policy.admit(open(s, '127.0.0.1'), head('/', { Host: 'admin.example' }), null)!;
  t.equal(okAdmin.group!.targets[0]!.label, '127.0.0.1:9001', "an allowed admin request goes to admin's group");
  t.equal(s.stats.routeMisses.get('route_no_path'), 1, 'misses counted by reason');
});

t.test('a list change re-decides open work: revocation without a socket', async (t) => {
  const s = setup(PLAIN);
  s.lists.apply('main', entries('127.0.0.1/32'), '1');
  const direct = open(s, '127.0.0.1');
  t.equal(s.policy.redecide(direct, false, true), null, 'allowed while listed');
  s.lists.apply('main', entries('127.0.0.2/32'), '2');
  t.equal(s.policy.redecide(direct, false, true), 'revoked', 'a direct client removed from the list: cut');
  t.equal(direct.entry, null, 'its connection-level decision is now a refusal');
  const next = s.policy.admit(direct, head('/'), null)!;
  t.equal(next.verdict, 'answer', 'its next request is refused');

  const proxy = open(s, '10.0.0.5');
  const inFlight = s.policy.admit(proxy, head('/', { 'X-Forwarded-For': '127.0.0.2' }), null)!;
  proxy.open.push(inFlight.ex!);
  t.equal(s.policy.redecide(proxy, false, true), null, "a trusted proxy's request in flight for an allowed client");
  s.lists.apply('main', entries('127.0.0.3/32'), '3');
  t.equal(s.policy.redecide(proxy, false, true), 'revoked', 'its client removed: the connection is cut after the response');
});

t.test('draining: no new request is admitted', async (t) => {
  const s = setup(PLAIN);
  s.lists.apply('main', entries('127.0.0.1/32'), '1');
  const hc = open(s, '127.0.0.1');
  hc.draining = true;
  t.equal(s.policy.admit(hc, head('/'), null), null, 'null: the engine closes the connection');
});

t.test('denied.keepAlive false closes a direct client after its 403', async (t) => {
  const s = setup(`${PLAIN}\n    http: {denied: {keepAlive: false}}`.replace('    http: {trustedProxies: [10.0.0.0/8]}\n', ''));
  s.lists.apply('main', entries('127.0.0.1/32'), '1');
  const d = s.policy.admit(open(s, '127.0.0.2'), head('/'), null)!;
  t.equal(d.closeAfterAnswer, true, 'the decision says: close after the answer');
});

t.test('a reload re-decides a routed connection against the new routes', async (t) => {
  const s = setup(ROUTED);
  s.lists.apply('main', entries('127.0.0.0/24'), '1');
  s.lists.apply('admins', entries('127.0.0.0/24'), '1');
  const hc = open(s, '127.0.0.2');
  const d = s.policy.admit(hc, head('/', { Host: 'admin.example' }), null)!;
  t.equal(d.verdict, 'forward', 'admitted by admin');
  hc.upgraded = d.ex; // a tunnel
  t.equal(s.policy.redecide(hc, true, true), null, 'the same routes: it goes on');
  // A reload that sends admin.example to the listener's own list, which no longer admits .2.
  s.lists.apply('main', entries('127.0.0.1/32'), '2');
  const lc = parseConfig(`
allowlists:
  main: [127.0.0.1/32]
listeners:
  - name: web
    mode: http
    listen: 127.0.0.1:0
    allowlist: main
    upstreams: ["127.0.0.1:9000"]
    routes:
      - name: admin
        hosts: [admin.example]
`).listeners[0]!;
  s.policy.routes = s.policy.compileRoutes(lc.routes, routesVersion([lc]));
  t.equal(s.policy.redecide(hc, true, false), null, 'without revokeLive the route (same name) takes the connection over');
  t.equal(s.policy.redecide(hc, true, true), 'revoked', "with revokeLive the new route's list decides: the tunnel is cut");
  const renamed = parseConfig(lcText('other')).listeners[0]!;
  s.policy.routes = s.policy.compileRoutes(renamed.routes, routesVersion([renamed]));
  t.equal(s.policy.redecide(hc, true, true), 'route_removed', 'its host now reaches another route: route_removed');
});

t.test('HTTP/2: every stream in flight is re-decided, not only the latest request', async (t) => {
  const s = setup(ROUTED);
  s.lists.apply('main', entries('127.0.0.0/24'), '1');
  s.lists.apply('admins', entries('127.0.0.0/24'), '1');
  const hc = open(s, '127.0.0.2');
  hc.protocol = 'h2';
  hc.h2 = { goaway: () => undefined };
  // Two streams in flight on one connection: admin's first, then www's (the latest).
  const admin = s.policy.admit(hc, head('/', { Host: 'admin.example' }), null)!;
  const www = s.policy.admit(hc, head('/app/x'), null)!;
  hc.open.push(admin.ex!, www.ex!);
  t.equal(hc.latest, www.ex, 'the latest request is www');
  t.equal(s.policy.redecide(hc, false, true), null, 'both lists admit the client');
  s.lists.apply('admins', entries('127.0.0.1/32'), '2');
  t.equal(s.policy.redecide(hc, false, true), 'revoked', "admin's list no longer admits it: its stream in flight is revoked");
  s.lists.apply('admins', entries('127.0.0.0/24'), '3');
  t.equal(s.policy.redecide(hc, false, true), null, 'admitted again');
  const renamed = parseConfig(`${lcText('other')}      - name: www
        hosts: [www.example]
        paths: [{path: /app, match: prefix}]
`).listeners[0]!;
  s.policy.routes = s.policy.compileRoutes(renamed.routes, routesVersion([renamed]));
  t.equal(s.policy.redecide(hc, true, false), 'route_removed', "a reload that moves admin's stream to another route: route_removed");
  hc.open.splice(0, 1); // admin's stream finished
  t.equal(s.policy.redecide(hc, true, false), null, 'www alone: it goes on');
});

function lcText(name: string): string {
  return `
allowlists:
  main: [127.0.0.1/32]
listeners:
  - name: web
    mode: http
    listen: 127.0.0.1:0
    allowlist: main
    upstreams: ["127.0.0.1:9000"]
    routes:
      - name: ${name}
        hosts: [admin.example]
`;
}
