/**
 * Per-connection and per-request state of the HTTP path: plain objects with fixed fields (one
 * hidden class each), engine-neutral (no node:http objects): what the policy decided and what the
 * engine (relay/relay-conn.ts) reports, read by the access log.
 */
import type { AllowEntry } from '../../allowlist/entry';
import type { Decision } from '../../allowlist/matcher';
import type { Connection, Via } from '../../connection/connection';
import type { Linked, LinkedSet } from '../../connection/linked-set';
import type { Reason } from '../../reasons';
import type { Upstream } from '../../upstream/upstream-group';
import type { HttpRoute } from './http-routes';

/**
 * How a connection that multiplexes requests (HTTP/2) is ended: GOAWAY, then close once its open
 * streams are done (forward/http/h2/h2-conn.ts). The forwarder's lifecycle (drain, revocation, a
 * route removed) calls it where an HTTP/1.1 connection would close after its in-flight response.
 */
export interface GracefulEnd {
  goaway(): void;
}

/** One client connection handed to the HTTP forwarder. */
export class HttpConn implements Linked<HttpConn> {
  /** `h1` or `h2`: the engine serving it (a bounded label of the metrics and the access line). */
  protocol: 'h1' | 'h2' = 'h1';
  /** HTTP/2: the engine's graceful end (GOAWAY); null for HTTP/1.1. */
  h2: GracefulEnd | null = null;
  /** The peer is a trusted proxy: identity (and the allowlist decision) per request from XFF. */
  readonly trusted: boolean;
  /** Connection-level decision for untrusted peers: the allowlist entry that admits it, null denied. */
  entry: AllowEntry | null = null;
  /**
   * For an untrusted peer that is refused: the decision (reason, deny entry) from the connection's
   * lookup, carried so that its denied requests are counted and summarised without a lookup each
   * (kept current by a list change's re-check, as `entry` is). Null otherwise.
   */
  denial: Decision | null = null;
  /** Exchanges whose response has not closed yet (pipelining, or HTTP/2 streams, can make it more than one). */
  readonly open: Exchange[] = [];
  /** The exchange that upgraded this connection (WebSocket), if any. */
  upgraded: Exchange | null = null;
  /** A list change no longer allows this connection: no new requests, close after the in-flight one. */
  revoked = false;
  /** The connection is ending (revoked, a route removed, draining): its in-flight response is its last. */
  closing = false;
  /** The listener is draining: no new request is admitted on this connection (it closes instead). */
  draining = false;
  /** A revoked connection's in-flight response gets a grace period, then this cuts it. */
  revokeTimer: NodeJS.Timeout | null = null;
  /** conn.destPort as text, for X-Forwarded-Port. */
  readonly destPortText: string;
  /** The listener had routes when this connection arrived: every request is routed (http-routes.ts). */
  routed = false;
  /**
   * This connection's latest request that a route took (admitted or refused; a tunnel's upgrade,
   * the one in flight, or the last one answered): what a reload or a list change re-decides
   * (HttpForwarder.redecide). Null before any.
   */
  latest: Exchange | null = null;

  /** The forwarder's set of its connections (connection/linked-set.ts). */
  linkSet: LinkedSet<HttpConn> | null = null;
  linkPrev: HttpConn | null = null;
  linkNext: HttpConn | null = null;

  constructor(
    readonly conn: Connection,
    trusted: boolean,
  ) {
    this.trusted = trusted;
    this.destPortText = String(conn.destPort);
  }
}

/** One request (or upgrade) and what became of it: the access-log record. */
export class Exchange {
  /** Real client of this request (canonical). */
  client: string;
  via: Via;
  /** Allowlist entry that admitted the client (the access log's `entry`); null denied. */
  entry: AllowEntry | null = null;
  /** Upstream target chosen, `host:port`. */
  upstream: Upstream | null = null;
  status = 0;
  /** The upstream's own status (0: no response head from it; ipgate answered, or nothing). */
  upstreamStatus = 0;
  /** performance.now() when the request went to the upstream (the last attempt). */
  sentAt = 0;
  /** Milliseconds from the request sent upstream to the response head (null: no head). */
  upstreamMs: number | null = null;
  /** X-Request-ID: a trusted proxy's, or ours (request-id.ts); sent upstream and logged. */
  requestId: string | null = null;
  /** The request's Host (after an absolute-form target's authority replaced it) and User-Agent. */
  host: string | null = null;
  userAgent: string | null = null;
  /** Routed listeners: the route that took this request (null: none matched, see `reason`). */
  route: HttpRoute | null = null;
  /** The request was routed (the access log and the metrics then carry `route`). */
  routed = false;
  /** Failure / result reason (`upstream_refused`, `upstream_timeout`, `denied`, `client_abort`, ...). */
  reason: Reason | null = null;
  readonly startedAt: number;
  /** The client socket's bytesWritten when the request arrived; the engine sets both. */
  bytesAtStart = 0;
  /** Bytes written to the client for this request (the response, or a tunnel's), set before it is recorded. */
  bytesOut = 0;
  /**
   * Request bytes for ipgate_http_request_size_bytes: the head's (request-size.ts) at the start,
   * plus the body bytes relayed upstream (the engine adds them as they go).
   */
  requestBytes = 0;
  /** The client sent no body (no Content-Length > 0, no Transfer-Encoding): safe to retry. */
  readonly bodyless: boolean;

  constructor(
    readonly hc: HttpConn,
    /** The request line's method and target, as the client sent them. */
    readonly method: string,
    readonly url: string,
    client: string,
    via: Via,
    now: number,
    bodyless: boolean,
  ) {
    this.client = client;
    this.via = via;
    this.startedAt = now;
    this.bodyless = bodyless;
  }
}
