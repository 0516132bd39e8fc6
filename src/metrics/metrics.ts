/**
 * Every ipgate metric, defined once (docs/architecture.md "Observability"; docs/metrics.md says
 * which question each answers): prefix `ipgate_`, base units (seconds, bytes), `_total` counters,
 * bounded labels only: listener, list, reason, result, version (PROXY version or list version),
 * direction, code_class, route, method (HTTP_METHODS), status (100-599, none, other), upstream (a
 * configured target), kind and source (configured files, ConfigMaps, certificates). Never a client
 * address or a host.
 *
 * The data path counts in plain numbers (ListenerStats: property increments, Map bumps, typed-array
 * histograms); the metrics here read them at scrape time. prom-client's labelled inc() costs
 * 100-340 ns and a histogram observe ~0.5-0.9 us, too dear per connection (bench/micro/metrics.ts).
 *
 * Workers (node:cluster): each process builds its own Metrics with the sources it has (a worker:
 * listeners; the primary: store, lists, admin API) and `registry.getMetricsAsJSON()`; the primary
 * merges them with `aggregateClusterMetrics` (cluster.ts), which is why each metric names its
 * aggregator and whether the primary owns it.
 */
import { performance } from 'node:perf_hooks';
import { type LimitZones, zonePlace } from '../limit/limit-zones';
import { exposition } from './exposition';
import { Registry } from './prom-registry';
import { registerProcessMetrics } from './process-metrics';
import type { Labels, Sample } from './published';
import { copyLabels, histogramSamples, Published } from './published';
import type { ListenerStats, RequestCounts, RouteCounts } from './listener-stats';
import type { TlsStats } from './tls-stats';

/** What the metrics read from a TLS listener's certificates (src/tls/cert-store.ts). */
interface CertSource {
  readonly listener: string;
  readonly reloads: { readonly ok: number; readonly refused: number };
  expiries(): { label: string; notAfter: number }[];
  /** Whether each pair's files were last found good, and when last (optional: older test doubles). */
  reloadStates?(): { label: string; ok: boolean; lastSuccessAt: number }[];
}

/** What the metrics read of the config's sources (src/config/reload-status.ts). */
interface ReloadSource {
  list(): readonly { readonly kind: string; readonly source: string; readonly ok: boolean; readonly lastSuccessAt: number }[];
}

/** One ConfigMap watch's health: the lists' (config/configmap-lists.ts) or the store's. */
export interface WatchState {
  /** `namespace/name`. */
  configMap: string;
  /** `lists` (declarative lists), `store` (the allowlist store). */
  use: 'lists' | 'store';
  /** No API failure since the watch last worked. */
  healthy: boolean;
  /** Last time the API answered (list, watch, event, bookmark), ms epoch; null: never yet. */
  lastSuccessAt: number | null;
}

/** What the metrics read from the live lists (src/store/live-lists.ts). */
export interface ListsSource {
  names(): string[];
  has(name: string): boolean;
  get(name: string): { readonly version: string; readonly appliedAt: number };
  entries(name: string): readonly unknown[];
  on(event: 'change', fn: (change: { list: { readonly name: string }; cause: 'update' | 'expiry' }) => void): unknown;
}

/** What the metrics read from the store (src/store/store.ts). */
interface StoreSource {
  readonly kind: string;
  lastRefusal(): { readonly reason: string; readonly at: number } | null;
}

/** What the metrics read from the self-checks (src/selfcheck/self-checks.ts). */
interface SelfCheckSource {
  state(): { listeners: Record<string, { sourceNat: { suspected: boolean; public: boolean } }> };
}

interface MetricsOptions {
  /** Node process metrics (event-loop lag, heap, GC, CPU, fds), prefixed `ipgate_`. Default true. */
  processMetrics?: boolean;
  /** Labels added to the process metrics, e.g. `{ worker: '2' }` in a cluster (bounded: one per process). */
  processLabels?: Record<string, string>;
  /** ipgate's version, for `ipgate_build_info`. */
  version?: string;
}

const CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/**
 * Metrics only the primary publishes in a cluster (it runs the store and the admin API): workers'
 * copies, if any, are dropped by the aggregation rather than summed or duplicated.
 */
export const PRIMARY_OWNED: ReadonlySet<string> = new Set([
  'ipgate_build_info',
  'ipgate_allowlist_entries',
  'ipgate_allowlist_version_info',
  'ipgate_allowlist_last_reload_timestamp_seconds',
  'ipgate_allowlist_reloads_total',
  'ipgate_allowlist_store_refused',
  'ipgate_allowlist_store_refusals_total',
  'ipgate_admin_requests_total',
  'ipgate_admin_auth_failures_total',
  'ipgate_configmap_watch_healthy',
  'ipgate_configmap_watch_last_success_timestamp_seconds',
]);

const STATUS_CLASS = ['none', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;

export class Metrics {
  readonly registry = new Registry();
  readonly contentType = CONTENT_TYPE;
  private readonly listeners: ListenerStats[] = [];
  /** The subset of `listeners` in mode `http`. */
  private readonly httpListeners: ListenerStats[] = [];
  /** TLS-terminating listeners: handshake counters and their certificates. */
  private readonly tls: { stats: TlsStats; certs: CertSource }[] = [];
  private lists: ListsSource | null = null;
  private store: StoreSource | null = null;
  private reloadSource: ReloadSource | null = null;
  private watchSource: (() => WatchState[]) | null = null;
  private selfChecks: SelfCheckSource | null = null;
  private limitZones: LimitZones | null = null;
  /** Admin API requests by `route \0 method \0 code_class`. */
  private readonly adminRequests = new Map<string, number>();
  /** Refused admin API authentications by reason (missing, malformed, invalid). */
  private readonly adminAuthFailures = { missing: 0, malformed: 0, invalid: 0 };
  /** Allowlist applications by `list \0 result`. */
  private readonly reloads = new Map<string, number>();
  private refusals = 0;
  private lastRefusalAt = 0;

  constructor(options: MetricsOptions = {}) {
    const r = this.registry;
    const listeners = this.listeners;
    const each =
      (fn: (s: ListenerStats, out: Sample[]) => void) =>
      (out: Sample[]): void => {
        for (const s of this.listeners) fn(s, out);
      };
    const eachHttp =
      (fn: (s: ListenerStats, out: Sample[]) => void) =>
      (out: Sample[]): void => {
        for (const s of this.httpListeners) fn(s, out);
      };
    const byKey = (map: Map<string, number>, out: Sample[], listener: string, label: string): void => {
      for (const [k, v] of map) out.push({ labels: { listener, [label]: k }, value: v });
    };
    /**
     * A connection counter with a `route` label for the connections a route took (TCP listeners
     * with routes): each route's counts with `route`, and the listener's remainder (closed before a
     * route was chosen: PROXY, ClientHello, no route) without it. A listener without routes has no
     * route counts, so its series are exactly those it had before routes existed. The remainder
     * only grows, so a zero one is left out rather than published.
     */
    const byKeyAndRoute = (
      s: ListenerStats,
      map: Map<string, number>,
      pick: (r: RouteCounts) => Map<string, number>,
      out: Sample[],
      label: string,
    ): void => {
      if (s.routes.size === 0) {
        byKey(map, out, s.listener, label);
        return;
      }
      const rest = new Map(map);
      for (const [route, counts] of s.routes) {
        for (const [k, v] of pick(counts)) {
          out.push({ labels: { listener: s.listener, route, [label]: k }, value: v });
          rest.set(k, (rest.get(k) ?? 0) - v);
        }
      }
      for (const [k, v] of rest) if (v > 0) out.push({ labels: { listener: s.listener, [label]: k }, value: v });
    };

    // --- connections -----------------------------------------------------------------------------
    new Published({
      name: 'ipgate_connections_accepted_total',
      type: 'counter',
      help: 'Connections accepted on a listener (before the PROXY header and the allowlist).',
      collect: each((s, out) => out.push({ labels: { listener: s.listener }, value: s.accepted })),
    }).register(r);
    new Published({
      name: 'ipgate_accept_errors_total',
      type: 'counter',
      help: 'Connections closed unserved at accept, by code: EMFILE (the open-file limit; refused just below it, since libuv would reset them unseen), ENFILE (the system-wide limit), other.',
      collect: each((s, out) => {
        out.push({ labels: { listener: s.listener, code: 'EMFILE' }, value: s.acceptErrorsEmfile });
        out.push({ labels: { listener: s.listener, code: 'ENFILE' }, value: s.acceptErrorsEnfile });
        out.push({ labels: { listener: s.listener, code: 'other' }, value: s.acceptErrorsOther });
      }),
    }).register(r);
    new Published({
      name: 'ipgate_connections_active',
      type: 'gauge',
      help: 'Connections open now on a listener.',
      collect: each((s, out) => out.push({ labels: { listener: s.listener }, value: s.active })),
    }).register(r);
    new Published({
      name: 'ipgate_connections_closed_total',
      type: 'counter',
      help: 'Connections closed, by result: ok, denied, revoked, drain, pp_<code>, tls_<code>, route_<code>, upstream_<code>, idle_timeout, HTTP parser errors; `route` on those an SNI route took.',
      collect: each((s, out) => byKeyAndRoute(s, s.closed, (c) => c.closed, out, 'result')),
    }).register(r);
    new Published({
      name: 'ipgate_denied_total',
      type: 'counter',
      help: 'Connections and HTTP requests refused, by reason: denied_by_entry (a deny entry decided), not_allowlisted (no entry covers the client), revoked, pp_<code> (PROXY header faults); `route` on connections an SNI route took.',
      collect: each((s, out) => byKeyAndRoute(s, s.denied, (c) => c.denied, out, 'reason')),
    }).register(r);
    new Published({
      name: 'ipgate_sni_hellos_total',
      type: 'counter',
      help: 'TCP listeners with routes: ClientHello reads by result, ok or tls_<code> (the connection was closed: malformed, too large, not TLS, truncated, timeout).',
      collect: each((s, out) => byKey(s.sniHellos, out, s.listener, 'result')),
    }).register(r);
    new Published({
      name: 'ipgate_sni_hello_retries_total',
      type: 'counter',
      help: "TCP listeners with routes: HelloRetryRequests from backends, by the second ClientHello's result: ok (it matched the first), or tls_<code> (closed: another server_name or ALPN, truncated, timeout, ...).",
      collect: each((s, out) => byKey(s.sniHelloRetries, out, s.listener, 'result')),
    }).register(r);
    new Published({
      name: 'ipgate_route_misses_total',
      type: 'counter',
      help: 'TCP listeners with routes: connections whose SNI matched no route (route_no_host); HTTP listeners count theirs in ipgate_http_route_misses_total.',
      collect: each((s, out) => {
        if (!this.httpListeners.includes(s)) byKey(s.routeMisses, out, s.listener, 'reason');
      }),
    }).register(r);
    new Published({
      name: 'ipgate_proxy_header_total',
      type: 'counter',
      help: 'Inbound PROXY header outcomes by version (v1, v2, none, unknown) and result (ok, local, none, trusted_none, pp_<code>).',
      collect: each((s, out) => {
        for (const [k, v] of s.proxyHeader) {
          const slash = k.indexOf('/');
          out.push({ labels: { listener: s.listener, version: k.slice(0, slash), result: k.slice(slash + 1) }, value: v });
        }
      }),
    }).register(r);
    new Published({
      name: 'ipgate_bytes_total',
      type: 'counter',
      help: 'Bytes of closed client connections, by direction: in = from the client, out = to the client (counted at close).',
      collect: each((s, out) => {
        out.push({ labels: { listener: s.listener, direction: 'in' }, value: s.bytesFromClient });
        out.push({ labels: { listener: s.listener, direction: 'out' }, value: s.bytesToClient });
      }),
    }).register(r);

    // --- upstreams -------------------------------------------------------------------------------
    new Published({
      name: 'ipgate_upstream_errors_total',
      type: 'counter',
      help: 'Upstream failures by reason: upstream_refused, upstream_timeout, upstream_reset, upstream_dns, upstream_error.',
      collect: each((s, out) => byKey(s.upstreamErrors, out, s.listener, 'reason')),
    }).register(r);
    const CLASSES = ['other', '1xx', '2xx', '3xx', '4xx', '5xx'];
    new Published({
      name: 'ipgate_upstream_responses_total',
      type: 'counter',
      help: "HTTP response heads received from each upstream target, by status class (the upstream's status, before ipgate answers anything itself).",
      collect: each((s, out) => {
        for (const [upstream, u] of s.upstreams) {
          for (let i = 0; i < CLASSES.length; i++) {
            if (i > 0 || u.responses[0]! > 0)
              out.push({ labels: { listener: s.listener, upstream, code_class: CLASSES[i]! }, value: u.responses[i]! });
          }
        }
      }),
    }).register(r);
    new Published({
      name: 'ipgate_upstream_failures_total',
      type: 'counter',
      help: 'Failures of each upstream target by reason (as ipgate_upstream_errors_total, per target).',
      collect: each((s, out) => {
        for (const [upstream, u] of s.upstreams)
          for (const [reason, v] of u.failures) out.push({ labels: { listener: s.listener, upstream, reason }, value: v });
      }),
    }).register(r);
    new Published({
      name: 'ipgate_upstream_response_seconds',
      type: 'histogram',
      help: 'Time from a request sent to an upstream target to its response head (millisecond resolution).',
      // One step per target: a config with a backend per route has as many as it has routes.
      steps: function* (out) {
        for (const s of listeners) {
          for (const [upstream, u] of s.upstreams) {
            histogramSamples(out, 'ipgate_upstream_response_seconds', { listener: s.listener, upstream }, u.responseTime);
            yield;
          }
        }
      },
    }).register(r);
    new Published({
      name: 'ipgate_upstream_connect_seconds',
      type: 'histogram',
      help: 'Time to establish a new upstream TCP connection (pooled HTTP connections are counted when opened).',
      collect: each((s, out) => histogramSamples(out, 'ipgate_upstream_connect_seconds', { listener: s.listener }, s.upstreamConnect)),
    }).register(r);

    new Published({
      name: 'ipgate_upstream_up',
      type: 'gauge',
      aggregator: 'max',
      help: "Whether each upstream target answered its last attempt: 1 it connected (TCP) or sent a response head (HTTP), 0 it refused, timed out or did not resolve. Passive (what the traffic saw); a target not tried yet has no series. Across workers: 1 while any worker's last attempt succeeded.",
      collect: each((s, out) => {
        for (const [upstream, u] of s.upstreams) if (u.up >= 0) out.push({ labels: { listener: s.listener, upstream }, value: u.up });
      }),
    }).register(r);

    new Published({
      name: 'ipgate_upstream_target_up',
      type: 'gauge',
      aggregator: 'min',
      help: 'Upstream targets of groups with health rules (upstreamHealth): 1 while the target may take connections and requests, 0 while it is skipped (passive: after failures; active: down by its checks until rise good ones). With workers: 0 while any worker skips it (each keeps its own state and runs its own checks). By route (route="": the listener\'s own group).',
      collect: each((s, out) => {
        const now = performance.now();
        for (const g of s.health)
          for (const tg of g.targets)
            out.push({ labels: { listener: s.listener, route: g.route, upstream: tg.label }, value: tg.health?.up(now) === false ? 0 : 1 });
      }),
    }).register(r);
    // --- HTTP ------------------------------------------------------------------------------------
    /** Each route's counts (route="" for misses) on a listener with routes, else the listener's one group. */
    const httpListeners = this.httpListeners;
    /**
     * The request metrics' series, one label set a step (a listener's, then each route's): with
     * 1,000 routes each of these metrics is ~15,000 samples, which the scrape writes in slices
     * (exposition.ts).
     */
    function* requestGroups(fn: (labels: Labels, c: RequestCounts) => void): Generator<void> {
      for (const s of httpListeners) {
        if (s.httpRoutes === null || s.http.duration.count > 0) {
          fn({ listener: s.listener }, s.http);
          yield;
        }
        if (s.httpRoutes === null) continue;
        for (const [route, rs] of s.httpRoutes) {
          fn({ listener: s.listener, route }, rs);
          yield;
        }
      }
    }
    new Published({
      name: 'ipgate_http_requests_total',
      type: 'counter',
      help: 'HTTP requests finished, by method (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH, OTHER), status (the exact code 100-599; none = the client left before a status; other = outside 100-599) and its class (code_class 1xx..5xx, none, other), and protocol (h1, h2: one HTTP/2 stream each); on listeners with routes, by route too (route="" : no route matched).',
      steps: (out) =>
        requestGroups((labels, c) => {
          const keys = Object.keys(labels);
          for (const x of c.labelled()) {
            const l = copyLabels(labels, keys);
            l.method = x.method;
            l.status = x.status;
            l.code_class = x.code_class;
            l.protocol = x.protocol;
            out.push({ labels: l, value: x.value });
          }
        }),
    }).register(r);
    new Published({
      name: 'ipgate_http2_connections_total',
      type: 'counter',
      help: 'HTTP/2 client connections served (ALPN h2 on a TLS listener, or h2c with prior knowledge).',
      collect: eachHttp((s, out) => out.push({ labels: { listener: s.listener }, value: s.h2Connections })),
    }).register(r);
    new Published({
      name: 'ipgate_http2_streams_total',
      type: 'counter',
      help: 'HTTP/2 streams received from clients, refused and malformed ones included.',
      collect: eachHttp((s, out) => out.push({ labels: { listener: s.listener }, value: s.h2Streams })),
    }).register(r);
    new Published({
      name: 'ipgate_http2_resets_total',
      type: 'counter',
      help: 'HTTP/2 RST_STREAM frames, by direction: received (the client reset a stream before its response was complete; the rapid-reset budget counts these), sent.',
      collect: eachHttp((s, out) => {
        out.push({ labels: { listener: s.listener, direction: 'received' }, value: s.h2ResetsReceived });
        out.push({ labels: { listener: s.listener, direction: 'sent' }, value: s.h2ResetsSent });
      }),
    }).register(r);
    new Published({
      name: 'ipgate_http2_goaways_total',
      type: 'counter',
      help: "HTTP/2 GOAWAY frames on client connections, by direction (sent, received) and error code (NO_ERROR, PROTOCOL_ERROR, ENHANCE_YOUR_CALM, ...); why ipgate sent one is the connection's close result (h2_<code>, drain, revoked).",
      collect: eachHttp((s, out) => {
        for (const [k, v] of s.h2Goaways) {
          const slash = k.indexOf('/');
          out.push({ labels: { listener: s.listener, direction: k.slice(0, slash), code: k.slice(slash + 1) }, value: v });
        }
      }),
    }).register(r);
    new Published({
      name: 'ipgate_http_request_size_bytes',
      type: 'histogram',
      help: 'HTTP request size: the head as parsed (request line and header fields) plus the body bytes relayed upstream (nginx $request_length); on listeners with routes, by route too.',
      steps: (out) => requestGroups((labels, c) => histogramSamples(out, 'ipgate_http_request_size_bytes', labels, c.requestSize)),
    }).register(r);
    new Published({
      name: 'ipgate_http_response_size_bytes',
      type: 'histogram',
      help: 'HTTP response size: the bytes written to the client for the request, head included (nginx $bytes_sent); on listeners with routes, by route too.',
      steps: (out) => requestGroups((labels, c) => histogramSamples(out, 'ipgate_http_response_size_bytes', labels, c.responseSize)),
    }).register(r);
    new Published({
      name: 'ipgate_http_upgrades_total',
      type: 'counter',
      help: 'HTTP upgrade requests (WebSocket, ...) received.',
      collect: eachHttp((s, out) => out.push({ labels: { listener: s.listener }, value: s.httpUpgrades })),
    }).register(r);
    new Published({
      name: 'ipgate_http_client_errors_total',
      type: 'counter',
      help: 'HTTP requests refused by the parser: bad_request (400), header_timeout (408), header_too_large (431); or for their Host (400): host_missing, host_repeated, host_invalid, host_too_long; or for their body size: body_too_large (413).',
      collect: eachHttp((s, out) => byKey(s.httpClientErrors, out, s.listener, 'reason')),
    }).register(r);
    new Published({
      name: 'ipgate_http_edge_total',
      type: 'counter',
      help: 'HTTP requests an edge rule answered or changed (docs/edge-rules.md), by route (route="": a listener without routes) and rule: redirect, https_redirect, rewrite, upstream_none_up.',
      collect: eachHttp((s, out) => {
        for (const [k, v] of s.edge) {
          const cut = k.indexOf('\0');
          out.push({ labels: { listener: s.listener, route: k.slice(0, cut), rule: k.slice(cut + 1) }, value: v });
        }
      }),
    }).register(r);
    new Published({
      name: 'ipgate_limited_total',
      type: 'counter',
      help: 'Requests (HTTP) and connections (TCP) a per-client limit refused or delayed (docs/edge-rules.md "Rate and connection limits"), by route (route="": the listener\'s own), limit (requests, concurrent, connection_rate) and action (refused, delayed).',
      collect: each((s, out) => {
        for (const [k, v] of s.limited) {
          const [route, limit, action] = k.split('\0');
          out.push({ labels: { listener: s.listener, route: route!, limit: limit!, action: action! }, value: v });
        }
      }),
    }).register(r);
    new Published({
      name: 'ipgate_limit_clients',
      type: 'gauge',
      // Each worker holds a copy of every table (src/limit/limit-zones.ts): the largest, not the sum.
      aggregator: 'max',
      help: 'Clients a per-client limit tracks now (its table; at most its maxClients), by zone place (listener/route/limit); with workers, the largest of their copies.',
      collect: (out) => {
        for (const z of this.limitZones?.all() ?? []) out.push({ labels: { zone: zonePlace(z.key) }, value: z.table.size });
      },
    }).register(r);
    new Published({
      name: 'ipgate_limit_evictions_total',
      type: 'counter',
      aggregator: 'max',
      help: 'Clients a full rate-limit table forgot to make room (least recently seen first), by zone place and state: idle (its bucket had drained: nothing lost) or active (its excess was lost: maxClients is too small for the traffic). Concurrency limits count state="overflow": a new client let through uncounted. With workers, the largest of their copies\' counts.',
      collect: (out) => {
        for (const z of this.limitZones?.all() ?? []) {
          const zone = zonePlace(z.key);
          const t = z.table;
          if ('evictedIdle' in t) {
            out.push({ labels: { zone, state: 'idle' }, value: t.evictedIdle });
            out.push({ labels: { zone, state: 'active' }, value: t.evictedActive });
          } else out.push({ labels: { zone, state: 'overflow' }, value: t.overflow });
        }
      },
    }).register(r);
    new Published({
      name: 'ipgate_http_request_duration_seconds',
      type: 'histogram',
      help: 'HTTP request duration, from the parsed request head to the response finished (millisecond resolution); on listeners with routes, by route too.',
      // A listener without routes keeps its one series; with routes, one per route name.
      steps: (out) => requestGroups((labels, c) => histogramSamples(out, 'ipgate_http_request_duration_seconds', labels, c.duration)),
    }).register(r);
    new Published({
      name: 'ipgate_http_route_misses_total',
      type: 'counter',
      help: 'HTTP requests on a listener with routes that no route matched, by reason: route_no_host, route_no_path (404), route_bad_path, route_path_params (400).',
      collect: eachHttp((s, out) => byKey(s.routeMisses, out, s.listener, 'reason')),
    }).register(r);

    // --- TLS termination (docs/tls.md) -----------------------------------------------------------
    new Published({
      name: 'ipgate_tls_handshakes_total',
      type: 'counter',
      help: 'TLS handshakes on terminating listeners, by result (ok, or the tls_<code> that closed the connection) and protocol version (TLSv1.2, TLSv1.3, unknown).',
      collect: (out) => {
        for (const { stats } of this.tls) {
          for (const [k, v] of stats.handshakes) {
            const slash = k.lastIndexOf('/');
            out.push({ labels: { listener: stats.listener, result: k.slice(0, slash), version: k.slice(slash + 1) }, value: v });
          }
        }
      },
    }).register(r);
    new Published({
      name: 'ipgate_tls_handshake_duration_seconds',
      type: 'histogram',
      help: 'TLS handshake time, from the first byte after any PROXY header to the handshake finished or failed.',
      collect: (out) => {
        for (const { stats } of this.tls)
          histogramSamples(out, 'ipgate_tls_handshake_duration_seconds', { listener: stats.listener }, stats.duration);
      },
    }).register(r);
    new Published({
      name: 'ipgate_tls_resumed_sessions_total',
      type: 'counter',
      help: 'TLS handshakes that resumed a session with a ticket (no certificate sent, no key exchange signature).',
      collect: (out) => {
        for (const { stats } of this.tls) out.push({ labels: { listener: stats.listener }, value: stats.resumed });
      },
    }).register(r);
    new Published({
      name: 'ipgate_tls_renegotiations_refused_total',
      type: 'counter',
      help: 'Client-initiated TLS 1.2 renegotiations refused on established connections (a no_renegotiation alert, as nginx sends; the connection goes on).',
      collect: (out) => {
        for (const { stats } of this.tls) out.push({ labels: { listener: stats.listener }, value: stats.renegotiationsRefused });
      },
    }).register(r);
    new Published({
      name: 'ipgate_tls_certificate_expiry_timestamp_seconds',
      type: 'gauge',
      aggregator: 'min',
      help: 'notAfter of the leaf certificate in force, seconds since the epoch, per listener and certificate (its tls.certificates name or index).',
      collect: (out) => {
        for (const { certs } of this.tls)
          for (const e of certs.expiries()) out.push({ labels: { listener: certs.listener, certificate: e.label }, value: e.notAfter });
      },
    }).register(r);
    new Published({
      name: 'ipgate_tls_certificate_reloads_total',
      type: 'counter',
      help: 'Certificate file changes seen, by result: ok (new handshakes use the new pair), refused (the file was bad; the pair in force stays; the log names the file).',
      collect: (out) => {
        for (const { certs } of this.tls) {
          out.push({ labels: { listener: certs.listener, result: 'ok' }, value: certs.reloads.ok });
          out.push({ labels: { listener: certs.listener, result: 'refused' }, value: certs.reloads.refused });
        }
      },
    }).register(r);

    // --- config sources: refused reloads and the ConfigMap watches (config/reload-status.ts) ------
    new Published({
      name: 'ipgate_config_last_reload_successful',
      type: 'gauge',
      aggregator: 'min',
      help: 'Whether the last read of each live config source was good and applied: 1 yes, 0 refused (the config in force stays, a change is not applied). kind: file (the config file and its list files), configmap (namespace/name of declarative lists), certificate (listener/certificate, or listener/clientCA). Across workers: 0 if any worker refused.',
      collect: (out) => this.reloadStates(out, (st) => (st.ok ? 1 : 0)),
    }).register(r);
    new Published({
      name: 'ipgate_config_last_reload_successful_timestamp_seconds',
      type: 'gauge',
      aggregator: 'min',
      help: 'When each live config source was last read good (Unix time; the start-up load counts). Across workers: the oldest.',
      collect: (out) => this.reloadStates(out, (st) => st.lastSuccessAt / 1000),
    }).register(r);
    new Published({
      name: 'ipgate_configmap_watch_healthy',
      type: 'gauge',
      aggregator: 'first',
      help: 'Whether the Kubernetes API watch of each ConfigMap ipgate follows works: 1 no failure since it last answered, 0 failing (retried with backoff; the lists in force stay). use: lists (declarative lists) or store (the allowlist store).',
      collect: (out) => {
        for (const w of this.watchSource?.() ?? []) out.push({ labels: { configmap: w.configMap, use: w.use }, value: w.healthy ? 1 : 0 });
      },
    }).register(r);
    new Published({
      name: 'ipgate_configmap_watch_last_success_timestamp_seconds',
      type: 'gauge',
      aggregator: 'first',
      help: 'When the API last answered the watch of each ConfigMap (a list, the watch opened, an event or a bookmark, about one a minute), Unix time.',
      collect: (out) => {
        for (const w of this.watchSource?.() ?? [])
          if (w.lastSuccessAt !== null) out.push({ labels: { configmap: w.configMap, use: w.use }, value: w.lastSuccessAt / 1000 });
      },
    }).register(r);

    // --- self-checks -----------------------------------------------------------------------------
    new Published({
      name: 'ipgate_source_nat_suspected',
      type: 'gauge',
      help: '1 when most recent peers of a public listener come from clusterNetworks (client addresses rewritten before ipgate; docs/real-ip.md).',
      collect: (out) => {
        if (this.selfChecks === null) return;
        for (const [listener, st] of Object.entries(this.selfChecks.state().listeners)) {
          out.push({ labels: { listener }, value: st.sourceNat.suspected ? 1 : 0 });
        }
      },
    }).register(r);

    // --- allowlists (primary-owned) --------------------------------------------------------------
    const listed =
      (fn: (lists: ListsSource, name: string, out: Sample[]) => void) =>
      (out: Sample[]): void => {
        const lists = this.lists;
        if (lists === null) return;
        for (const name of lists.names()) if (lists.has(name)) fn(lists, name, out);
      };
    new Published({
      name: 'ipgate_allowlist_entries',
      type: 'gauge',
      aggregator: 'first',
      help: 'Entries in the allowlist in force (expired entries included until the list is rebuilt).',
      collect: listed((l, list, out) => out.push({ labels: { list }, value: l.entries(list).length })),
    }).register(r);
    new Published({
      name: 'ipgate_allowlist_version_info',
      type: 'gauge',
      aggregator: 'first',
      help: 'The allowlist version (store ETag) this process enforces: always 1, the version is the label.',
      collect: listed((l, list, out) => out.push({ labels: { list, version: l.get(list).version }, value: 1 })),
    }).register(r);
    new Published({
      name: 'ipgate_allowlist_last_reload_timestamp_seconds',
      type: 'gauge',
      aggregator: 'first',
      help: 'When the allowlist in force was last compiled and swapped in (Unix time).',
      collect: listed((l, list, out) => out.push({ labels: { list }, value: l.get(list).appliedAt / 1000 })),
    }).register(r);
    new Published({
      name: 'ipgate_allowlist_reloads_total',
      type: 'counter',
      aggregator: 'first',
      help: 'Allowlist compilations swapped in, by result: ok (a new version: admin write, file edit, ConfigMap update), expiry (entries expired).',
      collect: (out) => {
        for (const [k, v] of this.reloads) {
          const z = k.indexOf('\0');
          out.push({ labels: { list: k.slice(0, z), result: k.slice(z + 1) }, value: v });
        }
      },
    }).register(r);
    new Published({
      name: 'ipgate_allowlist_store_refused',
      type: 'gauge',
      aggregator: 'first',
      help: '1 while the store holds content ipgate refuses (corrupt or invalid); the last good lists stay in force.',
      collect: (out) => {
        if (this.store === null) return;
        this.noticeRefusal();
        out.push({ labels: { store: this.store.kind }, value: this.store.lastRefusal() === null ? 0 : 1 });
      },
    }).register(r);
    new Published({
      name: 'ipgate_allowlist_store_refusals_total',
      type: 'counter',
      aggregator: 'first',
      help: 'Store contents refused (a reload that kept the last good lists); noticed at each list change and scrape.',
      collect: (out) => {
        if (this.store === null) return;
        this.noticeRefusal();
        out.push({ labels: { store: this.store.kind }, value: this.refusals });
      },
    }).register(r);

    // --- admin API (primary-owned) ---------------------------------------------------------------
    new Published({
      name: 'ipgate_admin_requests_total',
      type: 'counter',
      aggregator: 'first',
      help: 'Admin API requests by route (the route pattern, `unmatched` for 404s), method and status class.',
      collect: (out) => {
        for (const [k, v] of this.adminRequests) {
          const [route, method, codeClass] = k.split('\0') as [string, string, string];
          out.push({ labels: { route, method, code_class: codeClass }, value: v });
        }
      },
    }).register(r);

    new Published({
      name: 'ipgate_admin_auth_failures_total',
      type: 'counter',
      aggregator: 'first',
      help: 'Admin API requests refused for their Authorization header, by reason: missing, malformed (not "Bearer <token>"), invalid (a wrong token).',
      collect: (out) => {
        for (const reason of ['missing', 'malformed', 'invalid'] as const)
          out.push({ labels: { reason }, value: this.adminAuthFailures[reason] });
      },
    }).register(r);

    if (options.version !== undefined) {
      const version = options.version;
      new Published({
        name: 'ipgate_build_info',
        type: 'gauge',
        aggregator: 'first',
        help: 'ipgate and Node.js versions: always 1, the versions are labels.',
        collect: (out) => out.push({ labels: { version, node: process.version }, value: 1 }),
      }).register(r);
    }

    if (options.processMetrics ?? true) {
      // Event-loop lag, heap, GC, CPU, memory, fds: ipgate's own collectors, O(1) in connections
      // (process-metrics.ts says what prom-client's defaults cost per scrape and what differs).
      registerProcessMetrics(r, 'ipgate_', options.processLabels ?? {});
    }
  }

  /** Publish a listener's counters (worker or single process). */
  addListener(stats: ListenerStats, mode: 'tcp' | 'http'): void {
    this.listeners.push(stats);
    if (mode === 'http') this.httpListeners.push(stats);
  }

  /** Publish a TLS-terminating listener's handshake counters and certificates. */
  addTls(stats: TlsStats, certs: CertSource): void {
    this.tls.push({ stats, certs });
  }

  /** Publish the allowlists in force and the store's state (primary or single process). */
  setAllowlists(lists: ListsSource, store: StoreSource | null): void {
    this.lists = lists;
    this.store = store;
    lists.on('change', ({ list, cause }) => {
      const key = `${list.name}\0${cause === 'expiry' ? 'expiry' : 'ok'}`;
      this.reloads.set(key, (this.reloads.get(key) ?? 0) + 1);
      this.noticeRefusal();
    });
  }

  /** Publish the per-client limits' tables (src/limit/limit-zones.ts). */
  setLimits(zones: LimitZones): void {
    this.limitZones = zones;
  }

  setSelfChecks(selfChecks: SelfCheckSource): void {
    this.selfChecks = selfChecks;
  }

  /** Publish the config sources' reload outcomes (the process that watches the config file). */
  setReloads(reloads: ReloadSource): void {
    this.reloadSource = reloads;
  }

  /** Publish the health of the ConfigMap watches (read at each scrape). */
  setWatches(watches: () => WatchState[]): void {
    this.watchSource = watches;
  }

  /** The config sources' samples, and each TLS listener's certificates as `certificate` sources. */
  private reloadStates(out: Sample[], value: (st: { ok: boolean; lastSuccessAt: number }) => number): void {
    for (const st of this.reloadSource?.list() ?? []) out.push({ labels: { kind: st.kind, source: st.source }, value: value(st) });
    for (const { certs } of this.tls) {
      for (const st of certs.reloadStates?.() ?? [])
        out.push({ labels: { kind: 'certificate', source: `${certs.listener}/${st.label}` }, value: value(st) });
    }
  }

  /** Count one admin API request (admin/routes/metrics.ts hooks every response). */
  adminRequest(route: string, method: string, status: number): void {
    const key = `${route}\0${method}\0${STATUS_CLASS[status >= 100 && status < 600 ? Math.floor(status / 100) : 0]}`;
    this.adminRequests.set(key, (this.adminRequests.get(key) ?? 0) + 1);
  }

  /** Count one refused admin API authentication (admin-app.ts). */
  adminAuthFailure(reason: 'missing' | 'malformed' | 'invalid'): void {
    this.adminAuthFailures[reason]++;
  }

  /** The text exposition of this process alone. */
  scrape(): Promise<string> {
    return exposition(this.registry);
  }

  private noticeRefusal(): void {
    const refusal = this.store?.lastRefusal() ?? null;
    if (refusal !== null && refusal.at !== this.lastRefusalAt) {
      this.lastRefusalAt = refusal.at;
      this.refusals++;
    }
  }
}

export type { Labels };
