/**
 * HTTP forwarding (listener mode `http`): the listener's handler, which owns the lifecycle of its
 * connections and wires the three parts of docs/http-engines.md "The policy and its engines":
 * - the policy (http-policy.ts): what each request is allowed, decided without a socket;
 * - the engine (relay/relay-conn.ts): the bytes of one client connection, HTTP/1.1 both ways;
 * - the events (http-events.ts): counters and the access log.
 *
 * Lifecycle (listener/listener.ts ConnectionHandler): a list change re-checks its open
 * connections (`recheck`: each in-flight request, tunnel or connection-level decision against the
 * list that decides it now), a change of the trusted-proxies list closes what an untrusted peer
 * spoke for (`trustChanged`), a reload swaps the routes (`replaceRoutes`) and closes connections
 * whose route is gone, and a drain stops new requests.
 */
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import type tls from 'node:tls';
import type { Logger } from 'pino';
import type { ListenerAccessLog } from '../../access-log/access-log';
import { NO_UPSTREAM_HEALTH, type ListenerConfig, type RouteConfig } from '../../schema/config';
import type { Connection, Endpoint } from '../../connection/connection';
import type { ConnectionHandler } from '../../listener/listener';
import type { ListenerStats } from '../../metrics/listener-stats';
import { encodeProxyV1, encodeProxyV2 } from '../../proxy-protocol/encoder';
import type { RouteReceiver, RoutesVersion } from '../../route/route-receiver';
import { routesVersion } from '../../route/routes-in-force';
import { readsList } from '../../store/list-ref';
import type { LiveList } from '../../store/live-lists';
import { NetByteSocket, type ByteSocket, type Owned, type SocketCallback } from '../../transport/byte-socket';
import { RawSocket, rawSocketsWanted } from '../../transport/raw-socket';
import { takeTlsSocket } from '../../transport/tls-byte-socket';
import { WaitSweep } from '../../connection/wait-sweep';
import { buildGroup, type UpstreamGroup } from '../../upstream/upstream-group';
import type { Lookup } from '../../upstream/active-check';
import { CannedResponses } from './canned';
import { engineSettings } from './engine-settings';
import { HttpConn } from './exchange';
import { HttpRecorder } from './http-events';
import { HttpPolicy } from './http-policy';
import { http2Upstream, type HttpRoutes } from './http-routes';
import { RelayConn, type RelayHost } from './relay/relay-conn';
import { SocketPool } from './relay/socket-pool';
import { DnsCache } from './upstream-dns';
import { H2Conn, type H2Host } from './h2/h2-conn';
import { h2Settings } from './h2/h2-settings';
import { H2Upstreams } from './h2/h2-upstream';
import { sniffPreface } from './h2/h2c-preface';
import { LimitZones } from '../../limit/limit-zones';
import { LinkedSet } from '../../connection/linked-set';

/** A revoked connection's in-flight response gets this long before the socket is cut. */
const REVOKE_GRACE_MS = 1000;

export class HttpForwarder implements ConnectionHandler, RouteReceiver<HttpRoutes | null> {
  readonly routeKind = 'http';
  /** HTTP answers a denial with 403, which only the HTTP layer can write: every decision is per request. */
  readonly decidesPerRequest = true;
  /**
   * Plaintext listeners accept libuv handles (transport/raw-socket.ts) where this Node has them,
   * unless IPGATE_TCP_HANDLES=0: no net.Socket stream layer under the engine (bench/README.md
   * "HTTP on libuv handles"). TLS listeners accept net.Sockets (a TLSSocket wraps one).
   */
  readonly rawSockets: boolean;
  readonly policy: HttpPolicy;
  /** What every connection's engine shares. */
  private readonly host: RelayHost;
  /** The HTTP/2 engine's share (h2/h2-conn.ts): a TLS listener with http2.enabled, or http2.cleartext; else null. */
  private readonly h2: H2Host | null;
  private readonly log: Logger;
  private draining = false;
  private active = 0;
  /** Live client connections (drain closes the idle ones, then the rest as they finish). */
  private readonly conns = new LinkedSet<HttpConn>();
  /** The listener's own upstream group (its active checks run for the listener's life). */
  private readonly group: UpstreamGroup;
  /** How active checks resolve named targets: as the data path does (upstream-dns.ts), null: no cache. */
  private readonly lookup: Lookup | null;
  /** The close hook of every HTTP/1.x connection's socket (see open()). */
  private readonly closedHook: SocketCallback;

  constructor(
    private readonly config: Readonly<ListenerConfig>,
    logger: Logger,
    private readonly stats: ListenerStats,
    list: LiveList,
    /** The access log: a line per request (null: logging.access off). */
    access: ListenerAccessLog | null = null,
    /** `revokeLive`: a reload re-checks open connections against their route's list too. */
    private readonly revokeLive = true,
    /** The process's limit zones (src/limit/limit-zones.ts); absent: this listener's own. */
    limits: LimitZones = new LimitZones(),
  ) {
    const h = config.http;
    this.log = logger.child({ listener: config.name });
    const forwarder = this;
    const closedHook = function (this: Owned): void {
      forwarder.socketClosed((this.record as Connection).handlerState as HttpConn);
    };
    this.closedHook = closedHook;
    const canned = new CannedResponses(h.deniedBody);
    const group = buildGroup(
      config.upstreams,
      config.upstreamHealth ?? NO_UPSTREAM_HEALTH,
      http2Upstream(h.upstreamProtocol, h.upstreamCA),
    );
    this.group = group;
    if (group.health !== null) stats.health = [{ route: '', targets: group.targets }];
    this.policy = new HttpPolicy({ config, list, stats, log: this.log, canned, group, access, limits });
    const proto = config.tls !== null && config.tls !== undefined ? 'https' : 'http';
    // The sweep checks the waits between requests, the client's idle timeout and the idle bound
    // of outbound-PROXY connections' own upstream sockets; the last counts at half, as it must
    // run out before the backend's keep-alive timeout does (RelayConn.check).
    const h2 = h2Settings(config);
    const waits = new WaitSweep(
      Math.min(h.requestHeaderTimeoutMs, h.keepAliveTimeoutMs, config.timeouts.idleMs, h.upstreamIdleTimeoutMs / 2, h2.streamIdleTimeoutMs),
    );
    const dns = group.targets.some((t) => t.family === 0) ? new DnsCache(h.upstreamDnsTtlMs) : null;
    // With routes, any group (now or after a reload) may name hosts: the cache is there for them.
    const routedDns = dns ?? (config.routes !== undefined ? new DnsCache(h.upstreamDnsTtlMs) : null);
    this.lookup = routedDns?.lookup ?? null;
    group.startChecks({ log: this.log, route: '', lookup: this.lookup });
    // An h2c listener reads the first bytes of every connection to tell the preface from an
    // HTTP/1.1 request, and node:http2 needs a net.Socket: no libuv handles there
    // (docs/http-engines.md "h2c").
    this.rawSockets = rawSocketsWanted() && proto === 'http' && !h2.cleartext;
    const pool = new SocketPool(
      h.upstreamIdleTimeoutMs,
      h.upstreamMaxSockets,
      stats.upstreamConnect,
      routedDns,
      rawSocketsWanted(),
      config.timeouts.connectMs,
    );
    const settings = engineSettings(config, canned);
    const events = new HttpRecorder(stats, this.log, access);
    this.host = { settings, policy: this.policy, events, waits, pool };
    this.h2 =
      (proto === 'https' && h.http2.enabled) || h2.cleartext
        ? {
            settings,
            h2,
            policy: this.policy,
            events,
            waits,
            pool,
            stats,
            log: this.log,
            upstreams: new H2Upstreams(h.upstreamIdleTimeoutMs, h.upstreamPingIntervalMs, routedDns, this.log, stats.upstreamConnect),
          }
        : null;
    if (config.routes !== undefined) this.replaceRoutes(this.compileRoutes(config.routes, routesVersion([config])));
  }

  // --- routes (RouteReceiver: a reload compiles, then swaps) -------------------------------------

  compileRoutes(routes: readonly RouteConfig[] | undefined, version: RoutesVersion): HttpRoutes | null {
    return this.policy.compileRoutes(routes, version);
  }

  /**
   * Swap `next` in, then re-decide every open connection against it (HttpPolicy.redecide): those
   * whose route is gone close (`route_removed`), and with revokeLive those whose route's list in
   * `next` no longer admits their client (`revoked`); after their in-flight response, idle ones
   * and tunnels at once. Returns how many were marked.
   */
  replaceRoutes(next: HttpRoutes | null): number {
    const prior = this.policy.routes;
    this.policy.routes = next;
    this.swapChecks(prior, next);
    if (next !== null) this.stats.health = next.health;
    if (next !== null) this.stats.httpRoutes ??= new Map();
    let marked = 0;
    for (const hc of this.conns) {
      if (hc.closing || hc.revoked || hc.conn.socket.destroyed) continue;
      const why = this.policy.redecide(hc, true, this.revokeLive);
      if (why === null) continue;
      marked++;
      if (why === 'revoked') this.revoke(hc);
      else this.cut(hc, why);
    }
    return marked;
  }

  /**
   * Active checks follow the groups in force: those of `next` start (a group kept by the reload
   * keeps its timers and state), those `prior` had and `next` dropped stop.
   */
  private swapChecks(prior: HttpRoutes | null, next: HttpRoutes | null): void {
    const kept = new Set<UpstreamGroup>(next?.groups.values() ?? []);
    if (next !== null && !this.draining) {
      for (const g of kept) {
        if (g === this.group || (g.health?.active ?? null) === null) continue;
        const route = next.health.find((s) => s.targets === g.targets)?.route ?? '';
        g.startChecks({ log: this.log, route, lookup: this.lookup });
      }
    }
    for (const g of prior?.groups.values() ?? []) if (!kept.has(g) && g !== this.group) g.stopChecks();
  }

  // --- ConnectionHandler ------------------------------------------------------------------------

  handle(conn: Connection, leftover: Buffer): void {
    const h2 = this.h2;
    if (h2 !== null && !(conn.socket instanceof RawSocket)) {
      const client = conn.socket;
      if ((client as { alpnProtocol?: string | false }).alpnProtocol === 'h2') {
        this.http2(conn, client, leftover);
        return;
      }
      if (h2.h2.cleartext) {
        // h2c with prior knowledge: the connection's first bytes say which engine serves it.
        sniffPreface(client, leftover, this.config.http.requestHeaderTimeoutMs, (isH2, bytes) => {
          if (isH2 === null) client.destroy();
          else if (isH2) this.http2(conn, client, bytes);
          else this.http1(conn, bytes);
        });
        return;
      }
    }
    this.http1(conn, leftover);
  }

  /** An HTTP/2 connection (ALPN h2, or the h2c preface): the HTTP/2 engine. */
  private http2(conn: Connection, client: net.Socket, leftover: Buffer): void {
    const hc = this.open(conn, null);
    if (leftover.length > 0) client.unshift(leftover);
    new H2Conn(this.h2!, hc, client).start();
  }

  /**
   * The connection's HttpConn, registered for the lifecycle (drain, revocation, route reloads);
   * `socket`: the HTTP/1.1 engine's ByteSocket (its close hooks), null for HTTP/2 (the net.Socket's).
   */
  private open(conn: Connection, socket: ByteSocket | null): HttpConn {
    const hc = new HttpConn(conn, this.policy.trusts(conn.clientAddress));
    this.policy.open(hc);
    conn.handlerState = hc;
    this.active++;
    this.conns.add(hc);
    if (socket !== null) {
      // One hook for every connection: the socket's record is its Connection, whose handlerState
      // is this HttpConn (transport/byte-socket.ts says why not a closure).
      socket.record = conn;
      socket.onClose(this.closedHook);
    } else (conn.socket as net.Socket).once('close', () => this.socketClosed(hc));
    return hc;
  }

  /** An HTTP/1.x connection: the relay engine. */
  private http1(conn: Connection, leftover: Buffer): void {
    // A RawSocket on plaintext listeners (rawSockets); a TLSSocket after a handshake, or a
    // net.Socket where handles are off, behind the same callbacks.
    const client = conn.socket;
    let socket: ByteSocket;
    if (client instanceof RawSocket) {
      socket = client;
    } else {
      const encrypted = (client as { encrypted?: boolean }).encrypted === true;
      // Nagle off: a response written as head + body must not wait for the client's delayed ACK
      // (~40 ms per request on Linux; bench/README.md "HTTP path vs nginx"). The listener sets it
      // on the RawSockets it accepts, and net.Server's `noDelay` on the sockets it accepts, which
      // a TLSSocket wraps: setting it again through the TLSSocket is one more setsockopt and ~4 us
      // of a handshake's CPU on Node 20 (bench/README.md "What ipgate adds to a new
      // TLS handshake").
      if (!encrypted) client.setNoDelay(true);
      // A TLSSocket is driven on its TLS handle from here (transport/tls-byte-socket.ts), with
      // the bytes its stream had already decrypted handed on first.
      const taken = encrypted ? takeTlsSocket(client as tls.TLSSocket) : null;
      if (taken !== null) {
        socket = taken.socket;
        if (taken.early.length > 0) leftover = leftover.length === 0 ? taken.early : Buffer.concat([leftover, taken.early]);
      } else socket = new NetByteSocket(client);
    }
    const hc = this.open(conn, socket);
    const header = this.config.outboundProxyProtocol === 'none' ? null : this.proxyHeader(conn);
    new RelayConn(this.host, hc, socket, header).start(leftover);
  }

  drain(): void {
    this.draining = true;
    // No new requests: the checks of every group stop (their state no longer decides anything).
    this.group.stopChecks();
    for (const g of this.policy.routes?.groups.values() ?? []) g.stopChecks();
    // Idle keep-alive connections close now; the others after their exchange in flight (the
    // engine closes a connection whose HttpConn is closing once its response is done).
    for (const hc of this.conns) {
      hc.closing = true;
      hc.draining = true;
      // HTTP/2: GOAWAY, its streams in flight finish (h2/h2-conn.ts).
      if (hc.h2 !== null) hc.h2.goaway();
      else if (hc.open.length === 0 && hc.upgraded === null) hc.conn.socket.destroy();
    }
    if (this.active === 0) this.closePools();
  }

  /** Whether a change of `list` concerns this listener's connections beyond its own list (a route enforces it). */
  enforces(list: LiveList): boolean {
    const routes = this.policy.routes;
    return routes?.lists.has(list) === true;
  }

  /** After a list change (revokeLive): re-decide `conn`'s requests in flight, tunnel or connection; true when cut. */
  recheck(conn: Connection): boolean {
    const hc = conn.handlerState as HttpConn | null;
    if (hc === null || conn.socket.destroyed || hc.revoked || this.policy.redecide(hc, false, true) !== 'revoked') return false;
    this.revoke(hc);
    return true;
  }

  private revoke(hc: HttpConn): void {
    this.policy.admission.revoked(hc.conn);
    this.cut(hc, 'revoked');
  }

  /**
   * After a change of `list`: if it is the list behind http.trustedProxies, connections from a peer
   * it no longer trusts, whose requests were attributed by X-Forwarded-For, close after their
   * in-flight response (`trust_revoked`); the peer's next connection is an untrusted one (its own
   * address decides). Returns how many.
   */
  trustChanged(list: LiveList): number {
    const trusted = this.policy.trustedProxies;
    if (!readsList(trusted, list)) return 0;
    let n = 0;
    for (const hc of this.conns) {
      if (!hc.trusted || hc.revoked || hc.conn.socket.destroyed || trusted.admits(hc.conn.clientAddress)) continue;
      this.cut(hc, 'trust_revoked');
      n++;
    }
    return n;
  }

  /** This handler's routes receiver (itself: routes reload per request). */
  get routes(): RouteReceiver {
    return this;
  }

  // --- closing ----------------------------------------------------------------------------------

  private socketClosed(hc: HttpConn): void {
    this.active--;
    this.conns.delete(hc);
    if (hc.revokeTimer !== null) clearTimeout(hc.revokeTimer);
    hc.revokeTimer = null;
    if (this.draining && this.active === 0) this.closePools();
  }

  private closePools(): void {
    this.host.pool.close();
    this.h2?.upstreams.close();
  }

  /**
   * End `hc` for `reason`: at once when idle or tunnelled, else after its in-flight response
   * (the engine answers it with Connection: close: it reads hc.revoked and hc.closing).
   */
  private cut(hc: HttpConn, reason: 'revoked' | 'trust_revoked' | 'route_removed'): void {
    const conn = hc.conn;
    conn.result = reason;
    if (reason === 'route_removed') {
      hc.closing = true;
    } else {
      hc.revoked = true;
      conn.revoked = true;
    }
    if (hc.h2 !== null) {
      // HTTP/2: GOAWAY now (no new stream); the streams in flight get the same grace as an
      // HTTP/1.1 response in flight (a removed route's run to their end), then the connection is cut.
      hc.h2.goaway();
    } else if (hc.upgraded !== null || hc.open.length === 0) {
      conn.socket.destroy();
      return;
    }
    // A revoked client's response under way may finish, for at most REVOKE_GRACE_MS; a removed
    // route's runs to its end.
    if (reason !== 'route_removed') hc.revokeTimer = setTimeout(destroySocket, REVOKE_GRACE_MS, conn.socket);
  }

  private proxyHeader(conn: Connection): Buffer {
    const src = { address: conn.clientAddress, port: conn.clientPort };
    const dst = { address: conn.destAddress, port: conn.destPort };
    return this.config.outboundProxyProtocol === 'v1' ? encodeProxyV1(src, dst) : encodeProxyV2(src, dst);
  }
}

function destroySocket(socket: Endpoint): void {
  socket.destroy();
}
