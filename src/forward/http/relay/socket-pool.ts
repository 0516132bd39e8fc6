/**
 * The HTTP engine's upstream side: one socket per exchange in flight (UpstreamConn), parsed with
 * llhttp, and the shared keep-alive pool (SocketPool).
 *
 * - LIFO per target (the warmest socket first, so surplus ones expire), one request in flight on
 *   each, an idle socket closed after `http.upstreamIdleTimeoutMs` (below the backend's own
 *   keep-alive timeout, so ipgate rarely reuses a socket the backend is closing).
 * - Bounded: at most `http.upstreamMaxSockets` sockets per target, busy and idle together. A request
 *   that finds every socket busy waits in a FIFO queue for the next one released (or for a slot
 *   freed by a close); its upstream timeout runs while it waits (504 when it runs out).
 * - A socket returns to the pool only when the exchange on it completed both ways with known
 *   framing (docs/architecture.md "HTTP forwarding"), and nothing followed the response in the
 *   read that completed it; anything else is closed.
 * - Sockets that are never pooled (`dial`): upgrades (a declined upgrade leaves the socket's
 *   framing unknown) and a listener's outbound-PROXY connections (the header names one client, so
 *   the socket belongs to that client's connection alone). These are outside the bound: they
 *   follow client connections one to one, as TCP listeners' upstream connections do.
 * - Timeouts (docs/edge-rules.md "Timeouts"): a connect not done within `connectMs` (the
 *   listener's `timeouts.connectMs`, or a route's `http.connectTimeoutMs`) fails with ETIMEDOUT,
 *   as a refused one does (so the next target takes a request without a body); an exchange whose
 *   owner asked for it (`watch`, a route's or listener's `readTimeoutMs` / `sendTimeoutMs`) fails
 *   with ETIMEDOUT when the upstream moves nothing for readTimeoutMs while we read from it, or
 *   takes none of a pending write for sendTimeoutMs. One timer per socket, re-armed for the time
 *   left when it fires (no timer work per read or write).
 * - Names are resolved through the listener's DnsCache (upstream-dns.ts): addresses cached for a
 *   TTL, each address tried in turn when a connect fails.
 * - Sockets to IP literals are RawSockets (libuv handles, transport/raw-socket.ts) when the pool
 *   is made with `handles`; names go through net.connect (its lookup) behind NetByteSocket.
 */
import { performance } from 'node:perf_hooks';
import net from 'node:net';
import { NetByteSocket, type ByteSocket, type Owned } from '../../../transport/byte-socket';
import { RawSocket } from '../../../transport/raw-socket';
import type { Upstream } from '../../../upstream/upstream-group';
import type { DnsCache } from '../upstream-dns';
import { HttpParser, type ParserSink, type ResponseHead } from './llhttp-parser';

/** What an UpstreamConn reports to the exchange that owns it (RelayConn). */
export interface UpstreamOwner {
  responseHead(head: ResponseHead): void;
  responseBody(chunk: Buffer): void;
  /**
   * The response is complete, and the read that completed it is parsed: `keepAlive` is false when
   * the response says the connection ends, or when bytes followed it in that read. `trailers`: a
   * chunked body's trailer fields, [name, value, ...].
   */
  responseDone(up: UpstreamConn, keepAlive: boolean, trailers: readonly string[]): void;
  /** A 101 ended the HTTP part: `rest` is what the upstream sent after the 101's head. */
  responseUpgraded(up: UpstreamConn, rest: Buffer): void;
  /** The socket closed (or failed) while owned. */
  upstreamClosed(up: UpstreamConn): void;
  upstreamDrained(): void;
  /** Write what this read produced for the client. */
  flush(): void;
}

/** A request waiting for a pooled socket (SocketPool.acquire returned null). */
export interface PoolWaiter {
  poolGranted(up: UpstreamConn): void;
}

/** Connect durations (seconds): ipgate_upstream_connect_seconds. */
export interface ConnectTimer {
  observe(seconds: number): void;
}

interface TargetState {
  readonly free: UpstreamConn[];
  /** Pooled sockets of this target, busy and idle. */
  open: number;
  readonly waiters: PoolWaiter[];
}

/** Pooled upstream sockets per target, LIFO, one request in flight on each, bounded per target. */
export class SocketPool {
  private readonly targets = new Map<Upstream, TargetState>();
  /** Closes idle sockets past idleMs; runs while any socket idles in the pool. */
  private sweepTimer: NodeJS.Timeout | null = null;
  private readonly sweepMs: number;

  constructor(
    private readonly idleMs: number,
    /** `http.upstreamMaxSockets`: sockets per target, busy and idle. */
    private readonly maxSockets: number,
    readonly connectTime: ConnectTimer,
    readonly dns: DnsCache | null,
    /** Connect to IP literals on libuv handles (RawSocket) instead of net.Sockets. */
    readonly handles = false,
    /** A connect not done in this time fails (ETIMEDOUT): the listener's `timeouts.connectMs`. */
    readonly connectMs = 5000,
  ) {
    // An idle socket closes at most an eighth of idleMs late: idleMs sits below the backend's
    // own keep-alive timeout, and the margin between them is what keeps reuse from racing it.
    this.sweepMs = Math.max(25, Math.min(1000, Math.floor(idleMs / 8)));
  }

  private state(target: Upstream): TargetState {
    let s = this.targets.get(target);
    if (s === undefined) this.targets.set(target, (s = { free: [], open: 0, waiters: [] }));
    return s;
  }

  /**
   * A pooled socket of `target` (the warmest), or a new one while the target is under its bound;
   * null when it is at its bound: `waiter.poolGranted` is called with a socket later (or never, if
   * `cancel` is called first). `fresh`: not a reused socket (a retry after a stale one).
   */
  acquire(target: Upstream, waiter: PoolWaiter, fresh = false, connectMs = this.connectMs): UpstreamConn | null {
    const s = this.state(target);
    if (!fresh) {
      const c = s.free.pop();
      if (c !== undefined) return take(c);
    } else if (s.open >= this.maxSockets && s.free.length > 0) {
      // A fresh socket wanted at the bound: make room by closing the coldest idle one.
      s.free.shift()!.socket.destroy();
    }
    if (s.open < this.maxSockets) {
      s.open++;
      return new UpstreamConn(target, this, true, null, false, connectMs);
    }
    s.waiters.push(waiter);
    return null;
  }

  /** Stop waiting (the request was answered or its client left). */
  cancel(target: Upstream, waiter: PoolWaiter): void {
    const w = this.targets.get(target)?.waiters;
    const i = w?.indexOf(waiter) ?? -1;
    if (i >= 0) w!.splice(i, 1);
  }

  /** A socket outside the pool: an upgrade or an outbound-PROXY connection (`header` first). */
  dial(target: Upstream, header: Buffer | null, tunnel: boolean, connectMs = this.connectMs): UpstreamConn {
    return new UpstreamConn(target, this, false, header, tunnel, connectMs);
  }

  /** The exchange on `c` completed both ways: the next waiter gets it, else it idles in the pool. */
  release(c: UpstreamConn): void {
    c.owner = null;
    c.unwatch();
    const s = this.state(c.target);
    const w = s.waiters.shift();
    if (w !== undefined) {
      w.poolGranted(take(c));
      return;
    }
    s.free.push(c);
    if (this.sweepTimer === null) {
      this.sweepTimer = setInterval(sweepPool, this.sweepMs, this);
      this.sweepTimer.unref();
    }
  }

  /**
   * Close the sockets idle for idleMs or more (the coldest are first in each free list); the timer
   * stops once no socket idles.
   */
  sweep(now = performance.now()): void {
    let idle = 0;
    for (const s of this.targets.values()) {
      // closed() finds a socket closed here off the free list already.
      while (s.free.length > 0 && now - s.free[0]!.socket.lastActive >= this.idleMs) s.free.shift()!.socket.destroy();
      idle += s.free.length;
    }
    if (idle === 0 && this.sweepTimer !== null) {
      clearInterval(this.sweepTimer);
      this.sweepTimer = null;
    }
  }

  /** A pooled socket closed: off the free list, and its slot goes to the next waiter. */
  closed(c: UpstreamConn): void {
    const s = this.state(c.target);
    const i = s.free.indexOf(c);
    if (i >= 0) s.free.splice(i, 1);
    s.open--;
    const w = s.waiters.shift();
    if (w !== undefined) {
      s.open++;
      w.poolGranted(new UpstreamConn(c.target, this, true, null, false, this.connectMs));
    }
  }

  close(): void {
    for (const s of this.targets.values()) {
      const free = s.free.splice(0);
      for (const c of free) c.socket.destroy();
    }
    if (this.sweepTimer !== null) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
  }

  /** Sockets per target, for tests and the pool-bound check. */
  openSockets(target: Upstream): number {
    return this.targets.get(target)?.open ?? 0;
  }
}

function sweepPool(pool: SocketPool): void {
  pool.sweep();
}

function connectTimedOut(c: UpstreamConn): void {
  c.connectTimedOut();
}

function exchangeCheck(c: UpstreamConn): void {
  c.exchangeCheck();
}

function take(c: UpstreamConn): UpstreamConn {
  c.reused = true;
  c.received = false;
  return c;
}

/** One upstream socket and its response parser. */
export class UpstreamConn implements ParserSink<ResponseHead> {
  readonly socket: ByteSocket;
  /** Given back with release() when the socket closes or becomes a tunnel (see llhttp-parser.ts). */
  parser: HttpParser<'response'>;
  owner: UpstreamOwner | null = null;
  connected = false;
  /** Taken from the pool, or kept by its client connection (it carried an exchange before this one). */
  reused = false;
  /** Bytes arrived since it was taken for the current exchange. */
  received = false;
  /** The socket's error code, if it failed. */
  error: string | null = null;
  /** A 101 turned it into a byte tunnel: the parser and the HTTP handlers are gone. */
  tunnelled = false;
  /** The keep-alive verdict of the response completed in the read being parsed (onData acts on it). */
  private keepAlive = false;
  /** The trailer fields of that response (a chunked body's), handed on with it. */
  private trailers: readonly string[] = [];
  private readonly dialedAt = performance.now();
  /** The connect timeout, then (watch) the read / send timeout of the exchange on it; null: none. */
  private timer: NodeJS.Timeout | null = null;
  /** The exchange's bounds (watch), 0: none. */
  private readMs = 0;
  private sendMs = 0;

  /*
   * The socket's callbacks and close hook, one set for every upstream connection: the socket's
   * `owner` is its UpstreamConn (transport/byte-socket.ts has why; the backend closes its side
   * every `keepalive_requests`, so these connections churn as the clients' do).
   */
  private static readonly upData = function (this: Owned, d: Buffer): void {
    (this.owner as UpstreamConn).onData(d);
  };
  private static readonly upDrained = function (this: Owned): void {
    (this.owner as UpstreamConn).owner?.upstreamDrained();
  };
  private static readonly upFailed = function (this: Owned, code: string): void {
    const c = this.owner as UpstreamConn;
    c.error ??= code;
  };
  /**
   * Before a 101 (or on any socket but an upgrade's) the upstream's FIN ends the exchange: the
   * socket is closed and the close hook settles it (a body delimited by the close is completed
   * there). A tunnel takes over onEnd to pass the FIN on.
   */
  private static readonly upEnded = function (this: Owned): void {
    const c = this.owner as UpstreamConn;
    if (!c.tunnelled) c.socket.destroy();
  };
  private static readonly upClosed = function (this: Owned): void {
    const c = this.owner as UpstreamConn;
    c.clearTimer();
    if (c.pooled) c.pool.closed(c);
    const o = c.owner;
    c.owner = null;
    // The owner first: a body delimited by the close is completed with parser.finish(), so the
    // parser is freed only after it (test: "an upstream that closes after the response head").
    o?.upstreamClosed(c);
    c.parser = c.parser.release();
  };

  constructor(
    readonly target: Upstream,
    private readonly pool: SocketPool,
    /** Counted in the pool's bound (and told when it closes). */
    readonly pooled: boolean,
    header: Buffer | null,
    /** An upgrade's socket: half-open allowed, so a tunnel can pass a FIN each way. */
    tunnel: boolean,
    connectMs: number,
  ) {
    this.socket = pool.handles && target.family !== 0 ? this.dialHandle() : this.dialNet(tunnel);
    this.timer = setTimeout(connectTimedOut, connectMs, this);
    // The outbound PROXY header goes first on every socket of a dedicated connection (both kinds
    // of socket queue writes made before the connect completes).
    if (header !== null) this.socket.write(header);
    // Paused after each response, so bytes behind a complete response are seen (and the socket
    // dropped) instead of being parsed into a released socket's next message.
    this.parser = HttpParser.take('response', this, { pauseAfterMessage: true });
    const socket = this.socket;
    socket.owner = this;
    socket.onData = UpstreamConn.upData;
    socket.onDrain = UpstreamConn.upDrained;
    socket.onError = UpstreamConn.upFailed;
    socket.onEnd = UpstreamConn.upEnded;
    socket.onClose(UpstreamConn.upClosed);
  }

  private dialHandle(): ByteSocket {
    const t = this.target;
    const s = RawSocket.connect(t.host, t.port, t.family === 6 ? 6 : 4, (err) => {
      if (err !== null) {
        this.error ??= err; // the socket is destroyed: its close hook reports to the owner
        return;
      }
      this.connected = true;
      this.connectDone();
      this.pool.connectTime.observe((performance.now() - this.dialedAt) / 1000);
      s.resume(); // a RawSocket reads only when asked (net.Socket starts by itself)
    });
    return s;
  }

  private dialNet(tunnel: boolean): ByteSocket {
    const t = this.target;
    const dns = this.pool.dns;
    const s = net.connect({
      host: t.host,
      port: t.port,
      noDelay: true,
      allowHalfOpen: tunnel,
      ...(t.family === 0 && dns !== null ? { lookup: dns.lookup } : {}),
    });
    s.once('connect', () => {
      this.connected = true;
      this.connectDone();
      this.pool.connectTime.observe((performance.now() - this.dialedAt) / 1000);
    });
    return new NetByteSocket(s);
  }

  private onData(d: Buffer): void {
    this.received = true;
    const o = this.owner;
    if (o === null) {
      this.socket.destroy(); // bytes outside a response: the connection is not reusable
      return;
    }
    if (this.parser.state !== 'active') {
      this.socket.destroy();
      return;
    }
    const r = this.parser.execute(d);
    if (r.kind === 'upgrade' && this.owner === o) {
      // A 101 (the owner accepted it in responseHead, or it would have dropped the socket).
      o.responseUpgraded(this, d.subarray(r.consumed));
      return;
    }
    if (r.kind === 'error' || r.kind === 'upgrade') {
      this.socket.destroy();
      o.flush();
      return;
    }
    if (r.kind === 'paused') {
      // A response completed in this read. Bytes after it answer no request: the socket's framing
      // is no longer known, so it is not reusable, and the owner hears so before it can hand the
      // socket on. (Told from inside the parse, it released the socket to a request waiting at
      // the pool's bound, which wrote its head to it before these bytes were seen: test
      // "a complete response with bytes after it in the same write" in http-upstream-reuse.)
      const clean = r.consumed === d.length;
      if (clean) this.parser.resume();
      if (this.owner === o) o.responseDone(this, clean && this.keepAlive, this.trailers);
      if (!clean) this.socket.destroy();
    }
    o.flush();
  }

  private connectDone(): void {
    this.clearTimer();
    if (this.readMs > 0 || this.sendMs > 0) this.arm(Math.min(this.readMs || Infinity, this.sendMs || Infinity));
  }

  /** The connect did not complete in time: failed as a refused connect is (the close reports ETIMEDOUT). */
  connectTimedOut(): void {
    this.timer = null;
    if (this.connected) return;
    this.error ??= 'ETIMEDOUT';
    this.socket.destroy();
  }

  /**
   * Bound the exchange now on this socket (its owner calls this when it attaches, 0 for none):
   * `readMs` of silence while we read (nothing read or written; a socket we paused for a slow
   * client is not silent), `sendMs` of a write the upstream does not take. Either fails the socket
   * with ETIMEDOUT. Ends when the socket goes back to the pool or closes.
   */
  watch(readMs: number, sendMs: number): void {
    this.readMs = readMs;
    this.sendMs = sendMs;
    if (!this.connected || (readMs === 0 && sendMs === 0)) return; // the connect timer runs; armed once connected
    this.clearTimer();
    this.arm(Math.min(readMs || Infinity, sendMs || Infinity));
  }

  private arm(ms: number): void {
    this.timer = setTimeout(exchangeCheck, Math.max(1, Math.ceil(ms)), this);
  }

  /** The watch's timer: fail the socket if a bound ran out, else wait for the time left. */
  exchangeCheck(): void {
    this.timer = null;
    if (this.owner === null || this.socket.destroyed || (this.readMs === 0 && this.sendMs === 0)) return;
    const s = this.socket;
    const idle = performance.now() - s.lastActive;
    const pending = s.pendingBytes > 0;
    const bound = pending ? this.sendMs : s.isPaused() ? 0 : this.readMs;
    if (bound > 0 && idle >= bound) {
      this.error ??= 'ETIMEDOUT';
      s.destroy();
      return;
    }
    const next = Math.min(this.readMs || Infinity, this.sendMs || Infinity);
    this.arm(bound > 0 ? bound - idle : next);
  }

  /** The exchange is over (the socket goes back to the pool or idles): no bound until the next watch. */
  unwatch(): void {
    this.readMs = 0;
    this.sendMs = 0;
    if (this.connected) this.clearTimer();
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** After a 101: raw bytes from here on; the owner reads the socket itself. */
  tunnel(): void {
    this.unwatch();
    this.tunnelled = true;
    this.socket.onData = null;
    this.socket.onDrain = null;
    this.parser = this.parser.release();
  }

  onHead(head: ResponseHead): void {
    this.owner?.responseHead(head);
    // The owners use a head within responseHead (the relay writes it out, HTTP/2 converts it):
    // its header list serves the next response.
    this.parser.recycle(head.rawHeaders);
  }

  onBody(chunk: Buffer): void {
    this.owner?.responseBody(chunk);
  }

  /**
   * The response is complete: execute() returns 'paused' at its end, and onData tells the owner
   * once it knows what else the read held. (A 101's completion returns 'upgrade'; at EOF, in
   * parser.finish(), the owner is already gone: upstreamClosed settles a close-delimited body.)
   */
  onMessageComplete(keepAlive: boolean, trailers: string[]): void {
    this.keepAlive = keepAlive;
    this.trailers = trailers;
  }
}
