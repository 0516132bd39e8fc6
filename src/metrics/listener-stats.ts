import type { DeniedLabel, HttpClientErrorLabel, Reason, UpstreamReason } from '../reasons';
import { CONNECT_BUCKETS, FixedHistogram, HTTP_DURATION_BUCKETS, SIZE_BUCKETS } from './fixed-histogram';

/**
 * The `method` label's values: RFC 9110's methods and PATCH (RFC 5789), then OTHER for any other
 * token llhttp accepts (WebDAV's PROPFIND, ...): a bounded set, whatever clients send. Counted by
 * index (methodIndex) so the data path bumps a number-keyed Map and allocates nothing.
 */
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH', 'OTHER'] as const;

/** The index of `method` in HTTP_METHODS (OTHER for anything else). */
export function methodIndex(method: string): number {
  switch (method) {
    case 'GET':
      return 0;
    case 'HEAD':
      return 1;
    case 'POST':
      return 2;
    case 'PUT':
      return 3;
    case 'DELETE':
      return 4;
    case 'CONNECT':
      return 5;
    case 'OPTIONS':
      return 6;
    case 'TRACE':
      return 7;
    case 'PATCH':
      return 8;
    default:
      return 9;
  }
}

/**
 * A status as counted: the exact code for 100-599 (a bounded set: what an upstream can send past
 * llhttp, which reads three digits), 0 for none (the client left before one), 600 for anything
 * else (published as `other`).
 */
export function statusSlot(status: number): number {
  return status >= 100 && status < 600 ? status : status === 0 ? 0 : 600;
}

/** Added to an HTTP/2 stream's key in RequestCounts.status (above any method * 1000 + slot). */
const H2_KEY = 100_000;

const CLASS_OF_SLOT = (slot: number): string => (slot === 0 ? 'none' : slot === 600 ? 'other' : `${Math.floor(slot / 100)}xx`);

/**
 * HTTP requests finished, as one group of series counts them (a listener without routes, or one
 * route): by method, exact status and protocol (ipgate_http_requests_total{method,status,code_class,
 * protocol}; the class is derived at scrape time from the same counts; protocol h1, or h2 for an
 * HTTP/2 stream), duration, request and response size (both protocols in one histogram each). Per
 * request: one Map lookup with a number key, its box's count bumped, and three fixed-histogram
 * observes, no allocation but a new label set's box (bench/micro/metrics.ts "request record").
 */
export class RequestCounts {
  /**
   * Finished requests by `(h2 ? H2_KEY : 0) + methodIndex * 1000 + statusSlot`, each count in a box
   * of its own: a request adds to its box (one Map lookup) rather than setting the Map again.
   */
  readonly status = new Map<number, { n: number }>();
  /** Request duration, seconds (ipgate_http_request_duration_seconds). */
  readonly duration = new FixedHistogram(HTTP_DURATION_BUCKETS);
  /**
   * Request size, bytes (ipgate_http_request_size_bytes): the head as parsed (request line and
   * header fields) and the body bytes relayed upstream (decoded: chunk framing not counted; a
   * refused request's body is read past, not counted), as nginx's `$request_length` counts the
   * request line, header and body.
   */
  readonly requestSize = new FixedHistogram(SIZE_BUCKETS);
  /** Response size, bytes written to the client for this request, head included (nginx `$bytes_sent`). */
  readonly responseSize = new FixedHistogram(SIZE_BUCKETS);

  /** One finished request; `h2`: an HTTP/2 stream. */
  record(method: number, status: number, seconds: number, requestBytes: number, responseBytes: number, h2 = false): void {
    this.count(method, status, requestBytes, responseBytes, h2);
    this.duration.observe(seconds);
  }

  /** A request's status and sizes without its duration (a quick denial: its duration comes when its body is read past). */
  count(method: number, status: number, requestBytes: number, responseBytes: number, h2 = false): void {
    const key = (h2 ? H2_KEY : 0) + method * 1000 + statusSlot(status);
    const box = this.status.get(key);
    if (box !== undefined) box.n++;
    else this.status.set(key, { n: 1 });
    this.requestSize.observe(requestBytes);
    this.responseSize.observe(responseBytes);
  }

  /** Finished requests by status class (`1xx`..`5xx`, `none`, `other`): derived, for scrapes and tests. */
  get responses(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [key, { n }] of this.status) {
      const cls = CLASS_OF_SLOT(key % 1000);
      out.set(cls, (out.get(cls) ?? 0) + n);
    }
    return out;
  }

  /** Each (method, status, class, protocol) label set with its count, for the scrape. */
  labelled(): { method: string; status: string; code_class: string; protocol: string; value: number }[] {
    const out: { method: string; status: string; code_class: string; protocol: string; value: number }[] = [];
    for (const [key, { n: value }] of this.status) {
      const slot = key % 1000;
      out.push({
        method: HTTP_METHODS[Math.floor((key % H2_KEY) / 1000)]!,
        status: slot === 0 ? 'none' : slot === 600 ? 'other' : String(slot),
        code_class: CLASS_OF_SLOT(slot),
        protocol: key >= H2_KEY ? 'h2' : 'h1',
        value,
      });
    }
    return out;
  }
}

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
  /**
   * HTTP listeners: finished requests by method and status, durations and sizes (listeners with
   * routes count theirs per route, `httpRoutes`).
   */
  readonly http = new RequestCounts();
  /** HTTP listeners: requests rejected by the parser (`bad_request`, `header_timeout`, `header_too_large`) or for their Host (`host_*`). */
  readonly httpClientErrors = new Map<HttpClientErrorLabel, number>();
  /** HTTP/2 connections served (ALPN h2, or h2c with prior knowledge). */
  h2Connections = 0;
  /** HTTP/2 streams received (every one, refused and malformed ones too). */
  h2Streams = 0;
  /** RST_STREAM frames by direction: `received` (the client reset a stream before its response was done), `sent`. */
  h2ResetsReceived = 0;
  h2ResetsSent = 0;
  /** GOAWAY frames by `direction/code` (`sent/NO_ERROR`, `sent/ENHANCE_YOUR_CALM`, `received/NO_ERROR`, ...). */
  readonly h2Goaways = new Map<string, number>();
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

  /**
   * Requests (HTTP) and connections (TCP) a per-client limit refused or delayed (docs/edge-rules.md
   * "Rate and connection limits"), by `route \0 limit \0 action` (route '' for a listener's own;
   * limit requests, concurrent or connection_rate; action refused or delayed): ipgate_limited_total.
   */
  readonly limited = new Map<string, number>();

  /** The listener's upstream groups with health rules, by route ('' the listener's own): the ipgate_upstream_target_up gauge. */
  health: ReadonlyArray<HealthSource> = [];

  /** Per upstream target (`host:port` from the config: a bounded set), created on first use. */
  readonly upstreams = new Map<string, UpstreamStats>();

  constructor(readonly listener: string) {}

  /** HTTP listeners: finished requests by status class `1xx`..`5xx`, `none` (the client left first), `other`. */
  get httpResponses(): Map<string, number> {
    return this.http.responses;
  }

  /** HTTP listeners: request duration, seconds (ipgate_http_request_duration_seconds). */
  get httpDuration(): FixedHistogram {
    return this.http.duration;
  }

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

  /**
   * An upstream failure: the listener's count and the target's. One that says the target cannot
   * be reached (refused, no connect or answer in time, a name that does not resolve) marks it
   * down (ipgate_upstream_up 0); a reset mid-exchange or another socket error does not.
   */
  upstreamFailed(label: string | null | undefined, reason: UpstreamReason): void {
    ListenerStats.bump(this.upstreamErrors, reason);
    if (label === null || label === undefined) return;
    const u = this.upstream(label);
    ListenerStats.bump(u.failures, reason);
    if (reason === 'upstream_refused' || reason === 'upstream_timeout' || reason === 'upstream_dns') u.up = 0;
  }

  /** An HTTP response head from an upstream, `seconds` after the request went to it: it is up. */
  upstreamAnswered(label: string, status: number, seconds: number): void {
    const u = this.upstream(label);
    u.responses[status >= 100 && status < 600 ? Math.floor(status / 100) : 0]!++;
    u.responseTime.observe(seconds);
    u.up = 1;
  }

  /** A TCP connection to an upstream target was established: it is up. */
  upstreamConnected(label: string | null): void {
    if (label !== null) this.upstream(label).up = 1;
  }
}

/** What the target gauge reads of a group with health rules (forward/upstream-group.ts). */
export interface HealthSource {
  readonly route: string;
  readonly targets: ReadonlyArray<{ readonly label: string; readonly health: { up(now: number): boolean } | null }>;
}

/** One upstream target's counters (ipgate_upstream_responses_total, _failures_total, _response_seconds). */
class UpstreamStats {
  /** HTTP response heads received, by status class: index 1..5 (0: outside 100-599). */
  readonly responses = [0, 0, 0, 0, 0, 0];
  /** Failures by reason (upstream_refused, upstream_timeout, upstream_reset, ...). */
  readonly failures = new Map<UpstreamReason, number>();
  /** Time from the request sent to the response head, seconds (nginx $upstream_header_time). */
  readonly responseTime = new FixedHistogram(HTTP_DURATION_BUCKETS);
  /**
   * The last attempt's outcome (ipgate_upstream_up): 1 it connected (TCP) or answered (HTTP), 0 it
   * could not be reached; -1 before any attempt (no series). Passive: what the traffic saw, as
   * HAProxy's `observe layer4` sees it. Active checks do not set it: their verdict is the health
   * state, ipgate_upstream_target_up (docs/metrics.md "Up/down: two gauges, two questions").
   */
  up = -1;
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

/** One route's request counters (ipgate_http_requests_total, _duration_seconds, _size_bytes with `route`). */
export class RouteStats extends RequestCounts {}
