/**
 * The HTTP engine (docs/http-engines.md): HTTP/1.1 relayed with no node:http on either side. The
 * client connection is parsed with llhttp in WebAssembly (llhttp-parser.ts); each request goes to
 * an upstream socket (socket-pool.ts) whose response is parsed the same way and relayed back.
 *
 * What is decided stays in the policy (RelayHost, implemented by HttpForwarder): identity and
 * allowlist per request, the upstream head (scanRequestHeaders + the identity headers), canned
 * responses, counters and the access log. Here:
 * - requests one at a time (a pipelined one waits, parser paused, until the response before it is
 *   done); bodies relayed as parsed: Content-Length raw, chunked re-chunked from the decoded data,
 *   so what goes upstream is always well framed (the strict parser has rejected CL + TE, duplicate
 *   lengths, obs-fold: nothing can be smuggled past it);
 * - responses: status line and headers re-serialised without hop-by-hop headers (and those the
 *   response's Connection names); `connection: close` when the client connection ends after it
 *   (client asked, maxRequestsPerConnection, revoked, body delimited by the upstream's close);
 *   an HTTP/1.0 client gets a chunked body decoded, then the close; `Expect: 100-continue` is
 *   answered here for admitted requests only (a denied client gets its 403 first), other 1xx are
 *   passed on; a refused request (403, 404, 400) whose body did not come with its head is
 *   answered `connection: close` and its connection ends (refuse);
 * - output gathered per read and written once; backpressure both ways (a full socket pauses the
 *   other side until 'drain');
 * - timeouts: the request head within requestHeaderTimeoutMs (408), an idle keep-alive connection
 *   closed after keepAliveTimeoutMs, the upstream's head within upstreamTimeoutMs (504, also while
 *   waiting for a pooled socket at the pool's bound);
 * - upstream failures before the response head: 502, or the next target (requests without a
 *   body) after a refused connect, or for an idempotent method a connection closed before any
 *   answer; after the head: the client connection is cut;
 * - upgrades (WebSocket and others): sent on a socket of their own, never a pooled one (with the
 *   outbound PROXY header first when the listener sends one); after a 101 the connection becomes a
 *   byte tunnel (tunnel.ts: backpressure, half-close, idle timeout; revocation closes it); a
 *   declined upgrade's answer is relayed and both connections close. CONNECT is answered 400;
 * - outbound PROXY header (listener `outboundProxyProtocol`): the client connection's own upstream
 *   connection, the header first, kept across its requests and never shared (the header names one
 *   client; docs/architecture.md "HTTP forwarding");
 * - a reused socket the backend closed as the request reached it (nothing came back): an
 *   idempotent request without a body is sent once more on a new connection.
 */
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import type { OutgoingHttpHeaders } from 'node:http';
import type { ByteSocket, Owned } from '../../../transport/byte-socket';
import { ioNow } from '../../../transport/io-clock';
import type { Waiter, WaitSweep } from '../../../connection/wait-sweep';
import type { LinkedSet } from '../../../connection/linked-set';
import type { Upstream, UpstreamGroup } from '../../../upstream/upstream-group';
import type { Canned } from '../canned';
import type { EngineSettings } from '../engine-settings';
import type { Exchange, HttpConn } from '../exchange';
import type { EngineEvents } from '../http-events';
import type { RequestDecision, RequestFacts } from '../http-policy';
import { bodyOverLimit } from '../request-decision';
import { requestTarget } from '../request-target';
import {
  CONTENT_LENGTH,
  type ExecuteResult,
  HttpParser,
  isNameOf,
  NameForms,
  type ParserSink,
  type RequestHead,
  type ResponseHead,
  TRANSFER_ENCODING,
} from './llhttp-parser';
import { Tunnel } from './tunnel';
import type { PoolWaiter, SocketPool, UpstreamConn, UpstreamOwner } from './socket-pool';

/** The policy as an engine calls it (http-policy.ts HttpPolicy): one decision per request. */
export interface RequestPolicy {
  /** The decision for a request head, or null: the connection takes no new request and closes. */
  admit(hc: HttpConn, head: RequestFacts, authority: string | null): RequestDecision | null;
}

/** What every connection's engine of one listener shares (built once per listener by HttpForwarder). */
export interface RelayHost {
  readonly settings: EngineSettings;
  readonly policy: RequestPolicy;
  readonly events: EngineEvents;
  /** The listener's sweep of keep-alive and header waits. */
  readonly waits: WaitSweep;
  /** The keep-alive pool of upstream sockets. */
  readonly pool: SocketPool;
}

const NO_TARGETS: readonly Upstream[] = Object.freeze([]);
const OK: ExecuteResult = Object.freeze({ kind: 'ok' });
const EMPTY = Buffer.alloc(0);

/** How long an ended connection reads and drops what the client still sends before it is closed. */
export const LINGER_MS = 5000;

function destroySocket(socket: ByteSocket): void {
  socket.destroy();
}

/** RFC 9110 9.2.2: a request the backend may receive twice without harm. */
export const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

export class RelayConn implements ParserSink<RequestHead>, UpstreamOwner, PoolWaiter, Waiter {
  /** The listener's wait sweep's links (connection/linked-set.ts). */
  linkSet: LinkedSet<Waiter> | null = null;
  linkPrev: Waiter | null = null;
  linkNext: Waiter | null = null;
  /** Given back with release() when the connection ends or becomes a tunnel (see llhttp-parser.ts). */
  private parser: HttpParser<'request'>;
  /** Bytes read after a paused (complete) request, parsed once its response is done. */
  private backlog: Buffer | null = null;
  /** The current request's decision and its record (null for a quick denial, whose decision is shared). */
  private d: RequestDecision | null = null;
  private ex: Exchange | null = null;
  /** The upstream group serving the current request (the route's, or the listener's). */
  private targets: readonly Upstream[] = NO_TARGETS;
  private group: UpstreamGroup | null = null;
  private up: UpstreamConn | null = null;
  private head: RequestHead | null = null;
  /** Response framing towards the client. */
  private resChunked = false;
  private closeAfter = false;
  private requestDone = false;
  private responseStarted = false;
  /** The upstream request head (resent to the next target after a refused connect). */
  private upHead: Buffer = EMPTY;
  private attempt = 0;
  /** Body bytes of the current request relayed so far (checked against its maxBodyBytes). */
  private bodySeen = 0;
  /** This request was sent again after a stale pooled socket (at most once). */
  private staleRetried = false;
  private first = 0;
  private timer: NodeJS.Timeout | null = null;
  /**
   * When the upstream timeout runs out (performance.now()), checked by the listener's sweep; 0:
   * none, or it runs on `timer` (see armUpstreamTimeout).
   */
  private upstreamDeadline = 0;
  private timedOut = false;
  /**
   * Between requests: the keep-alive wait, then (first byte of a request) the header wait, checked
   * by the listener's sweep (connection/wait-sweep.ts); `waitDeadline` is when the current one runs out.
   */
  private waiting: 'idle' | 'head' | null = null;
  waitDeadline = 0;
  /** After endConnection: the lingering close's bound. */
  private lingerTimer: NodeJS.Timeout | null = null;
  private requests = 0;
  /** The current request is an upgrade sent upstream (on a socket of its own). */
  private upgrading = false;
  /** Waiting for a pooled socket of this target (the pool is at its bound). */
  private queued: Upstream | null = null;
  /** The request waits out its rate limit's delay (RequestDecision.delayMs): its body is kept for the upstream. */
  private delayed = false;
  /** The client connection's own upstream socket (outbound PROXY header), kept between requests. */
  private dedicated: UpstreamConn | null = null;
  /** The upstream socket of an open tunnel (closed with the client). */
  private tunnelSocket: ByteSocket | null = null;
  /**
   * The relay has ended its side (after a close-delimited answer, a 400/408, a denial): what the
   * client still sends is read and dropped, never parsed (a parser stopped mid-message must not be
   * fed, and a request completed after the answer must not go upstream), until the client's FIN
   * or LINGER_MS (nginx's lingering close: read, discard, then close).
   */
  private ending = false;
  /*
   * The client socket's callbacks and close hook, one set for every connection: the socket's
   * `owner` is its RelayConn (transport/byte-socket.ts has why: five closures made per connection
   * were ~330 bytes with their context, kept for the connection's life).
   */
  private static readonly clientData = function (this: Owned, d: Buffer): void {
    (this.owner as RelayConn).onData(d);
  };
  private static readonly clientDrained = function (this: Owned): void {
    (this.owner as RelayConn).up?.socket.resume();
  };
  /** Client sockets stay half open after a FIN unless closed: a client that stops sending is gone for HTTP's purposes. */
  private static readonly clientEnded = function (this: Owned): void {
    (this.owner as RelayConn).socket.destroy();
  };
  private static readonly clientClosed = function (this: Owned): void {
    (this.owner as RelayConn).closed();
  };
  /**
   * Connections whose next request is to be parsed in a microtask (finishExchange), in order, the
   * first `nextCount` of `nexts`: one microtask runs all that are queued, instead of a closure per
   * connection to queue each. The array keeps its length and a slot is cleared when its connection
   * runs, so it holds no closed connection. A first version (push, a try/finally, `length = 0`
   * after the loop) read ~2,000 more instructions an allowed request than the closure on Node 20;
   * this one reads the same (bench/README.md "Callbacks that take their socket as `this`").
   */
  private static readonly nexts: (RelayConn | null)[] = [];
  private static nextCount = 0;
  private static queueNext(c: RelayConn): void {
    const q = RelayConn.nexts;
    const n = RelayConn.nextCount++;
    if (n < q.length) q[n] = c;
    else q.push(c);
    if (n === 0) queueMicrotask(RelayConn.runNexts);
  }
  private static runNexts(): void {
    const q = RelayConn.nexts;
    let i = 0;
    try {
      // A next() may queue more (an exchange finished within its parse): the loop reaches them,
      // outside any parse.
      for (; i < RelayConn.nextCount; i++) {
        const c = q[i]!;
        q[i] = null;
        c.next();
      }
      RelayConn.nextCount = 0;
    } catch (err) {
      // next() threw: the rest still run, in a microtask of their own; the error goes on.
      const n = RelayConn.nextCount;
      let k = 0;
      for (let j = i + 1; j < n; j++) {
        q[k++] = q[j]!;
        q[j] = null;
      }
      RelayConn.nextCount = k;
      if (k > 0) queueMicrotask(RelayConn.runNexts);
      throw err;
    }
  }

  /**
   * The current request is a quick denial (quickDeny; its decision has no Exchange): answered,
   * `quickStart` is its Date.now(). `quickNext`: one is done and the connection goes on, so feed()
   * parses the next request of the same read at once (its 403 joins the same write).
   */
  private quick = false;
  private quickStart = 0;
  /** The quick denial's head and the bytes of its 403 as written (ipgate_http_request_size_bytes and _response_size_bytes). */
  private quickHead: RequestHead | null = null;
  private quickBytes = 0;
  private quickNext = false;
  /**
   * A refusal (403, 404, 400) of a request that announced a body, held until its body is read or
   * this read ends (refuse): whether the connection can stay depends on which comes first.
   */
  private held: Canned | null = null;
  /**
   * Output collected during one read, written once: a list of parts taken from the process's spare
   * lists at the first push (outParts / upOutParts) and given back after its write, so that a
   * connection holds none between reads. A list per connection, kept for its life, was ~180 bytes
   * each and died in the old generation with the connection (bench/README.md "What a connection
   * leaves in the old generation"); a new list per flush was ~180 bytes per request
   * (bench/README.md "Allocation per request (issue 31)").
   */
  private out: Parts | null = null;
  private upOut: Parts | null = null;

  constructor(
    private readonly host: RelayHost,
    private readonly hc: HttpConn,
    private readonly socket: ByteSocket,
    /** The outbound PROXY header for this client connection, null when the listener sends none. */
    private readonly proxyHeader: Buffer | null,
  ) {
    this.parser = HttpParser.take('request', this, { maxHeaderBytes: host.settings.maxHeaderBytes });
    socket.owner = this;
    socket.onData = RelayConn.clientData;
    socket.onDrain = RelayConn.clientDrained;
    socket.onClose(RelayConn.clientClosed);
    // Client sockets stay half open after a FIN unless closed: a client that stops sending is
    // gone for HTTP's purposes (nginx: proxy_ignore_client_abort off).
    socket.onEnd = RelayConn.clientEnded;
    // Silent in both directions for timeouts.idleMs: closed (check(), from the listener's sweep).
    // Between requests the keep-alive and header waits decide sooner; this covers the rest (a
    // body that stops half way after a 403, a client whose FIN a paused read never sees, a silent
    // tunnel).
  }

  start(leftover: Buffer): void {
    // The first request's head is due within the header timeout from the connection's start.
    this.host.waits.add(this);
    this.wait('head');
    if (leftover.length > 0) this.onData(leftover);
    if (!this.socket.destroyed) this.socket.resume();
  }

  /** Start the wait between requests: `idle` (keep-alive timeout) or `head` (header timeout). */
  private wait(kind: 'idle' | 'head'): void {
    if (this.ending) return; // the linger timer runs
    this.waiting = kind;
    this.waitDeadline = ioNow() + (kind === 'idle' ? this.host.settings.keepAliveTimeoutMs : this.host.settings.requestHeaderTimeoutMs);
  }

  private stopWaiting(): void {
    this.waiting = null;
    this.waitDeadline = 0;
  }

  /**
   * The listener's sweep (connection/wait-sweep.ts), every interval: the wait between requests, the idle
   * timeout (no byte either way on the client socket for timeouts.idleMs: the same rule as a
   * net.Socket's setTimeout), and the idle bound of the connection's own upstream socket.
   */
  check(now: number): void {
    if (this.upstreamDeadline !== 0 && now >= this.upstreamDeadline) {
      this.upstreamDeadline = 0;
      this.onTimeout();
      return;
    }
    if (this.waitDeadline !== 0 && now >= this.waitDeadline) {
      this.waitExpired();
      return;
    }
    if (now - this.socket.lastActive >= this.host.settings.idleTimeoutMs) {
      this.socket.destroy();
      return;
    }
    const d = this.dedicated;
    if (d !== null && d.owner === null && now - d.socket.lastActive >= this.host.settings.upstreamIdleTimeoutMs) d.socket.destroy();
  }

  /** The current wait ran out. */
  private waitExpired(): void {
    this.waitDeadline = 0;
    if (this.waiting === null) return;
    if (this.waiting === 'idle') {
      this.socket.destroy(); // an idle keep-alive connection closes without a response
      return;
    }
    this.waiting = null;
    this.host.events.clientError(this.hc, 'header_timeout');
    this.endConnection(this.host.settings.canned.requestTimeout.wire);
  }

  /** End our side (after `wire`, if any) and stop parsing: see `ending`. */
  private endConnection(wire: Buffer | null): void {
    if (this.ending) return;
    this.ending = true;
    this.stopWaiting();
    if (this.backlog !== null) this.backlog = null;
    this.flush(); // quick denials' answers gathered before this
    if (wire !== null) this.socket.write(wire);
    this.socket.end();
    this.socket.resume(); // read and drop until the client's FIN
    this.lingerTimer = setTimeout(destroySocket, LINGER_MS, this.socket);
  }

  private onData(d: Buffer): void {
    if (this.ending) return;
    if (this.waiting === 'idle') this.wait('head');
    if (this.ex !== null && this.requestDone) {
      // A pipelined request behind one in flight (or an upgrade's first tunnel bytes before its
      // 101): keep it for later.
      this.backlog = this.backlog === null ? d : Buffer.concat([this.backlog, d]);
      this.socket.pause();
      return;
    }
    this.feed(d);
  }

  private feed(d: Buffer): void {
    const state = this.parser.state;
    if (state !== 'active') {
      // Not expected (each path that stops the parser also ends or pauses the connection), but a
      // peer's bytes must never reach a stopped parser: keep them for next() or give up cleanly.
      if (state === 'paused' || state === 'upgraded') {
        this.backlog = this.backlog === null ? d : Buffer.concat([this.backlog, d]);
        this.socket.pause();
      } else {
        this.socket.destroy();
      }
      return;
    }
    this.quickNext = false; // set only by a quick denial completed inside this execute
    let r = this.parser.execute(d);
    while (r.kind === 'paused' && this.quickNext) {
      // A quick denial done: pipelined requests behind it are parsed now, in order, and their
      // answers gathered into one write (the strict parser still frames each one).
      this.quickNext = false;
      this.parser.resume();
      if (r.consumed >= d.length) {
        r = OK;
        break;
      }
      d = d.subarray(r.consumed);
      r = this.parser.execute(d);
    }
    if (this.held !== null) this.refuseUnread();
    this.flushUp();
    this.flush(); // a 100 Continue
    if (r.kind === 'ok' || this.ending) return;
    if (r.kind === 'paused' || (r.kind === 'upgrade' && this.upgrading)) {
      // A complete request; what follows waits for its response (an upgrade's: the tunnel's
      // first bytes, written upstream after the 101).
      if (r.consumed < d.length) {
        this.backlog = d.subarray(r.consumed);
        this.socket.pause();
      }
      return;
    }
    if (r.kind === 'upgrade') {
      // CONNECT (ipgate is no forward proxy), or an upgrade that did not go upstream.
      this.host.events.clientError(this.hc, 'bad_request');
      this.fail(this.host.settings.canned.badRequest);
      return;
    }
    this.host.events.clientError(this.hc, r.status === 431 ? 'header_too_large' : 'bad_request');
    this.fail(r.status === 431 ? this.host.settings.canned.headersTooLarge : this.host.settings.canned.badRequest);
  }

  // --- request side (parser sink) ---

  onHead(head: RequestHead): void {
    const upgrade = head.upgrade && head.method !== 'CONNECT';
    if (upgrade && (head.chunked || (head.contentLength ?? 0) > 0 || head.versionMinor !== 1)) {
      // An upgrade's body would go upstream only after a 101, so a backend declining it would
      // read that body as the next request on the connection (issue "Hardening" 3): refused, as
      // upgrades over HTTP/1.0 are (RFC 9110 7.8: Upgrade is HTTP/1.1).
      this.host.events.clientError(this.hc, 'bad_request');
      this.fail(this.host.settings.canned.badRequest);
      return;
    }
    const target = requestTarget(head.url);
    if (target === null) {
      this.host.events.clientError(this.hc, 'bad_request');
      this.fail(this.host.settings.canned.badRequest);
      return;
    }
    const d = this.host.policy.admit(this.hc, head, target.authority);
    if (d === null) {
      this.socket.destroy();
      return;
    }
    if (d.verdict === 'reject') {
      // A request no backend may see (a bad Host: request-host.ts): 400, counted as a client
      // error, and the connection ends, as for a malformed request.
      const r = d.refusal!;
      this.host.events.clientError(this.hc, r.reason, r.detail);
      this.fail(d.answer!);
      return;
    }
    const ex = d.ex;
    if (ex === null) {
      this.quickDeny(head, d);
      return;
    }
    ex.bytesAtStart = this.socket.bytesWritten;
    this.stopWaiting();
    this.d = d;
    this.ex = ex;
    this.head = head;
    this.requestDone = false;
    this.responseStarted = false;
    this.upgrading = false;
    this.requests++;
    const max = this.host.settings.maxRequestsPerConnection;
    // An upgrade request answered by anyone but a 101 ends the connection: the client may already
    // be sending the new protocol's bytes, which are no HTTP request.
    this.closeAfter = !head.keepAlive || (max > 0 && this.requests >= max) || this.hc.revoked || this.hc.closing || upgrade;
    this.hc.open.push(ex);
    if (d.verdict === 'answer') {
      // A refusal (403, counted by the policy) or a route miss (404 / 400 / 421): answered here,
      // nothing goes upstream.
      if (d.closeAfterAnswer) this.closeAfter = true;
      this.refuse(d.answer!, head);
      return;
    }
    const group = d.group!;
    if (group.http2 !== null) {
      // An upstream group that speaks HTTP/2 only (gRPC: upstreamProtocol h2c or h2): an HTTP/1.1
      // request does not reach it (docs/http-engines.md "The HTTP/2 engine").
      ex.reason = 'h2_required';
      this.cannedAnswer(this.host.settings.canned.versionNotSupported);
      if (!this.requestDone && !this.closeAfter) this.wait('idle');
      return;
    }
    this.targets = group.targets;
    this.group = group;
    this.bodySeen = 0;
    const path = d.path ?? target.path;
    // The upstream connection is the pool's: keep-alive whatever the client asked for its own.
    if (upgrade) this.upgrading = true;
    this.upHead = upstreamHead(head.method, path, upgrade ? (d.upgrade ?? '') : null, d.headers!);
    // Expect: 100-continue is answered here, for an admitted request only (scanRequestHeaders
    // drops the header upstream): the client sends its body now.
    if (head.versionMinor >= 1 && expectsContinue(head.rawHeaders)) this.outParts().push('HTTP/1.1 100 Continue\r\n\r\n');
    const own0 = this.dedicated;
    // A client connection's own upstream stays on one target while it lives.
    // (A route's group may not hold it: then the group's round robin picks.)
    const own = own0 !== null && !upgrade && !own0.socket.destroyed ? this.targets.indexOf(own0.target) : -1;
    this.first = own >= 0 ? own : group.start();
    this.attempt = 0;
    this.staleRetried = false;
    this.timedOut = false;
    if (d.delayMs > 0) {
      // nginx limit_req's delay within the burst: the request goes upstream once the rate allows
      // it; meanwhile the client's socket is paused (its body waits in the kernel, not here).
      this.delayed = true;
      this.socket.pause();
      this.timer = setTimeout(afterDelay, d.delayMs, this);
      return;
    }
    this.armUpstreamTimeout(d.upstreamTimeoutMs);
    this.dispatch();
  }

  /**
   * The wait for the response head. A timeout of at least four sweep intervals is a deadline the
   * listener's sweep checks (check()): acted on at most one interval late, a quarter of the
   * timeout at worst and 1 s of the default 60 s, as for the keep-alive and header waits. A
   * setTimeout and clearTimeout per request (a Timeout object, the timer list's keyed lookups)
   * were ~3% of an allowed request's instructions (bench/README.md "Repeated head pieces").
   * A shorter timeout keeps its timer, to the millisecond.
   */
  private armUpstreamTimeout(ms: number): void {
    if (ms >= 4 * this.host.waits.intervalMs) this.upstreamDeadline = performance.now() + ms;
    else this.timer = setTimeout(upstreamTimedOut, ms, this);
  }

  /** @internal The rate limit's delay is over: the request goes upstream. */
  delayOver(): void {
    this.timer = null;
    this.delayed = false;
    if (this.socket.destroyed || this.ex === null) return;
    this.armUpstreamTimeout(this.d!.upstreamTimeoutMs);
    this.dispatch();
    this.flushUp(); // the head (and any body read meanwhile), as poolGranted sends them
    if (!this.socket.destroyed && this.backlog === null) this.socket.resume();
  }

  private dispatch(fresh = false): void {
    const ex = this.ex!;
    const target = this.targets[(this.first + this.attempt) % this.targets.length]!;
    ex.upstream = target;
    ex.sentAt = performance.now();
    let up: UpstreamConn | null;
    const connectMs = this.d!.timeouts?.connectMs ?? this.host.pool.connectMs;
    if (this.upgrading) up = this.host.pool.dial(target, this.proxyHeader, true, connectMs);
    else if (this.proxyHeader !== null) up = this.ownUpstream(target, fresh, connectMs);
    else up = this.host.pool.acquire(target, this, fresh, connectMs);
    if (up === null) {
      // At the pool's bound: wait (the upstream timeout runs); the body waits with the client.
      this.queued = target;
      this.socket.pause();
      return;
    }
    this.attach(up);
  }

  private attach(up: UpstreamConn): void {
    up.owner = this;
    up.parser.setRequestMethod(this.head!.method);
    this.up = up;
    const to = this.d!.timeouts;
    // The route's read and send bounds (docs/edge-rules.md "Timeouts"); a tunnel drops them at its
    // 101. The read bound starts once the whole request is sent (onMessageComplete): while a slow
    // client's body streams, the backend is not expected to say anything.
    if (to !== null && (to.readMs > 0 || to.sendMs > 0)) up.watch(this.requestDone ? to.readMs : 0, to.sendMs);
    this.upOutParts().unshift(this.upHead);
  }

  /** PoolWaiter: a pooled socket for the request that waited. */
  poolGranted(up: UpstreamConn): void {
    this.queued = null;
    if (this.ex === null || this.up !== null || this.socket.destroyed) {
      this.host.pool.release(up); // not expected: a waiter is cancelled when it stops waiting
      return;
    }
    this.attach(up);
    this.flushUp();
    if (!this.socket.destroyed && this.backlog === null) this.socket.resume();
  }

  /** The client connection's own upstream socket (outbound PROXY): reused while alive. */
  private ownUpstream(target: Upstream, fresh: boolean, connectMs: number): UpstreamConn {
    const d = this.dedicated;
    if (d !== null && !fresh && d.target === target && d.owner === null && !d.socket.destroyed && d.parser.state === 'active') {
      d.reused = true;
      d.received = false;
      return d;
    }
    d?.socket.destroy();
    const c = this.host.pool.dial(target, this.proxyHeader, false, connectMs);
    this.dedicated = c;
    return c;
  }

  /** @internal The wait for the response head ran out (its timer, or the sweep's deadline). */
  onTimeout(): void {
    this.timer = null;
    if (this.responseStarted) return;
    this.timedOut = true;
    if (this.queued !== null) {
      // Still waiting for a pooled socket: answered now.
      this.host.pool.cancel(this.queued, this);
      this.queued = null;
      this.host.events.upstreamFailed(this.ex!, 'ETIMEDOUT', true, false);
      this.closeAfter = true;
      this.cannedAnswer(this.host.settings.canned.gatewayTimeout);
      return;
    }
    this.up?.socket.destroy(); // upstreamClosed answers 504
  }

  /**
   * A request from a client refused for the whole connection (a direct peer; no debug lines
   * wanted): the prebuilt 403 without an Exchange, upstream headers or request id, counted and
   * summarised as a denial (the reason and deny entry carried from the connection's lookup). Its
   * body, if any, is read past by the parser as for any denial; the framing is the strict
   * parser's, so nothing differs in what a request is.
   */
  private quickDeny(head: RequestHead, d: RequestDecision): void {
    this.stopWaiting();
    this.requests++;
    this.requestDone = false;
    this.quick = true;
    this.quickStart = Date.now();
    this.quickHead = head;
    this.d = d;
    const max = this.host.settings.maxRequestsPerConnection;
    this.closeAfter = !head.keepAlive || (max > 0 && this.requests >= max) || d.closeAfterAnswer;
    const canned = d.answer!;
    if (!this.closeAfter && announcesBody(head)) {
      this.held = canned; // as refuse() holds it
      return;
    }
    const wire = this.closeAfter ? canned.wire : canned.keepAliveWire;
    this.quickBytes = wire.length;
    // Written by feed() once the read is parsed (with the denials pipelined behind this one).
    this.outParts().push(wire);
    if (this.closeAfter) this.quickDone();
  }

  /**
   * Answer a request ipgate refuses (a denial, a route miss) with `canned`; nothing goes
   * upstream. A request that announced a body (Content-Length > 0, chunked) keeps its connection
   * only when the whole body came in the read that brought its head: its answer is held
   * (`held`) until onMessageComplete (keep-alive) or the end of the read (refuseUnread: close).
   * A body still to come may never come: a client waiting for 100 Continue (which a refused
   * request never gets) may skip it after a final status (RFC 9110 10.1.1), and on a kept
   * connection its next request would be read as that body. So the answer then says
   * `Connection: close` and the connection ends, read and dropped (endConnection), as HAProxy
   * does; nginx keeps it and answers that next request 400. A request without a body, or whose
   * body came with it, is answered and the connection stays, as before.
   */
  private refuse(canned: Canned, head: RequestHead): void {
    if (!this.closeAfter && announcesBody(head)) {
      this.held = canned;
      return;
    }
    this.cannedAnswer(canned);
  }

  /** The end of a read with a refusal held: the body did not all come with its head. */
  private refuseUnread(): void {
    const canned = this.held!;
    this.held = null;
    this.closeAfter = true;
    if (this.quick) {
      this.outParts().push(canned.wire);
      this.quickBytes = canned.wire.length;
      this.quickDone();
    } else {
      this.cannedAnswer(canned);
    }
  }

  private quickDone(): void {
    this.quick = false;
    const d = this.d!;
    this.d = null;
    const head = this.quickHead!;
    this.host.events.finished(this.hc, d, this.quickStart, head, this.quickBytes);
    this.quickHead = null;
    // Decided, answered and recorded: no one holds the head's header list (the policy and the
    // recorder copy what they keep), so it serves the next request's.
    this.parser.recycle(head.rawHeaders);
    if (this.closeAfter || this.hc.revoked || this.hc.closing) {
      this.endConnection(null);
      return;
    }
    this.quickNext = true;
    this.wait('idle');
  }

  onBody(chunk: Buffer): void {
    if (this.up === null && this.queued === null && !this.delayed) return; // denied: the body is read and dropped
    // The body limit as the body streams (a Content-Length over it was answered by the policy).
    if (bodyOverLimit(this.d!, (this.bodySeen += chunk.length))) {
      this.bodyTooLarge();
      return;
    }
    if (this.ex !== null) this.ex.requestBytes += chunk.length; // ipgate_http_request_size_bytes: the body relayed
    if (this.head!.chunked) this.upOutParts().push(`${chunk.length.toString(16)}\r\n`, Buffer.from(chunk), '\r\n');
    else this.upOutParts().push(Buffer.from(chunk)); // a view of the read: copied, the read buffer is reused
  }

  onMessageComplete(): void {
    this.requestDone = true;
    const held = this.held;
    if (held !== null) {
      // A refused request's whole body came in the read that brought its head: the connection stays.
      this.held = null;
      if (!this.quick) {
        this.cannedAnswer(held);
        return;
      }
      this.outParts().push(held.keepAliveWire);
      this.quickBytes = held.keepAliveWire.length;
    }
    if (this.quick) {
      this.quickDone();
      return;
    }
    if ((this.up !== null || this.queued !== null || this.delayed) && this.head!.chunked) this.upOutParts().push('0\r\n\r\n');
    const to = this.d?.timeouts ?? null;
    if (to !== null && to.readMs > 0 && this.up !== null) this.up.watch(to.readMs, to.sendMs);
    if (this.ex !== null && this.ex.status !== 0 && this.up === null && this.queued === null) this.finishExchange();
  }

  /**
   * A streamed body passed the request's maxBodyBytes (docs/edge-rules.md "Body size"): the
   * upstream exchange is abandoned (its socket closed, so the backend never takes the partial body
   * for a complete request), the client gets 413 and the connection ends; after the response head
   * (a backend that answered before reading the body) the connection is cut.
   */
  private bodyTooLarge(): void {
    const ex = this.ex!;
    ex.reason = 'body_too_large';
    this.host.events.clientError(this.hc, 'body_too_large');
    this.dropUpOut();
    this.abandonUpstream();
    if (this.responseStarted) {
      this.socket.destroy();
      return;
    }
    this.clearTimer();
    this.closeAfter = true;
    this.cannedAnswer(this.host.settings.canned.payloadTooLarge);
  }

  private flushUp(): void {
    const up = this.up;
    if (up === null) {
      if (this.queued === null && !this.delayed) this.dropUpOut(); // kept while the request waits for a socket or its delay
      return;
    }
    const parts = this.upOut;
    if (parts === null) return;
    // Taken off first: a write that comes back here (a callback of the socket) starts a list of its own.
    this.upOut = null;
    const ok = writeParts(up.socket, parts);
    giveParts(parts);
    if (!ok) this.socket.pause();
  }

  upstreamDrained(): void {
    this.socket.resume();
  }

  // --- response side (UpstreamOwner) ---

  responseHead(head: ResponseHead): void {
    const ex = this.ex!;
    if (head.statusCode === 101) {
      if (!this.upgrading) {
        // A 101 to a request that asked for no upgrade: not HTTP any more, and not ours to relay.
        this.up?.socket.destroy(); // upstreamClosed answers 502
        return;
      }
      // Relayed as is (Connection and Upgrade included: they are the handshake); the tunnel
      // starts in responseUpgraded, when the parser hands over the bytes after this head.
      ex.status = 101;
      this.host.events.upstreamAnswered(ex, 101);
      this.responseStarted = true;
      this.clearTimer();
      this.outParts().push(statusLine(head), headerLines(head.rawHeaders), '\r\n');
      return;
    }
    if (head.statusCode < 200) {
      // 1xx: passed on to HTTP/1.1 clients as is.
      if (this.head!.versionMinor >= 1) this.outParts().push(statusLine(head), headerLines(head.rawHeaders), '\r\n');
      return;
    }
    ex.status = head.statusCode;
    this.host.events.upstreamAnswered(ex, head.statusCode);
    this.responseStarted = true;
    this.clearTimer();
    const http10 = this.head!.versionMinor === 0;
    const bodyless = this.head!.method === 'HEAD' || head.statusCode === 204 || head.statusCode === 304;
    this.resChunked = head.chunked && !http10 && !bodyless;
    if ((head.chunked && http10) || head.untilEof) this.closeAfter = true;
    if (this.hc.revoked || this.hc.closing) this.closeAfter = true; // a list change or a drain since the request: last one
    this.outParts().push(responseHeadBytes(head, http10, this.closeAfter ? CONN_CLOSE : http10 ? CONN_KEEP_ALIVE : ''));
  }

  responseBody(chunk: Buffer): void {
    // Not copied: the upstream socket's reads are fresh Buffers (never a reused read buffer), and
    // the socket pool flushes this output at the end of the read that brought it (pausing the
    // upstream while the client's socket is full), where a write of several parts copies them
    // into one Buffer anyway.
    if (this.resChunked) this.outParts().push(`${chunk.length.toString(16)}\r\n`, chunk, '\r\n');
    else this.outParts().push(chunk);
  }

  responseDone(up: UpstreamConn, keepAlive: boolean): void {
    if (this.upgrading && this.ex !== null && this.ex.status === 101) return; // the tunnel follows
    // A message completed without a final head we took: a 101 refused in responseHead (the
    // request asked for no upgrade). Its socket is being destroyed; the close answers 502.
    if (!this.responseStarted) return;
    if (this.resChunked) this.outParts().push('0\r\n\r\n');
    this.flush();
    this.up = null;
    const reusable = keepAlive && this.requestDone && !this.upgrading;
    // flush() pauses the upstream when the client's socket is full, and the client's onDrain
    // resumes `this.up`, which is no longer this one: a socket kept for the next exchange reads
    // again now (idle, it must see its peer's FIN; reused paused, its next response would never
    // be read: test/integration/http-pool-backpressure.test.ts).
    if (reusable) up.socket.resume();
    if (up === this.dedicated && reusable) {
      up.owner = null; // idle from here: check() closes it after upstreamIdleTimeoutMs
    } else if (reusable && up.pooled) {
      this.host.pool.release(up);
    } else {
      up.socket.destroy();
    }
    if (!this.requestDone) this.closeAfter = true; // answered before the whole request: stop here
    this.finishExchange();
  }

  /** A 101: the client connection and `up` become one byte tunnel (tunnel.ts). */
  responseUpgraded(up: UpstreamConn, rest: Buffer): void {
    const ex = this.ex;
    if (ex === null || up !== this.up || !this.upgrading || ex.status !== 101) {
      up.socket.destroy();
      return;
    }
    if (rest.length > 0) this.outParts().push(Buffer.from(rest));
    this.flush();
    up.tunnel();
    this.up = null;
    const early = this.backlog;
    this.backlog = null;
    // The relay lets go of the client socket, except its close (closed() records the exchange and
    // closes the upstream) and its idle timeout.
    this.stopWaiting();
    this.parser = this.parser.release();
    this.socket.onData = null;
    this.socket.onDrain = null;
    this.socket.onEnd = null;
    this.tunnelSocket = up.socket;
    this.host.events.upgraded(ex, up.socket);
    new Tunnel(this.socket, up.socket, early).start();
  }

  /** The client's output of this read (a spare list taken at its first part). */
  private outParts(): Parts {
    return (this.out ??= takeParts());
  }

  /** The upstream's output of this read (a spare list taken at its first part). */
  private upOutParts(): Parts {
    return (this.upOut ??= takeParts());
  }

  /** Drop what was collected for the upstream (abandoned, or no upstream to send it to). */
  private dropUpOut(): void {
    const parts = this.upOut;
    if (parts === null) return;
    this.upOut = null;
    giveParts(parts);
  }

  /** Write what this read produced for the client, in one write. */
  flush(): void {
    const parts = this.out;
    if (parts === null) return;
    this.out = null;
    const ok = writeParts(this.socket, parts);
    giveParts(parts);
    if (!ok) this.up?.socket.pause();
  }

  upstreamClosed(up: UpstreamConn): void {
    if (this.up !== up) return;
    this.up = null;
    // Before the response head: the next target after a refused connect (requests without a body),
    // else 502 / 504.
    if (!this.responseStarted && this.ex !== null) {
      const ex = this.ex;
      if (!this.timedOut && up.reused && !up.received && !this.staleRetried && ex.bodyless && IDEMPOTENT.has(this.head!.method)) {
        // A reused socket the backend closed as the request reached it (its keep-alive timeout
        // raced our reuse): nothing came back, so the backend did not answer it. Sent once more,
        // on a new connection, as Go's and undici's clients do for idempotent requests without a body.
        this.staleRetried = true;
        this.dispatch(true);
        this.flushUp();
        return;
      }
      const code = this.timedOut ? 'ETIMEDOUT' : (up.error ?? 'ECONNRESET');
      // To the next target that is up (a group with health rules skips those out:
      // upstream-group.ts), for a request without a body: a connect that failed or timed out
      // (nothing was sent), or an idempotent request whose connection closed or reset before any
      // byte of an answer (nginx `proxy_next_upstream error`, which since 1.9.13 leaves out
      // non-idempotent methods: RFC 9110 9.2.2 lets a client repeat those; a backend dying with
      // the request in its accept queue or in flight). Not after a response-head timeout: the
      // backend may still be working on it.
      const again =
        !this.timedOut &&
        ex.bodyless &&
        (up.connected
          ? !up.received && code !== 'ETIMEDOUT' && IDEMPOTENT.has(this.head!.method)
          : isConnectFailure(code) || code === 'ETIMEDOUT');
      const nextOffset = again ? this.group!.nextOffset(this.first, this.attempt + 1) : -1;
      const retry = nextOffset > 0;
      this.host.events.upstreamFailed(ex, code, this.timedOut, retry);
      if (retry) {
        this.attempt = nextOffset;
        this.dispatch();
        this.flushUp();
        return;
      }
      this.clearTimer();
      this.closeAfter = true;
      // A timeout (the response head's, or a connect / read / send bound's ETIMEDOUT) is a 504, as nginx answers it.
      this.cannedAnswer(
        this.timedOut || code === 'ETIMEDOUT' ? this.host.settings.canned.gatewayTimeout : this.host.settings.canned.badGateway,
      );
      return;
    }
    // Mid-response, or a body that ran to the connection's end.
    const r = up.parser.finish();
    if (r.kind === 'ok' && this.ex !== null && this.ex.status !== 0 && this.ex.status !== 101) {
      this.closeAfter = true;
      this.flush();
      this.finishExchange();
      return;
    }
    this.socket.destroy();
  }

  // --- the end of an exchange ---

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.upstreamDeadline = 0;
    this.delayed = false;
  }

  private cannedAnswer(canned: Canned): void {
    const ex = this.ex!;
    ex.status = canned.status;
    // Prebuilt Buffers (canned.ts): a denial costs one write of constant bytes.
    this.outParts().push(this.closeAfter ? canned.wire : canned.keepAliveWire);
    this.flush();
    if (this.requestDone || this.closeAfter) this.finishExchange();
  }

  private finishExchange(): void {
    const ex = this.ex;
    if (ex === null) return;
    this.ex = null;
    this.forget(ex);
    this.record(ex);
    // As in quickDone: the upstream head was built from it (upHead), the exchange keeps strings.
    if (this.head !== null) this.parser.recycle(this.head.rawHeaders);
    // Not kept until the next request: a slice of Buffer's shared 8 KiB pool, it would keep its
    // whole slab alive while the connection idles (520-630 bytes a kept connection, bench/README.md
    // "What a connection leaves in the old generation"). Only a resend within the exchange reads it.
    this.upHead = EMPTY;
    if (this.closeAfter || this.hc.revoked || this.hc.closing) {
      this.endConnection(null);
      return;
    }
    // Next request: resume parsing what was read meanwhile. Not from here: this runs inside a
    // parser callback (the response's or the request's), and parsers share one execute at a time.
    RelayConn.queueNext(this);
  }

  private next(): void {
    if (this.socket.destroyed) return;
    this.wait('idle');
    this.parser.resume();
    const rest = this.backlog;
    this.backlog = null;
    if (rest !== null) this.feed(rest);
    if (!this.socket.destroyed && this.backlog === null && !(this.ex !== null && this.requestDone)) this.socket.resume();
  }

  /**
   * The exchange's upstream is given up: a queued ask cancelled, an attached socket closed (its
   * framing is unknown mid-exchange, so it is never pooled).
   */
  private abandonUpstream(): void {
    if (this.queued !== null) this.host.pool.cancel(this.queued, this);
    this.queued = null;
    const up = this.up;
    this.up = null;
    if (up !== null) {
      up.owner = null;
      up.socket.destroy();
    }
  }

  private fail(canned: Canned): void {
    if (this.ex === null || !this.responseStarted) {
      this.endConnection(canned.wire);
    } else {
      this.socket.destroy();
    }
    this.up?.socket.destroy();
  }

  private closed(): void {
    this.clearTimer();
    this.stopWaiting();
    this.host.waits.delete(this);
    if (this.lingerTimer !== null) clearTimeout(this.lingerTimer);
    this.lingerTimer = null;
    this.parser = this.parser.release();
    this.abandonUpstream();
    this.dedicated?.socket.destroy();
    this.dedicated = null;
    this.tunnelSocket?.destroy();
    if (this.quick) {
      this.quick = false; // a denied request whose body never came: recorded, as any exchange
      const d = this.d!;
      this.d = null;
      this.host.events.finished(this.hc, d, this.quickStart, this.quickHead, this.quickBytes);
      this.quickHead = null;
    }
    const ex = this.ex;
    if (ex !== null) {
      if (ex.status !== 101) ex.reason ??= 'client_abort';
      this.forget(ex);
      this.ex = null;
      this.record(ex);
    }
  }

  /** The current request is over: its bytes counted, reported once. */
  private record(ex: Exchange): void {
    const d = this.d!;
    this.d = null;
    ex.bytesOut = this.socket.bytesWritten - ex.bytesAtStart;
    this.host.events.finished(this.hc, d, ex.startedAt, null, 0);
  }

  /** Off the connection's open list (revocation looks there). */
  private forget(ex: Exchange): void {
    const open = this.hc.open;
    // Usually the only one (HTTP/1.1 has one request open at a time): pop() costs no splice.
    if (open.length > 0 && open[open.length - 1] === ex) {
      open.pop();
      return;
    }
    const i = open.indexOf(ex);
    if (i >= 0) open.splice(i, 1);
  }
}

/**
 * The upstream request head, written straight into one Buffer: `METHOD path HTTP/1.1`, the
 * Connection line (keep-alive; for an upgrade, `upgrade` and the Upgrade line), each header, the
 * blank line. Built as a string it was a cons string per piece (a template and a `+=` per header)
 * and a flat copy when written: ~1 KB per request on the heap (bench/README.md "Allocation per
 * request (issue 31)"); here the bytes go to the Buffer pool and the heap holds one wrapper.
 * Latin1, as the parser gave the bytes (see writeParts).
 */
export function upstreamHead(method: string, path: string, upgrade: string | null, headers: OutgoingHttpHeaders): Buffer {
  let n = method.length + 1 + path.length + HTTP11_CRLF.length + 2;
  n += upgrade === null ? CONN_KEEP_ALIVE.length : CONN_UPGRADE.length + upgrade.length + 2;
  for (const name in headers) {
    const v = headers[name];
    if (v !== undefined) n += name.length + 4 + headerText(v).length;
  }
  const b = Buffer.allocUnsafe(n);
  let at = putLatin1(b, method, 0);
  b[at++] = 0x20;
  at += putLatin1(b, path, at);
  if (upgrade === null) at += putBytes(b, HTTP11_KEEP_ALIVE_BYTES, at);
  else {
    at += putBytes(b, HTTP11_UPGRADE_BYTES, at);
    at += putLatin1(b, upgrade, at);
    b[at++] = 0x0d;
    b[at++] = 0x0a;
  }
  for (const name in headers) {
    const v = headers[name];
    if (v === undefined) continue;
    const known = NAME_BYTES.get(name);
    if (known !== undefined) at += putBytes(b, known, at);
    else {
      at += putLatin1(b, name, at);
      b[at++] = 0x3a;
      b[at++] = 0x20;
    }
    at += putLatin1(b, headerText(v), at);
    b[at++] = 0x0d;
    b[at++] = 0x0a;
  }
  b[at++] = 0x0d;
  b[at++] = 0x0a;
  return at === n ? b : b.subarray(0, at);
}

/**
 * Writes `s` into `b` at `at` as latin1 (each char's low byte, as Buffer#write's latin1 does) and
 * returns the bytes written. A head is mostly short pieces (names, small values, the status): for
 * those a loop here is cheaper than Buffer#write, whose encoding lookup and native call cost more
 * than the copy (bench/README.md "Short head pieces without Buffer#write"). Callers size `b` first.
 */
function putLatin1(b: Buffer, s: string, at: number): number {
  const n = s.length;
  if (n > SHORT_PIECE) return b.write(s, at, 'latin1');
  for (let i = 0; i < n; i++) b[at + i] = s.charCodeAt(i);
  return n;
}
const SHORT_PIECE = 32;

const HTTP11_CRLF = ' HTTP/1.1\r\n';
const CONN_KEEP_ALIVE = 'connection: keep-alive\r\n';
const CONN_UPGRADE = 'connection: upgrade\r\nupgrade: ';

/**
 * The fixed parts of an upstream head as bytes, copied rather than converted a char at a time:
 * optimised code checks a string's representation again for every char (~27 instructions a char
 * on Node 24), and ~90 of the ~200 chars of a head ipgate forwards are these (bench/README.md
 * "Header names as bytes"). The names: those ipgate writes, and those most clients send; a name
 * not here is converted as before. A fixed table: nothing a client sends adds to it.
 */
const HTTP11_KEEP_ALIVE_BYTES = Buffer.from(HTTP11_CRLF + CONN_KEEP_ALIVE, 'latin1');
const HTTP11_UPGRADE_BYTES = Buffer.from(HTTP11_CRLF + CONN_UPGRADE, 'latin1');
export const KNOWN_HEAD_NAMES: readonly string[] = [
  'host',
  'x-request-id',
  'x-real-ip',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'forwarded',
  'user-agent',
  'accept',
  'accept-encoding',
  'accept-language',
  'authorization',
  'cache-control',
  'content-length',
  'content-type',
  'cookie',
  'if-modified-since',
  'if-none-match',
  'origin',
  'pragma',
  'referer',
  'sec-fetch-dest',
  'sec-fetch-mode',
  'sec-fetch-site',
  'traceparent',
];
const NAME_BYTES = new Map<string, Uint8Array>(KNOWN_HEAD_NAMES.map((name) => [name, Buffer.from(`${name}: `, 'latin1')]));

/** Copies `src` into `b` at `at` (sized by the caller) and returns its length. */
function putBytes(b: Buffer, src: Uint8Array, at: number): number {
  b.set(src, at);
  return src.length;
}

/** A header's value as sent (a list joined with ", "); the policy sets strings, a route's extra headers may differ. */
function headerText(v: number | string | readonly string[]): string {
  return typeof v === 'string' ? v : Array.isArray(v) ? v.join(', ') : String(v);
}

/**
 * The response head as relayed, written straight into one Buffer (as a string it was a cons string
 * per piece and a flat copy at the write: bench/README.md "Allocation per request (issue 31)"):
 * - the status line, as HTTP/1.1;
 * - the header lines, as received: hop-by-hop headers dropped, and those the Connection header
 *   names (RFC 9110 7.6.1), except the framing; duplicates and case kept; an HTTP/1.0 client gets
 *   no Transfer-Encoding (its body is sent decoded, then the close);
 * - `conn`: a Connection line or '', then the blank line.
 */
export function responseHeadBytes(head: ResponseHead, http10: boolean, conn: string): Buffer {
  const raw = head.rawHeaders;
  const named = connectionTokens(raw);
  const status = String(head.statusCode); // small integers: V8's number-string cache, no new string
  let n = HTTP11_SP.length + status.length + 1 + head.reason.length + 2 + conn.length + 2;
  // Each header is classified once: the sizing pass notes the answer for the writing pass.
  if (relayed.length < raw.length >> 1) relayed = new Uint8Array(raw.length);
  const keep = relayed;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = relayedResponseHeader(raw[i]!, http10, named);
    keep[i >> 1] = k ? 1 : 0;
    if (k) n += raw[i]!.length + raw[i + 1]!.length + 4;
  }
  const b = Buffer.allocUnsafe(n);
  let at = putLatin1(b, HTTP11_SP, 0);
  at += putLatin1(b, status, at);
  b[at++] = 0x20;
  at += putLatin1(b, head.reason, at);
  b[at++] = 0x0d;
  b[at++] = 0x0a;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (keep[i >> 1] === 0) continue;
    const name = raw[i]!;
    at += putLatin1(b, name, at);
    b[at++] = 0x3a;
    b[at++] = 0x20;
    at += putLatin1(b, raw[i + 1]!, at);
    b[at++] = 0x0d;
    b[at++] = 0x0a;
  }
  at += putLatin1(b, conn, at);
  b[at++] = 0x0d;
  b[at++] = 0x0a;
  return at === n ? b : b.subarray(0, at);
}

const HTTP11_SP = 'HTTP/1.1 ';
/** responseHeadBytes' note of which headers it relays (one entry per header), grown as needed. */
let relayed = new Uint8Array(64);
const CONN_CLOSE = 'connection: close\r\n';

const TE = new NameForms('te');
const TRAILER = new NameForms('trailer');
const UPGRADE = new NameForms('upgrade');
const CONNECTION = new NameForms('connection');
const KEEP_ALIVE = new NameForms('keep-alive');
const PROXY_CONNECTION = new NameForms('proxy-connection');
const CLOSE = new NameForms('close');

/**
 * Whether a response header is relayed: not hop-by-hop (RFC 9110 7.6.1), nor one its Connection
 * header names (`named`) except the framing; an HTTP/1.0 client gets no Transfer-Encoding. The
 * names are compared by length first and without a lower-case copy (one per header per response
 * before: bench/README.md "Allocation per request (issue 31)").
 */
function relayedResponseHeader(name: string, http10: boolean, named: Set<string> | null): boolean {
  switch (name.length) {
    case 2:
      if (isNameOf(name, TE)) return false;
      break;
    case 7:
      if (isNameOf(name, TRAILER) || isNameOf(name, UPGRADE)) return false;
      break;
    case 10:
      if (isNameOf(name, CONNECTION) || isNameOf(name, KEEP_ALIVE)) return false;
      break;
    case 14:
      if (isNameOf(name, CONTENT_LENGTH)) return true;
      break;
    case 16:
      if (isNameOf(name, PROXY_CONNECTION)) return false;
      break;
    case 17:
      if (isNameOf(name, TRANSFER_ENCODING)) return !http10;
      break;
  }
  return named === null || !named.has(name.toLowerCase());
}

/** Header names listed in Connection (RFC 9110 7.6.1: hop-by-hop too), lower-case; null without any. */
export function connectionTokens(raw: readonly string[]): Set<string> | null {
  let out: Set<string> | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (!isNameOf(raw[i]!, CONNECTION)) continue;
    const v = raw[i + 1]!;
    // The usual values name no header: no split (an array and a string per token) for them.
    if (isNameOf(v, KEEP_ALIVE) || isNameOf(v, CLOSE)) continue;
    for (const part of v.split(',')) {
      const token = part.trim().toLowerCase();
      if (token !== '' && token !== 'close' && token !== 'keep-alive') (out ??= new Set()).add(token);
    }
  }
  return out;
}

function statusLine(head: ResponseHead): string {
  return `HTTP/1.1 ${head.statusCode} ${head.reason}\r\n`;
}

function headerLines(raw: readonly string[]): string {
  let text = '';
  for (let i = 0; i + 1 < raw.length; i += 2) text += `${raw[i]!}: ${raw[i + 1]!}\r\n`;
  return text;
}

function expectsContinue(raw: readonly string[]): boolean {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.length === 6 && raw[i]!.toLowerCase() === 'expect' && raw[i + 1]!.toLowerCase() === '100-continue') return true;
  }
  return false;
}

/** The request announced a body (Content-Length > 0, or chunked). */
function announcesBody(head: RequestHead): boolean {
  return head.chunked || (head.contentLength !== null && head.contentLength > 0);
}

/** A connect that failed before anything was sent: the next target may take the request. */
export function isConnectFailure(code: string): boolean {
  return code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH';
}

/**
 * One write of heads (strings) and bodies. Heads are latin1 both ways: the parser gives header
 * bytes as latin1 strings, so a byte >= 0x80 in a value must go out as that one byte (a string
 * written as UTF-8, net's default, would turn it into two).
 */
function writeParts(socket: ByteSocket, parts: Parts): boolean {
  if (parts.length !== 1) return socket.write(joinParts(parts));
  const p = parts[0]!;
  return typeof p === 'string' ? socket.writeLatin1(p) : socket.write(p);
}

/**
 * The parts in one Buffer: strings written as latin1 straight into it (a string's length is its
 * latin1 byte count). No mapped array and no Buffer per string, as Buffer.concat(parts.map(...))
 * had: one Buffer (one wrapper on the heap) per write.
 */
function joinParts(parts: Parts): Buffer {
  let total = 0;
  for (let i = 0; i < parts.length; i++) total += parts[i]!.length;
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    at += typeof p === 'string' ? putLatin1(out, p, at) : p.copy(out, at);
  }
  return out;
}

/** Parts of one write: head text (latin1) and bytes. */
type Parts = (string | Buffer)[];

/**
 * Lists of parts not in use, shared by every connection: a flush gives its list back, the next
 * first push takes one. Only writes that come back into a connection during a write hold more
 * than one at a time, so a few are kept (SPARE_PARTS) and the rest left to the collector.
 */
const spareParts: Parts[] = [];
const SPARE_PARTS = 16;

function takeParts(): Parts {
  return spareParts.pop() ?? [];
}

/**
 * A list that held more parts than this (a read of many pipelined requests) is not kept: its
 * backing store grew with it, and the stack would hold it for the process's life.
 */
const SPARE_MAX_PARTS = 64;

/**
 * Empties a list of parts and keeps it for the next take. Emptied by pop(), which keeps the
 * list's backing store (`length = 0` gives it back, and the next push allocates a new one).
 */
function giveParts(parts: Parts): void {
  if (parts.length > SPARE_MAX_PARTS || spareParts.length >= SPARE_PARTS) return;
  while (parts.length > 0) parts.pop();
  spareParts.push(parts);
}

/**
 * A short upstream timeout's timer ran out (armUpstreamTimeout). The connection is the timer's
 * argument: no closure per connection, which would die in the old generation with it.
 */
function upstreamTimedOut(c: RelayConn): void {
  c.onTimeout();
}

/** RequestDecision.delayMs ran out (a timer argument: no closure per delayed request). */
function afterDelay(c: RelayConn): void {
  c.delayOver();
}
