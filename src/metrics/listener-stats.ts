import type { DeniedLabel, HttpClientErrorLabel, Reason, UpstreamReason } from '../reasons';
import { CONNECT_BUCKETS, FixedHistogram, HTTP_DURATION_BUCKETS } from './fixed-histogram';

/**
 * Per-listener counters kept as plain numbers on the hot path. prom-client's labelled inc() costs
 * 100-340 ns; a property increment costs ~1 ns. The metrics module publishes these from a
 * collect() callback at scrape time.
 */
export class ListenerStats {
  accepted = 0;
  active = 0;
  /** Closed connections by result: `ok`, `denied`, `pp_*`, `upstream_*`, `drain`, `revoked`, ... */
  readonly closed = new Map<Reason | 'ok', number>();
  /** Denials by reason (`denied_by_entry`, `not_allowlisted`, `pp_untrusted`, ...). */
  readonly denied = new Map<DeniedLabel, number>();
  /** PROXY header outcomes by `version/result`, e.g. `v2/ok`, `v1/ok`, `v2/local`, `none/none`, `v1/pp_bad_address`. */
  readonly proxyHeader = new Map<string, number>();
  /** Upstream failures by reason. */
  readonly upstreamErrors = new Map<UpstreamReason, number>();
  /** Accepts that failed or were refused at the open-file limit, by code (listener/accept-errors.ts). */
  acceptErrorsEmfile = 0;
  acceptErrorsEnfile = 0;
  acceptErrorsOther = 0;
  bytesFromClient = 0;
  bytesToClient = 0;
  /** HTTP listeners: requests received (upgrades included). */
  httpRequests = 0;
  /** HTTP listeners: upgrade requests (WebSocket, ...). */
  httpUpgrades = 0;
  /** HTTP listeners: finished requests by status class `1xx`..`5xx`, `none` (the client left first). */
  readonly httpResponses = new Map<string, number>();
  /** HTTP listeners: requests rejected by the parser (`bad_request`, `header_timeout`, `header_too_large`) or for their Host (`host_*`). */
  readonly httpClientErrors = new Map<HttpClientErrorLabel, number>();
  /** HTTP listeners: request duration, seconds (ipgate_http_request_duration_seconds). */
  readonly httpDuration = new FixedHistogram(HTTP_DURATION_BUCKETS);
  /** Upstream connect time of new upstream connections, seconds (ipgate_upstream_connect_seconds). */
  readonly upstreamConnect = new FixedHistogram(CONNECT_BUCKETS);

  /**
   * TCP listeners with routes: ClientHello reads by result, `ok` or `tls_<code>`
   * (ipgate_sni_hellos_total).
   */
  readonly sniHellos = new Map<string, number>();
  /**
   * TCP listeners with routes: HelloRetryRequests from backends by how the client's second hello
   * ended, `ok` (it matched the first and went on) or `tls_<code>` (the connection was closed)
   * (ipgate_sni_hello_retries_total; forward/tcp/hello-watch.ts).
   */
  readonly sniHelloRetries = new Map<string, number>();
  /**
   * Connections (TCP, SNI) and requests (HTTP) that matched no route, by reason
   * (ipgate_route_misses_total for TCP listeners, ipgate_http_route_misses_total for HTTP ones).
   */
  readonly routeMisses = new Map<string, number>();
  /**
   * Per route (the config's route names: a bounded set), created when a route table is compiled
   * and kept across reloads so counters never go back. Only listeners with routes have any.
   */
  readonly routes = new Map<string, RouteCounts>();
  /**
   * HTTP listeners with `routes`: responses and durations per route name (`""`: requests no route
   * matched), published with a `route` label instead of the listener-wide series. null on a
   * listener without routes: its series keep exactly their label set (docs/routes-and-sni.md
   * "Metrics and logs"). Route names are config labels: a bounded set; a route removed by a reload
   * keeps its (frozen) series until the restart, as counters must not go back.
   */
  httpRoutes: Map<string, RouteStats> | null = null;

  /**
   * Edge rules that answered or changed a request (docs/edge-rules.md), by `route \0 rule` (route
   * '' on a listener without routes; rule redirect, https_redirect or rewrite): ipgate_http_edge_total.
   */
  readonly edge = new Map<string, number>();

  /** The listener's upstream groups with health rules, by route ('' the listener's own): the ipgate_upstream_target_up gauge. */
  health: ReadonlyArray<HealthSource> = [];

  /** Per upstream target (`host:port` from the config: a bounded set), created on first use. */
  readonly upstreams = new Map<string, UpstreamStats>();

  constructor(readonly listener: string) {}

  static bump<K>(map: Map<K, number>, key: K): void {
    map.set(key, (map.get(key) ?? 0) + 1);
  }

  /** The counters of the route `name` (created on first use). */
  route(name: string): RouteCounts {
    let r = this.routes.get(name);
    if (r === undefined) this.routes.set(name, (r = new RouteCounts()));
    return r;
  }

  /** HTTP listeners with routes: the request counters of route `name` (`""`: no route), created on first use. */
  httpRoute(name: string): RouteStats {
    const routes = (this.httpRoutes ??= new Map());
    let r = routes.get(name);
    if (r === undefined) routes.set(name, (r = new RouteStats()));
    return r;
  }

  upstream(label: string): UpstreamStats {
    let u = this.upstreams.get(label);
    if (u === undefined) this.upstreams.set(label, (u = new UpstreamStats()));
    return u;
  }

  /** An upstream failure: the listener's count and the target's. */
  upstreamFailed(label: string | null | undefined, reason: UpstreamReason): void {
    ListenerStats.bump(this.upstreamErrors, reason);
    if (label !== null && label !== undefined) ListenerStats.bump(this.upstream(label).failures, reason);
  }

  /** An HTTP response head from an upstream, `seconds` after the request went to it. */
  upstreamAnswered(label: string, status: number, seconds: number): void {
    const u = this.upstream(label);
    u.responses[status >= 100 && status < 600 ? Math.floor(status / 100) : 0]!++;
    u.responseTime.observe(seconds);
  }
}

/** What the target gauge reads of a group with health rules (forward/upstream-group.ts). */
export interface HealthSource {
  readonly route: string;
  readonly targets: ReadonlyArray<{ readonly label: string; readonly health: { up(now: number): boolean } | null }>;
}

/** One upstream target's counters (ipgate_upstream_responses_total, _failures_total, _response_seconds). */
export class UpstreamStats {
  /** HTTP response heads received, by status class: index 1..5 (0: outside 100-599). */
  readonly responses = [0, 0, 0, 0, 0, 0];
  /** Failures by reason (upstream_refused, upstream_timeout, upstream_reset, ...). */
  readonly failures = new Map<UpstreamReason, number>();
  /** Time from the request sent to the response head, seconds (nginx $upstream_header_time). */
  readonly responseTime = new FixedHistogram(HTTP_DURATION_BUCKETS);
}

/**
 * One route's share of its listener's connection counters: connections closed by result and
 * refusals by reason, for those the route took (the listener's own maps count them too; the
 * metrics publish the listener's remainder without a `route` label, docs/routes-and-sni.md).
 */
export class RouteCounts {
  readonly closed = new Map<Reason | 'ok', number>();
  readonly denied = new Map<DeniedLabel, number>();
}

/** One route's request counters (ipgate_http_requests_total, ipgate_http_request_duration_seconds with `route`). */
export class RouteStats {
  /** Finished requests by status class (`1xx`..`5xx`, `none`). */
  readonly responses = new Map<string, number>();
  readonly duration = new FixedHistogram(HTTP_DURATION_BUCKETS);
}
