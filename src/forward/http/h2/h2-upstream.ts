/**
 * HTTP/2 upstreams (`upstreamProtocol: h2c | h2`; gRPC): the streams of HTTP/2 clients relayed as
 * streams of shared upstream HTTP/2 connections (docs/http-engines.md "gRPC").
 *
 * H2Upstreams, one per listener: per target, the connections open to it. A stream takes the first
 * connection that is up, not going away and below the peer's SETTINGS_MAX_CONCURRENT_STREAMS;
 * a new one is dialled when none is. A GOAWAY from the upstream takes its connection out of
 * the choice (its streams in flight finish; the next stream dials a new one); a connection idle
 * (no stream) for http.upstreamIdleTimeoutMs is closed; while it carries streams it is pinged
 * every http.upstreamPingIntervalMs and closed when a PING goes unanswered for 20 s (gRPC's
 * keepalive timeout), which resets its streams towards their clients.
 *
 * H2Call, one per client stream: the request head from the policy's decision (`:authority` the
 * decided host, the identity headers, `te: trailers` when the client sent it), the body both ways
 * under each side's flow control (a full side pauses the other), the response head, body and
 * trailers (`grpc-status`, `grpc-message`) as they come, a trailers-only response as one HEADERS,
 * RST_STREAM both ways (a client's CANCEL cancels the upstream call, an upstream reset resets the
 * client's stream with the same code), `grpc-timeout` passed on untouched (the backend keeps the
 * deadline). Before a response head: 502 (the connection failed or reset the stream), 504
 * (upstreamTimeoutMs).
 */
import { performance } from 'node:perf_hooks';
import http2 from 'node:http2';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { ConnectTimer } from '../relay/socket-pool';
import type { Http2Upstream, Upstream } from '../../../upstream/upstream-group';
import type { RequestDecision } from '../http-policy';
import type { DnsCache } from '../upstream-dns';
import type { H2Request } from './h2-request';
import type { H2Stream } from './h2-stream';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR, NGHTTP2_FLAG_END_STREAM } = http2.constants;

/** gRPC's default keepalive timeout: a PING unanswered this long closes the connection. */
const PING_TIMEOUT_MS = 20_000;

/** Fields an HTTP/2 response or trailer never carries to the client, beside pseudo-headers. */
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings']);

/** One upstream HTTP/2 connection. */
class UpSession {
  /** Streams of ours open on it. */
  active = 0;
  /** The upstream sent GOAWAY, or the session failed: no new streams. */
  done = false;
  /** The connection's error code, for the streams it fails (502 reason). */
  error: string | null = null;
  idleSince = performance.now();
  lastPing = performance.now();
  pinging = false;
  constructor(
    readonly session: http2.ClientHttp2Session,
    readonly target: Upstream,
    readonly pool: H2Upstreams,
  ) {}

  /** Room for one more stream within the peer's SETTINGS_MAX_CONCURRENT_STREAMS. */
  get usable(): boolean {
    const s = this.session;
    if (this.done || s.destroyed || s.closed) return false;
    const max = s.remoteSettings.maxConcurrentStreams ?? 100;
    return this.active < max;
  }
}

const kUp = Symbol('ipgate.upSession');
type Tagged = http2.ClientHttp2Session & { [kUp]?: UpSession };

export class H2Upstreams {
  private readonly byTarget = new Map<Upstream, UpSession[]>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly idleMs: number,
    private readonly pingIntervalMs: number,
    private readonly dns: DnsCache | null,
    private readonly log: Logger,
    /** ipgate_upstream_connect_seconds: a new upstream connection counts when it is up. */
    private readonly connectTime: ConnectTimer,
  ) {}

  /** A session to `target` with room for a stream (dialled if need be). */
  session(target: Upstream, h2: Http2Upstream): UpSession {
    let list = this.byTarget.get(target);
    if (list === undefined) this.byTarget.set(target, (list = []));
    for (const u of list) if (u.usable) return u;
    const authority = `${h2.tls ? 'https' : 'http'}://${target.family === 6 ? `[${target.host}]` : target.host}:${target.port}`;
    const options: http2.SecureClientSessionOptions = {
      // The upstream's own limits are what its SETTINGS say; ours towards it are Node's defaults
      // but for these (stated, as on the client side).
      maxSessionMemory: 64,
      maxHeaderListPairs: 256,
      settings: { enablePush: false },
      ...(target.family === 0 && this.dns !== null ? { lookup: this.dns.lookup as never } : {}),
      ...(h2.tls
        ? { ALPNProtocols: ['h2'], ...(h2.ca !== null ? { ca: h2.ca } : {}), ...(target.family === 0 ? { servername: target.host } : {}) }
        : {}),
    };
    const dialedAt = performance.now();
    const s: Tagged = http2.connect(authority, options, () => this.connectTime.observe((performance.now() - dialedAt) / 1000));
    const u = new UpSession(s, target, this);
    s[kUp] = u;
    s.on('error', onUpSessionError);
    s.on('goaway', onUpGoaway);
    s.on('close', onUpClose);
    s.on('frameError', onUpFrameError);
    list.push(u);
    if (this.timer === null) {
      this.timer = setInterval(
        sweepUpstreams,
        Math.max(50, Math.min(1000, Math.floor(Math.min(this.idleMs, this.pingIntervalMs) / 4))),
        this,
      );
      this.timer.unref();
    }
    return u;
  }

  /** A session closed: out of the choice. */
  closed(u: UpSession): void {
    const list = this.byTarget.get(u.target);
    if (list === undefined) return;
    const i = list.indexOf(u);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.byTarget.delete(u.target);
  }

  sessionError(u: UpSession, err: NodeJS.ErrnoException): void {
    u.done = true;
    u.error ??= err.code ?? 'ECONNRESET';
    this.log.warn({ upstream: u.target.label, err: err.code ?? err.message }, 'HTTP/2 upstream connection failed');
  }

  /** Idle sessions closed, busy ones pinged (keepalive), unanswered pings fatal. */
  sweep(now = performance.now()): void {
    let any = false;
    for (const list of this.byTarget.values()) {
      for (const u of list) {
        any = true;
        const s = u.session;
        if (s.destroyed) continue;
        if (u.active === 0) {
          if (now - u.idleSince >= this.idleMs) s.close();
          continue;
        }
        if (u.pinging) {
          if (now - u.lastPing >= PING_TIMEOUT_MS) {
            u.error ??= 'ETIMEDOUT';
            s.destroy();
          }
          continue;
        }
        if (now - u.lastPing >= this.pingIntervalMs && !s.connecting) {
          u.pinging = true;
          u.lastPing = now;
          try {
            s.ping(pinged.bind(null, u));
          } catch {
            u.pinging = false; // too many outstanding: the next sweep tries again
          }
        }
      }
    }
    if (!any && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  close(): void {
    for (const list of this.byTarget.values()) for (const u of list) u.session.close();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

function pinged(u: UpSession, err: Error | null): void {
  u.pinging = false;
  u.lastPing = performance.now();
  if (err !== null && !u.session.destroyed) u.session.destroy();
}

function sweepUpstreams(p: H2Upstreams): void {
  p.sweep();
}

function onUpSessionError(this: Tagged, err: NodeJS.ErrnoException): void {
  const u = this[kUp];
  if (u !== undefined) u.pool.sessionError(u, err);
}

function onUpGoaway(this: Tagged): void {
  const u = this[kUp];
  if (u !== undefined) u.done = true;
}

function onUpClose(this: Tagged): void {
  const u = this[kUp];
  if (u !== undefined) {
    u.done = true;
    u.pool.closed(u);
  }
}

function onUpFrameError(): void {
  // A frame not sent (its stream was reset): the stream's own events settle it.
}

const kCall = Symbol('ipgate.h2call');
type CallStream = http2.ClientHttp2Stream & { [kCall]?: H2Call };

/** One client stream relayed to an HTTP/2 upstream. */
export class H2Call {
  private up: CallStream | null = null;
  private u: UpSession | null = null;
  private trailerFields: OutgoingHttpHeaders | null = null;
  /** The upstream stream's error code (its session's, when the connection failed). */
  upError: string | null = null;
  private answered = false;
  private ended = false;
  private cancelled = false;

  constructor(
    private readonly front: H2Stream,
    private readonly h2: Http2Upstream,
    private readonly d: RequestDecision,
    private readonly req: H2Request,
    private readonly endStream: boolean,
  ) {}

  start(): void {
    const front = this.front;
    const host = front.conn.host;
    const ex = front.exchange;
    const group = this.d.group!;
    const target = group.targets[group.start()]!;
    ex.upstream = target;
    ex.sentAt = performance.now();
    const upstreams = host.upstreams;
    const u = upstreams.session(target, this.h2);
    const headers: OutgoingHttpHeaders = {
      ':method': this.req.method,
      ':path': this.d.path ?? this.req.path,
      ':scheme': this.h2.tls ? 'https' : 'http',
      ':authority': this.d.headers!.host as string, // the host as the policy decided it
    };
    const given = this.d.headers!;
    for (const name in given) if (name !== 'host' && !CONNECTION_SPECIFIC.has(name)) headers[name] = given[name];
    if (this.req.teTrailers) headers.te = 'trailers';
    let up: CallStream;
    try {
      up = u.session.request(headers, { endStream: this.endStream });
    } catch (err) {
      // The session is going away (or a header Node refuses): 502, nothing sent.
      host.events.upstreamFailed(ex, (err as NodeJS.ErrnoException).code ?? 'ECONNRESET', false, false);
      front.answer(host.settings.canned.badGateway, false);
      return;
    }
    u.active++;
    this.u = u;
    this.up = up;
    up[kCall] = this;
    up.on('response', onUpResponse);
    up.on('headers', onUpInfo);
    up.on('data', onUpData);
    up.on('end', onUpEnd);
    up.on('trailers', onUpTrailers);
    up.on('close', onUpStreamClose);
    up.on('error', onUpStreamError);
    up.on('drain', onUpDrain);
    if (this.endStream) front.callRequestDone();
    front.startTimer(this.d.upstreamTimeoutMs);
  }

  /** The client's body: to the upstream stream, the client paused while it is full. */
  data(chunk: Buffer): void {
    const up = this.up;
    if (up === null || up.destroyed) return;
    if (!up.write(chunk)) this.front.stream.pause();
  }

  end(): void {
    this.front.callRequestDone();
    const up = this.up;
    if (up !== null && !up.destroyed) up.end();
  }

  /** The client's stream has room again: the upstream flows. */
  drained(): void {
    this.up?.resume();
  }

  upDrained(): void {
    this.front.resumeBody();
  }

  response(headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader, flags: number): void {
    const front = this.front;
    const ex = front.exchange;
    const status = Number(headers[':status'] ?? 0);
    ex.status = status;
    front.conn.host.events.upstreamAnswered(ex, status);
    front.callAnswered();
    this.answered = true;
    const stream = front.stream;
    if (stream.closed || stream.destroyed) return;
    const endStream = (flags & NGHTTP2_FLAG_END_STREAM) !== 0;
    try {
      // Trailers-only (a gRPC status without a body) is one HEADERS with END_STREAM; otherwise
      // the upstream's trailers follow the body (gRPC's grpc-status, grpc-message).
      stream.respond(fields(headers, true), { endStream, waitForTrailers: !endStream });
    } catch (err) {
      front.conn.host.log.warn(
        { upstream: ex.upstream?.label, err: (err as Error).message },
        'HTTP/2 upstream response head not relayable',
      );
      this.cancel();
      front.resetFromUpstream(http2.constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (endStream) front.callResponseDone();
  }

  info(headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
    const status = Number(headers[':status'] ?? 0);
    const stream = this.front.stream;
    if (this.answered || status < 100 || status >= 200 || status === 101 || stream.closed || stream.headersSent) return;
    stream.additionalHeaders(fields(headers, true));
  }

  upData(chunk: Buffer): void {
    const stream = this.front.stream;
    if (stream.closed || stream.destroyed) return;
    this.front.callWrote(chunk.length);
    if (!stream.write(chunk)) this.up?.pause();
  }

  upTrailers(headers: http2.IncomingHttpHeaders): void {
    this.trailerFields = fields(headers, false);
  }

  upEnd(): void {
    this.ended = true;
    const stream = this.front.stream;
    if (stream.closed || stream.destroyed || stream.writableEnded) return;
    this.front.callResponseDone();
    stream.end(); // 'wantTrailers' follows: trailers()
  }

  /** The trailers for the client ('wantTrailers'). */
  trailers(): OutgoingHttpHeaders | null {
    return this.trailerFields;
  }

  /** The upstream stream closed: a reset (before its end) goes on to the client with its code. */
  upClosed(): void {
    const up = this.up;
    const u = this.u;
    if (u !== null) {
      u.active--;
      if (u.active === 0) u.idleSince = performance.now();
    }
    this.up = null;
    if (up === null || this.cancelled) return;
    const code = up.rstCode ?? NGHTTP2_NO_ERROR;
    const front = this.front;
    if (this.ended && code === NGHTTP2_NO_ERROR) return;
    if (!this.answered) {
      // No response head: the connection failed, or the upstream refused or reset the stream.
      const host = front.conn.host;
      const ex = front.exchange;
      host.events.upstreamFailed(ex, this.upError ?? u?.error ?? 'ECONNRESET', false, false);
      front.answer(host.settings.canned.badGateway, false);
      return;
    }
    front.exchange.reason ??= 'upstream_reset';
    front.resetFromUpstream(code === NGHTTP2_NO_ERROR ? http2.constants.NGHTTP2_INTERNAL_ERROR : code);
  }

  /** upstreamTimeoutMs ran out before the response head: 504, the upstream call cancelled. */
  timedOut(): void {
    const front = this.front;
    const host = front.conn.host;
    host.events.upstreamFailed(front.exchange, 'ETIMEDOUT', true, false);
    this.cancel();
    front.answer(host.settings.canned.gatewayTimeout, false);
  }

  /** The client's stream is gone (or answered by ipgate): the upstream call is reset (CANCEL). */
  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    const up = this.up;
    if (up !== null && !up.closed && !up.destroyed) up.close(NGHTTP2_CANCEL);
  }
}

/** An upstream's fields for the client: pseudo-headers other than :status and connection-specific fields dropped. */
function fields(h: http2.IncomingHttpHeaders, status: boolean): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name in h) {
    if (name.charCodeAt(0) === 0x3a && !(status && name === ':status')) continue;
    if (CONNECTION_SPECIFIC.has(name)) continue;
    out[name] = h[name];
  }
  return out;
}

function onUpResponse(this: CallStream, headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader, flags: number): void {
  this[kCall]?.response(headers, flags);
}

function onUpInfo(this: CallStream, headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
  this[kCall]?.info(headers);
}

function onUpData(this: CallStream, chunk: Buffer): void {
  this[kCall]?.upData(chunk);
}

function onUpEnd(this: CallStream): void {
  this[kCall]?.upEnd();
}

function onUpTrailers(this: CallStream, headers: http2.IncomingHttpHeaders): void {
  this[kCall]?.upTrailers(headers);
}

function onUpStreamClose(this: CallStream): void {
  this[kCall]?.upClosed();
}

function onUpStreamError(this: CallStream, err: NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException }): void {
  // A reset or a failed session ('close' follows and settles the call): the connection's own
  // error (ECONNREFUSED, a TLS verify failure) is the cause of the stream's.
  const c = this[kCall];
  if (c !== undefined) c.upError ??= err.cause?.code ?? err.code ?? null;
}

function onUpDrain(this: CallStream): void {
  this[kCall]?.upDrained();
}
