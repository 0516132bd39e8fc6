/**
 * The HTTP policy (docs/http-engines.md "The policy and its engines"): what one request is allowed
 * and how it is told, decided without a socket. An engine (the HTTP/1.1 relay, relay/relay-conn.ts)
 * parses a request head and calls `admit`; the answer is a RequestDecision it acts on: forward to an
 * upstream group with these headers and this target, or answer with these canned bytes.
 *
 * Per request, in order (docs/architecture.md "The data path"):
 *   route (listeners with routes: Host + path in normal form; a miss is answered 404 / 400 / 421)
 *   -> identity (a trusted proxy's X-Forwarded-For, else the connection's client)
 *   -> allowlist (the route's list, else the listener's) -> the upstream head's headers
 *   -> the edge rules, for a route (or listener) that has any (edge-rules.ts, docs/edge-rules.md):
 *      redirect, body size, rate limit, rewrite, upstream up, concurrency limit.
 *
 * Identity (docs/architecture.md "Client identity"): the peer is conn.clientAddress (the PROXY
 * header's source when a trusted balancer sent one, else the socket). A peer in
 * `http.trustedProxies` speaks for others: the client is the rightmost X-Forwarded-For address
 * that is not a trusted proxy, decided per request. Anyone else is the client, decided once per
 * connection (HttpConn.entry / denial, kept current by a list change's re-check), and every
 * client-IP header it sent is discarded (request-headers.ts).
 *
 * Denials (docs/architecture.md "Forwarding"): every refused request is counted here, once, and
 * answered 403 (text or JSON by Accept); the connection stays open (`http.denied.keepAlive`,
 * default true, as nginx and HAProxy keep it; `false` closes a direct client's after its 403). A
 * direct client refused for its whole connection, with no per-request log line wanted, gets the
 * quick form of the same decision: no Exchange, no header scan, a shared decision object
 * (`ex: null`), recorded by the engine's `finished` like any other.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { ListenerAccessLog } from '../../access-log/access-log';
import type { ListenerConfig, RouteConfig } from '../../schema/config';
import { clientFromForwardedFor } from '../../identity/forwarded-for';
import { forwardedElement, forwardedWithoutHost } from '../../identity/forwarded-header';
import { Admission } from '../../listener/admission';
import { ListenerStats } from '../../metrics/listener-stats';
import type { RoutesVersion } from '../../route/route-receiver';
import { addressSet, type AddressLookup } from '../../store/list-ref';
import type { LiveList } from '../../store/live-lists';
import type { UpstreamGroup } from '../../upstream/upstream-group';
import type { LimitZones } from '../../limit/limit-zones';
import type { CannedResponses } from './canned';
import { compileEdgeRules, rewriteTarget, type EdgeRequest, type EdgeRules } from './edge-rules';
import { Exchange, type HttpConn } from './exchange';
import { compileHttpRoutes, type HttpRoute, type HttpRoutes } from './http-routes';
import { ReceivedHeaders, scanRequestHeaders } from './request-headers';
import { requestHost } from './request-host';
import { newRequestId, validRequestId } from './request-id';
import { requestHeadBytes } from './request-size';
import { requestTarget } from './request-target';
import { RequestDecision } from './request-decision';
import { DEBUG_LEVEL, logsAt } from '../../log';

export { RequestDecision } from './request-decision';

/** What an engine needs of a request head (relay/llhttp-parser.ts RequestHead, or an HTTP/2 stream's). */
export interface RequestFacts {
  readonly method: string;
  /** The request target as sent (origin form, or absolute form whose authority is passed apart). */
  readonly url: string;
  /** [name, value, ...] as received. */
  readonly rawHeaders: readonly string[];
  /** The request asks for a protocol upgrade (Upgrade + Connection: upgrade). */
  readonly upgrade: boolean;
}

/** The policy's side of a listener's routes: a reload compiles, then swaps (HttpForwarder.replaceRoutes). */
interface PolicyDeps {
  readonly config: Readonly<ListenerConfig>;
  /** The listener's own list (routes without an `allowlist` use it too). */
  readonly list: LiveList;
  readonly stats: ListenerStats;
  readonly log: Logger;
  readonly canned: CannedResponses;
  /** The listener's upstream group (routes without `upstreams` use it too). */
  readonly group: UpstreamGroup;
  /** The access log: with per-request denial lines wanted, there is no quick denial. */
  readonly access: ListenerAccessLog | null;
  /** The process's limit zones (src/limit/limit-zones.ts). */
  readonly limits?: LimitZones;
}

/** The scratch the edge steps read (admit is synchronous: one per policy, never read outside it). */
class EdgeScratch implements EdgeRequest {
  ex: Exchange = null as unknown as Exchange;
  scheme: 'http' | 'https' = 'http';
  host = '';
  target = '';
  contentLength = -1;
}

export class HttpPolicy {
  /**
   * The listener's routes in force (http-routes.ts), null without `routes`: then every request
   * takes the listener's upstream group and allowlist. Replaced whole by a reload.
   */
  routes: HttpRoutes | null = null;
  readonly trustedProxies: AddressLookup;
  /** The allowlist decision of the listener's own list (listener/admission.ts: decide, count, log). */
  readonly admission: Admission;
  private readonly config: Readonly<ListenerConfig>;
  private readonly stats: ListenerStats;
  private readonly log: Logger;
  private readonly canned: CannedResponses;
  private readonly group: UpstreamGroup;
  private readonly access: ListenerAccessLog | null;
  /** Scratch for one admit() (synchronous): what the header scan learned. Never read outside admit. */
  private readonly got = new ReceivedHeaders();
  private readonly xffAppend: boolean;
  private readonly forwarded: boolean;
  /** `https` on a listener that terminates TLS, else `http` (X-Forwarded-Proto, Forwarded proto). */
  private readonly proto: 'http' | 'https';
  private readonly requestIdHeader: boolean;
  private readonly deniedKeepAlive: boolean;
  /** Extra header names stripped from untrusted peers (`http.stripHeaders`), null without any. */
  private readonly strip: ReadonlySet<string> | null;
  private readonly upstreamTimeoutMs: number;
  /** The quick denials' decisions (403 as text or JSON), shared by every connection of the listener. */
  private readonly quickText: RequestDecision;
  private readonly quickJson: RequestDecision;
  /** A listener without routes: its edge rules (edge-rules.ts), null without any. */
  private readonly rules: EdgeRules | null;
  /** Its rules redirect before the allowlist: no quick denial then (a refused client is redirected). */
  private readonly redirectEarly: boolean;
  private readonly er = new EdgeScratch();
  private readonly limits: LimitZones | undefined;

  constructor(deps: PolicyDeps) {
    const config = deps.config;
    const h = config.http;
    this.config = config;
    this.stats = deps.stats;
    this.log = deps.log;
    this.canned = deps.canned;
    this.group = deps.group;
    this.access = deps.access;
    this.limits = deps.limits;
    this.admission = new Admission(deps.list, deps.stats, deps.log);
    this.trustedProxies = addressSet(h.trustedProxies, deps.list.owner);
    this.strip = h.stripHeaders.length > 0 ? new Set(h.stripHeaders.map((n) => n.toLowerCase())) : null;
    this.xffAppend = h.xForwardedFor === 'append';
    this.requestIdHeader = h.requestId;
    this.deniedKeepAlive = h.denied.keepAlive;
    this.forwarded = h.forwarded;
    this.proto = config.tls !== null && config.tls !== undefined ? 'https' : 'http';
    this.upstreamTimeoutMs = h.upstreamTimeoutMs;
    const close = !this.deniedKeepAlive;
    this.quickText = new RequestDecision('answer', null, deps.canned.forbiddenText, close, null, null, 0, null, null);
    this.quickJson = new RequestDecision('answer', null, deps.canned.forbiddenJson, close, null, null, 0, null, null);
    this.rules =
      config.routes !== undefined
        ? null
        : compileEdgeRules({
            listener: config,
            route: null,
            canned: deps.canned,
            stats: deps.stats,
            group: deps.group,
            limits: deps.limits,
            lists: deps.list.owner,
          });
    this.redirectEarly = this.rules?.redirectEarly === true;
  }

  /** Build a listener's routes without touching those in force (throws on anything that cannot be built). */
  compileRoutes(routes: readonly RouteConfig[] | undefined, version: RoutesVersion): HttpRoutes | null {
    if (routes === undefined) return null;
    return compileHttpRoutes(routes, version, {
      listener: this.config,
      lists: this.admission.list.owner,
      stats: this.stats,
      log: this.log,
      listenerGroup: this.group,
      listenerCanned: this.canned,
      previous: this.routes,
      limits: this.limits,
    });
  }

  /**
   * The connection-level part, once per connection: whether its peer is a trusted proxy, and for
   * a direct client of a listener without routes, the allowlist decision its requests share.
   */
  open(hc: HttpConn): void {
    if (this.routes !== null) {
      // The route decides each request's allowlist: nothing to decide for the connection (and no
      // quick denial: a client refused by one route may be allowed by another on this connection).
      hc.routed = true;
    } else if (!hc.trusted) {
      const d = this.admission.decide(hc.conn.clientAddress);
      hc.entry = d.allowed ? d.entry : null;
      hc.denial = d.allowed ? null : d;
      hc.conn.entry = hc.entry;
      // Decided once for the connection: each of its requests is answered 403 (and counted).
      if (hc.entry === null) hc.conn.result = 'denied';
    }
  }

  /** Whether the peer of a new connection is a trusted proxy (its requests carry their clients). */
  trusts(address: string): boolean {
    return this.trustedProxies.admits(address);
  }

  /**
   * The decision for one request, or null: the connection takes no new request (draining, or a
   * reload turned routing off under it) and closes. `authority`: an absolute-form target's, which
   * replaces the Host header (RFC 9112 3.2.2). Counts the request and, for a refusal, the denial.
   */
  admit(hc: HttpConn, head: RequestFacts, authority: string | null): RequestDecision | null {
    // RFC 9112 3.2, on every HTTP listener (as nginx refuses a bad Host everywhere): one valid
    // Host line (HTTP/1.0 too: the backend would otherwise get the upstream's address), the
    // absolute form's authority in its place; the host is forwarded in the form it was decided on
    // (request-host.ts).
    const host = requestHost(head.rawHeaders, authority);
    if (typeof host !== 'string') return new RequestDecision('reject', null, this.canned.badRequest, true, null, null, 0, null, null, host);
    if (hc.draining) return null;
    if (!head.upgrade && this.quick(hc)) return this.quickDenial(hc, head);
    this.stats.httpRequests++;
    const headers: OutgoingHttpHeaders = {};
    const got = this.got;
    scanRequestHeaders(head.rawHeaders, hc.trusted, headers, got, this.strip);
    // The host as decided (request-host.ts): the absolute form's authority, or the Host line in
    // normal form; what goes upstream is what routes and logs read.
    headers.host = host;
    got.host = host;
    if (got.upgrade !== null && head.upgrade) this.stats.httpUpgrades++;
    if (hc.routed) return this.routed(hc, head, authority, headers);
    const ex = this.exchange(hc, head, this.admission);
    const rules = this.rules;
    if (rules !== null)
      return this.edge(rules, hc, head, authority, ex, headers, null, '/', this.group, this.upstreamTimeoutMs, this.canned, null);
    if (ex.entry === null) return this.refuse(ex, this.canned);
    this.identityHeaders(headers, hc, ex, got);
    return new RequestDecision('forward', ex, null, false, headers, this.group, this.upstreamTimeoutMs, null, got.upgrade);
  }

  /**
   * The allowlist and the steps after it for a route (or listener) with edge rules
   * (edge-rules.ts): the redirect (before the allowlist with `beforeAllowlist`), the body size,
   * the rewrite, the upstream timeouts. `path`: the target routed (normal form) when it differs
   * from the client's; `match`: the path entry that matched.
   */
  private edge(
    rules: EdgeRules,
    hc: HttpConn,
    head: RequestFacts,
    authority: string | null,
    ex: Exchange,
    headers: OutgoingHttpHeaders,
    path: string | null,
    match: string,
    group: UpstreamGroup,
    upstreamTimeoutMs: number,
    canned: CannedResponses,
    route: HttpRoute | null,
  ): RequestDecision {
    const got = this.got;
    const er = this.er;
    er.ex = ex;
    // How the request reached the edge: a trusted proxy (which may terminate TLS) says, else the listener.
    er.scheme = hc.trusted && got.xForwardedProto !== null ? schemeOf(got.xForwardedProto, this.proto) : this.proto;
    er.host = got.host ?? '';
    er.target = authority === null ? head.url : (requestTarget(head.url)?.path ?? head.url);
    er.contentLength = got.contentLength;
    const redirects = rules.redirect !== null || rules.httpsRedirect !== null;
    if (redirects && rules.redirectEarly) {
      const d = rules.redirectFor(er);
      if (d !== null) return d;
    }
    if (ex.entry === null) return this.refuse(ex, canned);
    if (redirects && !rules.redirectEarly) {
      const d = rules.redirectFor(er);
      if (d !== null) return d;
    }
    this.identityHeaders(headers, hc, ex, got);
    const extra = route?.requestHeaders ?? null;
    if (extra !== null) for (const [name, value] of extra) headers[name] = value;
    const big = rules.tooLarge(er);
    if (big !== null) return big;
    let delayMs = 0;
    if (rules.rate !== null) {
      const limited = rules.rateLimit(ex);
      if (limited !== null) return limited;
      delayMs = rules.delayMs;
    }
    const rw = rules.rewrite;
    if (rw !== null) {
      path = rewriteTarget(rw, path ?? er.target, match, headers);
      ListenerStats.bump(this.stats.edge, `${rules.route}\0rewrite`);
    }
    const none = rules.noneUp(ex, group);
    if (none !== null) return none;
    let slot = null;
    if (rules.concurrent !== null) {
      const limited = rules.concurrencyLimit(ex);
      if (limited !== null) return limited;
      slot = rules.slot;
    }
    const fwd = new RequestDecision('forward', ex, null, false, headers, group, upstreamTimeoutMs, path, got.upgrade);
    fwd.maxBodyBytes = rules.maxBodyBytes;
    fwd.timeouts = rules.timeouts;
    fwd.delayMs = delayMs;
    fwd.slot = slot;
    return fwd;
  }

  /**
   * A request on a listener with routes: Host + path pick the route, whose allowlist decides this
   * request (a keep-alive connection can carry requests for two hosts, one allowed, one denied)
   * and whose settings apply; no route: 404 (400 for a path that cannot be matched safely, or one
   * with ';' parameters: route_path_params; 421 for an unknown host on a TLS listener).
   */
  private routed(hc: HttpConn, head: RequestFacts, authority: string | null, headers: OutgoingHttpHeaders): RequestDecision | null {
    const routes = this.routes;
    if (routes === null) return null; // routing turned off by a reload: this connection closes (replaceRoutes)
    const got = this.got;
    // The absolute form's path (its authority already replaced Host); the engine checked the form.
    // A reload looks the request up again from ex.host and ex.url (redecide): the same inputs.
    const hit = routes.lookup(got.host ?? '', authority === null ? head.url : lookupTarget(head.url));
    if (typeof hit === 'string') {
      const ex = this.exchange(hc, head, null);
      ex.routed = true;
      ex.reason = hit;
      ListenerStats.bump(this.stats.routeMisses, hit);
      this.log.debug({ conn: hc.conn.id, client: ex.client, host: got.host, url: head.url, reason: hit }, 'no route');
      // A TLS listener answers route_no_host with 421 (RFC 9110 15.5.20: this connection, whose
      // certificate the client chose by SNI, serves no such host; a client may retry elsewhere).
      const answer =
        hit === 'route_bad_path' || hit === 'route_path_params'
          ? this.canned.badRequest
          : hit === 'route_no_host' && this.config.tls !== null
            ? this.canned.misdirected
            : this.canned.notFound;
      return new RequestDecision('answer', ex, answer, false, null, null, 0, null, null);
    }
    const route = hit.route;
    const ex = this.exchange(hc, head, route.admission);
    ex.routed = true;
    ex.route = route;
    hc.latest = ex;
    const rules = route.rules;
    if (rules !== null)
      return this.edge(
        rules,
        hc,
        head,
        authority,
        ex,
        headers,
        hit.path,
        hit.match,
        route.group,
        route.upstreamTimeoutMs,
        route.canned,
        route,
      );
    if (ex.entry === null) return this.refuse(ex, route.canned);
    this.identityHeaders(headers, hc, ex, got);
    const extra = route.requestHeaders;
    if (extra !== null) for (const [name, value] of extra) headers[name] = value;
    return new RequestDecision('forward', ex, null, false, headers, route.group, route.upstreamTimeoutMs, hit.path, got.upgrade);
  }

  /**
   * The quick denial applies: a direct client refused for the connection, not revoked or closing,
   * and no per-request line wanted (debug lines and access-log denial lines need the Exchange).
   */
  private quick(hc: HttpConn): boolean {
    return (
      hc.denial !== null &&
      hc.entry === null &&
      !hc.trusted &&
      !hc.revoked &&
      !hc.closing &&
      !this.redirectEarly &&
      !logsAt(this.log, DEBUG_LEVEL) &&
      (this.access === null || !this.access.wantsDenialLines())
    );
  }

  private quickDenial(hc: HttpConn, head: RequestFacts): RequestDecision {
    this.stats.httpRequests++;
    const conn = hc.conn;
    this.admission.refused(conn.clientAddress, conn, conn.via, head.method, head.url, hc.denial!.reason!);
    return this.canned.forbidden(headerValue(head.rawHeaders, 'accept')) === this.canned.forbiddenJson ? this.quickJson : this.quickText;
  }

  /** Count one refused request (the one denial path) and answer it 403 in the client's format. */
  private refuse(ex: Exchange, canned: CannedResponses): RequestDecision {
    const hc = ex.hc;
    ex.reason = hc.revoked ? 'revoked' : 'denied';
    if (!hc.revoked) {
      // Every request refused counts, from a direct client as from a trusted proxy's clients (a
      // revoked connection was counted once, as `revoked`, when the list change cut it).
      const admission = ex.route === null ? this.admission : ex.route.admission;
      const carried = hc.trusted || ex.route !== null ? null : hc.denial;
      if (carried !== null) admission.refused(ex.client, hc.conn, ex.via, ex.method, ex.url, carried.reason!);
      else admission.refused(ex.client, hc.conn, ex.via, ex.method, ex.url);
    }
    const close = !hc.trusted && !this.deniedKeepAlive;
    return new RequestDecision('answer', ex, canned.forbidden(this.got.accept), close, null, null, 0, null, null);
  }

  /**
   * The request's identity and allowlist decision. `admission`: the list that decides (the
   * listener's, or the route's); null on a route miss (no decision). A direct client of a listener
   * without routes was decided once for its connection (hc.entry).
   */
  private exchange(hc: HttpConn, head: RequestFacts, admission: Admission | null): Exchange {
    const conn = hc.conn;
    const got = this.got;
    let ex: Exchange;
    const now = Date.now();
    if (hc.trusted) {
      const client = clientFromForwardedFor(got.xForwardedFor, conn.clientAddress, this.trustedProxies);
      ex = new Exchange(hc, head.method, head.url, client, client === conn.clientAddress ? conn.via : 'xff', now, !got.hasBody);
      ex.entry = admission === null ? null : admission.match(client);
    } else {
      ex = new Exchange(hc, head.method, head.url, conn.clientAddress, conn.via, now, !got.hasBody);
      ex.entry = !hc.routed ? hc.entry : admission === null ? null : admission.match(conn.clientAddress);
    }
    ex.host = got.host;
    ex.userAgent = got.userAgent;
    ex.requestBytes = requestHeadBytes(head);
    ex.requestId = got.requestId !== null && validRequestId(got.requestId) ? got.requestId : newRequestId();
    return ex;
  }

  /**
   * X-Real-IP, X-Forwarded-For/Proto/Host/Port and (optionally) Forwarded, all canonical.
   * X-Forwarded-For, append mode: what a trusted proxy sent, then our peer (nginx
   * `$proxy_add_x_forwarded_for` = `$http_x_forwarded_for, $remote_addr`; each hop appends the
   * address it received the request from, so a backend trusting ipgate and the same proxies can
   * walk it right to left too); from an untrusted peer, just the client. Replace mode: the client.
   * Proto/Port from a trusted proxy are kept (it may terminate TLS), and its Host on a listener
   * without routes; else ours: `https` on a listener that terminates TLS, else `http`; the host
   * the request was decided on; the port the client connected to.
   */
  private identityHeaders(headers: OutgoingHttpHeaders, hc: HttpConn, ex: Exchange, got: ReceivedHeaders): void {
    const peer = hc.conn.clientAddress;
    const client = ex.client;
    if (this.requestIdHeader && ex.requestId !== null) headers['x-request-id'] = ex.requestId;
    headers['x-real-ip'] = client;
    if (this.xffAppend) {
      headers['x-forwarded-for'] = hc.trusted && got.xForwardedFor !== null ? `${got.xForwardedFor}, ${peer}` : peer;
    } else {
      headers['x-forwarded-for'] = client;
    }
    headers['x-forwarded-proto'] = hc.trusted && got.xForwardedProto !== null ? got.xForwardedProto : this.proto;
    // With routes, the host the route (and so the allowlist) was chosen by is the only host the
    // backend hears of: a trusted proxy's X-Forwarded-Host (and the host= of its Forwarded
    // elements) is replaced, never passed beside it, or a backend that believes it (Express
    // `trust proxy`, Rails, Spring) would serve another route's host under this route's decision
    // (docs/routes-and-sni.md "The request's Host"). Without routes no host decided anything, and
    // a trusted proxy's X-Forwarded-Host is kept, as its X-Forwarded-Proto is.
    const host = hc.trusted && got.xForwardedHost !== null && !hc.routed ? got.xForwardedHost : got.host;
    if (host !== null) headers['x-forwarded-host'] = host;
    headers['x-forwarded-port'] = hc.trusted && got.xForwardedPort !== null ? got.xForwardedPort : hc.destPortText;
    if (this.forwarded) {
      // RFC 7239: one element per hop, `for` = the node this hop received the request from.
      const element = forwardedElement(this.xffAppend ? peer : client, this.proto, got.host);
      const received =
        this.xffAppend && hc.trusted && got.forwarded !== null ? (hc.routed ? forwardedWithoutHost(got.forwarded) : got.forwarded) : null;
      headers.forwarded = received !== null && received.length > 0 ? `${received}, ${element}` : element;
    }
  }

  /**
   * What a change does to one open connection, decided in this one place for a reload (`reload`:
   * the new routes in force; `recheckList`: revokeLive) and a list change (revokeLive). Null: it
   * goes on.
   *
   * - Routing turned on or off by the reload: `route_removed` (accepted under the other regime).
   * - Routed (docs/routes-and-sni.md "Reload"): at a reload the latest request's Host and path
   *   are looked up again. The route they reach now takes the connection over if it has the same
   *   name (its list decides from here, so an edit of the list a reload moved the route to
   *   reaches the connections admitted before it); another route, or none, is `route_removed`,
   *   as for an SNI connection (sni-routes.ts adopt): the request would now be decided by
   *   another list, and its tunnel or response comes from the old route's backend. Then, on a
   *   list change or a reload with revokeLive, that route's list must still admit the request's
   *   client (a trusted proxy's client by X-Forwarded-For), else `revoked`: the tunnel and an
   *   idle connection at once, a response in flight after it. A request the list refused has
   *   nothing to take back. A trusted proxy's idle connection is kept: it speaks for many
   *   clients, and its next request is decided by its own.
   * - Not routed (a list change only: a reload changes no listener's own list): a direct client
   *   is decided once per connection (hc.entry / hc.denial answer its next requests), a trusted
   *   proxy's clients per request in flight and tunnel.
   */
  redecide(hc: HttpConn, reload: boolean, recheckList: boolean): 'route_removed' | 'revoked' | null {
    const routes = this.routes;
    if (hc.routed !== (routes !== null)) return reload ? 'route_removed' : null;
    if (routes !== null) {
      const ex = hc.latest;
      if (ex === null || ex.route === null) return null; // no request routed yet
      const why = this.redecideRouted(hc, ex, routes, reload, recheckList);
      if (why !== null || hc.h2 === null) return why;
      // HTTP/2: the streams in flight are requests of their own, each on its route (one
      // connection can carry two routes with different allowlists): each is decided again too.
      for (const open of hc.open) {
        if (open === ex || open.route === null) continue;
        const w = this.redecideRouted(hc, open, routes, reload, recheckList);
        if (w !== null) return w;
      }
      return null;
    }
    if (reload) return null;
    const matcher = this.admission.list.matcher;
    if (!hc.trusted) {
      const conn = hc.conn;
      const d = matcher.decide(conn.clientAddress);
      if (d.allowed) {
        hc.entry = d.entry;
        hc.denial = null;
        conn.entry = d.entry;
        return null;
      }
      hc.denial = d; // the reason and deny entry its next denials are counted with
      if (hc.entry === null) return null; // denied from the start: every request already gets 403
      hc.entry = null;
      conn.entry = null;
      return 'revoked';
    }
    for (const ex of hc.open) if (!matcher.admits(ex.client)) return 'revoked';
    if (hc.upgraded !== null && !matcher.admits(hc.upgraded.client)) return 'revoked';
    return null;
  }

  /** redecide for one routed request `ex` of `hc` (its latest, or an HTTP/2 stream in flight). */
  private redecideRouted(
    hc: HttpConn,
    ex: Exchange,
    routes: HttpRoutes,
    reload: boolean,
    recheckList: boolean,
  ): 'route_removed' | 'revoked' | null {
    const route = ex.route!;
    if (reload) {
      const hit = routes.lookup(ex.host ?? '', lookupTarget(ex.url));
      if (typeof hit === 'string' || hit.route.name !== route.name) return 'route_removed';
      ex.route = hit.route;
      if (!recheckList) return null;
    }
    if (ex.entry === null) return null;
    if (hc.trusted && hc.upgraded === null && hc.open.length === 0) return null;
    const entry = ex.route!.admission.match(ex.client);
    if (entry === null) return 'revoked';
    ex.entry = entry;
    return null;
  }
}

/** The target a route is looked up by: the path (and query) of an origin- or absolute-form target. */
function lookupTarget(url: string): string {
  return requestTarget(url)?.path ?? url;
}

/** A trusted proxy's X-Forwarded-Proto (its first value): https or http; anything else leaves the listener's. */
function schemeOf(xfp: string, fallback: 'http' | 'https'): 'http' | 'https' {
  const comma = xfp.indexOf(',');
  const v = (comma < 0 ? xfp : xfp.slice(0, comma)).trim().toLowerCase();
  return v === 'https' ? 'https' : v === 'http' ? 'http' : fallback;
}

/** The header `lower` (a lower-case name): its values joined as scanRequestHeaders joins them, or null. */
function headerValue(raw: readonly string[], lower: string): string | null {
  let v: string | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.length === lower.length && raw[i]!.toLowerCase() === lower) v = v === null ? raw[i + 1]! : `${v}, ${raw[i + 1]!}`;
  }
  return v;
}
