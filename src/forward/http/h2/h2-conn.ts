/**
 * The HTTP/2 engine's client connection (docs/http-engines.md "The HTTP/2 engine"): node:http2's
 * server session (nghttp2: frames, HPACK, flow control) attached to the socket the listener's
 * stages handed over (a TLSSocket that agreed on ALPN `h2`, or a plaintext one that sent the h2c
 * preface), with `http2.performServerHandshake`: no http2 server object, so the PROXY, TLS and
 * identity stages run first exactly as for HTTP/1.1. Each stream is an H2Stream (h2-stream.ts),
 * decided by the same policy as an HTTP/1.1 request.
 *
 * What this adds to nghttp2's own limits (each counted: the connection's close result, and
 * ipgate_http2_goaways_total), every one GOAWAY then close:
 *   - rapid reset (CVE-2023-44487): streams the client resets before their response is complete
 *     spend a token bucket (`http.http2.resets`); empty: GOAWAY ENHANCE_YOUR_CALM (`h2_rapid_reset`).
 *     nghttp2 has one too (1000 resets, then 33/s), left in place as a backstop;
 *   - PING and SETTINGS floods: every one spends a second bucket (`http.http2.controlFrames`);
 *     empty: GOAWAY ENHANCE_YOUR_CALM (`h2_control_flood`). nghttp2 bounds only the queue of
 *     acknowledgements a client does not read;
 *   - idle: no open stream for http.keepAliveTimeoutMs (the first one within
 *     http.requestHeaderTimeoutMs of the connection): GOAWAY NO_ERROR (`h2_idle_timeout`);
 *   - a stream silent both ways for http.http2.streamIdleTimeoutMs is reset (CANCEL);
 *   - http.maxRequestsPerConnection streams, then GOAWAY NO_ERROR (nginx's keepalive_requests).
 * The timeouts are checked by the listener's wait sweep (listener/wait-sweep.ts), not a timer each.
 *
 * Ending: the forwarder's lifecycle (drain, revocation, a removed route) calls goaway(): GOAWAY
 * NO_ERROR with the last stream id, the streams in flight finish, then the session closes. A
 * session that has closed leaves a socket a client may hold half open: it is destroyed after
 * LINGER_MS. Nothing a client sends throws: the session's and every stream's 'error' is handled.
 */
import { performance } from 'node:perf_hooks';
import http2 from 'node:http2';
import type net from 'node:net';
import type { Logger } from 'pino';
import type { Waiter, WaitSweep } from '../../../connection/wait-sweep';
import { LinkedSet } from '../../../connection/linked-set';
import { ListenerStats } from '../../../metrics/listener-stats';
import type { H2Reason } from '../../../reasons';
import type { EngineSettings } from '../engine-settings';
import type { GracefulEnd, HttpConn } from '../exchange';
import type { EngineEvents } from '../http-events';
import type { RequestPolicy } from '../relay/relay-conn';
import { LINGER_MS } from '../relay/relay-conn';
import type { SocketPool } from '../relay/socket-pool';
import type { H2Upstreams } from './h2-upstream';
import type { H2Settings } from './h2-settings';
import { H2Stream } from './h2-stream';

const {
  NGHTTP2_ENHANCE_YOUR_CALM,
  NGHTTP2_FLAG_END_STREAM,
  NGHTTP2_PROTOCOL_ERROR,
  NGHTTP2_STREAM_CLOSED,
  NGHTTP2_FRAME_SIZE_ERROR,
  NGHTTP2_COMPRESSION_ERROR,
  NGHTTP2_FLOW_CONTROL_ERROR,
  NGHTTP2_REFUSED_STREAM,
  NGHTTP2_INTERNAL_ERROR,
} = http2.constants;

/**
 * An nghttp2 library error (NghttpError.errno; the values of nghttp2.h's nghttp2_error) -> the
 * RFC 9113 code nghttp2 itself puts in its GOAWAY for it (nghttp2_session.c
 * get_error_code_from_lib_error_code; a bad preface, SETTINGS_EXPECTED, is a PROTOCOL_ERROR by
 * RFC 9113 3.4; a flood ENHANCE_YOUR_CALM).
 */
const LIB_ERRORS = new Map<number, number>([
  [-505, NGHTTP2_PROTOCOL_ERROR],
  [-531, NGHTTP2_PROTOCOL_ERROR],
  [-532, NGHTTP2_PROTOCOL_ERROR],
  [-536, NGHTTP2_PROTOCOL_ERROR],
  [-903, NGHTTP2_PROTOCOL_ERROR],
  [-510, NGHTTP2_STREAM_CLOSED],
  [-522, NGHTTP2_FRAME_SIZE_ERROR],
  [-523, NGHTTP2_COMPRESSION_ERROR],
  [-524, NGHTTP2_FLOW_CONTROL_ERROR],
  [-533, NGHTTP2_REFUSED_STREAM],
  [-537, NGHTTP2_ENHANCE_YOUR_CALM],
  [-904, NGHTTP2_ENHANCE_YOUR_CALM],
]);

type Destroy = (this: http2.Http2Session, error?: Error | null, code?: number) => void;
/** Http2Session.prototype.destroy (the one every session inherits), taken at the first session. */
let baseDestroy: Destroy | null = null;

/**
 * A session's destroy(): node:http2 destroys a session whose peer broke the protocol with
 * `destroy(new NghttpError(libCode))` and no code, so its GOAWAY says INTERNAL_ERROR for every
 * fault (it goes out first; nghttp2's own, with the right code, is then dropped). With the
 * library error mapped as nghttp2 maps it, the client is told what it did (PROTOCOL_ERROR,
 * FLOW_CONTROL_ERROR, ...: test/integration/h2-conformance.test.ts). Where node:http2 stops
 * calling destroy() this way, the GOAWAY is INTERNAL_ERROR again, nothing else changes.
 */
function destroyWithCode(this: http2.Http2Session, error?: Error | null, code?: number): void {
  if (code === undefined && error instanceof Error) {
    const errno = (error as { errno?: unknown }).errno;
    const custom = (error as { code?: unknown }).code;
    if (typeof errno === 'number') code = LIB_ERRORS.get(errno) ?? NGHTTP2_INTERNAL_ERROR;
    if (custom === 'ERR_HTTP2_TOO_MANY_INVALID_FRAMES') code = NGHTTP2_ENHANCE_YOUR_CALM;
    const c = (this as Session)[kConn];
    if (c !== undefined && code !== undefined && !this.destroyed) ListenerStats.bump(c.host.stats.h2Goaways, `sent/${h2CodeName(code)}`);
  }
  baseDestroy!.call(this, error, code);
}

/** What every HTTP/2 connection of one listener shares (built once by HttpForwarder). */
export interface H2Host {
  readonly settings: EngineSettings;
  readonly h2: H2Settings;
  readonly policy: RequestPolicy;
  readonly events: EngineEvents;
  readonly waits: WaitSweep;
  /** The HTTP/1.1 upstreams' keep-alive pool (shared with the HTTP/1.1 engine). */
  readonly pool: SocketPool;
  /** Shared HTTP/2 connections to HTTP/2 upstreams (gRPC). */
  readonly upstreams: H2Upstreams;
  readonly stats: ListenerStats;
  readonly log: Logger;
}

const kConn = Symbol('ipgate.h2conn');
type Session = http2.ServerHttp2Session & { [kConn]?: H2Conn };

/** The GOAWAY / RST_STREAM error codes by number (RFC 9113 7), for the bounded `code` label. */
const CODE_NAMES = [
  'NO_ERROR',
  'PROTOCOL_ERROR',
  'INTERNAL_ERROR',
  'FLOW_CONTROL_ERROR',
  'SETTINGS_TIMEOUT',
  'STREAM_CLOSED',
  'FRAME_SIZE_ERROR',
  'REFUSED_STREAM',
  'CANCEL',
  'COMPRESSION_ERROR',
  'CONNECT_ERROR',
  'ENHANCE_YOUR_CALM',
  'INADEQUATE_SECURITY',
  'HTTP_1_1_REQUIRED',
];

export function h2CodeName(code: number): string {
  return CODE_NAMES[code] ?? 'OTHER';
}

/** A token bucket (`burst` at once, `perSecond` back), spent one at a time. */
class Budget {
  private tokens: number;
  private at = performance.now();
  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
  ) {
    this.tokens = burst;
  }

  /** Spend one; false when there was none left. */
  spend(now: number): boolean {
    const t = Math.min(this.burst, this.tokens + ((now - this.at) * this.perSecond) / 1000);
    this.at = now;
    if (t < 1) {
      this.tokens = t;
      return false;
    }
    this.tokens = t - 1;
    return true;
  }
}

export class H2Conn implements Waiter, GracefulEnd {
  /** The listener's wait sweep's links (connection/linked-set.ts). */
  linkSet: LinkedSet<Waiter> | null = null;
  linkPrev: Waiter | null = null;
  linkNext: Waiter | null = null;
  session: Session | null = null;
  /** Streams taken and not closed yet. */
  readonly streams = new LinkedSet<H2Stream>();
  private readonly startedAt = performance.now();
  /** When the last stream closed (0: none has run yet: the first-request wait applies). */
  private idleSince = 0;
  private streamsSeen = 0;
  private readonly resets: Budget;
  private readonly control: Budget;
  private goingAway = false;
  /** The session ended: when, for the lingering close of a socket the client holds open. */
  private endedAt = 0;

  constructor(
    readonly host: H2Host,
    readonly hc: HttpConn,
    readonly socket: net.Socket,
  ) {
    const h = host.h2;
    this.resets = new Budget(h.resetBurst, h.resetPerSecond);
    this.control = new Budget(h.controlBurst, h.controlPerSecond);
  }

  start(): void {
    const hc = this.hc;
    hc.protocol = 'h2';
    hc.h2 = this;
    this.host.stats.h2Connections++;
    // A TLSSocket built around an accepted socket (tls/terminate.ts) keeps `secureConnecting` true
    // after its handshake: only tls.Server clears it (onServerSocketSecure), and node:http2 waits
    // for a 'secureConnect' that a server socket never emits while it is set. Cleared as
    // tls.Server does, the session reads the socket at once.
    const tlsSocket = this.socket as net.Socket & { secureConnecting?: boolean };
    if (tlsSocket.secureConnecting === true) tlsSocket.secureConnecting = false;
    let s: Session;
    try {
      s = http2.performServerHandshake(this.socket, this.host.h2.session);
    } catch (err) {
      // Not expected (the options are ours and checked): a refused connection, never a throw.
      this.host.log.error({ err, conn: hc.conn.id }, 'HTTP/2 session could not start');
      this.socket.destroy();
      return;
    }
    s[kConn] = this;
    this.session = s;
    baseDestroy ??= s.destroy as Destroy;
    s.destroy = destroyWithCode as http2.Http2Session['destroy'];
    s.on('stream', onStream);
    s.on('error', onSessionError);
    s.on('close', onSessionClose);
    s.on('goaway', onGoaway);
    s.on('frameError', onFrameError);
    // Each of these costs a call into JavaScript per frame, which a flood makes worth it: they
    // are what the control-frame budget counts.
    s.on('ping', onControlFrame);
    s.on('remoteSettings', onControlFrame);
    this.host.waits.add(this);
  }

  /** A new stream (the 'stream' event). */
  stream(stream: http2.ServerHttp2Stream, flags: number, raw: string[]): void {
    this.host.stats.h2Streams++;
    this.streamsSeen++;
    new H2Stream(this, stream).start(raw, (flags & NGHTTP2_FLAG_END_STREAM) !== 0);
    const max = this.host.h2.maxStreamsPerConnection;
    if (max > 0 && this.streamsSeen >= max) this.goaway();
  }

  /** A stream closed (H2Stream.closed). `clientReset`: the client reset it before its response was done. */
  streamClosed(s: H2Stream, clientReset: boolean): void {
    this.streams.delete(s);
    if (this.streams.size === 0) this.idleSince = performance.now();
    if (!clientReset) return;
    this.host.stats.h2ResetsReceived++;
    if (!this.resets.spend(performance.now())) this.abort('h2_rapid_reset', NGHTTP2_ENHANCE_YOUR_CALM);
  }

  /** A PING or SETTINGS frame from the client. */
  controlFrame(): void {
    if (!this.control.spend(performance.now())) this.abort('h2_control_flood', NGHTTP2_ENHANCE_YOUR_CALM);
  }

  /**
   * GOAWAY NO_ERROR: no new stream; those in flight finish, then the session closes (drain,
   * revocation, a removed route, maxRequestsPerConnection, a denial with keep-alive off).
   */
  goaway(): void {
    const s = this.session;
    if (this.goingAway || s === null || s.destroyed) return;
    this.goingAway = true;
    this.hc.closing = true;
    ListenerStats.bump(this.host.stats.h2Goaways, 'sent/NO_ERROR');
    s.close();
  }

  /** A budget ran out (or the connection idled): GOAWAY with `code`, and closed now. */
  abort(reason: H2Reason, code: number): void {
    const s = this.session;
    if (s === null || s.destroyed) return;
    const conn = this.hc.conn;
    conn.result = conn.result === null || conn.result === 'denied' ? reason : conn.result;
    ListenerStats.bump(this.host.stats.h2Goaways, `sent/${h2CodeName(code)}`);
    this.host.log.debug({ conn: conn.id, client: conn.clientAddress, reason }, 'HTTP/2 connection closed');
    this.goingAway = true;
    // destroy(null, code): GOAWAY with `code`, then the socket closes (an Error here would be
    // re-emitted as the session's 'error').
    baseDestroy!.call(s, null, code);
  }

  /** The listener's sweep: the idle and first-request waits, silent streams, the lingering close. */
  check(now: number): void {
    const s = this.session;
    if (s === null || s.destroyed || this.endedAt !== 0) {
      if (this.endedAt === 0) this.endedAt = now;
      if (this.socket.destroyed) this.host.waits.delete(this);
      else if (now - this.endedAt >= LINGER_MS) this.socket.destroy();
      return;
    }
    if (this.streams.size === 0) {
      if (s.closed) {
        // Closed gracefully with nothing left: nghttp2 ends the socket; a client that keeps its
        // side open is cut after LINGER_MS.
        this.endedAt = now;
        return;
      }
      const settings = this.host.settings;
      const limit = this.idleSince === 0 ? settings.requestHeaderTimeoutMs : settings.keepAliveTimeoutMs;
      if (now - (this.idleSince === 0 ? this.startedAt : this.idleSince) >= limit) {
        if (this.hc.conn.result === null) this.hc.conn.result = 'h2_idle_timeout';
        this.goaway();
      }
      return;
    }
    const idle = this.host.h2.streamIdleTimeoutMs;
    this.streams.walk((st) => {
      if (now - st.lastActive >= idle) st.timedOut();
    });
  }

  /** The session closed (its socket too): nothing more to check. */
  sessionClosed(): void {
    this.host.waits.delete(this);
    this.endedAt = performance.now();
    if (!this.socket.destroyed) this.socket.destroy();
  }

  /** An error of the session: a peer's protocol fault (nghttp2 has sent GOAWAY) or its socket's. */
  sessionError(err: NodeJS.ErrnoException): void {
    const conn = this.hc.conn;
    const code = err.code ?? '';
    if (code.startsWith('ERR_HTTP2') && (conn.result === null || conn.result === 'denied')) conn.result = 'h2_protocol_error';
    this.host.log.debug(
      { conn: conn.id, client: conn.clientAddress, err: code || err.message, detail: err.message, errno: err.errno },
      'HTTP/2 session error',
    );
  }
}

function onStream(this: Session, stream: http2.ServerHttp2Stream, _headers: unknown, flags: number, raw: string[]): void {
  this[kConn]!.stream(stream, flags, raw);
}

function onSessionError(this: Session, err: NodeJS.ErrnoException): void {
  this[kConn]?.sessionError(err);
}

function onSessionClose(this: Session): void {
  this[kConn]?.sessionClosed();
}

function onGoaway(this: Session, code: number): void {
  const c = this[kConn];
  if (c !== undefined) ListenerStats.bump(c.host.stats.h2Goaways, `received/${h2CodeName(code)}`);
}

function onFrameError(this: Session): void {
  // A frame ipgate could not send (its stream was reset meanwhile): nothing to do, the stream's
  // own 'close' follows. Handled so that it is never an unhandled event.
}

function onControlFrame(this: Session): void {
  this[kConn]?.controlFrame();
}
