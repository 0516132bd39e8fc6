/**
 * A listener's `routes`: one port, many backends, an allowlist per route (docs/routes-and-sni.md).
 * The same shape serves HTTP listeners (host, then path) and TCP listeners routing on the TLS
 * ClientHello's SNI (hosts only). Semantic checks (hosts, paths in normal form, references, each
 * host + path once) are validate-routes.ts's, through the route table's own compile step, so the
 * config cannot accept a table the data path would refuse.
 *
 * ```yaml
 * listeners:
 *   - name: edge
 *     mode: http
 *     listen: 0.0.0.0:8080
 *     allowlist: office          # routes without their own allowlist use the listener's
 *     upstreams: [web:8080]      # routes without their own upstreams use the listener's
 *     routes:
 *       - name: api
 *         hosts: [api.example.com]
 *         paths: [{path: /v1, match: prefix}, {path: /health, match: exact}]
 *         upstreams: [api-v1:8080]
 *         allowlist: api-clients
 *         http: {upstreamTimeoutMs: 5000, requestHeaders: {X-Route: api}}
 *       - name: other
 *         hosts: ["*"]
 * ```
 */
import { HttpsRedirectSchema, RedirectSchema, RewriteSchema, RouteLimitsSchema, UpstreamHealthSchema } from './edge';
import { Enum, Ms, NAME_PATTERN, Nullable, Section, Type, type Static } from './kit';

/** An HTTP header field name (RFC 9110 token). */
const HEADER_NAME = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

const RoutePathSchema = Section({
  /** The path, in normal form (`/a/../b` is refused with "write `/b`"); the query is not part of it. */
  path: Type.String({ minLength: 1, maxLength: 2048 }),
  /**
   * `prefix`: the path and everything below it on a `/` boundary (`/api` matches `/api`,
   * `/api/`, `/api/v1`, never `/apix`); `exact`: the path only. Exact wins over prefix, then the
   * longest prefix wins.
   */
  match: Enum(['prefix', 'exact'], { default: 'prefix' }),
  /**
   * Compare ASCII letters without case (`/ADMIN/x` matches `/admin`; `%C3%89` is not `%C3%A9`):
   * set it on the paths of a backend that routes case-insensitively (Express unless its
   * `case sensitive routing` is set, IIS), else `/ADMIN` reaches that backend's `/admin` through
   * the route of `/`. Absent: case-sensitive, as nginx `location` and Gateway API.
   */
  ignoreCase: Type.Optional(Type.Boolean()),
});

/** Per-route HTTP settings (HTTP listeners only); each replaces the listener's `http` one. */
const RouteHttpSchema = Section({
  /** Time to wait for this route's upstream response headers before answering 504 (replaces `http.upstreamTimeoutMs`). */
  upstreamTimeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
  /**
   * Request headers set on every request this route forwards (replacing a client's header of the
   * same name), e.g. `{X-Route: api}`. Client-IP headers (X-Forwarded-*, X-Real-IP, Forwarded)
   * cannot be set here: ipgate writes those.
   */
  requestHeaders: Type.Optional(
    Type.Unsafe<Record<string, string>>({
      type: 'object',
      propertyNames: { pattern: HEADER_NAME },
      additionalProperties: { type: 'string', maxLength: 8192 },
      maxProperties: 64,
    }),
  ),
  /** Body of the 403 a client denied by this route gets (replaces `http.deniedBody`). */
  deniedBody: Type.Optional(Type.String({ maxLength: 65_536 })),
  /** What this route's upstreams speak: `http1`, `h2c` or `h2` (replaces `http.upstreamProtocol`; gRPC: `h2c` or `h2`). */
  upstreamProtocol: Type.Optional(Enum(['http1', 'h2c', 'h2'])),
  /** `upstreamProtocol: h2`: PEM file of the CAs this route's upstreams must chain to (replaces `http.upstreamCA`). */
  upstreamCA: Type.Optional(Type.String({ minLength: 1 })),
  /** Answer this route's requests with a redirect (edge.ts RedirectSchema): nothing goes upstream. */
  redirect: Type.Optional(RedirectSchema),
  /** Plain HTTP to HTTPS for this route (replaces the listener's `http.httpsRedirect`; null: none). */
  httpsRedirect: Type.Optional(Nullable(HttpsRedirectSchema)),
  /** Replace the matched path prefix before the request goes upstream (edge.ts RewriteSchema). */
  rewrite: Type.Optional(RewriteSchema),
  /** Largest request body, bytes (replaces the listener's `http.maxBodyBytes`; null: no limit). */
  maxBodyBytes: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
  /** Upstream connect timeout (replaces the listener's `timeouts.connectMs`; ingress-nginx `proxy-connect-timeout`). */
  connectTimeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
  /** Upstream read timeout between two reads (replaces `http.readTimeoutMs`; null: none; ingress-nginx `proxy-read-timeout`). */
  readTimeoutMs: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 86_400_000 }))),
  /** Upstream send timeout of a blocked body write (replaces `http.sendTimeoutMs`; null: none; ingress-nginx `proxy-send-timeout`). */
  sendTimeoutMs: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 86_400_000 }))),
});

export const RouteSchema = Section({
  /** Unique within the listener: the `route` label of metrics and the access log. */
  name: Type.String({ pattern: NAME_PATTERN }),
  /**
   * `api.example.com` (exact), `*.example.com` (any name ending in `.example.com`, never
   * `example.com` itself), or `*` (the catch-all). Exact, then the longest wildcard, then `*`;
   * the host found decides (no fallback to a less specific host).
   */
  hosts: Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { minItems: 1, maxItems: 1024 }),
  /** HTTP listeners only. Absent: every path (the prefix `/`). */
  paths: Type.Optional(Type.Array(RoutePathSchema, { minItems: 1, maxItems: 1024 })),
  /** Upstream targets `host:port` for this route (its own pool and round robin). Absent: the listener's `upstreams`. */
  upstreams: Type.Optional(Type.Array(Type.String(), { minItems: 1 })),
  /** The allowlist this route enforces (a key of `allowlists`). Absent: the listener's `allowlist`. */
  allowlist: Type.Optional(Type.String()),
  /** HTTP settings of this route (HTTP listeners only). */
  http: Type.Optional(RouteHttpSchema),
  /** Health of this route's upstream targets (replaces the listener's `upstreamHealth`; docs/edge-rules.md "Upstream health"). */
  upstreamHealth: Type.Optional(UpstreamHealthSchema),
  /** HTTP routes: per-client limits of this route (replace the listener's `limits`, each on its own). */
  limits: Type.Optional(RouteLimitsSchema),
});

/** TCP listeners with routes: how the ClientHello is read (tls/client-hello.ts). */
export const SniSchema = Section({
  /**
   * A ClientHello not complete within this time closes the connection (`tls_timeout`): the first
   * one from the connection's start, a second one (after a HelloRetryRequest) from the retry.
   */
  helloTimeoutMs: Ms({ default: 5000 }),
});

export type RouteConfig = Static<typeof RouteSchema>;
