/**
 * One HTTP/2 stream of a client connection (h2-conn.ts): one request through the policy
 * (http-policy.ts `admit`, exactly as an HTTP/1.1 request), then answered by ipgate or relayed:
 *   - to an HTTP/1.1 upstream on the shared keep-alive pool (relay/upstream-pool.ts): the h1 head
 *     written from the decision's headers (`:method`, the decided target, `:authority` as Host),
 *     the body re-framed (as received under a content-length, else chunked), the response parsed
 *     by llhttp and mapped back (1xx as informational HEADERS, no body for HEAD, 204 and 304,
 *     hop-by-hop fields dropped, a chunked body's declared trailers as trailing HEADERS). The
 *     socket goes back to the pool only when the request went out whole and the response's
 *     framing was complete; anything else closes it, so nothing a client does on its stream can
 *     leave an upstream connection mid-message (docs/architecture.md "HTTP forwarding");
 *   - to an HTTP/2 upstream (gRPC) through h2-upstream.ts.
 * Backpressure both ways: a full upstream socket pauses the stream (its flow-control window then
 * closes, so the client stops), a stream whose window is full pauses the upstream socket.
 *
 * Refusals: a malformed request (h2-request.ts) is reset with PROTOCOL_ERROR before the policy
 * sees it (counted `h2_malformed`); a request refused by the policy gets its canned answer (403,
 * 404, 421, 400) and a client still sending a body gets RST_STREAM NO_ERROR after it (RFC 9113
 * 8.1). Upstream failures: 502 / 504 before the response head (the next target after a refused
 * connect, a stale pooled socket retried once, as the HTTP/1.1 engine does); after it, the stream
 * is reset (INTERNAL_ERROR): an HTTP/2 client cannot be told mid-body otherwise.
 */
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import http2 from 'node:http2';
import type { Linked, LinkedSet } from '../../../connection/linked-set';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Upstream, UpstreamGroup } from '../../../upstream/upstream-group';
import type { Canned } from '../canned';
import type { Exchange } from '../exchange';
import type { RequestDecision, RequestFacts } from '../http-policy';
import type { ResponseHead } from '../relay/llhttp-parser';
import { connectionTokens, IDEMPOTENT, isConnectFailure } from '../relay/relay-conn';
import type { PoolWaiter, UpstreamConn, UpstreamOwner } from '../relay/socket-pool';
import type { H2Conn } from './h2-conn';
import { readH2Request, type H2Request } from './h2-request';
import { H2Call } from './h2-upstream';

const { NGHTTP2_NO_ERROR, NGHTTP2_PROTOCOL_ERROR, NGHTTP2_REFUSED_STREAM, NGHTTP2_CANCEL, NGHTTP2_INTERNAL_ERROR } = http2.constants;

const kStream = Symbol('ipgate.h2stream');
type Tagged = http2.ServerHttp2Stream & { [kStream]?: H2Stream };

const NO_TARGETS: readonly Upstream[] = Object.freeze([]);
const EMPTY_TRAILERS: OutgoingHttpHeaders = Object.freeze({}) as OutgoingHttpHeaders;

/** Response fields HTTP/2 forbids (RFC 9113 8.2.2) or that describe the HTTP/1.1 hop only. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'http2-settings', 'trailer']);
/** Trailer fields never passed on (RFC 9110 6.5.1: framing, routing, authentication, ...), beside HOP. */
const NOT_TRAILERS = new Set([
  'content-length',
  'content-type',
  'content-encoding',
  'content-range',
  'host',
  'authorization',
  'set-cookie',
]);

export class H2Stream implements UpstreamOwner, PoolWaiter, Linked<H2Stream> {
  /** Its connection's set of open streams (H2Conn.streams: connection/linked-set.ts). */
  linkSet: LinkedSet<H2Stream> | null = null;
  linkPrev: H2Stream | null = null;
  linkNext: H2Stream | null = null;
  /** performance.now() of the last byte either way (the stream idle timeout, h2-conn.ts check). */
  lastActive = performance.now();
  private readonly startedAt = Date.now();
  private d: RequestDecision | null = null;
  private ex: Exchange | null = null;
  private req: H2Request | null = null;
  /** The request as the policy read it (a quick denial's size is counted from it). */
  private facts: RequestFacts | null = null;
  /** The request had no body (END_STREAM on its HEADERS): safe to send twice. */
  private bodyless = false;
  private targets: readonly Upstream[] = NO_TARGETS;
  /** The request's upstream group (its next target that is up after a failure), null before one. */
  private group: UpstreamGroup | null = null;
  private first = 0;
  private attempt = 0;
  private staleRetried = false;
  private timedOutUp = false;
  private timer: NodeJS.Timeout | null = null;
  /** The HEADERS ended the stream (kept while a rate limit's delay runs). */
  private delayedEnd = false;
  private up: UpstreamConn | null = null;
  /** Waiting for a pooled socket of this target (the pool is at its bound). */
  private queued: Upstream | null = null;
  private upHead = '';
  /** Request body read before an upstream socket was attached. */
  private pending: Buffer[] | null = null;
  /** The body goes upstream chunked (no content-length, not ended with the HEADERS). */
  private chunked = false;
  private received = 0;
  /** The client's END_STREAM was read and what it ended was written upstream. */
  private requestDone = false;
  private responseStarted = false;
  /** ipgate's side of the stream is complete (END_STREAM queued). */
  private sideDone = false;
  /** The trailers to send (a chunked upstream response that declared `Trailer`). */
  private trailers: OutgoingHttpHeaders | null = null;
  private resetSent = false;
  /** The stream's 'drain' is listened to (from the first write that found it full). */
  private drainWatched = false;
  private bytesOut = 0;
  /** An HTTP/2 upstream's call (gRPC), instead of `up`. */
  private call: H2Call | null = null;

  constructor(
    readonly conn: H2Conn,
    readonly stream: Tagged,
  ) {}

  start(raw: string[], endStream: boolean): void {
    const stream = this.stream;
    const conn = this.conn;
    stream[kStream] = this;
    stream.on('error', onStreamError);
    stream.on('close', onStreamClose);
    conn.streams.add(this);
    const host = conn.host;
    const hc = conn.hc;
    const r = readH2Request(raw);
    if ('kind' in r) {
      host.log.debug({ conn: hc.conn.id, client: hc.conn.clientAddress, stream: stream.id, detail: r.detail }, 'HTTP/2 request refused');
      if (r.kind === 'malformed') {
        host.events.clientError(hc, 'h2_malformed');
        this.reset(NGHTTP2_PROTOCOL_ERROR);
      } else {
        host.events.clientError(hc, 'bad_request');
        this.answer(host.settings.canned.badRequest, false);
      }
      return;
    }
    if (endStream && r.contentLength > 0) {
      host.events.clientError(hc, 'h2_malformed');
      this.reset(NGHTTP2_PROTOCOL_ERROR); // RFC 9113 8.1.1: content-length against the DATA sent (none)
      return;
    }
    this.req = r;
    this.bodyless = endStream;
    const facts: RequestFacts = { method: r.method, url: r.path, rawHeaders: r.rawHeaders, upgrade: false };
    const d = host.policy.admit(hc, facts, r.authority);
    if (d === null) {
      // Draining, or routing turned off under this connection: the client may retry elsewhere
      // (REFUSED_STREAM: the request was not processed, RFC 9113 8.7).
      this.reset(NGHTTP2_REFUSED_STREAM);
      conn.goaway();
      return;
    }
    if (d.verdict === 'reject') {
      // A host no backend may see (request-host.ts): 400 and counted as the HTTP/1.1 engine
      // counts it (a client error, not a finished request); only this stream ends, the others
      // on the connection are requests of their own.
      const why = d.refusal!;
      host.events.clientError(hc, why.reason, why.detail);
      this.answer(d.answer!, false);
      return;
    }
    this.d = d;
    this.facts = facts;
    const ex = d.ex;
    if (ex !== null) hc.open.push(ex);
    this.ex = ex;
    if (d.verdict === 'answer') {
      this.answer(d.answer!, d.closeAfterAnswer);
      return;
    }
    if (d.delayMs > 0) {
      // nginx limit_req's delay within the burst: the stream goes upstream once the rate allows
      // it; its DATA is not read meanwhile (no 'data' listener: HTTP/2 flow control holds the
      // client). A close meanwhile clears the timer (dropUpstream).
      this.delayedEnd = endStream;
      this.timer = setTimeout(h2DelayOver, d.delayMs, this);
      return;
    }
    this.forward(d, r, endStream);
  }

  /** @internal The rate limit's delay is over. */
  delayOver(): void {
    this.timer = null;
    const d = this.d;
    if (d === null || this.req === null || this.stream.destroyed || this.stream.closed) return;
    this.forward(d, this.req, this.delayedEnd);
  }

  /** An admitted request goes to its group (at once, or after its rate limit's delay). */
  private forward(d: RequestDecision, r: H2Request, endStream: boolean): void {
    const stream = this.stream;
    const group = d.group!;
    if (!endStream) {
      stream.on('data', onStreamData);
      stream.on('end', onStreamEnd);
    }
    if (group.http2 !== null) {
      stream.on('drain', onStreamDrain);
      stream.on('wantTrailers', onWantTrailers);
      this.call = new H2Call(this, group.http2, d, r, endStream);
      this.call.start();
      return;
    }
    this.forwardH1(d, r, endStream);
  }

  // --- to an HTTP/1.1 upstream ------------------------------------------------------------------

  private forwardH1(d: RequestDecision, r: H2Request, endStream: boolean): void {
    const stream = this.stream;
    const headers = d.headers!;
    let text = `${r.method} ${d.path ?? r.path} HTTP/1.1\r\nconnection: keep-alive\r\n`;
    for (const name in headers) {
      const v = headers[name];
      if (v === undefined) continue;
      text += `${name}: ${Array.isArray(v) ? v.join(', ') : String(v)}\r\n`;
    }
    // HTTP/2 frames the body by END_STREAM; HTTP/1.1 needs a length or chunks (RFC 9113 8.2.2:
    // never a Transfer-Encoding from the client, h2-request.ts refused it).
    if (!endStream && r.contentLength < 0) {
      this.chunked = true;
      text += 'transfer-encoding: chunked\r\n';
    }
    this.upHead = `${text}\r\n`;
    this.requestDone = endStream;
    // Expect: 100-continue is answered here, for an admitted request only (the policy dropped the
    // header upstream), as the HTTP/1.1 engine does.
    if (!endStream && expectsContinue(r.rawHeaders)) stream.additionalHeaders({ ':status': 100 });
    const group = d.group!;
    this.group = group;
    this.targets = group.targets;
    this.first = group.start();
    this.timer = setTimeout(upstreamTimeout, d.upstreamTimeoutMs, this);
    this.dispatch(false);
  }

  private dispatch(fresh: boolean): void {
    const ex = this.ex!;
    const target = this.targets[(this.first + this.attempt) % this.targets.length]!;
    ex.upstream = target;
    ex.sentAt = performance.now();
    const up = this.conn.host.pool.acquire(target, this, fresh);
    if (up === null) {
      // At the pool's bound: wait (the upstream timeout runs); the body waits in the window.
      this.queued = target;
      if (!this.requestDone) this.stream.pause();
      return;
    }
    this.attach(up);
  }

  private attach(up: UpstreamConn): void {
    up.owner = this;
    up.parser.setRequestMethod(this.req!.method);
    this.up = up;
    let ok = up.socket.writeLatin1(this.upHead);
    const pending = this.pending;
    if (pending !== null) {
      this.pending = null;
      for (const b of pending) ok = this.writeUp(up, b);
    }
    if (this.requestDone) {
      if (this.chunked) up.socket.writeLatin1('0\r\n\r\n');
    } else if (ok) this.stream.resume();
    else this.stream.pause();
  }

  /** PoolWaiter: a pooled socket for the request that waited. */
  poolGranted(up: UpstreamConn): void {
    this.queued = null;
    if (this.ex === null || this.up !== null || this.stream.closed) {
      this.conn.host.pool.release(up); // not expected: a waiter is cancelled when it stops waiting
      return;
    }
    this.attach(up);
  }

  private writeUp(up: UpstreamConn, chunk: Buffer): boolean {
    if (!this.chunked) return up.socket.write(chunk);
    return up.socket.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`, 'latin1'), chunk, CRLF]));
  }

  /** A DATA frame's payload (the stream's 'data'). */
  data(chunk: Buffer): void {
    this.lastActive = performance.now();
    if (this.sideDone && this.call === null) return; // answered: the rest of the body is dropped
    const r = this.req!;
    this.received += chunk.length;
    if (r.contentLength >= 0 && this.received > r.contentLength) {
      // More DATA than content-length said (nghttp2 resets this itself; checked again here so
      // that no byte past the length can reach the upstream, whichever Node runs).
      this.malformedBody();
      return;
    }
    // ipgate_http_request_size_bytes: the body relayed (an answered request's is dropped above).
    if (this.ex !== null) this.ex.requestBytes += chunk.length;
    const up = this.up;
    if (this.call !== null) {
      this.call.data(chunk);
      return;
    }
    if (up === null) {
      (this.pending ??= []).push(chunk);
      this.stream.pause();
      return;
    }
    if (!this.writeUp(up, chunk)) this.stream.pause();
  }

  /** The client's END_STREAM (the stream's 'end'). */
  end(): void {
    this.lastActive = performance.now();
    const r = this.req!;
    if (r.contentLength >= 0 && this.received !== r.contentLength) {
      this.malformedBody();
      return;
    }
    if (this.call !== null) {
      this.call.end();
      return;
    }
    this.requestDone = true;
    const up = this.up;
    if (up !== null && this.chunked) up.socket.writeLatin1('0\r\n\r\n');
  }

  private malformedBody(): void {
    this.conn.host.events.clientError(this.conn.hc, 'h2_malformed');
    this.ex!.reason = 'h2_malformed';
    this.dropUpstream();
    this.reset(NGHTTP2_PROTOCOL_ERROR);
  }

  upstreamDrained(): void {
    this.resumeBody();
  }

  /**
   * The request body flows again. Only while one is still coming: a stream whose readable side
   * was never consumed (no body, or all of it read) is left alone, because resuming it makes Node
   * emit its 'end', and node:http2 then destroys the stream the moment nghttp2 closes it, before
   * the response's last write has completed: Writable's errorBuffer then builds an
   * ERR_STREAM_DESTROYED (stack trace and all) per stream that nobody reads. That error was 5% of
   * the busy time on `https-h2` (bench/README.md "HTTP/2: the bodyless stream left unread").
   */
  resumeBody(): void {
    if (!this.requestDone && !this.stream.closed) this.stream.resume();
  }

  /** The stream's window opened again (its 'drain'). */
  drained(): void {
    this.lastActive = performance.now();
    if (this.call !== null) this.call.drained();
    else this.up?.socket.resume();
  }

  // --- response side (UpstreamOwner) ------------------------------------------------------------

  responseHead(head: ResponseHead): void {
    const ex = this.ex!;
    const status = head.statusCode;
    if (status === 101) {
      // No request asked for an upgrade: not HTTP any more, and HTTP/2 has no 101 (RFC 9113 8.6).
      this.up?.socket.destroy(); // upstreamClosed answers 502
      return;
    }
    const stream = this.stream;
    if (status < 200) {
      // 1xx (103 Early Hints, ...) as informational HEADERS; a 100 is ipgate's own to send.
      if (status !== 100 && !stream.closed && !stream.headersSent) stream.additionalHeaders(responseHeaders(head.rawHeaders, status));
      return;
    }
    ex.status = status;
    this.conn.host.events.upstreamAnswered(ex, status);
    this.responseStarted = true;
    this.clearTimer();
    this.lastActive = performance.now();
    if (stream.closed || stream.destroyed) return;
    const bodyless = this.req!.method === 'HEAD' || status === 204 || status === 304;
    // Trailers are sent for a chunked response that declares them (RFC 9110 6.6.2 `Trailer`):
    // waiting for them costs a HEADERS frame even when none come, so undeclared ones are dropped.
    const trailers = head.chunked && !bodyless && hasField(head.rawHeaders, 'trailer');
    try {
      stream.respond(responseHeaders(head.rawHeaders, status), { endStream: bodyless, waitForTrailers: trailers });
    } catch (err) {
      // A head HTTP/2 cannot carry (not expected: the strict parser took it): the stream ends.
      this.conn.host.log.warn(
        { conn: this.conn.hc.conn.id, err: (err as Error).message, upstream: ex.upstream?.label },
        'upstream response head not relayable over HTTP/2',
      );
      this.up?.socket.destroy();
      this.reset(NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (trailers) {
      this.trailers = EMPTY_TRAILERS;
      stream.on('wantTrailers', onWantTrailers);
    }
  }

  responseBody(chunk: Buffer): void {
    const stream = this.stream;
    if (stream.closed || stream.destroyed) return;
    this.lastActive = performance.now();
    this.bytesOut += chunk.length;
    // A view of the upstream read: copied (the socket's read buffer is reused).
    if (!stream.write(Buffer.from(chunk))) {
      // The stream's window or buffer is full: the upstream waits for its 'drain'. Listened to
      // from the first full write only: most responses never fill it (a listener per stream is
      // a cost on every stream, bench/README.md "HTTP/2: the bodyless stream left unread").
      if (!this.drainWatched) {
        this.drainWatched = true;
        stream.on('drain', onStreamDrain);
      }
      this.up?.socket.pause();
    }
  }

  responseDone(up: UpstreamConn, keepAlive: boolean, trailers: readonly string[]): void {
    // A message completed without a final head we took: a 101 refused in responseHead.
    if (!this.responseStarted) return;
    this.up = null;
    if (keepAlive && this.requestDone && up.pooled) this.conn.host.pool.release(up);
    else up.socket.destroy();
    if (this.trailers !== null && trailers.length > 0) this.trailers = trailerFields(trailers);
    this.finishResponse();
  }

  responseUpgraded(up: UpstreamConn): void {
    up.socket.destroy(); // refused in responseHead; not reached
  }

  flush(): void {
    // Writes go to the stream as they come (nghttp2 gathers frames per send).
  }

  upstreamClosed(up: UpstreamConn): void {
    if (this.up !== up) return;
    this.up = null;
    const ex = this.ex;
    if (ex === null) return;
    if (!this.responseStarted) {
      const method = this.req!.method;
      if (!this.timedOutUp && up.reused && !up.received && !this.staleRetried && this.bodyless && IDEMPOTENT.has(method)) {
        // A reused socket the backend closed as the request reached it: sent once more (relay-conn.ts).
        this.staleRetried = true;
        this.dispatch(true);
        return;
      }
      const code = this.timedOutUp ? 'ETIMEDOUT' : (up.error ?? 'ECONNRESET');
      // The next target that is up, on the relay's rule (relay-conn.ts upstreamClosed): a failed
      // connect, or an idempotent request's connection closed before any answer; without a body.
      const again =
        !this.timedOutUp &&
        this.bodyless &&
        (up.connected ? !up.received && code !== 'ETIMEDOUT' && IDEMPOTENT.has(method) : isConnectFailure(code));
      const next = again ? this.group!.nextOffset(this.first, this.attempt + 1) : -1;
      const retry = next > 0;
      this.conn.host.events.upstreamFailed(ex, code, this.timedOutUp, retry);
      if (retry) {
        this.attempt = next;
        this.dispatch(false);
        return;
      }
      this.clearTimer();
      const canned = this.conn.host.settings.canned;
      this.answer(this.timedOutUp ? canned.gatewayTimeout : canned.badGateway, false);
      return;
    }
    // Mid-response: a body delimited by the close completes; anything else cuts the stream.
    const r = up.parser.finish();
    if (r.kind === 'ok' && ex.status !== 0) {
      this.finishResponse();
      return;
    }
    ex.reason ??= 'upstream_reset';
    this.reset(NGHTTP2_INTERNAL_ERROR);
  }

  /** The upstream response head did not come within upstreamTimeoutMs. */
  upstreamTimedOut(): void {
    this.timer = null;
    if (this.responseStarted || this.ex === null) return;
    this.timedOutUp = true;
    if (this.call !== null) {
      this.call.timedOut();
      return;
    }
    if (this.queued !== null) {
      this.conn.host.pool.cancel(this.queued, this);
      this.queued = null;
      this.conn.host.events.upstreamFailed(this.ex, 'ETIMEDOUT', true, false);
      this.answer(this.conn.host.settings.canned.gatewayTimeout, false);
      return;
    }
    this.up?.socket.destroy(); // upstreamClosed answers 504
  }

  // --- the end of a stream ----------------------------------------------------------------------

  /** Our side is complete: END_STREAM (after the trailers, if any), and the client's body stopped. */
  finishResponse(): void {
    if (this.sideDone) return;
    this.sideDone = true;
    const stream = this.stream;
    if (stream.closed || stream.destroyed) return;
    if (!stream.writableEnded) stream.end();
    // Answered before the whole request: the client stops sending (RFC 9113 8.1: RST_STREAM
    // NO_ERROR, sent once the response is out).
    if (!this.requestDone && this.call === null) this.closeAfterResponse();
  }

  /** ipgate's own answer (a refusal, a route miss, 502, 504, a malformed request's 400). */
  answer(canned: Canned, closeConnection: boolean): void {
    const stream = this.stream;
    if (this.ex !== null) this.ex.status = canned.status;
    this.responseStarted = true;
    this.sideDone = true;
    this.dropUpstream();
    if (!stream.closed && !stream.destroyed && !stream.headersSent) {
      const head = this.req?.method === 'HEAD';
      stream.respond(cannedHeaders(canned), { endStream: head });
      if (!head) {
        this.bytesOut += canned.body.length;
        stream.end(canned.body);
      }
      if (!this.requestDone && !this.bodyless) this.closeAfterResponse();
    }
    if (closeConnection) this.conn.goaway();
  }

  private closeAfterResponse(): void {
    const stream = this.stream;
    if (stream.closed || stream.destroyed || stream.readableEnded) return;
    this.conn.host.stats.h2ResetsSent++;
    this.resetSent = true;
    stream.close(NGHTTP2_NO_ERROR);
  }

  /** RST_STREAM `code` (our side: never counted against the client's reset budget). */
  reset(code: number): void {
    const stream = this.stream;
    if (stream.closed || stream.destroyed) return;
    this.resetSent = true;
    this.conn.host.stats.h2ResetsSent++;
    stream.close(code);
  }

  /** The stream moved no byte for streamIdleTimeoutMs (h2-conn.ts check). */
  timedOut(): void {
    this.conn.host.events.clientError(this.conn.hc, 'h2_stream_timeout');
    if (this.ex !== null) this.ex.reason ??= 'h2_stream_timeout';
    this.lastActive = performance.now(); // once
    this.dropUpstream();
    this.reset(NGHTTP2_CANCEL);
  }

  /** 'wantTrailers': the body is out, the trailers go now. */
  sendTrailers(): void {
    const stream = this.stream;
    if (stream.closed || stream.destroyed) return;
    const t = this.call !== null ? this.call.trailers() : this.trailers;
    stream.sendTrailers(t ?? EMPTY_TRAILERS);
  }

  /** An upstream exchange still attached is given up (its framing is unknown): closed, never pooled. */
  private dropUpstream(): void {
    this.clearTimer();
    if (this.queued !== null) this.conn.host.pool.cancel(this.queued, this);
    this.queued = null;
    const up = this.up;
    this.up = null;
    if (up !== null) {
      up.owner = null;
      up.socket.destroy();
    }
    this.call?.cancel();
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** The stream closed (both sides, or a reset either way): the request is over, recorded once. */
  closed(): void {
    const stream = this.stream;
    const conn = this.conn;
    const complete = this.sideDone && stream.rstCode === NGHTTP2_NO_ERROR;
    // A reset the client sent: the stream closed with an error code ipgate did not send, while
    // its socket is still up (a dead socket closes every stream with CANCEL).
    const session = conn.session;
    const clientReset =
      !this.resetSent &&
      stream.rstCode !== NGHTTP2_NO_ERROR &&
      !conn.socket.destroyed &&
      session !== null &&
      !session.destroyed &&
      !(this.sideDone && this.requestDone);
    this.dropUpstream();
    const ex = this.ex;
    if (ex !== null && !complete) ex.reason ??= 'client_abort';
    const d = this.d;
    if (d !== null) {
      this.d = null;
      if (ex !== null) {
        ex.bytesOut = this.bytesOut;
        const open = conn.hc.open;
        const i = open.indexOf(ex);
        if (i >= 0) open.splice(i, 1);
      }
      if (ex !== null) conn.host.events.finished(conn.hc, d, ex.startedAt, null, 0);
      else conn.host.events.finished(conn.hc, d, this.startedAt, this.facts, this.bytesOut);
    }
    conn.streamClosed(this, clientReset);
  }

  // --- for the HTTP/2 upstream call (h2-upstream.ts) --------------------------------------------

  /** The exchange, for the call's reports. */
  get exchange(): Exchange {
    return this.ex!;
  }

  /** The call has the response head: the head timer stops. */
  callAnswered(): void {
    this.responseStarted = true;
    this.clearTimer();
    this.lastActive = performance.now();
  }

  /** The call sent `n` body bytes to the client. */
  callWrote(n: number): void {
    this.bytesOut += n;
    this.lastActive = performance.now();
  }

  /** The call's upstream response timer (the decision's upstreamTimeoutMs). */
  startTimer(ms: number): void {
    this.timer = setTimeout(upstreamTimeout, ms, this);
  }

  /** The call is done with the request side: the client's END_STREAM was passed on. */
  callRequestDone(): void {
    this.requestDone = true;
  }

  /** Mark the response complete without ending the stream (the call ends it). */
  callResponseDone(): void {
    this.sideDone = true;
  }

  /** A reset passed on from the upstream (RST both ways). */
  resetFromUpstream(code: number): void {
    this.sideDone = true;
    this.reset(code);
  }
}

const CRLF = Buffer.from('\r\n', 'latin1');

function upstreamTimeout(s: H2Stream): void {
  s.upstreamTimedOut();
}

function onStreamError(this: Tagged): void {
  // A reset or a dead session: the 'close' that follows settles the stream.
}

function onStreamClose(this: Tagged): void {
  this[kStream]?.closed();
}

function onStreamData(this: Tagged, chunk: Buffer): void {
  this[kStream]?.data(chunk);
}

function onStreamEnd(this: Tagged): void {
  this[kStream]?.end();
}

function onStreamDrain(this: Tagged): void {
  this[kStream]?.drained();
}

function onWantTrailers(this: Tagged): void {
  this[kStream]?.sendTrailers();
}

/** An HTTP/1.1 response's fields as HTTP/2 ones: names lower-case, hop-by-hop ones (and those Connection names) dropped. */
export function responseHeaders(raw: readonly string[], status: number): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ':status': status };
  const named = connectionTokens(raw);
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP.has(name) || (named?.has(name) === true && name !== 'content-length') || name.charCodeAt(0) === 0x3a) continue;
    const value = raw[i + 1]!;
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (name === 'set-cookie') out[name] = Array.isArray(prev) ? [...prev, value] : [prev as string, value];
    else out[name] = `${prev as string}, ${value}`;
  }
  return out;
}

/** A chunked response's trailer fields as HTTP/2 trailers (those RFC 9110 6.5.1 keeps out of trailers dropped). */
function trailerFields(raw: readonly string[]): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP.has(name) || NOT_TRAILERS.has(name)) continue;
    const prev = out[name];
    out[name] = prev === undefined ? raw[i + 1]! : `${prev as string}, ${raw[i + 1]!}`;
  }
  return out;
}

function hasField(raw: readonly string[], lower: string): boolean {
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === lower.length && raw[i]!.toLowerCase() === lower) return true;
  return false;
}

function expectsContinue(raw: readonly string[]): boolean {
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i] === 'expect' && raw[i + 1]!.toLowerCase() === '100-continue') return true;
  return false;
}

/** A canned answer's HTTP/2 head, built once per Canned. */
const cannedHeads = new WeakMap<Canned, OutgoingHttpHeaders>();

function cannedHeaders(c: Canned): OutgoingHttpHeaders {
  let h = cannedHeads.get(c);
  if (h === undefined) {
    h = Object.freeze({ ':status': c.status, 'content-type': c.headers[1]!, 'content-length': c.body.length, 'cache-control': 'no-store' });
    cannedHeads.set(c, h);
  }
  return h;
}

/** RequestDecision.delayMs ran out (a timer argument: no closure per delayed stream). */
function h2DelayOver(s: H2Stream): void {
  s.delayOver();
}
