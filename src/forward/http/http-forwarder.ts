/**
 * HTTP forwarding (listener mode `http`): the policy over the two engines (docs/http-engines.md).
 * Each request gets the client's identity, an allowlist decision, a request id, rewritten
 * forwarding headers, and goes upstream through the relay (relay/relay-conn.ts, the default: this
 * class is its RelayHost) or through node:http + http-proxy (http-proxy-engine.ts: plain requests
 * with `engine: http-proxy`, and every upgrade and outbound-PROXY request on either engine).
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
 *
 * Errors: upstream refused/reset -> 502, no response headers within upstreamTimeoutMs -> 504, a
 * failure after the response headers went out -> the client socket is destroyed (never a second
 * status line). Bad requests -> 400, header timeout -> 408, headers too large -> 431. Connect
 * failures of requests without a body go to the next target (round robin, each target once).
 */
import http, { type Agent, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import net from 'node:net';
import type { Logger } from 'pino';
import type { ListenerAccessLog } from '../../access-log/access-log';
import { denialReason } from '../../allowlist/matcher';
import { addressSet, type AddressLookup } from '../../store/list-ref';
import type { ListenerConfig } from '../../config/schema';
import { clientFromForwardedFor } from '../../identity/forwarded-for';
import { forwardedElement } from '../../identity/forwarded-header';
import type { Connection } from '../../listener/connection';
import type { ConnectionHandler } from '../../listener/listener';
import { ListenerStats } from '../../metrics/listener-stats';
import { timeConnects } from '../../metrics/time-connects';
import { encodeProxyV1, encodeProxyV2 } from '../../proxy-protocol/encoder';
import type { LiveList } from '../../store/live-lists';
import { parseUpstreams, UpstreamPool } from '../tcp/tcp-forwarder';
import { Canned, CannedResponses } from './canned';
import type { EngineSink, HttpEngine } from './engine';
import { Exchange, HttpConn, kExchange, kHttpConn } from './exchange';
import { HttpProxyEngine } from './http-proxy-engine';
import { ReceivedHeaders, scanRequestHeaders } from './request-headers';
import { newRequestId, validRequestId } from './request-id';
import { requestTarget } from './request-target';
import type { RequestHead } from './relay/llhttp-parser';
import { LINGER_MS, RelayConn, RelayPool, requestStub, type RelayHost } from './relay/relay-conn';
import { upstreamReason } from '../upstream-reason';

/** A revoked connection's in-flight response gets this long before the socket is cut. */
export const REVOKE_GRACE_MS = 1000;

const STATUS_CLASS = ['none', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;

interface Carrier {
  [kExchange]?: Exchange;
  [kHttpConn]?: HttpConn;
}

type SocketWithMessage = net.Socket & { _httpMessage?: ServerResponse | null };

export class HttpForwarder implements ConnectionHandler, EngineSink, RelayHost {
  readonly server: http.Server;
  private readonly engine: HttpEngine;
  private readonly pool: UpstreamPool;
  private readonly agent: Agent;
  private readonly trustedProxies: AddressLookup;
  private readonly canned: CannedResponses;
  private readonly got = new ReceivedHeaders();
  private readonly log: Logger;
  private readonly xffAppend: boolean;
  private readonly forwarded: boolean;
  readonly upstreamTimeoutMs: number;
  private readonly idleMs: number;
  private draining = false;
  private active = 0;
  /** `http.denied.keepAlive`: a denied direct client's connection stays open after its 403. */
  readonly deniedKeepAlive: boolean;
  /** `http.requestId`: send X-Request-ID upstream. */
  private readonly requestIdHeader: boolean;
  /** Extra header names stripped from untrusted peers (`http.stripHeaders`), null without any. */
  readonly strip: ReadonlySet<string> | null;
  /** `http.engine: relay` (WIP): the relay's upstream pool; null on the node:http path. */
  private readonly relay: RelayPool | null;
  readonly maxHeaderBytes: number;

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
    this.pool = new UpstreamPool(parseUpstreams(config.upstreams));
    this.trustedProxies = addressSet(h.trustedProxies, list.owner);
    this.canned = new CannedResponses(h.deniedBody);
    this.strip = h.stripHeaders.length > 0 ? new Set(h.stripHeaders.map((n) => n.toLowerCase())) : null;
    this.xffAppend = h.xForwardedFor === 'append';
    this.requestIdHeader = h.requestId;
    this.deniedKeepAlive = h.denied.keepAlive;
    this.forwarded = h.forwarded;
    this.upstreamTimeoutMs = h.upstreamTimeoutMs;
    this.idleMs = config.timeouts.idleMs;
    // Defect 3 (no agent = a connection per request): keep-alive pool, bounded per target, idle
    // sockets closed before the backend would (upstreamIdleTimeoutMs < the backend's keep-alive
    // timeout avoids reusing a socket the backend is closing); Node also honours a backend's
    // `Keep-Alive: timeout=N` hint. lifo: the warmest socket first, so surplus ones expire.
    this.agent = new http.Agent({
      keepAlive: true, maxSockets: h.upstreamMaxSockets, maxFreeSockets: h.upstreamMaxSockets,
      timeout: h.upstreamIdleTimeoutMs, scheduling: 'lifo',
    });
    timeConnects(this.agent, stats.upstreamConnect);
    // Upgrades and outbound-PROXY requests go through http-proxy whatever the engine; with
    // `http.engine: http-proxy` plain requests do too.
    this.engine = new HttpProxyEngine(this.pool.targets, this.agent, this);

    // `undici` is the removed engine's name in old configs: the relay serves them (config warns).
    this.relay = h.engine !== 'http-proxy' && config.outboundProxyProtocol === 'none' ? new RelayPool(h.upstreamIdleTimeoutMs, stats.upstreamConnect) : null;
    this.maxHeaderBytes = h.maxHeaderBytes;
    this.server = http.createServer({
      maxHeaderSize: h.maxHeaderBytes,
      // The header timeout is enforced by a periodic sweep; check often enough that a slow-loris
      // is cut close to the configured time (the sweep is a C++ walk over the connection list).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(h.requestHeaderTimeoutMs / 4))),
      insecureHTTPParser: false,
      requireHostHeader: true,
    });
    this.server.headersTimeout = h.requestHeaderTimeoutMs;
    // Not the whole request: an upload may legitimately take long; a stalled one is cut by the
    // socket idle timeout below (timeouts.idleMs).
    this.server.requestTimeout = 0;
    this.server.keepAliveTimeout = h.keepAliveTimeoutMs;
    this.server.maxRequestsPerSocket = h.maxRequestsPerConnection;
    this.server.timeout = config.timeouts.idleMs;
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res));
    // With a listener here node:http no longer answers `Expect: 100-continue` by itself: onRequest
    // sends the 100 only to an admitted request (a denied one gets its 403 first).
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res, true));
    this.server.on('upgrade', (req: IncomingMessage, socket: net.Socket, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => this.onClientError(err, socket));
    // The server never listens (sockets come from the listener), but Node 20 starts the
    // connection tracking that enforces headersTimeout only on 'listening' (lib/_http_server.js
    // setupConnectionsTracking). Without this a slow-loris header is never cut: the slow-loris
    // test fails if this line is removed.
    this.server.emit('listening');
  }

  // --- ConnectionHandler ------------------------------------------------------------------------

  /** Always: HTTP answers a denial with 403, which only the HTTP layer can write. */
  decidesPerRequest(): boolean {
    return true;
  }

  handle(conn: Connection, leftover: Buffer): void {
    // HTTP listeners accept net.Sockets (rawSockets is not set here): http.Server needs a stream.
    const socket = conn.socket as net.Socket;
    const trusted = this.trustedProxies.lookup(conn.clientAddress) >= 0;
    const hc = new HttpConn(conn, trusted, this);
    if (!trusted) {
      hc.entry = this.list.matcher.match(conn.clientAddress);
      conn.entry = hc.entry;
      // Decided once for the connection: each of its requests is answered 403 (and counted).
      if (hc.entry === null) conn.result = 'denied';
    }
    if (this.config.outboundProxyProtocol !== 'none') hc.agent = this.dedicatedAgent(conn);
    (socket as Carrier)[kHttpConn] = hc;
    conn.onRevoke = this.onRevoke;
    // http.Server turns Nagle off on the sockets it accepts itself (noDelay), not on sockets
    // emitted into it: without this, a response written as head + body waits for the client's
    // delayed ACK (~40 ms per request on Linux; bench/README.md "HTTP path vs nginx").
    socket.setNoDelay(true);
    this.active++;
    socket.once('close', onClientSocketClose);
    if (this.relay !== null) {
      new RelayConn(this, this.relay, hc, socket, this.pool.targets, () => this.pool.start()).start(leftover);
      return;
    }
    // Node's HTTP parser consumes the socket's handle directly; bytes already read (after the
    // PROXY header) are put back into the stream buffer and delivered first once it flows
    // (test: PROXY header and request in one segment).
    if (leftover.length > 0) socket.unshift(leftover);
    this.server.emit('connection', socket);
    socket.resume();
  }

  drain(): void {
    this.draining = true;
    this.server.closeIdleConnections();
    if (this.active === 0) this.close();
  }

  // --- requests ---------------------------------------------------------------------------------

  private onRequest(req: IncomingMessage, res: ServerResponse, expectsContinue = false): void {
    const hc = (req.socket as Carrier)[kHttpConn];
    if (hc === undefined) {
      res.destroy();
      return;
    }
    if (hc.closing) return; // pipelined behind a denial: the socket closes after that 403
    this.stats.httpRequests++;
    const headers: OutgoingHttpHeaders = {};
    const got = this.got;
    scanRequestHeaders(req.rawHeaders, hc.trusted, headers, got, this.strip);
    const ex = this.exchange(hc, req, res, req.socket);
    (res as Carrier)[kExchange] = ex;
    (req as Carrier)[kExchange] = ex;
    hc.open.push(ex);
    res.once('close', onResponseClose);
    // What the relay's parser refuses, refused here too (issue "Hardening"): HTTP/0.9 and 2.0
    // request lines (node's parser takes them; they would go upstream as HTTP/1.1), HTTP/1.0
    // without Host (the backend would get the upstream's address as Host), a request target
    // that is neither origin-form nor a usable absolute-form.
    const target = req.httpVersionMajor === 1 && (got.host !== null || req.httpVersionMinor === 1) ? requestTarget(req.url ?? '') : null;
    if (target === null) {
      ex.reason = 'bad_request';
      ListenerStats.bump(this.stats.httpClientErrors, 'bad_request');
      if (hc.conn.result === null) hc.conn.result = 'bad_request';
      res.shouldKeepAlive = false;
      hc.closing = true;
      this.respond(ex, res, this.canned.badRequest);
      return;
    }
    if (target.authority !== null) {
      // RFC 9112 3.2.2: with an absolute-form target the Host header is replaced by its
      // authority; the backend gets origin-form, so its Host and X-Forwarded-Host agree.
      req.url = target.path;
      headers.host = target.authority;
      got.host = target.authority;
      ex.host = target.authority;
    }
    if (ex.entry === null) {
      // No `100 Continue` first (checkContinue): the client learns it is denied before it sends a body.
      this.deny(ex, res, this.canned.forbidden(got.accept));
      return;
    }
    if (expectsContinue) res.writeContinue();
    // Node 20 announces `Connection: close` on the last request allowed by maxRequestsPerSocket
    // but leaves the socket open (and answers 503 to more); close it properly instead.
    if (hc.revoked || this.draining || (res as ServerResponse & { maxRequestsOnConnectionReached?: boolean }).maxRequestsOnConnectionReached === true) {
      res.shouldKeepAlive = false;
    }
    this.identityHeaders(headers, hc, ex, got);
    ex.headers = headers;
    ex.first = this.pool.start();
    ex.timer = setTimeout(onUpstreamTimeout, this.upstreamTimeoutMs, ex);
    this.dispatch(ex);
  }

  private onUpgrade(req: IncomingMessage, socket: net.Socket, head: Buffer): void {
    const hc = (socket as Carrier)[kHttpConn];
    if (hc === undefined) {
      socket.destroy();
      return;
    }
    this.stats.httpRequests++;
    this.stats.httpUpgrades++;
    const headers: OutgoingHttpHeaders = {};
    const got = this.got;
    scanRequestHeaders(req.rawHeaders, hc.trusted, headers, got, this.strip);
    const ex = this.exchange(hc, req, null, socket);
    (req as Carrier)[kExchange] = ex;
    // An upgrade request with a body is refused (issue "Hardening" 3): the engines send the head
    // upstream and the body bytes only after a 101, so a backend that answers without 101 would
    // read the next request on that connection as the body. A request that is allowed and
    // well formed is then sent on a connection of its own (upgradeAgent), never a pooled one.
    const target = requestTarget(req.url ?? '');
    const bad = got.upgrade === null || got.hasBody || req.httpVersionMajor !== 1 || req.httpVersionMinor !== 1 || target === null;
    if (target !== null && target.authority !== null) {
      req.url = target.path;
      headers.host = target.authority;
      got.host = target.authority;
      ex.host = target.authority;
    }
    if (ex.entry === null || hc.revoked || this.draining || bad) {
      const canned = ex.entry === null || hc.revoked ? this.canned.forbidden(got.accept) : this.canned.badRequest;
      if (ex.entry === null) this.countDenied(ex);
      else if (bad) {
        ex.reason = 'bad_request';
        ListenerStats.bump(this.stats.httpClientErrors, 'bad_request');
      }
      ex.status = canned.status;
      this.record(ex);
      endUpgradeSocket(socket, canned.wire);
      return;
    }
    this.identityHeaders(headers, hc, ex, got);
    headers.connection = 'upgrade';
    headers.upgrade = got.upgrade!; // not null: `bad` above
    ex.headers = headers;
    hc.upgraded = ex;
    ex.first = this.pool.start();
    ex.upstream = this.pool.targets[ex.first % this.pool.targets.length]!;
    ex.sentAt = performance.now();
    ex.timer = setTimeout(onUpstreamTimeout, this.upstreamTimeoutMs, ex);
    this.engine.ws(ex, ex.first, headers, this.upgradeAgent(hc.conn), head);
  }

  /**
   * The agent of one upgrade: a connection of its own, closed after the exchange (no keep-alive),
   * with the outbound PROXY header first when the listener sends one. An upgrade is never sent on
   * a pooled socket: if the backend declines it, what follows on that socket is no longer framed
   * by anything ipgate knows, and the socket must not carry another request.
   */
  private upgradeAgent(conn: Connection): Agent {
    const agent = this.config.outboundProxyProtocol === 'none'
      ? new http.Agent({ keepAlive: false, maxSockets: 1 })
      : new ProxyHeaderAgent(this.proxyHeader(conn), 0, false);
    return timeConnects(agent, this.stats.upstreamConnect);
  }

  // --- the relay engine's host (RelayHost, WIP) -------------------------------------------------

  relayExchange(hc: HttpConn, head: RequestHead, socket: net.Socket, authority: string | null): { ex: Exchange; headers: OutgoingHttpHeaders; accept: string | null } | null {
    if (hc.closing) return null;
    this.stats.httpRequests++;
    const headers: OutgoingHttpHeaders = {};
    const got = this.got;
    scanRequestHeaders(head.rawHeaders, hc.trusted, headers, got, this.strip);
    if (authority !== null) {
      headers.host = authority;
      got.host = authority;
    }
    const ex = this.exchange(hc, requestStub(head), null, socket);
    if (ex.entry !== null) this.identityHeaders(headers, hc, ex, got);
    return { ex, headers, accept: got.accept };
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

  get requestTimeout(): Canned {
    return this.canned.requestTimeout;
  }

  get requestHeaderTimeoutMs(): number {
    return this.config.http.requestHeaderTimeoutMs;
  }

  get idleTimeoutMs(): number {
    return this.idleMs;
  }

  get keepAliveTimeoutMs(): number {
    return this.config.http.keepAliveTimeoutMs;
  }

  get maxRequestsPerConnection(): number {
    return this.config.http.maxRequestsPerConnection;
  }

  relayHandoff(socket: net.Socket, bytes: Buffer): void {
    socket.unshift(bytes);
    this.server.emit('connection', socket);
    socket.resume();
  }

  relayClientError(hc: HttpConn, reason: string): void {
    ListenerStats.bump(this.stats.httpClientErrors, reason);
    if (hc.conn.result === null) hc.conn.result = reason;
    this.log.debug({ conn: hc.conn.id, peer: hc.conn.clientAddress, reason }, 'bad request');
  }

  get gatewayTimeout(): Canned {
    return this.canned.gatewayTimeout;
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

  relayRecord(ex: Exchange): void {
    this.record(ex);
  }

  relayDenied(ex: Exchange): void {
    this.countDenied(ex);
  }

  private exchange(hc: HttpConn, req: IncomingMessage, res: ServerResponse | null, socket: net.Socket): Exchange {
    const conn = hc.conn;
    const got = this.got;
    let ex: Exchange;
    if (hc.trusted) {
      const client = clientFromForwardedFor(got.xForwardedFor, conn.clientAddress, this.trustedProxies);
      ex = new Exchange(hc, req, res, socket, client, client === conn.clientAddress ? conn.via : 'xff', Date.now(), !got.hasBody);
      ex.entry = this.list.matcher.match(client);
    } else {
      ex = new Exchange(hc, req, res, socket, conn.clientAddress, conn.via, Date.now(), !got.hasBody);
      ex.entry = hc.entry;
    }
    ex.host = got.host;
    ex.userAgent = got.userAgent;
    ex.requestId = got.requestId !== null && validRequestId(got.requestId) ? got.requestId : newRequestId();
    return ex;
  }

  /**
   * X-Real-IP, X-Forwarded-For/Proto/Host/Port and (optionally) Forwarded, all canonical.
   * X-Forwarded-For, append mode: what a trusted proxy sent, then our peer (nginx
   * `$proxy_add_x_forwarded_for` = `$http_x_forwarded_for, $remote_addr`; each hop appends the
   * address it received the request from, so a backend trusting ipgate and the same proxies can
   * walk it right to left too); from an untrusted peer, just the client. Replace mode: the client.
   * Proto/Host/Port from a trusted proxy are kept (it may terminate TLS); else ours: `http`
   * (ipgate does not terminate TLS), the Host header, the port the client connected to.
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
    headers['x-forwarded-proto'] = hc.trusted && got.xForwardedProto !== null ? got.xForwardedProto : 'http';
    const host = hc.trusted && got.xForwardedHost !== null ? got.xForwardedHost : got.host;
    if (host !== null) headers['x-forwarded-host'] = host;
    headers['x-forwarded-port'] = hc.trusted && got.xForwardedPort !== null ? got.xForwardedPort : hc.destPortText;
    if (this.forwarded) {
      // RFC 7239: one element per hop, `for` = the node this hop received the request from.
      const element = forwardedElement(this.xffAppend ? peer : client, 'http', got.host);
      headers.forwarded = this.xffAppend && hc.trusted && got.forwarded !== null ? `${got.forwarded}, ${element}` : element;
    }
  }

  private dispatch(ex: Exchange): void {
    const targets = this.pool.targets;
    const index = (ex.first + ex.attempt) % targets.length;
    ex.upstream = targets[index]!;
    ex.proxyReq = null;
    ex.sentAt = performance.now();
    this.engine.web(ex, index, ex.headers!, ex.hc.agent ?? this.agent);
  }

  private deny(ex: Exchange, res: ServerResponse, canned: Canned): void {
    this.countDenied(ex);
    // Kept alive, as nginx and HAProxy keep a connection they answered 403 on (`http.denied.keepAlive`,
    // default true): a denied client that reconnects per request costs a handshake each time.
    // A revoked connection closes; `keepAlive: false` closes a direct client's after its 403.
    if ((!ex.hc.trusted && !this.deniedKeepAlive) || ex.hc.revoked) {
      res.shouldKeepAlive = false;
      ex.hc.closing = true;
    }
    // A body still coming is read past (node:http discards it) rather than closing: as nginx does
    // for the requests it refuses. A body that stops is cut by the keep-alive timeout node:http
    // arms once the 403 is written (keepAliveTimeoutMs; test: "finding B").
    this.respond(ex, res, canned, false);
  }

  private countDenied(ex: Exchange): void {
    ex.reason = ex.hc.revoked ? 'revoked' : 'denied';
    if (ex.hc.revoked) return; // counted once, as `revoked`, when the list change cut it
    // Every request refused counts, from a direct client as from a trusted proxy's clients.
    ListenerStats.bump(this.stats.denied, denialReason(this.list.matcher, ex.client));
    // A deny is a decision, not an error: debug (scans must not flood the log).
    if (this.log.isLevelEnabled('debug')) {
      this.log.debug({ conn: ex.hc.conn.id, client: ex.client, peer: ex.hc.conn.clientAddress, via: ex.via,
        method: ex.req.method, url: ex.req.url }, 'denied');
    }
  }

  /** A canned response through Node's response object, or a destroyed socket if too late. */
  private respond(ex: Exchange, res: ServerResponse, canned: Canned, closeIfBodyPending = true): void {
    if (res.headersSent || res.destroyed) {
      // Never a second status line on a response already under way: cut it so the client sees
      // a truncated response, not a corrupt one.
      res.destroy();
      return;
    }
    ex.status = canned.status;
    if (closeIfBodyPending && !ex.bodyless && !ex.req.complete) {
      // Answered before the request body was all read (504 to a trickled body, 502): the client
      // may go on sending for as long as it likes, so the connection ends with this answer
      // instead of waiting for the body under keep-alive (issue "Hardening": a 1 byte/s body held
      // a connection for idleMs).
      res.shouldKeepAlive = false;
      ex.hc.closing = true;
      res.once('finish', destroySocketOf);
    }
    res.writeHead(canned.status, canned.headers as string[]);
    res.end(canned.body);
  }

  // --- engine events (EngineSink) ---------------------------------------------------------------

  upstreamRequest(ex: Exchange): void {
    // The client may have left while the request waited for a pooled socket.
    if (ex.closed) ex.proxyReq?.destroy();
  }

  upstreamResponse(ex: Exchange, status: number): void {
    if (ex.timer !== null) clearTimeout(ex.timer);
    ex.timer = null;
    ex.status = status;
    this.upstreamAnswered(ex, status);
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

  upstreamError(ex: Exchange, err: NodeJS.ErrnoException): void {
    if (ex.closed) return; // the client left first: nothing to answer (the upstream was aborted)
    if (ex.res === null && ex.status !== 0 && ex.upstreamSocket === null) {
      // A refused upgrade whose answer is being relayed: the tunnel never opened; just close.
      ex.socket.destroy();
      return;
    }
    const reason = ex.timedOut ? 'upstream_timeout' : upstreamReason(err);
    const res = ex.res;
    const targets = this.pool.targets;
    if (!ex.timedOut && res !== null && !res.headersSent && ex.bodyless && isConnectFailure(err) &&
        ex.attempt + 1 < targets.length) {
      this.stats.upstreamFailed(ex.upstream?.label, reason);
      this.log.warn({ conn: ex.hc.conn.id, upstream: ex.upstream?.label, err: err.code ?? err.message }, 'upstream connect failed; trying next');
      ex.attempt++;
      this.dispatch(ex);
      return;
    }
    if (ex.timer !== null) clearTimeout(ex.timer);
    ex.timer = null;
    ex.reason = reason;
    this.stats.upstreamFailed(ex.upstream?.label, reason);
    // Upstream faults log at warn (docs/architecture.md "Observability").
    this.log.warn({ conn: ex.hc.conn.id, client: ex.client, upstream: ex.upstream?.label, reason, err: err.code ?? err.message },
      'upstream failed');
    const canned = ex.timedOut ? this.canned.gatewayTimeout : this.canned.badGateway;
    if (res !== null) {
      this.respond(ex, res, canned);
      return;
    }
    // Upgrade: before the 101 the client gets a status; after it, the tunnel is cut.
    ex.status = canned.status;
    if (ex.upstreamSocket === null && ex.socket.writable) endUpgradeSocket(ex.socket, canned.wire);
    else ex.socket.destroy();
    this.record(ex);
  }

  upgraded(ex: Exchange, upstreamSocket: net.Socket): void {
    if (ex.timer !== null) clearTimeout(ex.timer);
    ex.timer = null;
    ex.status = 101;
    this.upstreamAnswered(ex, 101);
    ex.upstreamSocket = upstreamSocket;
    const conn = ex.hc.conn;
    conn.upstreamSocket = upstreamSocket;
    conn.upstream = ex.upstream?.label ?? null;
    (upstreamSocket as Carrier)[kExchange] = ex;
    // http-proxy pipes both ways but ends neither side when the other is destroyed: tie them.
    upstreamSocket.once('close', onUpstreamSocketClose);
    // A tunnel silent in both directions for timeouts.idleMs is closed, like a TCP stream.
    ex.socket.setTimeout(this.idleMs);
    ex.socket.once('timeout', destroyThis);
  }

  // --- closing ----------------------------------------------------------------------------------

  socketClosed(hc: HttpConn): void {
    this.active--;
    if (this.draining && this.active === 0) this.close();
    if (hc.revokeTimer !== null) clearTimeout(hc.revokeTimer);
    hc.revokeTimer = null;
    const up = hc.upgraded;
    if (up !== null) {
      up.closed = true;
      if (up.timer !== null) clearTimeout(up.timer);
      up.timer = null;
      up.upstreamSocket?.destroy();
      // Not tunnelled yet (no answer, or a declined upgrade's answer still being relayed): the
      // upstream request goes with the client, or a response piped to a closed socket would hold
      // its upstream connection for good (fuzz: "no upstream connection left open").
      if (up.upstreamSocket === null && up.proxyReq !== null && !up.proxyReq.destroyed) up.proxyReq.destroy();
      this.record(up);
    }
    hc.agent?.destroy();
  }

  responseClosed(ex: Exchange, res: ServerResponse): void {
    ex.closed = true;
    if (ex.timer !== null) clearTimeout(ex.timer);
    ex.timer = null;
    if (!res.writableFinished) {
      // Defect 2: the client left (or we cut the response) before it was complete. http-proxy
      // would let the upstream request run on; abort it so the backend sees the disconnect.
      ex.reason ??= 'client_abort';
      if (ex.proxyReq !== null && !ex.proxyReq.destroyed) ex.proxyReq.destroy();
    } else if (!ex.bodyless && !ex.req.complete && ex.proxyReq !== null && !ex.proxyReq.destroyed) {
      // The backend answered before the request body was all sent (an early 413, a redirect):
      // that upstream request can only end if the client sends the rest, and a client that
      // leaves would hold the upstream socket for good (fuzz finding C). Cut it: an upstream
      // socket is reused only after an exchange that completed both ways.
      ex.proxyReq.destroy();
    }
    const open = ex.hc.open;
    const i = open.indexOf(ex);
    if (i >= 0) open.splice(i, 1);
    this.record(ex);
    if (ex.hc.revoked && open.length === 0) ex.socket.destroy();
    else if (ex.hc.pendingError !== null && open.length === 0) {
      const socket = ex.socket;
      if (!socket.writable || !res.writableFinished) socket.destroy();
      else {
        socket.end(ex.hc.pendingError.wire);
        socket.once('finish', destroyThis);
      }
      ex.hc.pendingError = null;
    }
  }

  /** Count one finished request (status class, duration) and write its access-log line. */
  private record(ex: Exchange): void {
    ListenerStats.bump(this.stats.httpResponses, STATUS_CLASS[ex.status >= 100 && ex.status < 600 ? Math.floor(ex.status / 100) : 0]!);
    const now = Date.now();
    this.stats.httpDuration.observe((now - ex.startedAt) / 1000);
    if (this.access !== null) this.access.request(ex, now);
    else if (this.log.isLevelEnabled('debug')) {
      this.log.debug({
        conn: ex.hc.conn.id, client: ex.client, via: ex.via, peer: ex.hc.conn.clientAddress, method: ex.req.method,
        url: ex.req.url, status: ex.status, reason: ex.reason, upstream: ex.upstream?.label ?? null,
        bytes: ex.socket.bytesWritten - ex.bytesAtStart, ms: Date.now() - ex.startedAt,
      }, 'request');
    }
  }

  timedOut(ex: Exchange): void {
    ex.timer = null;
    ex.timedOut = true;
    // Destroying the upstream request makes the engine report an error, answered with 504.
    if (ex.proxyReq !== null && !ex.proxyReq.destroyed) {
      ex.proxyReq.destroy(Object.assign(new Error('upstream response timeout'), { code: 'ETIMEDOUT' }));
      return;
    }
    // Still waiting for a pooled socket: answer now; the request is dropped when it gets one.
    this.upstreamError(ex, Object.assign(new Error('upstream response timeout'), { code: 'ETIMEDOUT' }));
  }

  // --- revocation (Listener.revokeDenied -> conn.onRevoke) ---------------------------------------

  private readonly onRevoke = (conn: Connection): void => {
    const hc = (conn.socket as Carrier)[kHttpConn];
    if (hc === undefined || conn.socket.destroyed || hc.revoked) return;
    const matcher = this.list.matcher;
    let denied = false;
    if (!hc.trusted) {
      const entry = matcher.match(conn.clientAddress);
      if (entry !== null) {
        hc.entry = entry;
        conn.entry = entry;
        return;
      }
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
    const conn = hc.conn;
    hc.revoked = true;
    conn.revoked = true;
    conn.result = 'revoked';
    ListenerStats.bump(this.stats.denied, 'revoked');
    this.log.debug({ conn: conn.id, client: conn.clientAddress }, 'revoked');
    if (hc.upgraded !== null || hc.open.length === 0) {
      conn.socket.destroy();
      return;
    }
    // A response under way may finish (with Connection: close), for at most REVOKE_GRACE_MS.
    for (const ex of hc.open) if (ex.res !== null && !ex.res.headersSent) ex.res.shouldKeepAlive = false;
    hc.revokeTimer = setTimeout(destroySocket, REVOKE_GRACE_MS, conn.socket as net.Socket);
  }

  private onClientError(err: NodeJS.ErrnoException, socket: net.Socket): void {
    const code = err.code ?? '';
    const canned = code === 'HPE_HEADER_OVERFLOW' ? this.canned.headersTooLarge
      : code === 'ERR_HTTP_REQUEST_TIMEOUT' ? this.canned.requestTimeout : this.canned.badRequest;
    const reason = canned.status === 431 ? 'header_too_large' : canned.status === 408 ? 'header_timeout' : 'bad_request';
    ListenerStats.bump(this.stats.httpClientErrors, reason);
    const hc = (socket as Carrier)[kHttpConn];
    if (hc !== undefined && hc.conn.result === null) hc.conn.result = reason;
    // Peer faults log at debug.
    this.log.debug({ conn: hc?.conn.id, peer: hc?.conn.clientAddress, reason, err: code || err.message }, 'bad request');
    const msg = (socket as SocketWithMessage)._httpMessage;
    if (code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    if (hc !== undefined && hc.open.length > 0 && hc.upgraded === null && hc.open.every(requestComplete)) {
      // Bytes that do not parse behind a request still being answered: that request was
      // admitted and sent upstream, so its response goes out first, then the 400 and the close
      // (issue "Hardening": the client got only the 400 while the backend ran its request).
      hc.closing = true;
      hc.pendingError = canned;
      return;
    }
    if (msg != null && msg.headersSent) {
      socket.destroy();
      return;
    }
    socket.end(canned.wire);
    socket.once('finish', destroyThis);
  }

  private dedicatedAgent(conn: Connection): Agent {
    return timeConnects(new ProxyHeaderAgent(this.proxyHeader(conn), this.config.http.upstreamIdleTimeoutMs, true), this.stats.upstreamConnect);
  }

  private proxyHeader(conn: Connection): Buffer {
    const src = { address: conn.clientAddress, port: conn.clientPort };
    const dst = { address: conn.destAddress, port: conn.destPort };
    return this.config.outboundProxyProtocol === 'v1' ? encodeProxyV1(src, dst) : encodeProxyV2(src, dst);
  }

  private close(): void {
    this.relay?.close();
    this.agent.destroy();
    this.engine.close?.();
    this.server.close();
  }
}

/**
 * Outbound PROXY header for HTTP (issue item 6): never on the shared pool, where it would
 * attribute every later request to the first client. One agent per client connection, one
 * upstream socket (maxSockets 1), the header written first on every socket it opens.
 */
class ProxyHeaderAgent extends http.Agent {
  constructor(private readonly header: Buffer, idleMs: number, keepAlive: boolean) {
    super(keepAlive ? { keepAlive: true, maxSockets: 1, maxFreeSockets: 1, timeout: idleMs } : { keepAlive: false, maxSockets: 1 });
  }

  override createConnection(options: net.NetConnectOpts): net.Socket {
    const socket = net.connect(options);
    socket.write(this.header);
    return socket;
  }
}

// Shared event handlers: `this` is the emitter, the state hangs off it (no per-request closures).

function onResponseClose(this: ServerResponse): void {
  const ex = (this as Carrier)[kExchange];
  if (ex !== undefined) forwarderOf(ex).responseClosed(ex, this);
}

function onClientSocketClose(this: net.Socket): void {
  const hc = (this as Carrier)[kHttpConn];
  if (hc !== undefined) (hc.forwarder as HttpForwarder).socketClosed(hc);
}

function onUpstreamTimeout(ex: Exchange): void {
  forwarderOf(ex).timedOut(ex);
}

function onUpstreamSocketClose(this: net.Socket): void {
  const ex = (this as Carrier)[kExchange];
  if (ex !== undefined && !ex.socket.destroyed) ex.socket.destroy();
}

function destroyThis(this: net.Socket): void {
  this.destroy();
}

function destroySocket(socket: net.Socket): void {
  socket.destroy();
}

/**
 * Answer an upgrade request's socket (node:http has let go of it) and end it. It is read and
 * dropped from here: a socket nobody reads never sees the client's FIN or reset, and would stay
 * open, counted active, for good (found by the engine fuzz test); closed after LINGER_MS at most.
 */
function endUpgradeSocket(socket: net.Socket, wire: Buffer): void {
  socket.end(wire);
  socket.on('data', dropData);
  socket.resume();
  socket.setTimeout(LINGER_MS);
  socket.once('timeout', destroyThis);
}

function dropData(): void {}

/**
 * The request was read whole: its response can still come. One whose body the parse error cut
 * (a FIN mid-body) never will, and waiting for it would hold the client and its upstream socket.
 */
function requestComplete(ex: Exchange): boolean {
  return ex.bodyless || ex.req.complete;
}

function destroySocketOf(this: ServerResponse): void {
  this.socket?.destroy();
}


function forwarderOf(ex: Exchange): HttpForwarder {
  return ex.hc.forwarder as HttpForwarder;
}

function isConnectFailure(err: NodeJS.ErrnoException): boolean {
  const c = err.code;
  return c === 'ECONNREFUSED' || c === 'EHOSTUNREACH' || c === 'ENETUNREACH' || c === 'ENOTFOUND' || c === 'EAI_AGAIN';
}

