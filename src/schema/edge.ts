/**
 * The edge rules' option sections (docs/edge-rules.md; src/forward/http/edge-rules.ts applies
 * them): what an nginx `location` block holds besides `allow` / `deny` and `proxy_pass`.
 *
 * ```yaml
 * listeners:
 *   - name: web
 *     mode: http
 *     http:
 *       httpsRedirect: {status: 308}      # plain HTTP -> https://host/path (behind a trusted proxy, its X-Forwarded-Proto decides)
 *     routes:
 *       - name: old
 *         hosts: [old.example.com]
 *         http:
 *           redirect: {host: new.example.com, status: 301}
 * ```
 */
import { Enum, Nullable, Section, Type, type Static } from './kit';

/**
 * Redirect the request (nginx `return 30x`, Gateway API `RequestRedirect`): to `url` as it is, or
 * to the request's own URL with the parts given replaced. The Location is built from the host the
 * request was decided on and its target as sent.
 */
export const RedirectSchema = Section({
  /** A fixed Location (ingress-nginx `permanent-redirect` / `temporal-redirect`); the request's path is not appended. */
  url: Type.Optional(Type.String({ pattern: '^https?://[\\x21-\\x7e]+$', maxLength: 2048 })),
  /** Replace the scheme. */
  scheme: Type.Optional(Enum(['http', 'https'])),
  /** Replace the host (e.g. to or from `www.`). */
  host: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9.-]{1,253}$' })),
  /** Replace the port; absent: none in the Location when the scheme changed, else the request's. */
  port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65_535 })),
  /** Replace the path (the query is kept). */
  path: Type.Optional(Type.String({ pattern: '^/[\\x21-\\x7e]*$', maxLength: 2048 })),
  /** 301, 302 (Gateway API's when none is given), 303, 307 or 308. */
  status: Type.Unsafe<301 | 302 | 303 | 307 | 308>({ enum: [301, 302, 303, 307, 308], default: 302 }),
  /**
   * Redirect before the allowlist decides, as nginx's `return` does: a refused client is redirected
   * too (and so learns where to). `false`: after it, so a refused client learns nothing but its 403.
   */
  beforeAllowlist: Type.Boolean({ default: false }),
});

/** Plain HTTP to HTTPS (ingress-nginx `ssl-redirect`, `force-ssl-redirect`): `https://host[:port]/target`. */
export const HttpsRedirectSchema = Section({
  /** 301, 302, 307 or 308 (ingress-nginx's `http-redirect-code`). */
  status: Type.Unsafe<301 | 302 | 307 | 308>({ enum: [301, 302, 307, 308], default: 308 }),
  /** The HTTPS port in the Location (none written for 443). */
  port: Type.Integer({ minimum: 1, maximum: 65_535, default: 443 }),
  /** As `redirect.beforeAllowlist`: redirect refused clients too (nginx's order). */
  beforeAllowlist: Type.Boolean({ default: false }),
});

/**
 * Replace the path prefix the route matched (Gateway API `ReplacePrefixMatch`, Traefik
 * `StripPrefix`, ingress-nginx `rewrite-target: /$2` with `path: /api(/|$)(.*)`): with
 * `replacePrefix: /`, `/api/v1/x?q` on the path entry `/api/v1` goes upstream as `/x?q`. No
 * regular expression is evaluated on a request (docs/edge-rules.md "Rewrites").
 */
export const RewriteSchema = Section({
  /** What the matched path entry is replaced with: `/` removes it. */
  replacePrefix: Type.String({ pattern: '^/[\\x21-\\x7e]*$', maxLength: 2048 }),
  /** Send `X-Forwarded-Prefix` with the prefix removed (Spring, ASP.NET and Traefik-aware apps build links from it). */
  forwardedPrefix: Type.Boolean({ default: true }),
});

export type RewriteConfig = Static<typeof RewriteSchema>;
export type RedirectConfig = Static<typeof RedirectSchema>;
export type HttpsRedirectConfig = Static<typeof HttpsRedirectSchema>;

/**
 * nginx `max_fails` / `fail_timeout` (HAProxy `observe layer7` with `error-limit`): a target that
 * fails is skipped for a while (docs/edge-rules.md "Upstream health").
 */
export const PassiveHealthSchema = Section({
  /** Failures in a row (the first no older than `failTimeoutMs`) that take a target out (nginx `max_fails`). */
  maxFails: Type.Integer({ minimum: 1, maximum: 1000, default: 1 }),
  /** The window the failures must fall in, and how long the target is then skipped (nginx `fail_timeout`). */
  failTimeoutMs: Type.Integer({ minimum: 1, maximum: 86_400_000, default: 10_000 }),
  /**
   * Upstream statuses counted as failures besides failed connects and timeouts (nginx
   * `proxy_next_upstream http_502 ...`); a response with any other status resets the count.
   */
  statuses: Type.Array(Type.Integer({ minimum: 500, maximum: 599 }), { default: [], maxItems: 100 }),
});

/**
 * Active checks (HAProxy `check inter / rise / fall` with `option httpchk` and `http-check expect
 * status`; nginx Plus `health_check`): each target of the group is probed every `intervalMs`, apart
 * from client traffic (docs/edge-rules.md "Upstream health").
 */
export const ActiveHealthSchema = Section({
  /** `tcp`: a connect that succeeds; `http`: an HTTP/1.1 `GET path` answered with an expected status. */
  type: Enum(['tcp', 'http'], { default: 'tcp' }),
  /** The path (and query) an `http` check requests; absent: `/`. */
  path: Type.Optional(Type.String({ pattern: '^/[\\x21-\\x7e]*$', maxLength: 2048 })),
  /** The Host header of an `http` check; absent: the target as written (`host:port`, as nginx's `$proxy_host`). */
  host: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9.:\\[\\]-]{1,261}$' })),
  /** Statuses an `http` check accepts; empty: any 2xx or 3xx (as HAProxy's `option httpchk` without `http-check expect`). */
  expectStatuses: Type.Array(Type.Integer({ minimum: 100, maximum: 599 }), { default: [], maxItems: 100 }),
  /** Time between the starts of two checks of one target (HAProxy `inter`); the first is at a random point within it. */
  intervalMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 2000 }),
  /** A check not done (connected, and for `http` the status line read) within this fails. */
  timeoutMs: Type.Integer({ minimum: 10, maximum: 60_000, default: 1000 }),
  /** Successful checks in a row that bring a target that is down back (HAProxy `rise`). */
  rise: Type.Integer({ minimum: 1, maximum: 100, default: 2 }),
  /** Failed checks in a row that take a target down (HAProxy `fall`). */
  fall: Type.Integer({ minimum: 1, maximum: 100, default: 3 }),
});

/**
 * Health of a listener's upstream group (and its routes' without their own) or of one route's
 * group. A target that is out is skipped; only when no target of the group is up is a request
 * answered 503 (`upstream_none_up`) without a connect (a TCP listener closes the connection).
 */
export const UpstreamHealthSchema = Section({
  /** Skip a target that fails `maxFails` times in a row; null: never (ingress-nginx's `upstream-max-fails: 0`). */
  passive: Nullable(PassiveHealthSchema, { default: null }),
  /**
   * Probe each target; null: no probes. With `passive` too, a passive failure takes the target
   * down and only `rise` good checks bring it back (HAProxy `observe` with `on-error mark-down`).
   */
  active: Nullable(ActiveHealthSchema, { default: null }),
});

/** No health rules: a listener without `upstreamHealth`. */
export const NO_UPSTREAM_HEALTH: Readonly<UpstreamHealthConfig> = Object.freeze({ passive: null, active: null });

export type PassiveHealthConfig = Static<typeof PassiveHealthSchema>;
export type ActiveHealthConfig = Static<typeof ActiveHealthSchema>;
export type UpstreamHealthConfig = Static<typeof UpstreamHealthSchema>;

// --- Rate and connection limits (docs/edge-rules.md "Rate and connection limits"; src/limit/) ---

/** Allowlist names (keys of `allowlists`) whose clients are never limited (ingress-nginx `limit-whitelist`). */
const LimitExemptSchema = Type.Array(Type.String({ minLength: 1 }), { default: [], maxItems: 64 });

/** nginx's rate form: `10r/s` or `30r/m` (a fraction allowed: `0.5r/s`). */
const RateSchema = Type.String({ pattern: '^[0-9]{1,7}(\\.[0-9]{1,3})?r/[sm]$' });

/** Clients tracked at once by one limit (its table; docs/edge-rules.md "Bounded under a flood"). */
const MaxClientsSchema = Type.Integer({ minimum: 1, maximum: 10_000_000, default: 100_000 });

/**
 * nginx `limit_req`: a leaky bucket per client (the identity ipgate derived: behind a trusted
 * balancer or proxy, the real client). A request past `rate` plus `burst` is refused with
 * `status`; within the burst it is delayed to the rate (nginx's default), or forwarded at once
 * with `nodelay` (ingress-nginx's choice), or the first `delay` of the burst at once and the rest
 * delayed (nginx `delay=`).
 */
export const RequestRateSchema = Section({
  /** Requests a client may make over time: `10r/s`, `30r/m` (nginx `rate=`; ingress-nginx `limit-rps` / `limit-rpm`). */
  rate: RateSchema,
  /** Requests a client may make beyond the rate at once (nginx `burst=`). */
  burst: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
  /** Requests within the burst forwarded at once; the rest wait until the rate allows them (nginx `delay=`). */
  delay: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
  /** Forward every request within the burst at once (nginx `nodelay`; `delay` is then unused). */
  nodelay: Type.Boolean({ default: false }),
  /**
   * Status of a refused request: 429 (RFC 6585 Too Many Requests: the client's own rate, not the
   * service, is the cause) or 503 (what nginx's `limit_req_status` and ingress-nginx answer unless told otherwise).
   */
  status: Type.Unsafe<429 | 503>({ enum: [429, 503], default: 429 }),
  /** Allowlist names whose clients are never limited (ingress-nginx `limit-whitelist`). */
  exempt: LimitExemptSchema,
  /**
   * Clients tracked at once (nginx's zone size; 10m holds ~160,000). Past it the least recently
   * seen client is forgotten: one whose bucket has drained without a trace, otherwise its excess
   * (ipgate_limit_evictions_total{state="active"}: the table is too small for the traffic).
   */
  maxClients: MaxClientsSchema,
});

/**
 * nginx `limit_conn`: at most `perClient` at once per client. On an HTTP listener it counts
 * requests in progress, as nginx does ("a connection is counted only if it has a request being
 * processed by the server"; each HTTP/2 stream is one); on a TCP listener, open connections.
 */
export const ConcurrencySchema = Section({
  /** Requests in progress (HTTP) or open connections (TCP) per client (ingress-nginx `limit-connections`). */
  perClient: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  /** Status of a refused HTTP request: 429 or 503 (nginx `limit_conn_status` answers 503 unless told otherwise). A TCP connection is closed. */
  status: Type.Unsafe<429 | 503>({ enum: [429, 503], default: 429 }),
  /** Allowlist names whose clients are never limited. */
  exempt: LimitExemptSchema,
  /** Clients tracked at once: past it a new client is let through uncounted (ipgate_limit_overflow_total). */
  maxClients: MaxClientsSchema,
});

/** TCP listeners: new connections per client (HAProxy `sc0_conn_rate`, nginx stream has none); one past the rate and burst is closed. */
export const ConnectionRateSchema = Section({
  /** New connections a client may open over time: `10r/s`, `60r/m`. */
  rate: RateSchema,
  /** Connections a client may open beyond the rate at once. */
  burst: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
  /** Allowlist names whose clients are never limited. */
  exempt: LimitExemptSchema,
  /** Clients tracked at once (as `requests.maxClients`). */
  maxClients: MaxClientsSchema,
});

/** Per-client limits of a listener (also its routes' default). */
export const LimitsSchema = Section({
  /** HTTP listeners: requests per client (nginx `limit_req`); null: none. */
  requests: Nullable(RequestRateSchema, { default: null }),
  /** Requests in progress (HTTP) or open connections (TCP) per client (nginx `limit_conn`); null: none. */
  concurrent: Nullable(ConcurrencySchema, { default: null }),
  /** TCP listeners: new connections per client; null: none. */
  connectionRate: Nullable(ConnectionRateSchema, { default: null }),
});

/** An HTTP route's limits: each one given replaces the listener's (its own bucket; null: none); absent: the listener's. */
export const RouteLimitsSchema = Section({
  /** Requests per client on this route; null: none, even if the listener has one. */
  requests: Type.Optional(Nullable(RequestRateSchema)),
  /** Requests in progress per client on this route; null: none, even if the listener has one. */
  concurrent: Type.Optional(Nullable(ConcurrencySchema)),
});

export type RequestRateConfig = Static<typeof RequestRateSchema>;
export type ConcurrencyConfig = Static<typeof ConcurrencySchema>;
export type ConnectionRateConfig = Static<typeof ConnectionRateSchema>;
export type LimitsConfig = Static<typeof LimitsSchema>;
export type RouteLimitsConfig = Static<typeof RouteLimitsSchema>;
