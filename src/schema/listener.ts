/**
 * A listener (a public data port) and its sections: inbound PROXY protocol, timeouts, HTTP options.
 *
 * A section defined in a file of its own (src/schema/NAME.ts, built with ./kit, never
 * importing ../schema) becomes an optional listener option with one line at the end of
 * `ListenerSchema`, `/** what it is (schema-NAME.ts); null: none. *\/ name: NameProperty,` (plus
 * its import), where `NameProperty` carries a `default` (e.g. `Nullable(NameSchema, { default:
 * null })`) or is `Type.Optional(...)`. test/unit/config/schema-docs.test.ts then asks for the
 * regenerated docs/config-reference.md and the option in the chart's values.schema.json.
 */
import { Enum, Ms, NAME_PATTERN, Nullable, Section, Type, type Static } from './kit';
import { Http2Schema } from './http2';
import { HttpsRedirectSchema, LimitsSchema, UpstreamHealthSchema } from './edge';
import { RouteSchema, SniSchema } from './routes';
import { ListenerTlsProperty } from './tls';

/** CIDRs (trusted peers), or the name of an allowlist holding them (so they can change live). */
function CidrsOrList() {
  return Type.Union([Type.Array(Type.String()), Type.String({ pattern: NAME_PATTERN })], { default: [] });
}

const InboundProxySchema = Section(
  {
    /**
     * `off`: no PROXY header is read; the socket address is the client.
     * `optional`: a peer in `trustedSources` may send a header; plain connections keep the socket address.
     * `required`: a peer in `trustedSources` must send one; everyone else is closed.
     * Anyone outside `trustedSources` who sends a header is closed (`pp_untrusted`): the spec forbids
     * believing a header from a peer that any client can impersonate.
     */
    mode: Enum(['off', 'optional', 'required'], { default: 'off' }),
    /**
     * CIDRs allowed to send a PROXY header (load balancers), or the name of an allowlist holding
     * them (a key of `allowlists`): a list named here changes live, like any allowlist (e.g. a
     * balancer's published ranges kept through the admin API). `[]`: nobody.
     */
    trustedSources: CidrsOrList(),
    /** A header not complete within this time closes the connection (`pp_timeout`). */
    headerTimeoutMs: Ms({ default: 5_000 }),
    /** Largest v2 header accepted, bytes (signature + address block + TLVs). */
    maxV2Length: Type.Integer({ minimum: 232, maximum: 65_551, default: 4_096 }),
  },
  { default: {} },
);

const TimeoutsSchema = Section(
  {
    /**
     * Upstream connect timeout, per target (TCP and HTTP; a route's `http.connectTimeoutMs` replaces
     * it on HTTP). A connect that times out counts as a failed connect: a request without a body
     * goes to the next target, else it is answered 504 (docs/edge-rules.md "Timeouts").
     */
    connectMs: Ms({ default: 5_000 }),
    /** A TCP stream (or HTTP keep-alive connection) idle this long in both directions is closed. */
    idleMs: Ms({ default: 600_000 }),
  },
  { default: {} },
);

const HttpSchema = Section(
  {
    /**
     * CIDRs of proxies in front of ipgate whose X-Forwarded-For is believed, or the name of an
     * allowlist holding them (changes live). `[]`: nobody's.
     */
    trustedProxies: CidrsOrList(),
    /** `append`: X-Forwarded-For = trusted chain + client; `replace`: the client only. */
    xForwardedFor: Enum(['append', 'replace'], { default: 'append' }),
    /** Also send an RFC 7239 `Forwarded` header. */
    forwarded: Type.Boolean({ default: false }),
    /** Body of the 403 response to a denied client (text; JSON clients get `{"error":...}`). */
    deniedBody: Type.String({ maxLength: 65_536, default: 'Forbidden\n' }),
    /** What happens to a denied client's connection. */
    denied: Section(
      {
        /**
         * A denied client's connection stays open after its 403 (keep-alive, limits and timeouts as
         * for an allowed one; its further requests are answered 403 too), as nginx and HAProxy do;
         * except after a request whose announced body did not come with its head, which a client
         * waiting for `100 Continue` may never send (docs/http-engines.md "Refusals").
         * `false`: `Connection: close` after the 403.
         */
        keepAlive: Type.Boolean({ default: true }),
      },
      { default: {} },
    ),
    /**
     * Send `X-Request-ID` upstream: a trusted proxy's as received, else a new one of 128 random
     * bits as 32 hex characters, like nginx's `$request_id` (in the access line either way, as
     * `requestId`).
     */
    requestId: Type.Boolean({ default: true }),
    /**
     * More request header names removed from untrusted peers, case-insensitive, besides the
     * built-in client-IP headers (X-Forwarded-*, X-Real-IP, Forwarded, True-Client-IP, X-Client-IP,
     * X-Cluster-Client-IP, CF-Connecting-IP, X-Original-Forwarded-For, Fastly-Client-IP,
     * X-Envoy-External-Address, Client-IP, X-ProxyUser-Ip, and any of them spelt with `_`).
     */
    stripHeaders: Type.Array(Type.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" }), { default: [] }),
    /** Time allowed to receive the complete request headers. */
    requestHeaderTimeoutMs: Ms({ default: 10_000 }),
    /** Largest request header block, bytes. */
    maxHeaderBytes: Type.Integer({ minimum: 1024, maximum: 1_048_576, default: 16_384 }),
    /** Idle time between keep-alive requests from the client. */
    keepAliveTimeoutMs: Ms({ default: 60_000 }),
    /** Requests served on one client connection before it is closed; 0 = unlimited. */
    maxRequestsPerConnection: Type.Integer({ minimum: 0, default: 1000 }),
    /**
     * Time to wait for the upstream's response headers before answering 504. A timeout of at least
     * four times the listener's sweep interval (a quarter of its shortest wait, 50 ms to 1 s) is
     * checked by that sweep, so it may run out up to one interval late; a shorter one is exact.
     */
    upstreamTimeoutMs: Ms({ default: 60_000 }),
    /**
     * The upstream silent this long while a response is awaited or streams in (nginx
     * `proxy_read_timeout`: between two reads, not for the whole response): 504 before the response
     * head, the client connection cut after it. null: no bound besides `upstreamTimeoutMs`.
     */
    readTimeoutMs: Nullable(Type.Integer({ minimum: 1, maximum: 86_400_000 }), { default: null }),
    /**
     * A request body write to the upstream blocked this long (the upstream stopped reading; nginx
     * `proxy_send_timeout`): 504 before the response head, cut after it. null: no bound.
     */
    sendTimeoutMs: Nullable(Type.Integer({ minimum: 1, maximum: 86_400_000 }), { default: null }),
    /**
     * Answer every request that reached this listener over plain HTTP with a redirect to HTTPS
     * (edge.ts HttpsRedirectSchema); behind a trusted proxy, its X-Forwarded-Proto says whether it
     * was. Routes may turn it off (`routes[].http.httpsRedirect: null`). null: none.
     */
    httpsRedirect: Nullable(HttpsRedirectSchema, { default: null }),
    /**
     * Largest request body, bytes (nginx `client_max_body_size`): a larger Content-Length is answered
     * 413 at once, a chunked body 413 as soon as it passes the limit; the connection closes either
     * way. Routes may set their own (`routes[].http.maxBodyBytes`). null: no limit (ipgate streams
     * bodies and holds none in memory; docs/edge-rules.md "Body size" says why no limit is imposed).
     */
    maxBodyBytes: Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), { default: null }),
    /**
     * Listeners with `routes`: how a `;` in a request path is read (docs/routes-and-sni.md "Path
     * parameters"). `refuse`: 400 (`route_path_params`), since a servlet container cuts every
     * segment at its `;` (`/public/..;/admin/` is `/admin/` to Tomcat) and nginx does not.
     * `servlet`: for backends that use matrix parameters (`;jsessionid=`): routes match each
     * segment cut at its `;` (`..;x` is `..`), and the upstream gets that normal form with the
     * parameters of the segments that remain. An encoded `;` (`%3B`) is refused either way.
     * Listeners without routes forward the target as sent.
     */
    pathParameters: Enum(['refuse', 'servlet'], { default: 'refuse' }),
    /**
     * Upstream keep-alive pool: sockets per target, busy and idle together; a request that finds
     * them all busy waits for one (its upstreamTimeoutMs runs meanwhile). Upgrades and outbound-PROXY
     * connections (one per client connection) are outside it.
     */
    upstreamMaxSockets: Type.Integer({ minimum: 1, maximum: 65_536, default: 128 }),
    /** Upstream keep-alive pool: idle socket lifetime; keep it below the backend's. */
    upstreamIdleTimeoutMs: Ms({ default: 4_000 }),
    /**
     * Upstream names (not IP literals) are resolved at most once per this long and the addresses
     * kept; a failed connect tries the next address (src/forward/http/upstream-dns.ts).
     */
    upstreamDnsTtlMs: Ms({ default: 10_000 }),
    /**
     * The engine: only `relay` remains (src/forward/http/relay/, docs/http-engines.md). `undici` and
     * `http-proxy` are accepted for old configs and run the relay, with a warning naming the field:
     * both engines were removed (docs/http-engines.md says why).
     */
    engine: Enum(['relay', 'http-proxy', 'undici'], { default: 'relay' }),
    /**
     * What the upstreams speak: `http1` (HTTP/1.1 on the keep-alive pool), `h2c` (HTTP/2 without
     * TLS, e.g. a gRPC server) or `h2` (HTTP/2 over TLS, its certificate verified against
     * `upstreamCA`). An HTTP/2 upstream takes the streams of HTTP/2 clients over one shared
     * connection per target (within its SETTINGS limits); an HTTP/1.1 request routed to one is
     * answered 505 (`h2_required`). Routes may set their own.
     */
    upstreamProtocol: Enum(['http1', 'h2c', 'h2'], { default: 'http1' }),
    /**
     * `upstreamProtocol: h2`: PEM file of the CAs the upstreams' certificates must chain to
     * (relative to the config file); null: Node's bundled CAs. The name checked is the target's
     * host (an IP literal: its address).
     */
    upstreamCA: Nullable(Type.String({ minLength: 1 }), { default: null }),
    /**
     * HTTP/2 upstreams: a connection carrying streams is pinged this often and closed when a PING
     * goes unanswered for 20 s (its streams reset towards their clients). Five minutes is the
     * floor gRPC servers enforce out of the box (grpc-go and grpc-js answer more frequent pings from
     * one client with GOAWAY ENHANCE_YOUR_CALM).
     */
    upstreamPingIntervalMs: Type.Integer({ minimum: 1000, maximum: 86_400_000, default: 300_000 }),
    /** HTTP/2 from clients (schema/http2.ts, docs/http-engines.md "The HTTP/2 engine"). */
    http2: Http2Schema,
  },
  { default: {} },
);

export const ListenerSchema = Section({
  /** Unique name; the metric and log label. */
  name: Type.String({ pattern: NAME_PATTERN }),
  /** `tcp` forwards byte streams; `http` proxies HTTP/1.1 (and upgrades). */
  mode: Enum(['tcp', 'http'], { default: 'tcp' }),
  /** `host:port` to bind, e.g. `0.0.0.0:8443`, `[::]:8443` (dual stack). Port 0 picks a free port. */
  listen: Type.String(),
  /** Name of the allowlist this listener enforces (a key of `allowlists`). */
  allowlist: Type.String(),
  /** Inbound PROXY protocol: whether a header is read, and from whom it is believed. */
  proxyProtocol: InboundProxySchema,
  /**
   * Upstream targets `host:port`; several are used round robin, the next one on connect failure.
   * May be left empty when every route has its own.
   */
  upstreams: Type.Array(Type.String(), { default: [] }),
  /**
   * PROXY header written to the upstream before any payload: `none` | `v1` | `v2`.
   * HTTP listeners (for backends listening with `proxy_protocol`): each client connection then gets
   * its own upstream connection (kept alive for that client's requests, never pooled: a pooled
   * connection would attribute every later request to the first client). The header carries the
   * connection's client (the peer, or the PROXY source from a balancer), not X-Forwarded-For.
   */
  outboundProxyProtocol: Enum(['none', 'v1', 'v2'], { default: 'none' }),
  /** Upstream connect and idle timeouts. */
  timeouts: TimeoutsSchema,
  /** HTTP listener options (mode `http` only). */
  http: HttpSchema,
  /**
   * Host / path routes (HTTP) or SNI routes (TCP, the ClientHello read and forwarded untouched):
   * src/schema/routes.ts. Absent: one upstream group and one allowlist.
   */
  routes: Type.Optional(Type.Array(RouteSchema, { minItems: 1, maxItems: 100_000 })),
  /** How a TCP listener with routes reads the ClientHello. */
  sni: Type.Optional(SniSchema),
  /**
   * Health of the upstream targets (edge.ts UpstreamHealthSchema), also for routes without their
   * own; on a TCP listener a failed connect counts as a passive failure, a connect as a success.
   * docs/edge-rules.md "Upstream health". Absent: none.
   */
  upstreamHealth: Type.Optional(UpstreamHealthSchema),
  /**
   * Per-client rate and connection limits (edge.ts LimitsSchema; docs/edge-rules.md "Rate and
   * connection limits"), also for routes without their own. Absent: none.
   */
  limits: Type.Optional(LimitsSchema),
  /** TLS termination on an HTTP listener (schema/tls.ts, docs/tls.md); null: none (plaintext). */
  tls: ListenerTlsProperty,
});

/** One listener: a public data port. */
export type ListenerConfig = Static<typeof ListenerSchema>;
