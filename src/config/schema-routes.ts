/**
 * A listener's `routes`: one port, many backends, an allowlist per route (docs/routes-and-sni.md).
 * The same shape serves HTTP listeners (host, then path) and TCP listeners routing on the TLS
 * ClientHello's SNI (hosts only). Written once with TypeBox: the JSON Schema Ajv checks and the
 * TypeScript type come from the same definition. Semantic checks (hosts, paths in normal form,
 * references, each host + path once) are validate-routes.ts's, through the route table's own
 * compile step, so the config cannot accept a table the data path would refuse.
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
 *       - name: default
 *         hosts: ["*"]
 * ```
 */
import { Type, type Static } from '@sinclair/typebox';

/** A route's name: a bounded log and metric label (as listener names are). */
const ROUTE_NAME = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$';
/** An HTTP header field name (RFC 9110 token). */
const HEADER_NAME = '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$';

export const RoutePathSchema = Type.Object({
  /** The path, in normal form (`/a/../b` is refused with "write `/b`"); the query is not part of it. */
  path: Type.String({ minLength: 1, maxLength: 2048 }),
  /**
   * `prefix`: the path and everything below it on a `/` boundary (`/api` matches `/api`,
   * `/api/`, `/api/v1`, never `/apix`); `exact`: the path only. Exact wins over prefix, then the
   * longest prefix wins.
   */
  match: Type.Union([Type.Literal('prefix'), Type.Literal('exact')], { default: 'prefix' }),
}, { additionalProperties: false });

/** Per-route HTTP settings (HTTP listeners only); each replaces the listener's `http` one. */
export const RouteHttpSchema = Type.Object({
  /** Time to wait for this route's upstream response headers before answering 504 (replaces `http.upstreamTimeoutMs`). */
  upstreamTimeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400_000 })),
  /**
   * Request headers set on every request this route forwards (replacing a client's header of the
   * same name), e.g. `{X-Route: api}`. Client-IP headers (X-Forwarded-*, X-Real-IP, Forwarded)
   * cannot be set here: ipgate writes those.
   */
  requestHeaders: Type.Optional(Type.Record(Type.String({ pattern: HEADER_NAME }), Type.String({ maxLength: 8192 }), { maxProperties: 64 })),
  /** Body of the 403 a client denied by this route gets (replaces `http.deniedBody`). */
  deniedBody: Type.Optional(Type.String({ maxLength: 65_536 })),
}, { additionalProperties: false });

export const RouteSchema = Type.Object({
  /** Unique within the listener: the `route` label of metrics and the access log. */
  name: Type.String({ pattern: ROUTE_NAME }),
  /**
   * `api.example.com` (exact), `*.example.com` (any name ending in `.example.com`, never
   * `example.com` itself), or `*` (the default route). Exact, then the longest wildcard, then the
   * default; the host found decides (no fallback to a less specific host).
   */
  hosts: Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { minItems: 1, maxItems: 1024 }),
  /** HTTP listeners only. Absent: every path (the prefix `/`). */
  paths: Type.Optional(Type.Array(RoutePathSchema, { minItems: 1, maxItems: 1024 })),
  /** Upstream targets `host:port` for this route (its own pool and round robin). Absent: the listener's `upstreams`. */
  upstreams: Type.Optional(Type.Array(Type.String(), { minItems: 1 })),
  /** The allowlist this route enforces (a key of `allowlists`). Absent: the listener's `allowlist`. */
  allowlist: Type.Optional(Type.String()),
  /** HTTP listeners only. */
  http: Type.Optional(RouteHttpSchema),
}, { additionalProperties: false });

/** TCP listeners with routes: how the ClientHello is read (tls/client-hello.ts). */
export const SniSchema = Type.Object({
  /** A ClientHello not complete within this time closes the connection (`tls_timeout`). */
  helloTimeoutMs: Type.Integer({ minimum: 1, maximum: 86_400_000, default: 5000 }),
}, { additionalProperties: false });

/**
 * The listener properties this file adds. `routes` absent: the listener has one upstream group
 * and one allowlist, exactly as before routes existed. On a TCP listener, `routes` turns on SNI
 * routing: the ClientHello is read (after any PROXY header) and forwarded untouched.
 */
export const listenerRouteProperties = {
  /** Host (and path) routes; see the file comment. Absent: no routing. */
  routes: Type.Optional(Type.Array(RouteSchema, { minItems: 1, maxItems: 100_000 })),
  /** TCP listeners with `routes` only. */
  sni: Type.Optional(SniSchema),
};

export type RoutePathConfig = Static<typeof RoutePathSchema>;
export type RouteHttpConfig = Static<typeof RouteHttpSchema>;
export type RouteConfig = Static<typeof RouteSchema>;
export type SniConfig = Static<typeof SniSchema>;
