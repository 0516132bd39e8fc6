/**
 * TCP forwarding: dial an upstream (round robin, next target on connect failure), write the
 * outbound PROXY header and any bytes that followed the inbound header, then relay both ways.
 * A connection an SNI route took first has its handshake watched up to the backend's ServerHello
 * (hello-watch.ts: a second ClientHello after a HelloRetryRequest must match the first).
 *
 * One dial routine for both socket models (TcpForwarder.dial; a SocketKind opens the upstream in
 * the client's model) and one relay contract (transport/relay-pair.ts: an entry per model):
 * - Backpressure: the relay pauses the fast side while the slow side's buffer is full, so a
 *   stalled reader never makes memory grow without bound.
 * - Half-close: the relay ends the destination when the source ends, so a FIN travels on while
 *   the other direction keeps flowing.
 * - One upstream connection per client connection: the PROXY header describes one client.
 */
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import net from 'node:net';
import type { Logger } from 'pino';
import { NO_UPSTREAM_HEALTH, type ListenerConfig } from '../../schema/config';
import { canonicalAddress } from '../../identity/address';
import type { Connection, Endpoint } from '../../connection/connection';
import type { ConnectionHandler } from '../../listener/listener';
import { RawSocket, rawSocketsWanted } from '../../transport/raw-socket';
import type { Owned } from '../../transport/byte-socket';
import { netRelayPair, relayPair } from '../../transport/relay-pair';
import { ListenerStats } from '../../metrics/listener-stats';
import { encodeProxyV1, encodeProxyV2 } from '../../proxy-protocol/encoder';
import type { UpstreamReason } from '../../reasons';
import type { ClientHelloDone } from '../../tls/client-hello';
import type { TlsReason } from '../../tls/codes';
import { helloTimeoutMs } from '../../tls/hello-stage';
import { buildGroup, parseUpstreams, type UpstreamGroup, type Upstream } from '../../upstream/upstream-group';
import { upstreamReason } from '../../upstream/upstream-reason';
import { type ConcurrencyZone, LimitZones, REFUSED, type RateZone } from '../../limit/limit-zones';
import type { LiveList } from '../../store/live-lists';
import { HelloWatch, type WatchHost } from './hello-watch';
import { BULK_CHUNK_BYTES, giveReadBuffer, largeReadsEnabled, largeReadStats, maybeSwitch, takeReadBuffer } from './large-reads';

/**
 * Socket buffer for both sides of a relay. Node's default (16 KiB writable) is below one 64 KiB
 * read, so nearly every chunk of a bulk stream made write() return false: a pause (epoll_ctl) and
 * a 'drain' + resume per chunk. 256 KiB holds four reads; a stalled reader still pins at most
 * this much per direction. bench/README.md "Hot path" has the before/after.
 */
const RELAY_HIGH_WATER_MARK = 256 * 1024;

export class TcpForwarder implements ConnectionHandler {
  readonly socketHighWaterMark = RELAY_HIGH_WATER_MARK;
  /** A TCP connection is decided once, by the listener's allowlist stage (its SNI route's list, or its own). */
  readonly decidesPerRequest = false;
  /** SNI routes are the listener's own (Listener.routeReceiver). */
  readonly routes = null;
  /**
   * Relay on libuv handles (raw-socket.ts) where this Node has them, unless IPGATE_TCP_HANDLES=0,
   * and when every upstream (the listener's and its routes') is an IP literal: a RawSocket
   * connects to an address, not a name (names keep net.connect's lookup and the net.Socket path).
   */
  readonly rawSockets: boolean;
  private readonly pool: UpstreamGroup;
  private readonly log: Logger;
  /**
   * What a connection's HelloWatch calls back (SNI routes only), one per socket model, built once
   * per listener: the watch ends in that model's relay (transport/relay-pair.ts).
   * @internal (SocketKind)
   */
  readonly netWatch: WatchHost<net.Socket>;
  /** @internal (SocketKind) */
  readonly rawWatch: WatchHost<RawSocket>;

  /** `limits.connectionRate` (new connections per client), or null. */
  private readonly connRate: RateZone | null = null;
  private readonly connRateExempt: readonly LiveList[] = [];
  /** `limits.concurrent` (open connections per client), or null. */
  private readonly concurrent: ConcurrencyZone | null = null;
  private readonly concurrentExempt: readonly LiveList[] = [];
  /** The idle timers' callback on RawSocket clients (handle(); `conn` is the timer's argument). */
  private readonly idleCheck: (conn: Connection) => void;
  /** @internal (RAW.relay) A relayed RawSocket upstream's error handler: its record is the connection. */
  readonly rawUpstreamFailed: (this: Owned, code: string) => void;

  constructor(
    private readonly config: Readonly<ListenerConfig>,
    logger: Logger,
    private readonly stats: ListenerStats,
    /** Where `limits.*.exempt` names resolve (absent: no exemption). */
    lists?: { get(name: string): LiveList },
    /** The process's limit zones (src/limit/limit-zones.ts). */
    limits: LimitZones = new LimitZones(),
  ) {
    // Per-client limits (docs/edge-rules.md "Rate and connection limits"): checked once per
    // connection, after the listener's allowlist admitted it (a refused client gets no limit's count).
    const cr = config.limits?.connectionRate ?? null;
    const cc = config.limits?.concurrent ?? null;
    const named = (names: readonly string[]): LiveList[] => (lists === undefined ? [] : names.map((n) => lists.get(n)));
    if (cr !== null) {
      this.connRate = limits.rate(`${config.name}//connection_rate`, 'connection_rate', cr);
      this.connRateExempt = named(cr.exempt);
    }
    if (cc !== null) {
      this.concurrent = limits.concurrency(`${config.name}//concurrent`, cc);
      this.concurrentExempt = named(cc.exempt);
    }
    // With routes the listener's own group may be empty: every route then has its own.
    this.pool = buildGroup(config.upstreams, config.upstreamHealth ?? NO_UPSTREAM_HEALTH);
    this.log = logger.child({ listener: config.name });
    // With routes, every connection dials its route's group (route/sni-routes.ts owns those and
    // their checks); without, this one. Names resolve as net.connect resolves them on this path
    // (no DNS cache on TCP listeners).
    if (config.routes === undefined) {
      if (this.pool.health !== null) stats.health = [{ route: '', targets: this.pool.targets }];
      this.pool.startChecks({ log: this.log, route: '', lookup: null });
    }
    const routeTargets = (config.routes ?? []).flatMap((r) => parseUpstreams(r.upstreams ?? []));
    this.rawSockets = rawSocketsWanted() && this.pool.targets.every((t) => t.family !== 0) && routeTargets.every((t) => t.family !== 0);
    if (!largeReadsEnabled()) this.log.debug('bulk relays use ordinary socket reads (large reads off or unsupported by this Node)');
    const watch = {
      helloTimeoutMs: helloTimeoutMs(config),
      stats,
      log: this.log,
      closeWith: (conn: Connection, reason: TlsReason) => this.closeWith(conn, reason),
    };
    this.netWatch = { ...watch, relayBoth: relayNet };
    this.rawWatch = { ...watch, relayBoth: relayRaw };
    const idleMs = config.timeouts.idleMs;
    const idleCheck = (conn: Connection): void => {
      const client = conn.socket as RawSocket;
      if (client.destroyed) return;
      const left = idleMs - (performance.now() - client.lastActive);
      if (left <= 0) this.fail(conn, 'idle_timeout');
      else conn.handlerState = setTimeout(idleCheck, Math.ceil(left), conn);
    };
    this.idleCheck = idleCheck;
    const fwd = this;
    const rawUpstreamFailed = function (this: Owned, code: string): void {
      fwd.upstreamError(this.record as Connection, code);
    };
    this.rawUpstreamFailed = rawUpstreamFailed;
  }

  // Lifecycle (ConnectionHandler): the listener re-checks and closes TCP connections itself (each
  // was decided once, by the listener); a stream has no request boundary to drain at.
  drain(): void {
    this.pool.stopChecks();
  }
  enforces(): boolean {
    return false;
  }
  recheck(): boolean {
    return false;
  }
  trustChanged(): number {
    return 0;
  }

  /**
   * `hello` (TCP listeners with routes): the ClientHello that chose the route, the first
   * `hello.length` bytes of `leftover`; only those go to the backend at first (hello-watch.ts).
   * The client's socket model picks the SocketKind (the listener accepts RawSockets where it can,
   * else net.Sockets); from here on the path is the same for both.
   */
  handle(conn: Connection, leftover: Buffer, hello?: ClientHelloDone): void {
    const client = conn.socket;
    if ((this.connRate !== null || this.concurrent !== null) && !this.withinLimits(conn)) return;
    // A connection an SNI route took dials the route's group (its own round robin).
    const pool = conn.route === null ? this.pool : conn.route.upstreams;
    if (pool.health !== null && !pool.anyUp()) {
      // Every target is out (upstreamHealth): close at once rather than dial one known to fail
      // (HAProxy closes a TCP connection with no server available the same way).
      this.log.debug({ conn: conn.id }, 'no upstream target up');
      if (conn.result === null) conn.result = 'upstream_none_up';
      client.destroy();
      return;
    }
    client.pause();
    if (client instanceof RawSocket) {
      // The client socket's idle timeout, as net's socket.setTimeout: any read or write on the
      // client resets it. One timer per connection, re-armed for the time left when it fires
      // after activity (not per read). Its callback is the forwarder's and the timer waits in
      // the connection's handlerState for a close hook shared by every connection: closures made
      // per connection were ~190 bytes for its life (bench/README.md "A TCP connection's relay
      // without closures").
      conn.handlerState = setTimeout(this.idleCheck, this.config.timeouts.idleMs, conn);
      client.onClose(rawClientClosed);
      this.dial(RAW, conn, client, leftover, hello ?? null, pool, pool.start(), 0);
      return;
    }
    // Idle in both directions: any read or write on the client socket resets the timer, and
    // everything from the upstream is written to it.
    client.setTimeout(this.config.timeouts.idleMs, () => this.fail(conn, 'idle_timeout'));
    this.dial(NET, conn, client, leftover, hello ?? null, pool, pool.start(), 0);
  }

  /**
   * The one dial routine: connect to the group's next target (round robin from `index`), and on a
   * connect failure or timeout try the next one until every target was tried once. Each failure
   * but the last is logged ("trying next") and counted under its target; the last one ends the
   * connection with its reason. `kind` opens the upstream socket in the client's model.
   */
  private dial<S extends Endpoint>(
    kind: SocketKind<S>,
    conn: Connection,
    client: S,
    leftover: Buffer,
    hello: ClientHelloDone | null,
    pool: UpstreamGroup,
    index: number,
    attempt: number,
  ): void {
    const targets = pool.targets;
    const target = targets[(index + attempt) % targets.length]!;
    if (client.destroyed) return;
    const dialedAt = performance.now();
    // `code` null: connected; else the connect failure (the socket is destroyed).
    const outcome = (code: string | null): void => {
      clearTimeout(timer);
      if (conn.upstreamSocket !== upstream) return;
      if (code === null) {
        target.health?.succeeded(performance.now());
        if (this.opened(conn, client, upstream, dialedAt, leftover, hello)) kind.relay(this, conn, client, upstream, hello, leftover);
        return;
      }
      const reason = upstreamReason({ code } as NodeJS.ErrnoException);
      // Passive health (upstream-health.ts): a failed connect counts against its target.
      target.health?.failed(performance.now());
      // The next target that is up (a group with health rules skips those out), each tried once.
      const next = client.destroyed ? -1 : pool.nextOffset(index, attempt + 1);
      if (next !== -1) {
        this.log.warn({ conn: conn.id, upstream: target.label, err: code }, 'upstream connect failed; trying next');
        this.stats.upstreamFailed(target.label, reason);
        this.dial(kind, conn, client, leftover, hello, pool, index, next);
        return;
      }
      this.log.warn({ conn: conn.id, upstream: target.label, err: code }, 'upstream connect failed');
      this.fail(conn, reason);
    };
    const timer = setTimeout(() => {
      upstream.destroy();
      outcome('ETIMEDOUT');
    }, this.config.timeouts.connectMs);
    const upstream = kind.open(this, conn, client, target, timer, outcome);
    conn.upstreamSocket = upstream;
    conn.upstream = target.label;
  }

  /** @internal (SocketKind) An upstream socket failed after connecting: both sides close. */
  upstreamError(conn: Connection, code: string): void {
    this.log.debug({ conn: conn.id, upstream: conn.upstream, err: code }, 'upstream socket error');
    this.fail(conn, 'upstream_reset');
  }

  /**
   * The upstream connected (either socket model): count the connect time and send the first bytes in one
   * write (the outbound PROXY header and what followed the inbound one; with a `hello`, only the
   * hello: the rest waits for the backend's ServerHello). False when the client is already gone:
   * the upstream is closed and there is nothing to relay.
   */
  private opened(
    conn: Connection,
    client: Endpoint,
    upstream: Endpoint,
    dialedAt: number,
    leftover: Buffer,
    hello: ClientHelloDone | null,
  ): boolean {
    this.stats.upstreamConnect.observe((performance.now() - dialedAt) / 1000);
    this.stats.upstreamConnected(conn.upstream); // ipgate_upstream_up
    if (client.destroyed) {
      upstream.destroy();
      return false;
    }
    const header = this.header(conn);
    const payload = hello === null || hello.length === leftover.length ? leftover : leftover.subarray(0, hello.length);
    const first = header === null ? payload : payload.length > 0 ? Buffer.concat([header, payload]) : header;
    if (first.length > 0) upstream.write(first);
    return true;
  }

  private header(conn: Connection): Buffer | null {
    const mode = this.config.outboundProxyProtocol;
    if (mode === 'none') return null;
    if (conn.destAddress === '') destination(conn);
    const src = { address: conn.clientAddress, port: conn.clientPort };
    const dst = { address: conn.destAddress, port: conn.destPort };
    return mode === 'v1' ? encodeProxyV1(src, dst) : encodeProxyV2(src, dst);
  }

  /** The handshake watch refused the connection (hello-watch.ts): close both sides with `reason`. */
  private closeWith(conn: Connection, reason: TlsReason): void {
    if (conn.result === null) conn.result = reason;
    conn.socket.destroy();
    conn.upstreamSocket?.destroy();
  }

  /**
   * The listener's per-client limits for a new connection: false when one refused it (closed,
   * counted); a concurrency slot taken is given back when the client's socket closes.
   */
  private withinLimits(conn: Connection): boolean {
    const client = conn.clientAddress;
    const rate = this.connRate;
    if (rate !== null && !exempts(this.connRateExempt, client) && rate.take(client, Number.POSITIVE_INFINITY) === REFUSED) {
      return this.limited(conn, 'limited_connection_rate', 'connection_rate');
    }
    const conc = this.concurrent;
    if (conc !== null && !exempts(this.concurrentExempt, client)) {
      const r = conc.acquire(client);
      if (r === 0) return this.limited(conn, 'limited_concurrent', 'concurrent');
      if (r === 1) {
        const release = (): void => conc.release(client);
        const socket = conn.socket;
        if (socket instanceof net.Socket) socket.once('close', release);
        else socket.onClose(release);
      }
    }
    return true;
  }

  private limited(conn: Connection, reason: 'limited_connection_rate' | 'limited_concurrent', kind: string): false {
    conn.result = reason;
    ListenerStats.bump(this.stats.limited, `\0${kind}\0refused`);
    this.log.debug({ conn: conn.id, client: conn.clientAddress, reason }, 'connection refused by a limit');
    conn.socket.destroy();
    return false;
  }

  /** @internal (SocketKind) */
  fail(conn: Connection, reason: 'idle_timeout' | UpstreamReason): void {
    if (conn.result === null) conn.result = reason;
    if (reason !== 'idle_timeout') this.stats.upstreamFailed(conn.upstream, reason);
    conn.socket.destroy();
    conn.upstreamSocket?.destroy();
  }
}

/**
 * What differs between the two socket models on the forwarder's path, one object per model
 * (shared by every listener): how to open an upstream socket of the client's kind and what its
 * errors and closes do to the pair, and which relay of transport/relay-pair.ts moves the bytes.
 * The dial routine (TcpForwarder.dial: round robin, failover, counts, logs) is one for both.
 */
interface SocketKind<S extends Endpoint> {
  /**
   * Start connecting `client`'s upstream to `target`. `outcome(null)` once connected,
   * `outcome(code)` when the connect fails (the socket is destroyed); nothing after our own
   * destroy(). The socket's close clears `timer` (the connect timeout).
   */
  open(fwd: TcpForwarder, conn: Connection, client: S, target: Upstream, timer: NodeJS.Timeout, outcome: (code: string | null) => void): S;
  /**
   * Connected, the first bytes written (TcpForwarder.opened): relay both ways, after the handshake
   * watch when there is a `hello`.
   */
  relay(fwd: TcpForwarder, conn: Connection, client: S, upstream: S, hello: ClientHelloDone | null, leftover: Buffer): void;
}

/** net.Sockets: TCP listeners where libuv handles are off or unavailable, and DNS-named upstreams. */
const NET: SocketKind<net.Socket> = {
  open(fwd, conn, client, target, timer, outcome) {
    const upstream = net.connect(connectOptions(target));
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      outcome(null);
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (!connected) outcome(err.code ?? err.message);
      else fwd.upstreamError(conn, err.code ?? err.message);
    });
    upstream.once('close', () => {
      clearTimeout(timer);
      if (!connected || conn.upstreamSocket !== upstream) return;
      // The upstream is gone in both directions. Let what it sent reach the client (the relay
      // already ended the client's write side), then close; an aborted upstream aborts the client.
      if (client.destroyed) return;
      if (client.writableFinished) client.destroy();
      else client.once('finish', () => client.destroy());
    });
    client.once('close', () => {
      if (!upstream.destroyed) {
        // The client is gone: the relay already forwarded a FIN if it closed cleanly; if it
        // aborted, abort the upstream too.
        if (client.readableEnded && !upstream.writableFinished) upstream.once('finish', () => upstream.destroy());
        else upstream.destroy();
      }
    });
    return upstream;
  },
  relay(fwd, conn, client, upstream, hello, leftover) {
    if (hello !== null) new HelloWatch(conn, client, upstream, hello, held(leftover, hello), fwd.netWatch).start();
    else relayNet(client, upstream);
  },
};

/** RawSockets (libuv handles): TCP listeners whose upstreams are all IP literals, where Node has them. */
const RAW: SocketKind<RawSocket> = {
  open(_fwd, _conn, _client, target, timer, outcome) {
    const upstream = RawSocket.connect(target.host, target.port, target.family === 6 ? 6 : 4, outcome);
    // Closed before connecting (Listener.close: revocation, drain): no timeout to report. The
    // timer waits in the socket's `owner` (unused on a TCP listener's upstream) for a close hook
    // shared by every upstream, and relay() lets it go: a closure here kept the timer, and through
    // its callback the dial's whole context, for the connection's life.
    upstream.owner = timer;
    upstream.onClose(clearConnectTimer);
    return upstream;
  },
  relay(fwd, conn, client, upstream, hello, leftover) {
    upstream.owner = null;
    if (upstream.destroyed) {
      // The first write failed at once (the upstream reset right after accepting).
      fwd.fail(conn, 'upstream_reset');
      return;
    }
    // Either side failing ends the connection: the listener logs the client's error and the
    // client's close hook (rawClientClosed) closes the upstream; the upstream's error handler is
    // the forwarder's, which finds the connection in the socket's `record`.
    upstream.record = conn;
    upstream.onError = fwd.rawUpstreamFailed;
    if (hello !== null) new HelloWatch(conn, client, upstream, hello, held(leftover, hello), fwd.rawWatch).start();
    else relayRaw(client, upstream);
  },
};

/** The relays (transport/relay-pair.ts) with this forwarder's bulk switches (large-reads.ts). */
const relayNet = netRelayPair({ bytes: BULK_CHUNK_BYTES, switch: maybeSwitch });
const relayRaw = relayPair<RawSocket>({ bytes: BULK_CHUNK_BYTES, switch: switchRaw });

/** The close hook of RAW.open: `owner` is the connect timer until the upstream connected. */
function clearConnectTimer(this: Owned): void {
  if (this.owner !== null) clearTimeout(this.owner as NodeJS.Timeout);
}

/**
 * maybeSwitch() for RawSockets: a read of BULK_CHUNK_BYTES or more that `dst` took at once (a bulk
 * flow) switches `src` to large reads into a pooled buffer, which goes back to the pool once both
 * sockets are closed. relayPair's pause-until-drain is the rule the reused buffer needs.
 */
function switchRaw(src: RawSocket, dst: RawSocket): void {
  if (src.largeReads || !largeReadsEnabled() || dst.destroyed) return;
  const buf = takeReadBuffer();
  if (!src.useLargeReads(buf)) {
    giveReadBuffer(buf);
    return;
  }
  largeReadStats.switched++;
  let closes = 0;
  const closed = (): void => {
    if (++closes === 2) giveReadBuffer(buf);
  };
  src.onClose(closed);
  dst.onClose(closed);
}

/**
 * The close hook of a RawSocket client (TcpForwarder.handle), whose record is its Connection: its
 * idle timer stops, and its upstream (connecting, relaying, or already closed by the relay) closes.
 */
function rawClientClosed(this: Owned): void {
  const conn = this.record as Connection;
  clearTimeout(conn.handlerState as NodeJS.Timeout);
  conn.upstreamSocket?.destroy();
}

/**
 * Fill in `conn`'s destination from its client socket's local address: a listener on libuv handles
 * leaves it to here (Connection.destAddress), where an outbound PROXY header needs it. The client
 * is open (TcpForwarder.opened checked); were it not, the unspecified address of the client's
 * family keeps the header encodable.
 */
function destination(conn: Connection): void {
  const s = conn.socket;
  let address: string | undefined;
  let port = 0;
  if (s instanceof RawSocket) {
    const name = s.localName();
    address = name?.address;
    port = name?.port ?? 0;
  } else {
    address = s.localAddress;
    port = s.localPort ?? 0;
  }
  conn.destAddress =
    address === undefined || address === '' ? (conn.clientAddress.includes(':') ? '::' : '0.0.0.0') : canonicalAddress(address);
  conn.destPort = port;
}

/** What the client sent after its first hello (held by the watch until the backend's ServerHello). */
function held(leftover: Buffer, hello: ClientHelloDone): Buffer {
  return hello.length === leftover.length ? EMPTY : leftover.subarray(hello.length);
}

const EMPTY = Buffer.alloc(0);

/** highWaterMark is a net.Socket (Duplex) option that @types/node's NetConnectOpts does not list. */
function connectOptions(target: Upstream): net.NetConnectOpts {
  const opts = { host: target.host, port: target.port, allowHalfOpen: true, noDelay: true, highWaterMark: RELAY_HIGH_WATER_MARK };
  return opts;
}

/** Whether `client` is in one of the `exempt` lists (a limit's `exempt`). */
function exempts(lists: readonly LiveList[], client: string): boolean {
  for (let i = 0; i < lists.length; i++) if (lists[i]!.matcher.admits(client)) return true;
  return false;
}
