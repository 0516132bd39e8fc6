/**
 * HTTP forwarding (listener mode `http`), the policy half: what each request is allowed and how it
 * is told, over the one engine that moves its bytes (relay/relay-conn.ts; docs/http-engines.md).
 * This file decides identity, admission, the upstream head's forwarding headers, canned answers
 * and records; the engine owns the client connection from its first byte (parse, relay, pool,
 * upgrades, outbound PROXY) and calls back through the RelayHost interface.
 *
 * Identity (docs/architecture.md "Client identity"): the peer is conn.clientAddress (the PROXY
 * header's source when a trusted balancer sent one, else the socket). A peer in
 * `http.trustedProxies` speaks for others: the client is the rightmost X-Forwarded-For address
 * that is not a trusted proxy, decided per request. Anyone else is the client, decided once per
 * connection, and every client-IP header it sent is discarded (request-headers.ts).
 *
 * Denials (docs/architecture.md "HTTP forwarding"): an HTTP client is told (403, text or JSON by
 * Accept), so this handler makes every allowlist decision itself (`decidesPerRequest` is always
 * true). Each refused request is answered 403 and counted; the connection stays open
 * (`http.denied.keepAlive`, default true, as nginx and HAProxy keep it; `false` closes a direct
 * client's after its 403; a revoked one always closes). The backend receives nothing.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { ListenerAccessLog } from '../../access-log/access-log';
import { addressSet, readsList, type AddressLookup } from '../../store/list-ref';
import type { ListenerConfig, RouteConfig } from '../../config/schema';
import { clientFromForwardedFor } from '../../identity/forwarded-for';
import { forwardedElement } from '../../identity/forwarded-header';
import type { Connection, Endpoint } from '../../listener/connection';
import { NetByteSocket, type ByteSocket } from '../../transport/byte-socket';
import { RawSocket, rawSocketsWanted } from '../../transport/raw-socket';
import { Admission } from '../../listener/admission';
import type { ConnectionHandler } from '../../listener/listener';
import { ListenerStats, methodIndex } from '../../metrics/listener-stats';
import { encodeProxyV1, encodeProxyV2 } from '../../proxy-protocol/encoder';
import type { LiveList } from '../../store/live-lists';
import type { RouteReceiver, RoutesVersion } from '../../route/route-receiver';
import { requestTarget } from './request-target';
import { compileHttpRoutes, type HttpRoutes } from './http-routes';
import { routesVersion } from '../../route/routes-in-force';
import { parseUpstreams, UpstreamPool } from '../upstream-group';
import type { ClientReason } from '../../reasons';
import { upstreamReason } from '../upstream-reason';
import { Canned, CannedResponses } from './canned';
import { Exchange, HttpConn } from './exchange';
import { ReceivedHeaders, scanRequestHeaders } from './request-headers';
import { newRequestId, validRequestId } from './request-id';
import { requestHeadBytes } from './request-size';
import type { RequestHead } from './relay/llhttp-parser';
import { RelayConn, type Admitted, type RelayHost } from './relay/relay-conn';
import { RelayPool } from './relay/upstream-pool';
import { WaitSweep } from '../../listener/wait-sweep';
import { DnsCache } from './upstream-dns';

/** A revoked connection's in-flight response gets this long before the socket is cut. */
export const REVOKE_GRACE_MS = 1000;

const kHttpConn = Symbol('ipgate.httpConn');

interface Carrier {
  [kHttpConn]?: HttpConn;
}

export class HttpForwarder implements ConnectionHandler, RelayHost, RouteReceiver<HttpRoutes | null> {
  readonly routeKind = 'http';
  /**
   * The listener's routes in force (http-routes.ts), null without `routes`: then every request
   * takes the listener's upstream group and allowlist exactly as before routes existed. Replaced
   * whole by replaceRoutes (a reload).
   */
  routes: HttpRoutes | null = null;
  private readonly pool: UpstreamPool;
  private readonly relay: RelayPool;
  private readonly trustedProxies: AddressLookup;
  /** The allowlist decision, shared with the TCP path (listener/admission.ts): decide, count, log. */
  private readonly admission: Admission;
  private readonly canned: CannedResponses;
  private readonly got = new ReceivedHeaders();
  private readonly log: Logger;
  private readonly xffAppend: boolean;
  private readonly forwarded: boolean;
  /** `https` on a listener that terminates TLS, else `http` (X-Forwarded-Proto, Forwarded proto). */
  private readonly proto: 'http' | 'https';
  /**
   * Plaintext listeners accept libuv handles (transport/raw-socket.ts) where this Node has them,
   * unless IPGATE_TCP_HANDLES=0: no net.Socket stream layer under the engine (bench/README.md
   * "HTTP on libuv handles"). TLS listeners accept net.Sockets (a TLSSocket wraps one).
   */
  readonly rawSockets: boolean;
  readonly upstreamTimeoutMs: number;
  readonly upstreamIdleTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly requestHeaderTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxRequestsPerConnection: number;
  readonly maxHeaderBytes: number;
  readonly waits: WaitSweep;
  private draining = false;
  private active = 0;
  /** `http.denied.keepAlive`: a denied direct client's connection stays open after its 403. */
  readonly deniedKeepAlive: boolean;
  /** `http.requestId`: send X-Request-ID upstream. */
  private readonly requestIdHeader: boolean;
  /** Extra header names stripped from untrusted peers (`http.stripHeaders`), null without any. */
  readonly strip: ReadonlySet<string> | null;
  /** Live client connections (drain closes the idle ones, then the rest as they finish). */
  private readonly conns = new Set<HttpConn>();

  constructor(
    private readonly config: Readonly<ListenerConfig>,
    logger: Logger,
    private readonly stats: ListenerStats,
    private readonly list: LiveList,
    /** The access log: a line per request (null: logging.access off). */
    private readonly access: ListenerAccessLog | null = null,
  ) {
    const h = config.http;
    this.log = logger.child({ listener: config.name });
    this.admission = new Admission(list, stats, this.log);
    this.pool = new UpstreamPool(parseUpstreams(config.upstreams));
    this.trustedProxies = addressSet(h.trustedProxies, list.owner);
    this.canned = new CannedResponses(h.deniedBody);
    this.strip = h.stripHeaders.length > 0 ? new Set(h.stripHeaders.map((n) => n.toLowerCase())) : null;
    this.xffAppend = h.xForwardedFor === 'append';
    this.requestIdHeader = h.requestId;
    this.deniedKeepAlive = h.denied.keepAlive;
    this.forwarded = h.forwarded;
    this.proto = config.tls !== null && config.tls !== undefined ? 'https' : 'http';
    this.upstreamTimeoutMs = h.upstreamTimeoutMs;
    this.upstreamIdleTimeoutMs = h.upstreamIdleTimeoutMs;
    this.idleTimeoutMs = config.timeouts.idleMs;
    this.requestHeaderTimeoutMs = h.requestHeaderTimeoutMs;
    this.keepAliveTimeoutMs = h.keepAliveTimeoutMs;
    this.maxRequestsPerConnection = h.maxRequestsPerConnection;
    this.maxHeaderBytes = h.maxHeaderBytes;
    // The sweep checks the waits between requests, the client's idle timeout and the idle bound
    // of outbound-PROXY connections' own upstream sockets; the last counts at half, as it must
    // run out before the backend's keep-alive timeout does (RelayConn.check).
    this.waits = new WaitSweep(Math.min(h.requestHeaderTimeoutMs, h.keepAliveTimeoutMs, config.timeouts.idleMs, h.upstreamIdleTimeoutMs / 2));
    const dns = this.pool.targets.some((t) => t.family === 0) ? new DnsCache(h.upstreamDnsTtlMs) : null;
    // With routes, any group (now or after a reload) may name hosts: the cache is there for them.
    const routedDns = dns ?? (config.routes !== undefined ? new DnsCache(h.upstreamDnsTtlMs) : null);
    this.rawSockets = rawSocketsWanted() && this.proto === 'http';
    this.relay = new RelayPool(h.upstreamIdleTimeoutMs, h.upstreamMaxSockets, stats.upstreamConnect, routedDns, rawSocketsWanted());
    if (config.routes !== undefined) this.replaceRoutes(this.compileRoutes(config.routes, routesVersion([config])));
  }

  // --- routes (RouteReceiver: a reload compiles, then swaps) -------------------------------------

  compileRoutes(routes: readonly RouteConfig[] | undefined, version: RoutesVersion): HttpRoutes | null {
    if (routes === undefined) return null;
    return compileHttpRoutes(routes, version, {
      listener: this.config, lists: this.list.owner, stats: this.stats, log: this.log,
      listenerGroup: this.pool, listenerCanned: this.canned, previous: this.routes,
    });
  }

  /**
   * Swap `next` in. Connections are not cut, except those whose route is gone: the latest
   * request's route is not in `next`, or routing itself was turned on or off (a connection
   * accepted under the other regime). They close after their in-flight response
   * (`route_removed`); idle ones and tunnels at once.
   */
  replaceRoutes(next: HttpRoutes | null): number {
    this.routes = next;
    if (next !== null) this.stats.httpRoutes ??= new Map();
    let marked = 0;
    for (const hc of this.conns) {
      const gone = hc.routed !== (next !== null) || (next !== null && hc.routeName !== null && !next.names.has(hc.routeName));
      if (!gone || hc.closing) continue;
      marked++;
      hc.closing = true;
      hc.conn.result = 'route_removed';
      if (hc.upgraded !== null || hc.open.length === 0) hc.conn.socket.destroy();
    }
    return marked;
  }

  /** Whether a change of `list` concerns this listener's connections (a route enforces it). */
  usesList(list: LiveList): boolean {
    return list === this.list || (this.routes !== null && this.routes.lists.has(list));
  }

  // --- ConnectionHandler ------------------------------------------------------------------------

  /** Always: HTTP answers a denial with 403, which only the HTTP layer can write. */
  decidesPerRequest(): boolean {
    return true;
  }

  handle(conn: Connection, leftover: Buffer): void {
    // A RawSocket on plaintext listeners (rawSockets); a TLSSocket after a handshake, or a
    // net.Socket where handles are off, behind the same callbacks.
    const client = conn.socket;
    let socket: ByteSocket;
    if (client instanceof RawSocket) {
      socket = client;
    } else {
      // Nagle off: a response written as head + body must not wait for the client's delayed ACK
      // (~40 ms per request on Linux; bench/README.md "HTTP path vs nginx"). The listener sets it
      // on the RawSockets it accepts, and net.Server's `noDelay` on the sockets it accepts, which
      // a TLSSocket wraps: setting it again through the TLSSocket is one more setsockopt and ~4 us
      // of a handshake's CPU on Node 20 (bench/README.md "2026-12-02: what ipgate adds to a new
      // TLS handshake").
      if (!(client as { encrypted?: boolean }).encrypted) client.setNoDelay(true);
      socket = new NetByteSocket(client);
    }
    const trusted = this.trustedProxies.lookup(conn.clientAddress) >= 0;
    const hc = new HttpConn(conn, trusted, this);
    if (this.routes !== null) {
      // The route decides each request's allowlist: nothing to decide for the connection (and no
      // quick denial: a client refused by one route may be allowed by another on this connection).
      hc.routed = true;
    } else if (!trusted) {
      const d = this.admission.decide(conn.clientAddress);
      hc.entry = d.allowed ? d.entry : null;
      hc.denial = d.allowed ? null : d;
      conn.entry = hc.entry;
      // Decided once for the connection: each of its requests is answered 403 (and counted).
      if (hc.entry === null) conn.result = 'denied';
    }
    (client as Carrier)[kHttpConn] = hc;
    conn.onRevoke = this.onRevoke;
    this.active++;
    this.conns.add(hc);
    socket.onClose(() => this.socketClosed(hc));
    const header = this.config.outboundProxyProtocol === 'none' ? null : this.proxyHeader(conn);
    new RelayConn(this, this.relay, hc, socket, this.pool.targets, () => this.pool.start(), header).start(leftover);
  }

  drain(): void {
    this.draining = true;
    // Idle keep-alive connections close now; the others after their exchange in flight (the
    // engine closes a connection whose HttpConn is closing once its response is done).
    for (const hc of this.conns) {
      hc.closing = true;
      if (hc.open.length === 0 && hc.upgraded === null) hc.conn.socket.destroy();
    }
    if (this.active === 0) this.close();
  }

  // --- the engine's host (RelayHost) ------------------------------------------------------------

  relayExchange(hc: HttpConn, head: RequestHead, socket: ByteSocket, authority: string | null): Admitted | null {
    if (hc.closing && this.draining) return null;
    this.stats.httpRequests++;
    const headers: OutgoingHttpHeaders = {};
    const got = this.got;
    scanRequestHeaders(head.rawHeaders, hc.trusted, headers, got, this.strip);
    if (authority !== null) {
      headers.host = authority;
      got.host = authority;
    }
    if (got.upgrade !== null && head.upgrade) this.stats.httpUpgrades++;
    if (hc.routed) return this.routedExchange(hc, head, socket, authority, headers);
    const ex = this.exchange(hc, head, socket, this.admission);
    if (ex.entry !== null) this.identityHeaders(headers, hc, ex, got);
    return { ex, headers, accept: got.accept, upgrade: got.upgrade };
  }

  /**
   * A request on a listener with routes: Host + path pick the route, whose allowlist decides this
   * request (a keep-alive connection can carry requests for two hosts, one allowed, one denied)
   * and whose settings apply; no route: 404 (400 for a path that cannot be matched safely).
   */
  private routedExchange(hc: HttpConn, head: RequestHead, socket: ByteSocket, authority: string | null, headers: OutgoingHttpHeaders): Admitted | null {
    const routes = this.routes;
    if (routes === null) return null; // routing turned off by a reload: this connection closes (replaceRoutes)
    const got = this.got;
    // The absolute form's path (its authority already replaced Host); the engine checked the form.
    const target = authority === null ? head.url : requestTarget(head.url)?.path ?? head.url;
    const hit = routes.lookup(got.host ?? '', target);
    if (typeof hit === 'string') {
      const ex = this.exchange(hc, head, socket, null);
      ex.routed = true;
      ex.reason = hit;
      ListenerStats.bump(this.stats.routeMisses, hit);
      this.log.debug({ conn: hc.conn.id, client: ex.client, host: got.host, url: head.url, reason: hit }, 'no route');
      // A TLS listener answers route_no_host with 421 (RFC 9110 15.5.20: this connection, whose
      // certificate the client chose by SNI, serves no such host; a client may retry elsewhere).
      const answer = hit === 'route_bad_path' ? this.canned.badRequest
        : hit === 'route_no_host' && this.config.tls !== null ? this.canned.misdirected : this.canned.notFound;
      return { ex, headers, accept: got.accept, upgrade: got.upgrade, answer };
    }
    const route = hit.route;
    const ex = this.exchange(hc, head, socket, route.admission);
    ex.routed = true;
    ex.route = route;
    hc.routeName = route.name;
    if (ex.entry !== null) {
      this.identityHeaders(headers, hc, ex, got);
      const extra = route.requestHeaders;
      if (extra !== null) for (const [name, value] of extra) headers[name] = value;
    }
    return { ex, headers, accept: got.accept, upgrade: got.upgrade, route, path: hit.path };
  }

  forbidden(accept: string | null): Canned {
    return this.canned.forbidden(accept);
  }

  get badRequest(): Canned {
    return this.canned.badRequest;
  }

  get headersTooLarge(): Canned {
    return this.canned.headersTooLarge;
  }

  get badGateway(): Canned {
    return this.canned.badGateway;
  }

  get gatewayTimeout(): Canned {
    return this.canned.gatewayTimeout;
  }

  get requestTimeout(): Canned {
    return this.canned.requestTimeout;
  }

  relayClientError(hc: HttpConn, reason: ClientReason): void {
    ListenerStats.bump(this.stats.httpClientErrors, reason);
    if (hc.conn.result === null) hc.conn.result = reason;
    this.log.debug({ conn: hc.conn.id, peer: hc.conn.clientAddress, reason }, 'bad request');
  }

  relayUpstreamFailed(ex: Exchange, code: string, timedOut: boolean, retrying: boolean): void {
    const reason = timedOut ? 'upstream_timeout' : upstreamReason({ code } as NodeJS.ErrnoException);
    this.stats.upstreamFailed(ex.upstream?.label, reason);
    if (retrying) {
      this.log.warn({ conn: ex.hc.conn.id, upstream: ex.upstream?.label, err: code }, 'upstream connect failed; trying next');
      return;
    }
    ex.reason = reason;
    this.log.warn({ conn: ex.hc.conn.id, client: ex.client, upstream: ex.upstream?.label, reason, err: code }, 'upstream failed');
  }

  /** The upstream's response head: its status and time, per target (issue "Operations"). */
  private upstreamAnswered(ex: Exchange, status: number): void {
    ex.upstreamStatus = status;
    const ms = performance.now() - ex.sentAt;
    ex.upstreamMs = Math.round(ms);
    if (ex.upstream !== null) this.stats.upstreamAnswered(ex.upstream.label, status, ms / 1000);
  }

  relayUpstreamResponse(ex: Exchange, status: number): void {
    this.upstreamAnswered(ex, status);
  }

  relayUpgraded(ex: Exchange, upstream: ByteSocket): void {
    const hc = ex.hc;
    hc.upgraded = ex;
    hc.conn.upstreamSocket = upstream;
    hc.conn.upstream = ex.upstream?.label ?? null;
  }

  relayRecord(ex: Exchange): void {
    this.record(ex);
  }

  relayDenied(ex: Exchange): void {
    this.countDenied(ex);
  }

  /**
   * The quick denial (relay-conn.ts `quickDeny`) applies: a direct client refused for the connection,
   * not revoked or draining, and no debug line wanted (the debug lines need the full exchange).
   */
  quickDenial(hc: HttpConn): boolean {
    return hc.denial !== null && hc.entry === null && !hc.trusted && !hc.revoked && !hc.closing
      && !this.log.isLevelEnabled('debug') && (this.access === null || !this.access.wantsDenialLines());
  }

  relayQuickDenied(hc: HttpConn, head: RequestHead, responseBytes: number): void {
    this.stats.httpRequests++;
    const conn = hc.conn;
    this.admission.refused(conn.clientAddress, conn, conn.via, head.method, head.url, hc.denial!.reason!);
    this.stats.http.count(methodIndex(head.method), 403, requestHeadBytes(head), responseBytes);
  }

  relayQuickRecord(hc: HttpConn, startedAt: number): void {
    this.stats.http.duration.observe((Date.now() - startedAt) / 1000);
    const d = hc.denial!;
    this.access?.deniedRequest(hc.conn.clientAddress, d.reason!, d.entry?.cidr ?? null);
  }

  /**
   * The request's identity and allowlist decision. `admission`: the list that decides (the
   * listener's, or the route's); null on a route miss (no decision). A direct client of a listener
   * without routes was decided once for its connection (hc.entry).
   */
  private exchange(hc: HttpConn, head: RequestHead, socket: ByteSocket, admission: Admission | null): Exchange {
    const conn = hc.conn;
    const got = this.got;
    let ex: Exchange;
    if (hc.trusted) {
      const client = clientFromForwardedFor(got.xForwardedFor, conn.clientAddress, this.trustedProxies);
      ex = new Exchange(hc, head.method, head.url, socket, client, client === conn.clientAddress ? conn.via : 'xff', Date.now(), !got.hasBody);
      ex.entry = admission === null ? null : admission.match(client);
    } else {
      ex = new Exchange(hc, head.method, head.url, socket, conn.clientAddress, conn.via, Date.now(), !got.hasBody);
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
   * Proto/Host/Port from a trusted proxy are kept (it may terminate TLS); else ours: `https` on a
   * listener that terminates TLS, else `http`; the Host header; the port the client connected to.
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
    const host = hc.trusted && got.xForwardedHost !== null ? got.xForwardedHost : got.host;
    if (host !== null) headers['x-forwarded-host'] = host;
    headers['x-forwarded-port'] = hc.trusted && got.xForwardedPort !== null ? got.xForwardedPort : hc.destPortText;
    if (this.forwarded) {
      // RFC 7239: one element per hop, `for` = the node this hop received the request from.
      const element = forwardedElement(this.xffAppend ? peer : client, this.proto, got.host);
      headers.forwarded = this.xffAppend && hc.trusted && got.forwarded !== null ? `${got.forwarded}, ${element}` : element;
    }
  }

  private countDenied(ex: Exchange): void {
    ex.reason = ex.hc.revoked ? 'revoked' : 'denied';
    if (ex.hc.revoked) return; // counted once, as `revoked`, when the list change cut it
    // Every request refused counts, from a direct client as from a trusted proxy's clients.
    const admission = ex.route === null ? this.admission : ex.route.admission;
    const carried = ex.hc.trusted || ex.route !== null ? null : ex.hc.denial;
    if (carried !== null) admission.refused(ex.client, ex.hc.conn, ex.via, ex.method, ex.url, carried.reason!);
    else admission.refused(ex.client, ex.hc.conn, ex.via, ex.method, ex.url);
  }

  /** Count one finished request (method, status, duration, sizes) and write its access-log line. */
  private record(ex: Exchange): void {
    const now = Date.now();
    // Routed: the route's series (route="" for a miss), metrics/listener-stats.ts.
    const counts = !ex.routed ? this.stats.http : ex.route === null ? this.stats.httpRoute('') : ex.route.stats;
    counts.record(methodIndex(ex.method), ex.status, (now - ex.startedAt) / 1000, ex.requestBytes, ex.socket.bytesWritten - ex.bytesAtStart);
    if (this.access !== null) this.access.request(ex, now);
    else if (this.log.isLevelEnabled('debug')) {
      this.log.debug({
        conn: ex.hc.conn.id, client: ex.client, via: ex.via, peer: ex.hc.conn.clientAddress, method: ex.method,
        url: ex.url, status: ex.status, reason: ex.reason, upstream: ex.upstream?.label ?? null,
        bytes: ex.socket.bytesWritten - ex.bytesAtStart, ms: Date.now() - ex.startedAt,
      }, 'request');
    }
  }

  // --- closing ----------------------------------------------------------------------------------

  socketClosed(hc: HttpConn): void {
    this.active--;
    this.conns.delete(hc);
    if (hc.revokeTimer !== null) clearTimeout(hc.revokeTimer);
    hc.revokeTimer = null;
    if (this.draining && this.active === 0) this.close();
  }

  // --- revocation (Listener.revokeDenied -> conn.onRevoke) ---------------------------------------

  private readonly onRevoke = (conn: Connection): void => {
    const hc = (conn.socket as Carrier)[kHttpConn];
    if (hc === undefined || conn.socket.destroyed || hc.revoked) return;
    const matcher = this.list.matcher;
    let denied = false;
    if (hc.routed) {
      // Decided per request by each one's route: re-check the requests in flight (and a tunnel)
      // against their route's list; the next request is decided afresh anyway.
      for (const ex of hc.open) if (ex.route !== null && ex.entry !== null && ex.route.list.matcher.lookup(ex.client) < 0) denied = true;
      const up = hc.upgraded;
      if (up !== null && up.route !== null && up.route.list.matcher.lookup(up.client) < 0) denied = true;
    } else if (!hc.trusted) {
      const d = matcher.decide(conn.clientAddress);
      if (d.allowed) {
        hc.entry = d.entry;
        hc.denial = null;
        conn.entry = d.entry;
        return;
      }
      hc.denial = d; // the reason and deny entry its next denials are counted with
      if (hc.entry === null) return; // denied from the start: every request already gets 403
      hc.entry = null;
      conn.entry = null;
      denied = true;
    } else {
      for (const ex of hc.open) if (matcher.lookup(ex.client) < 0) denied = true;
      if (hc.upgraded !== null && matcher.lookup(hc.upgraded.client) < 0) denied = true;
    }
    if (denied) this.revoke(hc);
  };

  private revoke(hc: HttpConn): void {
    this.admission.revoked(hc.conn);
    this.cut(hc, 'revoked');
  }

  /** Whether `list` is the named list behind http.trustedProxies (read live). */
  trustsBy(list: LiveList): boolean {
    return readsList(this.trustedProxies, list);
  }

  /**
   * After a change of the trustedProxies list: connections from a peer it no longer trusts, whose
   * requests were attributed by X-Forwarded-For, close after their in-flight response
   * (`trust_revoked`); the peer's next connection is an untrusted one (its own address decides).
   */
  revokeUntrusted(): number {
    let n = 0;
    for (const hc of this.conns) {
      if (!hc.trusted || hc.revoked || hc.conn.socket.destroyed || this.trustedProxies.lookup(hc.conn.clientAddress) >= 0) continue;
      this.cut(hc, 'trust_revoked');
      n++;
    }
    return n;
  }

  /** End `hc` for `reason`: at once when idle or tunnelled, else after its in-flight response. */
  private cut(hc: HttpConn, reason: 'revoked' | 'trust_revoked'): void {
    const conn = hc.conn;
    hc.revoked = true;
    conn.revoked = true;
    conn.result = reason;
    if (hc.upgraded !== null || hc.open.length === 0) {
      conn.socket.destroy();
      return;
    }
    // A response under way may finish (with Connection: close: the engine reads hc.revoked), for
    // at most REVOKE_GRACE_MS.
    hc.revokeTimer = setTimeout(destroySocket, REVOKE_GRACE_MS, conn.socket);
  }

  private proxyHeader(conn: Connection): Buffer {
    const src = { address: conn.clientAddress, port: conn.clientPort };
    const dst = { address: conn.destAddress, port: conn.destPort };
    return this.config.outboundProxyProtocol === 'v1' ? encodeProxyV1(src, dst) : encodeProxyV2(src, dst);
  }

  private close(): void {
    this.relay.close();
  }
}

function destroySocket(socket: Endpoint): void {
  socket.destroy();
}
