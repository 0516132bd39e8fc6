/**
 * One public data port. Every connection walks the same stages, in order, once:
 *
 *   accept -> PROXY header decode -> TLS handshake (http listeners with tls) -> client identity
 *     -> allowlist -> handler (tcp or http forward)
 *
 * A TCP listener with `routes` has two more stages between the PROXY header and the allowlist: the
 * ClientHello (tls/hello-stage.ts) and the SNI route (route/sni-routes.ts), which gives the
 * allowlist and the upstream group. A listener without routes never calls them.
 *
 * Failures before the handler are decisions, not exceptions: the connection is closed with a reason
 * code that is both the log field and the metric label. Nothing a peer sends can throw out of here.
 */
import { Buffer } from 'node:buffer';
import net from 'node:net';
import type { Logger } from 'pino';
import type { ListenerAccessLog } from '../access-log/access-log';
import { addressSet, readsList, type AddressLookup } from '../store/list-ref';
import type { ListenerConfig, RouteConfig } from '../schema/config';
import { parseHostPort } from '../address/host-port';
import { canonicalAddress, formatHostPort } from '../identity/address';
import { beforeHeader, type IdentityOutcome } from '../identity/derive';
import { ListenerStats } from '../metrics/listener-stats';
import type { PpReason } from '../proxy-protocol/codes';
import type { Reason } from '../reasons';
import type { LiveList } from '../store/live-lists';
import type { TlsStageResult, TlsTerminator } from '../tls/terminate';
import type { RouteReceiver } from '../route/route-receiver';
import { SniRoutes } from '../route/sni-routes';
import type { ClientHelloDone } from '../tls/client-hello';
import { helloTimeoutMs, HelloStage, type HelloSink, type HelloStageResult } from '../tls/hello-stage';
import { AcceptErrors } from './accept-errors';
import { Admission } from './admission';
import { Connection } from '../connection/connection';
import { LinkedSet } from '../connection/linked-set';
import { gather } from '../connection/gather';
import { HeaderStage, type HeaderSink } from './header-stage';
import { RawSocket } from '../transport/raw-socket';
import type { Owned, SocketCallback } from '../transport/byte-socket';

/**
 * What a listener hands an admitted connection to, and the lifecycle the listener drives through
 * it (docs/architecture.md "The data path"): a list change (revokeLive) re-checks open connections,
 * a change of a trusted-peer list closes what an untrusted peer spoke for, a reload swaps routes,
 * a drain stops new work. Listener.listChanged is the one place that decides which of these a
 * list change calls; each handler answers for what it decided.
 */
export interface ConnectionHandler {
  /**
   * Take over an admitted connection. `leftover` holds bytes that arrived after the PROXY header
   * (payload, forwarded untouched). The socket is paused. `hello`: on a TCP listener with routes,
   * the ClientHello that chose the route (`leftover` starts with its `length` bytes); the
   * forwarder follows the handshake to the backend's ServerHello with it (a second hello after a
   * HelloRetryRequest must match it: forward/tcp/hello-watch.ts).
   */
  handle(conn: Connection, leftover: Buffer, hello?: ClientHelloDone): void;
  /**
   * The handler decides the allowlist per request (HTTP: a 403 per request, and a trusted proxy's
   * clients come from X-Forwarded-For): the listener then makes no connection-level decision, and
   * a list change asks the handler to `recheck` each such connection.
   */
  readonly decidesPerRequest: boolean;
  /** Read/write buffer size for accepted sockets (bytes); undefined: Node's. */
  readonly socketHighWaterMark?: number;
  /**
   * The handler takes RawSockets (raw-socket.ts) instead of net.Sockets (it checked that this Node
   * has them: rawSocketsWanted): the listener then accepts libuv handles itself and never builds
   * a net.Socket.
   */
  readonly rawSockets: boolean;
  /** Stop taking new requests on open connections (drain); close idle ones. */
  drain(): void;
  /** Whether the handler decides with `list` besides the listener's own (an HTTP route's list). */
  enforces(list: LiveList): boolean;
  /** After a list change: re-decide a connection this handler decides per request; true when it cut it (now or after its response). */
  recheck(conn: Connection): boolean;
  /** After a change of `list`: close what a peer it no longer trusts spoke for (HTTP trustedProxies); how many. */
  trustChanged(list: LiveList): number;
  /** The routes the handler takes live (HTTP listeners), or null: the listener's own (SNI) routes, if any. */
  readonly routes: RouteReceiver | null;
}

interface ListenerDeps {
  list: LiveList;
  logger: Logger;
  handler: ConnectionHandler;
  stats?: ListenerStats;
  /** Self-check fed with every accepted peer (source NAT suspicion). */
  selfCheck?: PeerObserver | null;
  /** The access log: a line per closed connection (null: logging.access off). */
  accessLog?: ListenerAccessLog | null;
  /** HTTP listeners with `tls`: the TLS stage, run after the PROXY header (src/tls/terminate.ts). */
  tls?: TlsTerminator | null;
  /** `revokeLive`: a reload of SNI routes re-checks open connections against their new routes' lists. */
  revokeLive?: boolean;
}

/** What a list change closed on one listener (Listener.listChanged). */
interface ListChangeResult {
  /** Connections a peer no longer trusted spoke for (`trust_revoked`). */
  readonly untrusted: number;
  /** Connections whose client is no longer allowed (`revoked`; HTTP ones may be marked to close after their response). */
  readonly revoked: number;
}

/** Sees the peer address of every accepted connection (src/selfcheck). */
interface PeerObserver {
  observe(peer: string): void;
}

const EMPTY = Buffer.alloc(0);
let nextConnectionId = 1;

export class Listener implements HeaderSink, HelloSink, RouteReceiver<SniRoutes | null> {
  readonly routeKind = 'sni';
  readonly name: string;
  readonly stats: ListenerStats;
  /** Open connections: a LinkedSet, not a Set (connection/linked-set.ts says why). */
  readonly connections = new LinkedSet<Connection>();
  private readonly server: net.Server;
  private readonly trustedSources: AddressLookup;
  private readonly log: Logger;
  /** The allowlist decision for connection-level handlers (TCP): decide, count, log. */
  private readonly admission: Admission;
  private bound: net.AddressInfo | null = null;
  private draining = false;
  /** Accepting libuv handles as RawSockets (handler.rawSockets, where available). */
  private raw = false;
  /** Failed accepts: counted, logged once per interval, refused just below the fd limit. */
  private readonly acceptErrors: AcceptErrors;
  /** The TLS stage, or null (plaintext: the leftover bytes go straight to the handler). */
  private readonly tls: TlsTerminator | null;
  /**
   * A RawSocket's error handler and close hook, one of each for every connection of the listener:
   * the socket's `record` is its Connection (transport/byte-socket.ts says why not a closure).
   */
  private readonly socketFailed: (this: Owned, code: string) => void;
  private readonly socketClosed: SocketCallback;
  /** What the TLS stage calls back with. */
  private readonly tlsResult: TlsStageResult = {
    done: (conn, socket) => {
      conn.socket = socket;
      this.admit(conn, EMPTY);
    },
    failed: (conn, reason) => this.close(conn, reason),
  };
  /** TCP listeners with routes: the compiled SNI routes (swapped whole by replaceRoutes); else null. */
  private routes: SniRoutes | null;
  /** The PROXY header stage, for peers in `trustedSources` and for the rest. */
  private readonly headerTrusted: HeaderStage;
  private readonly headerUntrusted: HeaderStage;
  /** The ClientHello stage (TCP listeners with routes; unused otherwise). */
  private readonly hello: HelloStage;
  /**
   * Whether an accepted RawSocket's local address is read at accept (HTTP listeners: the engine
   * reads it per request, X-Forwarded-Port, possibly after the client closed). A TCP listener's
   * connection reads it only for an outbound PROXY header without an inbound one, when the
   * upstream connected (Connection.destAddress): one getsockname less per connection otherwise.
   */
  private readonly localAtAccept: boolean;

  constructor(
    readonly config: Readonly<ListenerConfig>,
    private readonly deps: ListenerDeps,
  ) {
    this.name = config.name;
    this.stats = deps.stats ?? new ListenerStats(config.name);
    this.log = deps.logger.child({ listener: config.name });
    const log = this.log;
    const listener = this;
    // Made in locals (test/unit/transport/handler-functions.test.ts); once per listener.
    const socketFailed = function (this: Owned, code: string): void {
      // Errors from the peer (ECONNRESET, ...) are expected: they only end this connection.
      log.debug({ err: code, conn: (this.record as Connection).id }, 'client socket error');
    };
    const socketClosed = function (this: Owned): void {
      listener.onClosed(this.record as Connection);
    };
    this.socketFailed = socketFailed;
    this.socketClosed = socketClosed;
    this.admission = new Admission(deps.list, this.stats, this.log);
    this.trustedSources = addressSet(config.proxyProtocol.trustedSources, deps.list.owner);
    this.tls = deps.tls ?? null;
    this.routes = config.mode === 'tcp' && config.routes !== undefined ? SniRoutes.compile(config, deps.list.owner, this.stats) : null;
    if (this.routes !== null) {
      this.stats.health = this.routes.health;
      this.routes.startChecks({ log: this.log, lookup: null });
    }
    this.headerTrusted = new HeaderStage(config.proxyProtocol, true, this);
    this.headerUntrusted = new HeaderStage(config.proxyProtocol, false, this);
    this.hello = new HelloStage({ timeoutMs: helloTimeoutMs(config) }, this.stats, this);
    this.localAtAccept = deps.handler.decidesPerRequest || this.tls !== null;
    // allowHalfOpen: a client's FIN is passed on to the upstream while the other direction keeps
    // flowing (the TCP forwarder ends each side itself). noDelay: a relay must not hold a small write
    // back for the peer's delayed ACK (Nagle + delayed ACK = ~40 ms stalls; nginx's tcp_nodelay on).
    this.server = net.createServer(
      { allowHalfOpen: true, pauseOnConnect: true, noDelay: true, highWaterMark: deps.handler.socketHighWaterMark },
      (socket) => this.accept(socket),
    );
    this.acceptErrors = new AcceptErrors(this.stats, this.log);
    this.server.on('error', (err: NodeJS.ErrnoException) => {
      // net.Server emits a failed accept (the libuv EMFILE trick itself failing, ENFILE, ...) as an
      // error event per failure: counted and rate-limited like the handle path's.
      if (err.syscall === 'accept') this.acceptErrors.failed(typeof err.errno === 'number' ? err.errno : 0);
      else this.log.error({ err }, 'listener error');
    });
  }

  get address(): net.AddressInfo | null {
    return this.bound;
  }

  get list(): LiveList {
    return this.deps.list;
  }

  async listen(): Promise<net.AddressInfo> {
    const hp = parseHostPort(this.config.listen, true);
    if (typeof hp === 'string') throw new Error(`listeners.${this.name}.listen: ${hp}`);
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        reject(
          Object.assign(
            new Error(`listener "${this.name}" cannot listen on ${formatHostPort(hp.host, hp.port)}: ${err.code ?? err.message}`, {
              cause: err,
            }),
            { code: 'IPGATE_BIND' },
          ),
        );
      };
      this.server.once('error', onError);
      this.server.listen({ host: hp.host, port: hp.port, backlog: 1024 }, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    this.bound = this.server.address() as net.AddressInfo;
    if (this.deps.handler.rawSockets === true) this.acceptHandles();
    return this.bound;
  }

  /** Whether this listener accepts RawSockets (after listen()). */
  get rawSockets(): boolean {
    return this.raw;
  }

  /**
   * Take accepted handles before net.Server wraps them in sockets. net.Server calls its handle's
   * `onconnection(err, clientHandle)` per accept; in a cluster worker the handle is the shared
   * socket (SCHED_NONE) or cluster's stand-in that the primary's round robin calls the same way
   * (SCHED_RR), so replacing that one function covers all three. Where the handle has no such
   * function (a Node that changed it), the listener keeps net.Sockets.
   */
  private acceptHandles(): void {
    const handle = (this.server as unknown as { _handle?: { onconnection?: unknown } | null })._handle;
    if (handle === null || handle === undefined || typeof handle.onconnection !== 'function') return;
    this.raw = true;
    const onconnection = (err: number, clientHandle: { fd: number; close(): void } | undefined | null): void => {
      if (err !== 0 || clientHandle === undefined || clientHandle === null) {
        this.acceptErrors.failed(err);
        return;
      }
      if (!this.acceptErrors.admit(clientHandle.fd)) {
        clientHandle.close();
        return;
      }
      this.acceptRaw(RawSocket.accepted(clientHandle));
    };
    handle.onconnection = onconnection;
  }

  /** Stop accepting; open connections continue (the caller waits, then `destroyAll`). */
  stopAccepting(): void {
    this.draining = true;
    this.acceptErrors.close();
    this.deps.handler.drain();
    this.routes?.stopChecks(null);
    // close() stops accepting at once; its callback would wait for every open connection, which is
    // the drain's job (bounded by drainTimeoutMs), so it is not awaited here.
    if (this.server.listening) this.server.close();
  }

  destroyAll(result: Reason): void {
    for (const conn of this.connections) this.close(conn, result);
  }

  /** Close a connection with a result label (idempotent). */
  close(conn: Connection, result: Reason): void {
    if (conn.result === null) conn.result = result;
    conn.socket.destroy();
    conn.upstreamSocket?.destroy();
  }

  /**
   * A list changed (revokeLive): the one place that decides what that closes on this listener.
   * A list behind proxyProtocol.trustedSources or http.trustedProxies closes what a peer it no
   * longer trusts spoke for; a list this listener decides with (its own, an SNI route's, an HTTP
   * route's) re-checks every open connection against the list that decides it now.
   */
  listChanged(list: LiveList): ListChangeResult {
    const handler = this.deps.handler;
    const untrusted = (readsList(this.trustedSources, list) ? this.revokeUntrusted() : 0) + handler.trustChanged(list);
    const revoked = this.enforces(list) || handler.enforces(list) ? this.revokeDenied() : 0;
    return { untrusted, revoked };
  }

  /** What takes this listener's routes on a reload: the HTTP handler, or the listener itself (SNI routes of a TCP listener). */
  get routeReceiver(): RouteReceiver {
    return this.deps.handler.routes ?? this;
  }

  /**
   * After a change of the trustedSources list: close every open connection whose PROXY header was
   * believed from a peer the list no longer trusts (`trust_revoked`). Its client address came from
   * that header, so nothing the connection does may be attributed to it any more; a new connection
   * from the peer is treated as any untrusted one (docs/architecture.md "Inbound PROXY protocol").
   */
  revokeUntrusted(): number {
    let closed = 0;
    for (const conn of this.connections) {
      if (conn.via !== 'proxy-v1' && conn.via !== 'proxy-v2') continue;
      if (this.trustedSources.admits(conn.peerAddress)) continue;
      conn.revoked = true;
      this.close(conn, 'trust_revoked');
      closed++;
    }
    return closed;
  }

  /**
   * Re-check every live connection against the list in force and close those whose client is no
   * longer allowed (revokeLive). Connections the handler decides per request are re-decided by it.
   * Returns how many were cut (an HTTP connection's response in flight may still finish).
   */
  revokeDenied(): number {
    let closed = 0;
    for (const conn of this.connections) {
      if (conn.entry === null && !conn.decidedPerRequest) continue; // not yet admitted
      if (conn.decidedPerRequest) {
        if (this.deps.handler.recheck(conn)) closed++;
        continue;
      }
      const entry = this.admission.matchConnection(conn);
      if (entry !== null) {
        conn.entry = entry;
      } else {
        conn.revoked = true;
        this.admission.revoked(conn);
        this.close(conn, 'revoked');
        closed++;
      }
    }
    return closed;
  }

  private accept(socket: net.Socket): void {
    const handle = (socket as unknown as { _handle: { fd: number } | null })._handle;
    if (handle !== null && !this.acceptErrors.admit(handle.fd)) {
      socket.destroy();
      return;
    }
    const remote = socket.remoteAddress;
    if (remote === undefined || this.draining) {
      socket.destroy();
      return;
    }
    const conn = new Connection(
      nextConnectionId++,
      this.name,
      socket,
      canonicalAddress(remote),
      socket.remotePort ?? 0,
      canonicalAddress(socket.localAddress ?? ''),
      socket.localPort ?? 0,
    );
    // Errors from the peer (ECONNRESET, ...) are expected: they only end this connection.
    socket.on('error', (err) => this.log.debug({ err: err.message, conn: conn.id }, 'client socket error'));
    socket.once('close', () => this.onClosed(conn));
    this.start(conn);
  }

  /** accept() for a RawSocket: the same stages without a net.Socket. */
  private acceptRaw(socket: RawSocket): void {
    const peer = this.draining ? null : socket.peerName();
    if (peer === null) {
      socket.destroy();
      return;
    }
    // Read now: peerName's object is shared.
    const remote = canonicalAddress(peer.address);
    const remotePort = peer.port;
    let local = '';
    let localPort = 0;
    if (this.localAtAccept) {
      const name = socket.localName();
      if (name === null) {
        socket.destroy();
        return;
      }
      local = canonicalAddress(name.address);
      localPort = name.port;
    }
    socket.setNoDelay();
    const conn = new Connection(nextConnectionId++, this.name, socket, remote, remotePort, local, localPort);
    socket.record = conn;
    socket.onError = this.socketFailed;
    socket.onClose(this.socketClosed);
    this.start(conn);
  }

  private start(conn: Connection): void {
    this.stats.accepted++;
    this.stats.active++;
    this.connections.add(conn);
    this.deps.selfCheck?.observe(conn.peerAddress);

    const mode = this.config.proxyProtocol.mode;
    const trusted = mode !== 'off' && this.trustedSources.admits(conn.peerAddress);
    // The decision is derive.ts's (shared with the admin API's explain).
    const early = beforeHeader(mode, trusted);
    // Nothing else happens for this connection until the header is read (no dial, no allowlist).
    if (early === null) gather(conn, EMPTY, trusted ? this.headerTrusted : this.headerUntrusted);
    else this.headerRead(conn, early, EMPTY);
  }

  /**
   * The PROXY header stage's outcome (header-stage.ts; or beforeHeader's, with nothing read): close,
   * or fill in the client and go on to the next stage.
   */
  headerRead(conn: Connection, outcome: IdentityOutcome, buf: Buffer): void {
    if (!outcome.ok) {
      if (outcome.detail !== undefined) {
        this.log.debug({ conn: conn.id, peer: conn.peerAddress, reason: outcome.reason, detail: outcome.detail }, 'malformed PROXY header');
      }
      this.reject(conn, outcome.reason, outcome.version);
      return;
    }
    ListenerStats.bump(this.stats.proxyHeader, outcome.label);
    if (outcome.source !== null && outcome.destination !== null) {
      conn.clientAddress = outcome.source.address;
      conn.clientPort = outcome.source.port;
      conn.destAddress = outcome.destination.address;
      conn.destPort = outcome.destination.port;
    }
    conn.via = outcome.via;
    conn.tlvs = outcome.tlvs;
    const n = outcome.headerLength;
    const rest = n === 0 ? buf : n === buf.length ? EMPTY : buf.subarray(n);
    // TLS after the PROXY header: a balancer's header precedes the ClientHello (HTTP listeners
    // with tls terminate it; TCP listeners with routes read it and pass it on untouched).
    if (this.tls !== null) this.tls.start(conn, conn.socket as net.Socket, rest, this.tlsResult);
    else if (this.routes === null) this.admit(conn, rest);
    else this.hello.read(conn, rest);
  }

  /**
   * The ClientHello stage's result (TCP listeners with routes): close with its reason, or route by
   * SNI and go on to the allowlist with the route's list; the hello and what followed it are
   * forwarded untouched.
   */
  helloRead(conn: Connection, r: HelloStageResult): void {
    if (!r.ok) {
      this.log.debug(
        { conn: conn.id, peer: conn.peerAddress, client: conn.clientAddress, reason: r.reason, detail: r.detail },
        'ClientHello rejected',
      );
      this.close(conn, r.reason);
      return;
    }
    conn.sni = r.hello.sni;
    const d = this.routes!.decide(conn.sni);
    if (d.kind === 'miss') {
      ListenerStats.bump(this.stats.routeMisses, d.reason);
      this.log.debug({ conn: conn.id, client: conn.clientAddress, sni: conn.sni, reason: d.reason }, 'no route');
      this.close(conn, d.reason);
      return;
    }
    conn.route = d.route;
    this.admit(conn, r.bytes, r.hello);
  }

  /** Whether this listener decides on `list` (its own, or one of its routes'): revocation asks. */
  enforces(list: LiveList): boolean {
    return list === this.deps.list || this.routes?.routes.some((r) => r.list === list) === true;
  }

  /** The SNI routes in force (TCP listeners with routes), or null. */
  get sniRoutes(): SniRoutes | null {
    return this.routes;
  }

  /**
   * A reload's new routes (TCP listeners with routes), compiled with SniRoutes.compile: the table,
   * the groups and the lists are swapped in one assignment, so a new connection sees the old
   * routes or the new ones, never a mix. An open connection keeps going when its SNI still
   * reaches a route of the same name (it then belongs to the new route: its list decides a later
   * revocation, so call revokeDenied() after this when revokeLive is on); otherwise its route is
   * gone and it is closed (`route_removed`). Connections still reading their hello use the new
   * table. Returns the number closed. Throws, changing nothing, for a listener without routes or
   * when this listener relays on libuv handles and a new upstream is a name (handles dial
   * addresses only: a restart picks the net.Socket path).
   */
  replaceRoutes(next: SniRoutes | null): number {
    if (next === null) return 0;
    if (this.routes === null) throw new Error(`listener "${this.name}" has no SNI routes (mode tcp with routes): nothing to replace`);
    if (this.raw && !next.ipLiteralsOnly) {
      throw new Error(
        `listener "${this.name}" relays on libuv handles, which dial IP addresses only: a route upstream that is a name needs a restart`,
      );
    }
    const prior = this.routes;
    this.routes = next;
    // Active checks follow the groups in force (upstream-group.ts): kept groups keep their timers.
    this.stats.health = next.health;
    if (!this.draining) next.startChecks({ log: this.log, lookup: null });
    prior.stopChecks(next);
    const gone = next.adopt(this.connections);
    for (const conn of gone) this.close(conn, 'route_removed');
    return this.deps.revokeLive === true ? gone.length + this.revokeDenied() : gone.length;
  }

  /**
   * A TCP listener's side of a routes reload (route/route-receiver.ts): the SNI routes compiled
   * from the new config without touching what is in force. Turning SNI routing on or off changes
   * the listener's stages (ClientHello read or not), so that is refused with "needs a restart", as
   * a changed `mode` or `listen` is.
   */
  compileRoutes(routes: readonly RouteConfig[] | undefined): SniRoutes | null {
    const started = this.config.routes !== undefined;
    if ((routes !== undefined) !== started) {
      throw new Error(
        `SNI routing turned ${started ? 'off' : 'on'} for TCP listener "${this.name}": its stages change, which needs a restart`,
      );
    }
    if (routes === undefined) return null;
    const next = SniRoutes.compile({ ...this.config, routes }, this.deps.list.owner, this.stats, this.routes);
    if (this.raw && !next.ipLiteralsOnly) {
      throw new Error(
        `listener "${this.name}" relays on libuv handles, which dial IP addresses only: a route upstream that is a name needs a restart`,
      );
    }
    return next;
  }

  private admit(conn: Connection, leftover: Buffer, hello?: ClientHelloDone): void {
    const handler = this.deps.handler;
    if (handler.decidesPerRequest) {
      conn.decidedPerRequest = true;
    } else {
      const entry = this.admission.matchConnection(conn);
      if (entry === null) {
        this.admission.refused(conn.clientAddress, conn, conn.via);
        this.close(conn, 'denied');
        return;
      }
      conn.entry = entry;
    }
    handler.handle(conn, leftover, hello);
  }

  private reject(conn: Connection, reason: PpReason, version: string): void {
    ListenerStats.bump(this.stats.proxyHeader, `${version}/${reason}`);
    ListenerStats.bump(this.stats.denied, reason);
    this.log.debug({ conn: conn.id, peer: conn.peerAddress, reason }, 'PROXY header rejected');
    this.close(conn, reason);
  }

  private onClosed(conn: Connection): void {
    this.connections.delete(conn);
    this.stats.active--;
    const result = conn.result ?? 'ok';
    ListenerStats.bump(this.stats.closed, result);
    if (conn.route !== null) ListenerStats.bump(conn.route.counts.closed, result);
    const bytesIn = conn.socket.bytesRead;
    const bytesOut = conn.socket.bytesWritten;
    this.stats.bytesFromClient += bytesIn;
    this.stats.bytesToClient += bytesOut;
    this.deps.accessLog?.connection(conn, bytesIn, bytesOut);
  }
}
