/**
 * One catalogue of the reasons a connection or a request ends other than `ok`: each code is at
 * once the access log's `result` / `reason` field and a metric label (`ipgate_connections_closed_total
 * {result}`, `ipgate_denied_total{reason}`, `ipgate_http_client_errors_total{reason}` (client and host reasons),
 * `ipgate_upstream_errors_total{reason}`), so the set is closed and small, and each has one
 * sentence (HAProxy's `conn_err_code_str` and fastify's lib/errors.js are the models). The PROXY
 * stage's codes live beside its decoder (proxy-protocol/codes.ts), the ClientHello stage's beside
 * its reader (tls/codes.ts) and the route stage's beside the route table (route/codes.ts); all
 * are part of this set.
 * docs/architecture.md "The data path" says where each stage produces its codes.
 */
import { PP_REASONS, type PpReason } from './proxy-protocol/codes';
import { ROUTE_MISS_REASONS, type RouteMissReason } from './route/codes';
import { TLS_REASONS, type TlsReason } from './tls/codes';

/** Why a client was refused (`ipgate_denied_total{reason}`, with the PROXY stage's refusals). */
export const DENIAL_REASONS = Object.freeze({
  not_allowlisted: 'No entry of the allowlist covers the client address.',
  denied_by_entry: 'A deny entry is the most specific entry covering the client address.',
  revoked: 'An allowlist change no longer admits the client of an open connection; it was closed.',
});
export type DenialReason = keyof typeof DENIAL_REASONS;
/** The allowlist's own verdict on an address (matcher.ts): a refusal without the revocation. */
export type AllowlistRefusal = Exclude<DenialReason, 'revoked'>;

/** An HTTP client's fault or departure (`ipgate_http_client_errors_total{reason}` for the first three). */
export const CLIENT_REASONS = Object.freeze({
  bad_request:
    'The request could not be parsed, or is one ipgate refuses (HTTP/0.9, 2.x, a request target neither origin-form nor http(s) absolute-form, a body on an upgrade, CONNECT).',
  header_timeout: 'The request head was not complete within http.requestHeaderTimeoutMs (408).',
  header_too_large: 'The request head exceeded http.maxHeaderBytes (431).',
  client_abort: 'The client closed the connection before its response was complete.',
  idle_timeout: 'Nothing moved in either direction for timeouts.idleMs.',
  h2_malformed:
    'An HTTP/2 request broke RFC 9113 8.2 / 8.3 (a connection-specific, upper-case or pseudo header out of place, CR, LF or NUL in a value, a bad :method, :path or :authority, content-length against DATA): 400 or RST_STREAM, nothing upstream.',
  h2_stream_timeout: 'An HTTP/2 stream moved no byte either way for http.http2.streamIdleTimeoutMs; it was reset (CANCEL).',
  h2_required: 'An HTTP/1.1 request was routed to an upstream group that speaks HTTP/2 only (upstreamProtocol h2c or h2): 505.',
});
type ClientReason = keyof typeof CLIENT_REASONS;

/**
 * A request refused for its Host (400, counted in `ipgate_http_client_errors_total{reason}` with
 * the client reasons): RFC 9112 3.2 "A server MUST respond with a 400 (Bad Request) status code to
 * any HTTP/1.1 request message that lacks a Host header field and to any request message that
 * contains more than one Host header field line or a Host header field with an invalid field
 * value." forward/http/request-host.ts decides them, for the wire and for /v1/explain.
 */
export const HOST_REASONS = Object.freeze({
  host_missing: 'The request has no Host header (HTTP/1.0 included: the backend would be given no host to serve) (400).',
  host_repeated: 'The request has more than one Host header line (400).',
  host_invalid:
    'The Host (or the absolute-form target\'s authority) is not a host name, an IPv4 address or a bracketed IPv6 address with an optional port of digits up to 65535: empty, percent-encoded, userinfo ("@"), a comma, a non-ASCII byte, a bad label (400).',
  host_too_long: 'The host name of the Host (or the absolute-form authority) is longer than 253 characters, the DNS limit (400).',
});
export type HostReason = keyof typeof HOST_REASONS;
/**
 * What the edge rules decide (docs/edge-rules.md): each step of the policy that ends a request has
 * its code, the access log's `result` and the label of its counter.
 */
export const EDGE_REASONS = Object.freeze({
  upstream_none_up:
    'No target of the upstream group is up (upstreamHealth: each out after failures within its window, or down by its active checks): HTTP 503 without a connect, a TCP connection closed at once.',
  redirected:
    'A redirect rule answered the request (routes[].http.redirect, http.httpsRedirect): a 30x with its Location, nothing upstream (ipgate_http_edge_total).',
  body_too_large:
    'The request body is larger than maxBodyBytes: 413, at once for its Content-Length, as soon as a chunked body passes it; the connection closes (ipgate_http_client_errors_total).',
  limited_requests:
    "A client past its request rate and burst (limits.requests, nginx limit_req): answered with the limit's status (429, or 503), nothing went upstream.",
  limited_concurrent:
    'A client at its number of requests in progress (HTTP) or open connections (TCP) (limits.concurrent, nginx limit_conn): refused (429 or 503; a TCP connection closed).',
  limited_connection_rate:
    'A client past its new-connection rate and burst on a TCP listener (limits.connectionRate): the connection closed.',
});
export type EdgeReason = keyof typeof EDGE_REASONS;

/** What `ipgate_http_client_errors_total{reason}` can carry. */
export type HttpClientErrorLabel = ClientReason | HostReason | 'body_too_large';

/** An upstream's fault (`ipgate_upstream_errors_total{reason}`, `ipgate_upstream_failures_total`). */
export const UPSTREAM_REASONS = Object.freeze({
  upstream_refused: 'The upstream refused the connection (ECONNREFUSED).',
  upstream_timeout: 'The upstream did not connect, or send a response head, in time (HTTP: 504).',
  upstream_dns: 'The upstream name did not resolve.',
  upstream_reset: 'The upstream reset or closed the connection mid-exchange (HTTP: 502 before the head).',
  upstream_error: 'Any other upstream socket error.',
});
export type UpstreamReason = keyof typeof UPSTREAM_REASONS;

/** How a connection ended, besides the reasons above (`ipgate_connections_closed_total{result}`). */
export const END_REASONS = Object.freeze({
  denied: 'The client was refused: a TCP connection is closed; an HTTP one is answered 403 per request.',
  drain: 'Still open when shutdown.drainTimeoutMs ran out after SIGTERM; closed.',
  trust_revoked:
    'A change of the list named by proxyProtocol.trustedSources or http.trustedProxies no longer trusts the peer whose PROXY header or X-Forwarded-For named the client of an open connection; it was closed (HTTP: after its in-flight response).',
  route_removed:
    'A routes reload removed the route of an open connection (or sent its SNI to another route): an HTTP one is closed after its in-flight response, a TCP one at once.',
});
type EndReason = keyof typeof END_REASONS;

/**
 * How an HTTP/2 connection ended other than after its client's GOAWAY or close
 * (`ipgate_connections_closed_total{result}`; ipgate sent GOAWAY with the error code named).
 * docs/http-engines.md "The HTTP/2 engine".
 */
export const H2_REASONS = Object.freeze({
  h2_protocol_error:
    'The client broke HTTP/2 framing, flow control or HPACK, or went past a bound node:http2 keeps (streams, refused streams, session memory): GOAWAY with the error found, closed.',
  h2_rapid_reset:
    'The client reset more streams before their response than http.http2.resets allows (CVE-2023-44487): GOAWAY ENHANCE_YOUR_CALM, closed.',
  h2_control_flood: 'The client sent more PING and SETTINGS frames than http.http2.controlFrames allows: GOAWAY ENHANCE_YOUR_CALM, closed.',
  h2_idle_timeout:
    'An HTTP/2 connection had no open stream for http.keepAliveTimeoutMs (its first within http.requestHeaderTimeoutMs): GOAWAY, closed.',
});
export type H2Reason = keyof typeof H2_REASONS;

/**
 * Why a TLS handshake on a terminating listener failed (`ipgate_tls_handshakes_total{result}`, and
 * the connection's close result). docs/tls.md "Handshake failures".
 */
export const TLS_HANDSHAKE_REASONS = Object.freeze({
  tls_handshake_timeout: 'The TLS handshake did not finish within tls.handshakeTimeoutMs (a silent client, or half a ClientHello).',
  tls_version: 'The client offered no protocol version between tls.minVersion and tls.maxVersion.',
  tls_unknown_sni: 'The client asked for a name no certificate serves, or for none, and tls.unknownSni is refuse.',
  tls_client_cert_missing: 'The client sent no certificate where tls.clientCertificate is required.',
  tls_client_cert_invalid: 'The client certificate does not verify against tls.clientCA (unknown issuer, expired, bad signature).',
  tls_handshake_aborted: 'The client closed or reset the connection during the handshake.',
  tls_handshake_failed: 'The handshake failed otherwise (no common cipher or ALPN protocol, a bad message, an alert from the client).',
});
/** tls_not_handshake is the ClientHello reader's code (tls/codes.ts), shared by both TLS stages. */
export type TlsHandshakeReason = keyof typeof TLS_HANDSHAKE_REASONS | 'tls_not_handshake';

/** Every code a connection or request can end with, `ok` aside. */
export type Reason =
  | DenialReason
  | ClientReason
  | HostReason
  | UpstreamReason
  | EndReason
  | EdgeReason
  | H2Reason
  | PpReason
  | TlsReason
  | RouteMissReason
  | TlsHandshakeReason;

/** Each code with its sentence (docs and `ipgate doctor` read it). */
export const REASONS: Readonly<Record<Reason, string>> = Object.freeze({
  ...DENIAL_REASONS,
  ...CLIENT_REASONS,
  ...HOST_REASONS,
  ...UPSTREAM_REASONS,
  ...END_REASONS,
  ...EDGE_REASONS,
  ...H2_REASONS,
  ...PP_REASONS,
  ...TLS_REASONS,
  ...ROUTE_MISS_REASONS,
  ...TLS_HANDSHAKE_REASONS,
});

/** What `ipgate_denied_total{reason}` can carry: allowlist refusals and the PROXY stage's. */
export type DeniedLabel = DenialReason | PpReason;
