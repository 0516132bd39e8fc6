/**
 * Per-connection and per-request state of the HTTP path: plain objects with fixed fields (one
 * hidden class each), found from Node's req/res/socket through a symbol, so event handlers can be
 * shared functions instead of per-request closures.
 */
import type { Agent, ClientRequest, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type net from 'node:net';
import type { AllowEntry } from '../../allowlist/entry';
import type { Connection, Via } from '../../listener/connection';
import type { Upstream } from '../tcp/tcp-forwarder';
import type { Canned } from './canned';

export const kHttpConn = Symbol('ipgate.httpConn');
export const kExchange = Symbol('ipgate.exchange');

/** One client connection handed to the HTTP forwarder. */
export class HttpConn {
  /** The peer is a trusted proxy: identity (and the allowlist decision) per request from XFF. */
  readonly trusted: boolean;
  /** Connection-level decision for untrusted peers: the allowlist entry that admits it, null denied. */
  entry: AllowEntry | null = null;
  /** Exchanges whose response has not closed yet (pipelining can make it more than one). */
  readonly open: Exchange[] = [];
  /** The exchange that upgraded this connection (WebSocket), if any. */
  upgraded: Exchange | null = null;
  /** A list change no longer allows this connection: no new requests, close after the in-flight one. */
  revoked = false;
  /**
   * A direct client was answered 403 + Connection: close: requests it pipelined behind that one are
   * never answered (Node 24 emits them before the socket closes) and must not be counted.
   */
  closing = false;
  revokeTimer: NodeJS.Timeout | null = null;
  /** A parse error behind requests still being answered: written (and the socket closed) after them. */
  pendingError: Canned | null = null;
  /** Dedicated upstream agent (outbound PROXY header): one upstream connection for this client. */
  agent: Agent | null = null;
  /** conn.destPort as text, for X-Forwarded-Port. */
  readonly destPortText: string;

  constructor(
    readonly conn: Connection,
    trusted: boolean,
    /** The HttpForwarder (typed loosely to keep this file free of a cycle). */
    readonly forwarder: unknown,
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
  /** First target index (round robin) and attempts made (failover on connect errors). */
  first = 0;
  attempt = 0;
  proxyReq: ClientRequest | null = null;
  /** Upstream socket of an upgraded exchange. */
  upstreamSocket: net.Socket | null = null;
  /** Headers sent upstream (kept for a retry on the next target). */
  headers: OutgoingHttpHeaders | null = null;
  timer: NodeJS.Timeout | null = null;
  timedOut = false;
  /** The response (or upgraded socket) closed: nothing more may be written or started. */
  closed = false;
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
  /** Failure / result reason (`upstream_refused`, `upstream_timeout`, `denied`, `client_abort`, ...). */
  reason: string | null = null;
  readonly startedAt: number;
  readonly bytesAtStart: number;
  /** The client sent no body (no Content-Length > 0, no Transfer-Encoding): safe to retry. */
  readonly bodyless: boolean;

  constructor(
    readonly hc: HttpConn,
    readonly req: IncomingMessage,
    /** null for an upgrade (then `socket` is the client socket) */
    readonly res: ServerResponse | null,
    readonly socket: net.Socket,
    client: string,
    via: Via,
    now: number,
    bodyless: boolean,
  ) {
    this.client = client;
    this.via = via;
    this.startedAt = now;
    this.bytesAtStart = socket.bytesWritten;
    this.bodyless = bodyless;
  }
}
