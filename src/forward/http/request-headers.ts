/**
 * The request headers sent upstream, built in one pass over the client's raw headers.
 *
 * Removed from every request (RFC 7230 6.1 hop-by-hop, and what made http-proxy defeat the pool):
 *   Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade, HTTP2-Settings, and every
 *   header the client's Connection header names. The client's `Connection: close` ends the
 *   client's connection, not our pooled upstream one. (Upgrade/Connection are set again for an
 *   upgrade request.) Expect: the server already answered `100 Continue` to the client.
 *   Transfer-Encoding is kept: Node re-frames the body it parsed, and a kept `chunked` makes it
 *   frame DELETE/OPTIONS bodies too instead of sending them unframed (request smuggling).
 * Removed from untrusted peers, set by us (docs/architecture.md: client-sent forwarding headers are discarded):
 *   X-Forwarded-For, X-Real-IP, Forwarded, every X-Forwarded-*, and the other client-IP headers
 *   backends are known to read (True-Client-IP, X-Client-IP, X-Cluster-Client-IP,
 *   CF-Connecting-IP, X-Original-Forwarded-For, Fastly-Client-IP, X-Envoy-External-Address,
 *   Client-IP, X-ProxyUser-Ip), and the operator's `http.stripHeaders`: a forged one must never
 *   reach a backend that happens to believe it. Underscore spellings of these are dropped from
 *   everyone.
 * From a trusted proxy, X-Forwarded-For/Proto/Host/Port and Forwarded are read (the chain is
 * extended, not replaced) and the other headers pass unchanged.
 *
 * Duplicate lines are joined as Node does (`, `; `; ` for Cookie), except the single-valued ones
 * Node keeps the first of (Host, Content-Type, ...).
 */
import type { OutgoingHttpHeaders } from 'node:http';

/** What the client sent about forwarding, captured during the scan (reset per request). */
export class ReceivedHeaders {
  xForwardedFor: string | null = null;
  xForwardedProto: string | null = null;
  xForwardedHost: string | null = null;
  xForwardedPort: string | null = null;
  forwarded: string | null = null;
  host: string | null = null;
  accept: string | null = null;
  userAgent: string | null = null;
  /** A trusted proxy's X-Request-ID (never passed on as received: the forwarder sets the header). */
  requestId: string | null = null;
  upgrade: string | null = null;
  /** The request has a body (Content-Length > 0 or Transfer-Encoding): not safe to send twice. */
  hasBody = false;
  /** Content-Length as a number (the parser checked it is one), -1 without one. */
  contentLength = -1;
  /** Extra tokens of the Connection header (other than close/keep-alive/upgrade), lower-case. */
  connectionTokens: string[] | null = null;

  reset(): void {
    this.xForwardedFor = null;
    this.xForwardedProto = null;
    this.xForwardedHost = null;
    this.xForwardedPort = null;
    this.forwarded = null;
    this.host = null;
    this.accept = null;
    this.userAgent = null;
    this.requestId = null;
    this.upgrade = null;
    this.hasBody = false;
    this.contentLength = -1;
    this.connectionTokens = null;
  }
}

/** Node's "keep the first" set (lib/_http_incoming.js matchKnownFields). */
const SINGLE = new Set([
  'host',
  'content-type',
  'content-length',
  'user-agent',
  'referer',
  'authorization',
  'proxy-authorization',
  'if-modified-since',
  'if-unmodified-since',
  'from',
  'location',
  'max-forwards',
  'retry-after',
  'etag',
  'last-modified',
  'server',
  'age',
  'expires',
]);

/**
 * Scan `raw` (IncomingMessage.rawHeaders) into `out`; fill `got`. `trusted`: the peer is a trusted
 * proxy (its forwarding headers are read; otherwise they are dropped unread).
 */
export function scanRequestHeaders(
  raw: readonly string[],
  trusted: boolean,
  out: OutgoingHttpHeaders,
  got: ReceivedHeaders,
  strip: ReadonlySet<string> | null = null,
): void {
  got.reset();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const value = raw[i + 1]!;
    // `X_Forwarded_For`, `X-Real_IP`: CGI/WSGI backends fold `_` and `-` into one variable
    // (HTTP_X_FORWARDED_FOR), so an underscore spelling of an identity header is that header.
    // Never passed on, from anyone: nginx drops every underscore header by default.
    if (name.includes('_') && isIdentityHeader(name.replace(/_/g, '-'))) continue;
    if (strip !== null && !trusted && strip.has(name)) continue;
    switch (name) {
      case 'connection':
        connectionTokens(value, got);
        continue;
      case 'keep-alive':
      case 'proxy-connection':
      case 'te':
      case 'trailer':
      case 'http2-settings':
      case 'expect':
        continue;
      case 'upgrade':
        if (got.upgrade === null) got.upgrade = value;
        continue;
      case 'x-forwarded-for':
        if (trusted) got.xForwardedFor = got.xForwardedFor === null ? value : `${got.xForwardedFor}, ${value}`;
        continue;
      case 'forwarded':
        if (trusted) got.forwarded = got.forwarded === null ? value : `${got.forwarded}, ${value}`;
        continue;
      case 'x-forwarded-proto':
        if (trusted && got.xForwardedProto === null) got.xForwardedProto = value;
        continue;
      case 'x-forwarded-host':
        if (trusted && got.xForwardedHost === null) got.xForwardedHost = value;
        continue;
      case 'x-forwarded-port':
        if (trusted && got.xForwardedPort === null) got.xForwardedPort = value;
        continue;
      case 'x-real-ip':
        continue; // always ours
      case 'x-request-id':
        if (trusted && got.requestId === null) got.requestId = value;
        continue; // set by the forwarder: the trusted proxy's, or a new one
      case 'user-agent':
        if (got.userAgent === null) got.userAgent = value;
        break;
      case 'host':
        if (got.host === null) got.host = value;
        break;
      case 'content-length':
        if (value !== '0') got.hasBody = true;
        if (got.contentLength < 0) got.contentLength = Number(value);
        break;
      case 'transfer-encoding':
        got.hasBody = true;
        break;
      case 'accept':
        got.accept = got.accept === null ? value : `${got.accept}, ${value}`;
        break;
      case 'true-client-ip':
      case 'x-client-ip':
      case 'x-cluster-client-ip':
      case 'cf-connecting-ip':
      case 'x-original-forwarded-for': // ingress-nginx
      case 'fastly-client-ip':
      case 'x-envoy-external-address':
      case 'client-ip':
      case 'x-proxyuser-ip':
        if (!trusted) continue;
        break;
      default:
        if (!trusted && name.startsWith('x-forwarded-')) continue;
    }
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (SINGLE.has(name)) continue;
    else out[name] = `${prev as string}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  if (got.connectionTokens !== null) {
    // RFC 7230 6.1: headers named in Connection are hop-by-hop too. Never the message framing or
    // Host: `Connection: content-length` must not turn a body into the next request upstream.
    // (The forwarding headers are set after the scan, so naming them removes nothing of ours.)
    for (const token of got.connectionTokens) {
      if (token === 'host' || token === 'content-length' || token === 'transfer-encoding') continue;
      delete out[token];
    }
  }
}

/** Headers some backend is known to read a client address from (lower-case, `-` spelling). */
const IDENTITY = new Set([
  'x-forwarded-for',
  'x-real-ip',
  'forwarded',
  'true-client-ip',
  'x-client-ip',
  'x-cluster-client-ip',
  'cf-connecting-ip',
  'x-original-forwarded-for',
  'fastly-client-ip',
  'x-envoy-external-address',
  'client-ip',
  'x-proxyuser-ip',
]);

function isIdentityHeader(name: string): boolean {
  return IDENTITY.has(name) || name.startsWith('x-forwarded-');
}

function connectionTokens(value: string, got: ReceivedHeaders): void {
  for (const part of value.split(',')) {
    const token = part.trim().toLowerCase();
    if (token === '' || token === 'close' || token === 'keep-alive' || token === 'upgrade') continue;
    (got.connectionTokens ??= []).push(token);
  }
}
