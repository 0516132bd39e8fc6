/**
 * `http.engine: relay`: HTTP/1.1 relayed with no node:http on either side. The client connection
 * is parsed with llhttp in WebAssembly (llhttp-parser.ts); each request goes to a pooled upstream
 * socket (RelayPool: LIFO per target, one request in flight on each, closed after
 * upstreamIdleTimeoutMs idle) whose response is parsed the same way and relayed back. Work per
 * CPU-second ~1.5x the undici engine's (bench/README.md "The relay engine").
 *
 * What the forwarder decides stays in HttpForwarder (RelayHost): identity and allowlist per
 * request, the upstream head (scanRequestHeaders + the identity headers), canned responses,
 * counters and the access log. Here:
 * - requests one at a time (a pipelined one waits, parser paused, until the response before it is
 *   done); bodies relayed as parsed: Content-Length raw, chunked re-chunked from the decoded data,
 *   so what goes upstream is always well framed (the strict parser has rejected CL + TE, duplicate
 *   lengths, obs-fold: nothing can be smuggled past it);
 * - responses: status line and headers re-serialised without hop-by-hop headers (and those the
 *   response's Connection names); `connection: close` when the client connection ends after it
 *   (client asked, maxRequestsPerConnection, revoked, body delimited by the upstream's close);
 *   an HTTP/1.0 client gets a chunked body decoded, then the close; `Expect: 100-continue` is
 *   answered here (as node:http does for the other engines), other 1xx are passed on;
 * - output gathered per read and written once; backpressure both ways (a full socket pauses the
 *   other side until 'drain');
 * - timeouts: the request head within requestHeaderTimeoutMs (408), an idle keep-alive connection
 *   closed after keepAliveTimeoutMs, the upstream's head within upstreamTimeoutMs (504);
 * - upstream failures before the response head: 502, or the next target after a refused connect
 *   (requests without a body); after the head: the client connection is cut;
 * - an upgrade request (WebSocket) hands the connection, from that request's first byte, to the
 *   node:http path (HttpForwarder.relayHandoff), which serves upgrades; CONNECT is answered 400.
 * - a pooled socket the backend closed as the request reached it (nothing came back): an
 *   idempotent request without a body is sent once more on a new connection.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import net from 'node:net';
import type { Upstream } from '../../tcp/tcp-forwarder';
import type { Canned } from '../canned';
import { requestTarget } from '../request-target';
import type { Exchange, HttpConn } from '../exchange';
import { HttpParser, type ParserSink, type RequestHead, type ResponseHead } from './llhttp-parser';

/** What the relay needs from the HTTP forwarder (its decisions and its records). */
export interface RelayHost {
  /** An Exchange for this request (identity, allowlist entry), or null when the connection is closing. */
  /** `authority`: an absolute-form target's, which replaces the Host header (RFC 9112 3.2.2). */
  relayExchange(hc: HttpConn, head: RequestHead, socket: net.Socket, authority: string | null): { ex: Exchange; headers: OutgoingHttpHeaders; accept: string | null } | null;
  forbidden(accept: string | null): Canned;
  readonly badRequest: Canned;
  readonly headersTooLarge: Canned;
  readonly badGateway: Canned;
  readonly gatewayTimeout: Canned;
  readonly upstreamTimeoutMs: number;
  readonly requestTimeout: Canned;
  readonly requestHeaderTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  /** timeouts.idleMs: a client connection silent this long in both directions is closed. */
  readonly idleTimeoutMs: number;
  readonly maxRequestsPerConnection: number;
  /**
   * Give the connection to the node:http path, `bytes` (the rest of the stream from the first byte
   * of an upgrade request) first: upgrades (WebSocket) are served there.
   */
  relayHandoff(socket: net.Socket, bytes: Buffer): void;
  /** Count a client error (`bad_request`, `header_too_large`, `header_timeout`) on its connection. */
  relayClientError(hc: HttpConn, reason: string): void;
  /** Count and log an upstream failure (`upstream_refused`, ...); `retrying`: the next target follows. */
  relayUpstreamFailed(ex: Exchange, code: string, timedOut: boolean, retrying: boolean): void;
  /** The upstream's response head (status, time since `ex.sentAt`), counted per target. */
  relayUpstreamResponse(ex: Exchange, status: number): void;
  /** Count and log one finished request. */
  relayRecord(ex: Exchange): void;
  /** Denied request bookkeeping (counts, debug line). */
  relayDenied(ex: Exchange): void;
  readonly maxHeaderBytes: number;
  /** `http.denied.keepAlive`: a denied direct client keeps its connection after the 403. */
  readonly deniedKeepAlive: boolean;
}

/** How long an ended connection reads and drops what the client still sends before it is closed. */
export const LINGER_MS = 5000;

function destroySocket(socket: net.Socket): void {
  socket.destroy();
}

/** RFC 9110 9.2.2: a request the backend may receive twice without harm. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']);

/** Pooled upstream sockets per target, LIFO, one request in flight on each. */
export class RelayPool {
  private readonly free = new Map<Upstream, UpstreamConn[]>();
  constructor(
    private readonly idleMs: number,
    /** Connect durations (seconds): ipgate_upstream_connect_seconds, as the other engines feed it. */
    readonly connectTime: { observe(seconds: number): void },
  ) {}

  /** A pooled socket of `target` (the warmest), or a new one; `fresh`: always a new one. */
  acquire(target: Upstream, fresh = false): UpstreamConn {
    const list = fresh ? undefined : this.free.get(target);
    const c = list?.pop();
    if (c !== undefined) {
      c.socket.setTimeout(0);
      c.reused = true;
      c.received = false;
      return c;
    }
    return new UpstreamConn(target, this);
  }

  release(c: UpstreamConn): void {
    let list = this.free.get(c.target);
    if (list === undefined) this.free.set(c.target, (list = []));
    c.owner = null;
    list.push(c);
    c.socket.setTimeout(this.idleMs);
  }

  drop(c: UpstreamConn): void {
    const list = this.free.get(c.target);
    const i = list?.indexOf(c) ?? -1;
    if (i >= 0) list!.splice(i, 1);
  }

  close(): void {
    for (const list of this.free.values()) for (const c of list) c.socket.destroy();
    this.free.clear();
  }
}

/** One upstream socket and its response parser. */
export class UpstreamConn implements ParserSink<ResponseHead> {
  readonly socket: net.Socket;
  readonly parser: HttpParser<'response'>;
  owner: RelayConn | null = null;
  connected = false;
  /** Taken from the pool (it carried an exchange before this one). */
  reused = false;
  /** Bytes arrived since it was taken for the current exchange. */
  received = false;
  /** The socket's error code, if it failed. */
  error: string | null = null;

  constructor(readonly target: Upstream, private readonly pool: RelayPool) {
    this.socket = net.connect({ host: target.host, port: target.port, noDelay: true });
    // Paused after each response, so bytes behind a complete response are seen (and the socket
    // dropped) instead of being parsed into a released socket's next message.
    this.parser = new HttpParser('response', this, { pauseAfterMessage: true });
    this.socket.on('data', (d: Buffer) => this.onData(d));
    const dialedAt = performance.now();
    this.socket.once('connect', () => {
      this.connected = true;
      pool.connectTime.observe((performance.now() - dialedAt) / 1000);
    });
    this.socket.on('error', (err: NodeJS.ErrnoException) => { this.error ??= err.code ?? 'ECONNRESET'; });
    this.socket.on('timeout', () => this.socket.destroy());
    this.socket.once('close', () => {
      this.pool.drop(this);
      const o = this.owner;
      this.owner = null;
      // The owner first: a body delimited by the close is completed with parser.finish(), so the
      // parser is freed only after it (test: "an upstream that closes after the response head").
      o?.upstreamClosed(this);
      this.parser.free();
    });
    this.socket.on('drain', () => this.owner?.upstreamDrained());
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
    if (r.kind === 'error' || r.kind === 'upgrade') {
      this.socket.destroy();
      o.flush();
      return;
    }
    if (r.kind === 'paused') {
      // A response completed in this read (and the socket may be back in the pool): bytes after
      // it are no response to any request, so the socket's framing is no longer known.
      if (r.consumed < d.length) this.socket.destroy();
      else this.parser.resume();
    }
    o.flush();
  }

  onHead(head: ResponseHead): void {
    this.owner?.responseHead(head);
  }

  onBody(chunk: Buffer): void {
    this.owner?.responseBody(chunk);
  }

  onMessageComplete(keepAlive: boolean): void {
    const o = this.owner;
    if (o === null) return;
    o.responseDone(this, keepAlive);
  }
}

export class RelayConn implements ParserSink<RequestHead> {
  private readonly parser: HttpParser<'request'>;
  /** Bytes read after a paused (complete) request, parsed once its response is done. */
  private backlog: Buffer | null = null;
  private ex: Exchange | null = null;
  private up: UpstreamConn | null = null;
  private head: RequestHead | null = null;
  /** Response framing towards the client. */
  private resChunked = false;
  private closeAfter = false;
  private requestDone = false;
  private responseStarted = false;
  /** The upstream request head (resent to the next target after a refused connect). */
  private upHead = '';
  private attempt = 0;
  /** This request was sent again after a stale pooled socket (at most once). */
  private staleRetried = false;
  private first = 0;
  private timer: NodeJS.Timeout | null = null;
  private timedOut = false;
  /** Between requests: the keep-alive timer, then (first byte of a request) the header timer. */
  private waitTimer: NodeJS.Timeout | null = null;
  private waiting: 'idle' | 'head' | null = null;
  private requests = 0;
  /** Reads of the current message before its head was complete (an upgrade hands them on). */
  private partial: Buffer[] = [];
  private headSeen = false;
  /** The current request is an upgrade: the connection goes to the node:http path. */
  private handoff = false;
  /**
   * The relay has ended its side (after a close-delimited answer, a 400/408, a denial): what the
   * client still sends is read and dropped, never parsed (a parser stopped mid-message must not be
   * fed, and a request completed after the answer must not go upstream), until the client's FIN
   * or LINGER_MS (nginx's lingering close: read, discard, then close).
   */
  private ending = false;
  private readonly onDataFn = (d: Buffer): void => this.onData(d);
  private readonly onDrainFn = (): void => { this.up?.socket.resume(); };
  private readonly onEndFn = (): void => { this.socket.destroy(); };
  private readonly onCloseFn = (): void => this.closed();
  /** Output collected during one read, written once. */
  private out: (string | Buffer)[] = [];
  private upOut: (string | Buffer)[] = [];

  constructor(
    private readonly host: RelayHost,
    private readonly pool: RelayPool,
    private readonly hc: HttpConn,
    private readonly socket: net.Socket,
    private readonly targets: readonly Upstream[],
    private readonly pick: () => number,
  ) {
    this.parser = new HttpParser('request', this, { maxHeaderBytes: host.maxHeaderBytes });
    socket.on('data', this.onDataFn);
    socket.on('drain', this.onDrainFn);
    socket.once('close', this.onCloseFn);
    // The listener's sockets are allowHalfOpen: a client FIN would leave the connection half open.
    // A client that stops sending is gone for HTTP's purposes (nginx: proxy_ignore_client_abort off).
    socket.once('end', this.onEndFn);
    // Silent in both directions for timeouts.idleMs: closed, as node:http's server.timeout does on
    // the other path. Between requests the keep-alive and header timers decide sooner; this covers
    // the rest (a body that stops half way after a 403, a client whose FIN a paused read never sees).
    socket.setTimeout(host.idleTimeoutMs);
    socket.once('timeout', this.onEndFn);
  }

  start(leftover: Buffer): void {
    // The first request's head is due within the header timeout from the connection's start.
    this.wait('head');
    if (leftover.length > 0) this.onData(leftover);
    if (!this.socket.destroyed) this.socket.resume();
  }

  /** Arm the wait between requests: `idle` (keep-alive timeout) or `head` (header timeout). */
  private wait(kind: 'idle' | 'head'): void {
    if (this.ending) return; // the linger timer runs
    if (this.waitTimer !== null) clearTimeout(this.waitTimer);
    this.waiting = kind;
    const ms = kind === 'idle' ? this.host.keepAliveTimeoutMs : this.host.requestHeaderTimeoutMs;
    this.waitTimer = setTimeout(() => this.waitExpired(), ms);
  }

  private stopWaiting(): void {
    if (this.waitTimer !== null) clearTimeout(this.waitTimer);
    this.waitTimer = null;
    this.waiting = null;
  }

  private waitExpired(): void {
    this.waitTimer = null;
    if (this.waiting === 'idle') {
      this.socket.destroy(); // an idle keep-alive connection closes without a response
      return;
    }
    this.waiting = null;
    this.host.relayClientError(this.hc, 'header_timeout');
    this.endConnection(this.host.requestTimeout.wire);
  }

  /** End our side (after `wire`, if any) and stop parsing: see `ending`. */
  private endConnection(wire: Buffer | null): void {
    if (this.ending) return;
    this.ending = true;
    this.stopWaiting();
    if (this.backlog !== null) this.backlog = null;
    if (wire !== null) this.socket.end(wire);
    else this.socket.end();
    this.socket.resume(); // read and drop until the client's FIN
    this.waitTimer = setTimeout(destroySocket, LINGER_MS, this.socket);
  }

  private onData(d: Buffer): void {
    if (this.ending) return;
    if (this.waiting === 'idle') this.wait('head');
    if (this.ex !== null && this.requestDone) {
      // A pipelined request behind one in flight: keep it for later.
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
      if (state === 'paused') {
        this.backlog = this.backlog === null ? d : Buffer.concat([this.backlog, d]);
        this.socket.pause();
      } else {
        this.socket.destroy();
      }
      return;
    }
    const r = this.parser.execute(d);
    this.flushUp();
    this.flush(); // a 100 Continue
    if (r.kind === 'ok') {
      if (!this.headSeen) this.partial.push(d); // bounded: the parser stops past maxHeaderBytes
      return;
    }
    if (r.kind === 'paused') {
      this.partial = [];
      this.headSeen = false;
      if (r.consumed < d.length) {
        this.backlog = d.subarray(r.consumed);
        this.socket.pause();
      }
      return;
    }
    if (r.kind === 'upgrade' && this.handoff) {
      const bytes = this.partial.length === 0 ? d : Buffer.concat([...this.partial, d]);
      this.detach();
      this.host.relayHandoff(this.socket, bytes);
      return;
    }
    if (r.kind === 'upgrade') {
      // CONNECT, or an upgrade that could not be handed on.
      this.host.relayClientError(this.hc, 'bad_request');
      this.fail(this.host.badRequest);
      return;
    }
    this.host.relayClientError(this.hc, r.status === 431 ? 'header_too_large' : 'bad_request');
    this.fail(r.status === 431 ? this.host.headersTooLarge : this.host.badRequest);
  }

  // --- request side (parser sink) ---

  onHead(head: RequestHead): void {
    this.headSeen = true;
    if (head.upgrade && head.method !== 'CONNECT') {
      if (head.chunked || (head.contentLength ?? 0) > 0) {
        // Refused, as on the node:http path (HttpForwarder.onUpgrade): an upgrade's body is sent
        // upstream only after a 101, so a backend declining it would desync on that body.
        this.host.relayClientError(this.hc, 'bad_request');
        this.fail(this.host.badRequest);
        return;
      }
      this.handoff = true; // feed() hands the connection on when execute returns
      return;
    }
    if (!hasHost(head.rawHeaders)) {
      // As node:http's requireHostHeader (answered before any handler: not a counted client
      // error), and for HTTP/1.0 too: the backend would otherwise get the upstream's address.
      this.fail(this.host.badRequest);
      return;
    }
    const target = requestTarget(head.url);
    if (target === null) {
      this.host.relayClientError(this.hc, 'bad_request');
      this.fail(this.host.badRequest);
      return;
    }
    const made = this.host.relayExchange(this.hc, head, this.socket, target.authority);
    if (made === null) {
      this.socket.destroy();
      return;
    }
    const { ex, headers, accept } = made;
    this.stopWaiting();
    this.ex = ex;
    this.head = head;
    this.requestDone = false;
    this.responseStarted = false;
    this.requests++;
    const max = this.host.maxRequestsPerConnection;
    this.closeAfter = !head.keepAlive || (max > 0 && this.requests >= max) || this.hc.revoked;
    this.hc.open.push(ex);
    if (ex.entry === null) {
      this.host.relayDenied(ex);
      const canned = this.host.forbidden(accept);
      if (!this.hc.trusted && !this.host.deniedKeepAlive) this.closeAfter = true;
      this.cannedAnswer(canned);
      // Answered, the body (if any) still to read past: idle from here as between requests, so a
      // body that stops is cut after keepAliveTimeoutMs (a trickled one after the header timeout),
      // as node:http does on the other path (test: "finding B").
      if (!this.requestDone && !this.closeAfter) this.wait('idle');
      return;
    }
    // The upstream connection is the pool's: keep-alive whatever the client asked for its own.
    let text = `${head.method} ${target.path} HTTP/1.1\r\nconnection: keep-alive\r\n`;
    for (const name in headers) {
      const v = headers[name];
      if (v === undefined) continue;
      text += `${name}: ${Array.isArray(v) ? v.join(', ') : String(v)}\r\n`;
    }
    this.upHead = `${text}\r\n`;
    // Expect: 100-continue is answered here, as node:http's server does for the other engines
    // (scanRequestHeaders drops the header upstream): the client sends its body now.
    if (head.versionMinor >= 1 && expectsContinue(head.rawHeaders)) this.out.push('HTTP/1.1 100 Continue\r\n\r\n');
    this.first = this.pick();
    this.attempt = 0;
    this.staleRetried = false;
    this.timedOut = false;
    this.timer = setTimeout(() => this.onTimeout(), this.host.upstreamTimeoutMs);
    this.dispatch();
  }

  private dispatch(fresh = false): void {
    const ex = this.ex!;
    const target = this.targets[(this.first + this.attempt) % this.targets.length]!;
    ex.upstream = target;
    ex.sentAt = performance.now();
    const up = this.pool.acquire(target, fresh);
    up.owner = this;
    up.parser.setRequestMethod(this.head!.method);
    this.up = up;
    this.upOut.unshift(this.upHead);
  }

  private onTimeout(): void {
    this.timer = null;
    if (this.responseStarted || this.up === null) return;
    this.timedOut = true;
    this.up.socket.destroy(); // upstreamClosed answers 504
  }

  onBody(chunk: Buffer): void {
    if (this.up === null) return; // denied: the body is read and dropped
    if (this.head!.chunked) this.upOut.push(`${chunk.length.toString(16)}\r\n`, Buffer.from(chunk), '\r\n');
    else this.upOut.push(Buffer.from(chunk)); // a view of the read: copied, the read buffer is reused
  }

  onMessageComplete(): void {
    this.requestDone = true;
    if (this.up !== null && this.head!.chunked) this.upOut.push('0\r\n\r\n');
    if (this.ex !== null && this.ex.status !== 0 && this.up === null) this.finishExchange();
  }

  private flushUp(): void {
    const up = this.up;
    if (up === null || this.upOut.length === 0) {
      this.upOut.length = 0;
      return;
    }
    const parts = this.upOut;
    this.upOut = [];
    const ok = writeParts(up.socket, parts);
    if (!ok) this.socket.pause();
  }

  upstreamDrained(): void {
    this.socket.resume();
  }

  // --- response side (called by UpstreamConn) ---

  responseHead(head: ResponseHead): void {
    const ex = this.ex!;
    if (head.statusCode < 200) {
      // 1xx: passed on to HTTP/1.1 clients as is.
      if (this.head!.versionMinor >= 1) this.out.push(statusLine(head), headerLines(head.rawHeaders), '\r\n');
      return;
    }
    ex.status = head.statusCode;
    this.host.relayUpstreamResponse(ex, head.statusCode);
    this.responseStarted = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const http10 = this.head!.versionMinor === 0;
    const bodyless = this.head!.method === 'HEAD' || head.statusCode === 204 || head.statusCode === 304;
    this.resChunked = head.chunked && !http10 && !bodyless;
    if ((head.chunked && http10) || head.untilEof) this.closeAfter = true;
    let text = `HTTP/1.1 ${head.statusCode} ${head.reason}\r\n`;
    const raw = head.rawHeaders;
    const named = connectionTokens(raw);
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!;
      const lower = name.toLowerCase();
      if (HOP.has(lower) || (lower === 'transfer-encoding' && http10)) continue;
      if (named !== null && named.has(lower) && lower !== 'content-length' && lower !== 'transfer-encoding') continue;
      text += `${name}: ${raw[i + 1]!}\r\n`;
    }
    if (this.hc.revoked) this.closeAfter = true; // a list change since the request: last one
    if (this.closeAfter) text += 'connection: close\r\n';
    else if (http10) text += 'connection: keep-alive\r\n';
    this.out.push(`${text}\r\n`);
  }

  responseBody(chunk: Buffer): void {
    if (this.resChunked) this.out.push(`${chunk.length.toString(16)}\r\n`, Buffer.from(chunk), '\r\n');
    else this.out.push(Buffer.from(chunk));
  }

  responseDone(up: UpstreamConn, keepAlive: boolean): void {
    if (this.resChunked) this.out.push('0\r\n\r\n');
    this.flush();
    this.up = null;
    if (keepAlive && this.requestDone) this.pool.release(up);
    else up.socket.destroy();
    if (!this.requestDone) this.closeAfter = true; // answered before the whole request: stop here
    this.finishExchange();
  }

  /** Write what this read produced for the client, in one write. */
  flush(): void {
    if (this.out.length === 0) return;
    const parts = this.out;
    this.out = [];
    const ok = writeParts(this.socket, parts);
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
        // A pooled socket the backend closed as the request reached it (its keep-alive timeout
        // raced our reuse): nothing came back, so the backend did not answer it. Sent once more, on
        // a new connection, as Go's and undici's clients do for idempotent requests without a body.
        this.staleRetried = true;
        this.dispatch(true);
        this.flushUp();
        return;
      }
      const code = this.timedOut ? 'ETIMEDOUT' : up.error ?? 'ECONNRESET';
      const retry = !this.timedOut && !up.connected && ex.bodyless && this.attempt + 1 < this.targets.length && isConnectFailure(code);
      this.host.relayUpstreamFailed(ex, code, this.timedOut, retry);
      if (retry) {
        this.attempt++;
        this.dispatch();
        this.flushUp();
        return;
      }
      if (this.timer !== null) clearTimeout(this.timer);
      this.timer = null;
      this.closeAfter = true;
      this.cannedAnswer(this.timedOut ? this.host.gatewayTimeout : this.host.badGateway);
      return;
    }
    // Mid-response, or a body that ran to the connection's end.
    const r = up.parser.finish();
    if (r.kind === 'ok' && this.ex !== null && this.ex.status !== 0) {
      this.closeAfter = true;
      this.flush();
      this.finishExchange();
      return;
    }
    this.socket.destroy();
  }

  // --- the end of an exchange ---

  private cannedAnswer(canned: Canned): void {
    const ex = this.ex!;
    ex.status = canned.status;
    if (this.closeAfter) {
      this.out.push(canned.wire);
    } else {
      let text = `HTTP/1.1 ${canned.status} ${canned.reason}\r\n`;
      for (let i = 0; i + 1 < canned.headers.length; i += 2) text += `${canned.headers[i]!}: ${canned.headers[i + 1]!}\r\n`;
      this.out.push(`${text}\r\n`, canned.body);
    }
    this.flush();
    if (this.requestDone || this.closeAfter) this.finishExchange();
  }

  private finishExchange(): void {
    const ex = this.ex;
    if (ex === null) return;
    this.ex = null;
    this.forget(ex);
    this.host.relayRecord(ex);
    if (this.closeAfter || this.hc.revoked) {
      this.endConnection(null);
      return;
    }
    // Next request: resume parsing what was read meanwhile. Not from here: this runs inside a
    // parser callback (the response's or the request's), and parsers share one execute at a time.
    queueMicrotask(() => this.next());
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

  private fail(canned: Canned): void {
    if (this.ex === null || !this.responseStarted) {
      this.endConnection(canned.wire);
    } else {
      this.socket.destroy();
    }
    this.up?.socket.destroy();
  }

  /** Leave the socket to the node:http path: no listener, timer or parser of the relay stays. */
  private detach(): void {
    this.stopWaiting();
    this.socket.setTimeout(0);
    this.socket.off('timeout', this.onEndFn);
    this.socket.off('data', this.onDataFn);
    this.socket.off('drain', this.onDrainFn);
    this.socket.off('end', this.onEndFn);
    this.socket.off('close', this.onCloseFn);
    this.parser.free();
  }

  private closed(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.stopWaiting();
    this.parser.free();
    const up = this.up;
    this.up = null;
    if (up !== null) {
      up.owner = null;
      up.socket.destroy();
    }
    if (this.ex !== null) {
      this.ex.reason ??= 'client_abort';
      this.forget(this.ex);
      this.host.relayRecord(this.ex);
      this.ex = null;
    }
  }

  /** Off the connection's open list (revocation looks there). */
  private forget(ex: Exchange): void {
    const open = this.hc.open;
    const i = open.indexOf(ex);
    if (i >= 0) open.splice(i, 1);
  }
}

/** Header names listed in Connection (RFC 9110 7.6.1: hop-by-hop too), lower-case; null without any. */
function connectionTokens(raw: readonly string[]): Set<string> | null {
  let out: Set<string> | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const part of raw[i + 1]!.split(',')) {
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

function hasHost(raw: readonly string[]): boolean {
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') return true;
  return false;
}

function isConnectFailure(code: string): boolean {
  return code === 'ECONNREFUSED' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH';
}

/**
 * One write of heads (strings) and bodies. Heads are latin1 both ways: the parser gives header
 * bytes as latin1 strings, so a byte >= 0x80 in a value must go out as that one byte (a string
 * written as UTF-8, net's default, would turn it into two).
 */
function writeParts(socket: net.Socket, parts: (string | Buffer)[]): boolean {
  if (parts.length !== 1) return socket.write(joinParts(parts));
  const p = parts[0]!;
  return typeof p === 'string' ? socket.write(p, 'latin1') : socket.write(p);
}

function joinParts(parts: (string | Buffer)[]): Buffer {
  return Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : p)));
}

/** A stand-in for IncomingMessage where the Exchange and the access log read it (method, url). */
export function requestStub(head: RequestHead): IncomingMessage {
  return { method: head.method, url: head.url } as IncomingMessage;
}
