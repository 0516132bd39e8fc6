/**
 * The config file's schema: every option, its type and its default, documented where it is defined.
 *
 * The JSON Schema is checked by Ajv once at start-up (`load.ts`), with `additionalProperties: false`
 * everywhere so a misspelt key is an error rather than a silently ignored option; semantic checks
 * (CIDRs, addresses, cross references) follow in `validate.ts`. The resulting object is frozen.
 */
import { listenerRouteProperties, type RouteConfig, type SniConfig } from './schema-routes';
import { ListConfigMapSchema, type ListConfigMap } from './list-configmap';

/** One listener: a public data port. */
export interface ListenerConfig {
  /** Unique name; the metric and log label. */
  name: string;
  /** `tcp` forwards byte streams; `http` proxies HTTP/1.1 (and upgrades). */
  mode: 'tcp' | 'http';
  /** `host:port` to bind, e.g. `0.0.0.0:8443`, `[::]:8443` (dual stack). Port 0 picks a free port. */
  listen: string;
  /** Name of the allowlist this listener enforces (a key of `allowlists`). */
  allowlist: string;
  proxyProtocol: InboundProxyConfig;
  /**
   * Upstream targets `host:port`; several are used round robin, the next one on connect failure.
   * Required unless every route has its own. Default `[]`.
   */
  upstreams: string[];
  /**
   * PROXY header written to the upstream before any payload: `none` | `v1` | `v2`. Default `none`.
   * HTTP listeners (for backends listening with `proxy_protocol`): each client connection then gets
   * its own upstream connection (kept alive for that client's requests, never pooled: a pooled
   * connection would attribute every later request to the first client). The header carries the
   * connection's client (the peer, or the PROXY source from a balancer), not X-Forwarded-For.
   */
  outboundProxyProtocol: 'none' | 'v1' | 'v2';
  timeouts: TimeoutsConfig;
  /** HTTP listener options (mode `http` only). */
  http: HttpConfig;
  /** Host / path / SNI routes (schema-routes.ts). Absent: one upstream group, one allowlist. */
  routes?: RouteConfig[];
  /** TCP listeners with routes: the ClientHello read (schema-routes.ts). */
  sni?: SniConfig;
}

export interface InboundProxyConfig {
  /**
   * `off` (default): no PROXY header is read; the socket address is the client.
   * `optional`: a peer in `trustedSources` may send a header; plain connections keep the socket address.
   * `required`: a peer in `trustedSources` must send one; everyone else is closed.
   * Anyone outside `trustedSources` who sends a header is closed (`pp_untrusted`): the spec forbids
   * believing a header from a peer that any client can impersonate.
   */
  mode: 'off' | 'optional' | 'required';
  /**
   * CIDRs allowed to send a PROXY header (load balancers), or the name of an allowlist holding
   * them (a key of `allowlists`): a list named here changes live, like any allowlist (e.g. a
   * balancer's published ranges kept through the admin API). Default: none (`[]`).
   */
  trustedSources: string[] | string;
  /** A header not complete within this time closes the connection (`pp_timeout`). Default 5000. */
  headerTimeoutMs: number;
  /** Largest v2 header accepted, bytes (signature + address block + TLVs). Default 4096. */
  maxV2Length: number;
}

export interface TimeoutsConfig {
  /** Upstream connect timeout, per target. Default 5000. */
  connectMs: number;
  /** A TCP stream (or HTTP keep-alive connection) idle this long in both directions is closed. Default 600000. */
  idleMs: number;
}

export interface HttpConfig {
  /**
   * CIDRs of proxies in front of ipgate whose X-Forwarded-For is believed, or the name of an
   * allowlist holding them (changes live). Default: none (`[]`).
   */
  trustedProxies: string[] | string;
  /** `append`: X-Forwarded-For = trusted chain + client (default); `replace`: the client only. */
  xForwardedFor: 'append' | 'replace';
  /** Also send an RFC 7239 `Forwarded` header. Default false. */
  forwarded: boolean;
  /** Body of the 403 response to a denied client (text; JSON clients get `{"error":...}`). */
  deniedBody: string;
  denied: {
    /**
     * A denied client's connection stays open after its 403 (keep-alive, limits and timeouts as
     * for an allowed one; its further requests are answered 403 too), as nginx and HAProxy do.
     * `false`: `Connection: close` after the 403. Default true.
     */
    keepAlive: boolean;
  };
  /**
   * More request header names removed from untrusted peers, case-insensitive, besides the
   * built-in client-IP headers (X-Forwarded-*, X-Real-IP, Forwarded, True-Client-IP, X-Client-IP,
   * X-Cluster-Client-IP, CF-Connecting-IP, X-Original-Forwarded-For, Fastly-Client-IP,
   * X-Envoy-External-Address, Client-IP, X-ProxyUser-Ip, and any of them spelt with `_`).
   * Default: none.
   */
  stripHeaders: string[];
  /**
   * Send `X-Request-ID` upstream: a trusted proxy's as received, else a new 32-hex id (in the
   * access line either way, as `requestId`). Default true.
   */
  requestId: boolean;
  /** Time allowed to receive the complete request headers. Default 10000. */
  requestHeaderTimeoutMs: number;
  /** Largest request header block, bytes. Default 16384. */
  maxHeaderBytes: number;
  /** Idle time between keep-alive requests from the client. Default 60000. */
  keepAliveTimeoutMs: number;
  /** Requests served on one client connection before it is closed; 0 = unlimited. Default 1000. */
  maxRequestsPerConnection: number;
  /** Time to wait for the upstream's response headers before answering 504. Default 60000. */
  upstreamTimeoutMs: number;
  /**
   * Upstream keep-alive pool: sockets per target, busy and idle together; a request that finds
   * them all busy waits for one (its upstreamTimeoutMs runs meanwhile). Upgrades and outbound-PROXY
   * connections (one per client connection) are outside it. Default 128.
   */
  upstreamMaxSockets: number;
  /** Upstream keep-alive pool: idle socket lifetime; keep it below the backend's. Default 4000. */
  upstreamIdleTimeoutMs: number;
  /**
   * Upstream names (not IP literals) are resolved at most once per this long and the addresses
   * kept; a failed connect tries the next address (src/forward/http/upstream-dns.ts). Default 10000.
   */
  upstreamDnsTtlMs: number;
  /**
   * The engine: only `relay` remains (src/forward/http/relay/, docs/http-engines.md). `undici` and
   * `http-proxy` are accepted for old configs and run the relay, with a warning naming the field:
   * both engines were removed (docs/http-engines.md says why). Default `relay`.
   */
  engine: 'http-proxy' | 'undici' | 'relay';
}

/** One entry: a CIDR string (an allow entry), or `{cidr, action?, comment?, expiresAt?}`. */
export interface AllowEntryConfig {
  cidr: string;
  /** `allow` (default) or `deny`. The most specific entry decides; deny wins at the same prefix. */
  action?: 'allow' | 'deny';
  comment?: string;
  expiresAt?: string;
}

/**
 * One named list, after loading. Written in the config either as an array of entries (the old
 * form: exactly `{source: store, entries: [...]}`) or as an object:
 *
 * ```yaml
 * allowlists:
 *   office:                     # old form: the store owns it, this only seeds an empty store
 *     - 10.0.0.0/8
 *   partners:
 *     source: config            # the config owns it (GitOps): edits to this file apply live
 *     allowTemporary: true      # admin API may add entries that carry expiresAt
 *     entries:
 *       - 203.0.113.0/24
 *       - {cidr: 203.0.113.66/32, action: deny, comment: compromised}
 *   balancers:
 *     source: config
 *     file: lists/balancers.yaml   # the entries in their own file (or configMap: {name, key})
 * ```
 */
export interface AllowlistConfig {
  /**
   * Who owns the list. Required in the object form (ownership is written down, never guessed).
   * `config`: this file (or `file`) is the truth; a change to it is applied live without a
   *   restart (the file is watched, re-read and fully validated; a bad file is refused with a
   *   log line and the lists in force stay); admin API writes are refused with 409.
   * `store`: the store is the truth (the admin API edits it); `entries` only seed an empty
   *   store, and a seed that differs from the store is reported once at start-up and in /readyz.
   */
  source: 'config' | 'store';
  /** The entries (strings or objects). Default `[]`. With `file`, must be left out. */
  entries: AllowEntryConfig[];
  /**
   * `source: config` only: a YAML or JSON file holding the entries array (relative paths are
   * relative to the config file), watched like the config itself (polled: outside Kubernetes; in
   * it, `configMap` is applied within a second, a mounted file after the kubelet's sync). Default null.
   * After loading, `entries` holds the file's entries and `file` its absolute path.
   */
  file: string | null;
  /** `source: config` only: the entries in a ConfigMap key, watched through the API (list-configmap.ts). Default null. */
  configMap: ListConfigMap | null;
  /**
   * `source: config` only: the admin API may add temporary entries, each with an `expiresAt` in
   * the future (an incident-time overlay that cannot outlive its expiry), kept in the store and
   * shown apart (`temporary`) from the declared ones. Default false.
   */
  allowTemporary: boolean;
}

export interface AdminConfig {
  /**
   * Admin API address (never a data port). Default `127.0.0.1:9901`. `null` disables it. The
   * environment variable IPGATE_ADMIN_LISTEN, when set and not empty, replaces it (the chart sets
   * it to the pod IP: config/load.ts).
   */
  listen: string | null;
  /** File holding the bearer token (takes precedence over `tokenEnv`). */
  tokenFile: string | null;
  /** Environment variable holding the bearer token. Default `IPGATE_ADMIN_TOKEN`. */
  tokenEnv: string;
  /**
   * File of named tokens, one `name:token` per line (`#` comments): the name is the audit log's
   * "who". Default null. The token from `tokenFile` / `tokenEnv` is named `admin`. With no token at
   * all, every authenticated route is refused (health, readiness and metrics still answer).
   */
  tokensFile: string | null;
  /** Audit records kept in memory for `GET /v1/audit` (the log lines are the durable record). Default 1000. */
  auditHistory: number;
  /** Largest request body, bytes. Default 1048576. */
  bodyLimit: number;
  /**
   * With `workers: 1`: run the admin API in its own process (a primary holding the store, the admin
   * API and `/metrics`) and the listeners in one cluster worker, as `workers >= 2` always does.
   * Default false: one process. The split was the default while the HTTP data path ran on
   * node:http, which an admin request in the same process slowed; the data path has no node:http
   * now, and one process measured the same work per CPU-second as two while using 57-83 MiB less
   * (bench/README.md "2026-12-02: one HTTP engine, one process"). Ignored with `listen: null` (one
   * process) and with `workers` above 1 (always separate).
   */
  separateProcess: boolean;
  /**
   * Host names, besides IP literals and `localhost`, that the admin API answers (the Host header,
   * compared case-insensitively, its port ignored); any other Host gets 421. Default `[]`. A DNS
   * rebinding page can reach a loopback or pod address through a browser, but its Host is still
   * the attacker's name: list here the names clients really use, such as the admin Service's
   * `ipgate-admin.ipgate.svc` and `ipgate-admin.ipgate.svc.cluster.local`. No ports, no wildcards.
   */
  allowedHosts: string[];
}

export interface StoreConfig {
  /** `file` (default): a JSON file written atomically; `kubernetes`: a ConfigMap; `memory`: tests and demos. */
  type: 'file' | 'kubernetes' | 'memory';
  /** File store path. Default `./data/allowlists.json`. */
  path: string;
  /** Kubernetes store: namespace (default: the pod's own) and ConfigMap name. */
  namespace: string | null;
  configMap: string;
  /** File store: periodic check of the file for external edits, besides fs.watch. Default 2000. */
  pollIntervalMs: number;
}

export interface LoggingConfig {
  /** pino level. Default `info`. */
  level: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
  /** `json` (default) or `pretty` (human-readable, for a terminal). */
  format: 'json' | 'pretty';
  /** Write an access log line per TCP connection / HTTP request. Default true. */
  access: boolean;
  /**
   * Denials are logged one by one at debug; at info they are summarised every this many ms
   * ("N denials from M addresses in the last 10 s"; src/access-log/denial-summary.ts). 0 = no
   * summary. Default 10000.
   */
  denialSummaryIntervalMs: number;
  /** Distinct addresses a summary interval remembers (memory bound under a scan). Default 4096. */
  denialSummaryMaxAddresses: number;
  /**
   * At info, the first denial of each client address per summary interval is logged at once
   * (listener, client, reason, the deny entry), at most this many lines per interval; later
   * denials and addresses past the cap are only counted in the summary line. 0 = none. Default 100.
   */
  denialLinesPerInterval: number;
  /**
   * JSON logs to stdout are written in blocks of this many bytes (0 = each line at once), so the
   * access log does not cost a write(2) per connection; 64 KiB like nginx's usual `buffer=64k`: 4 KiB
   * blocks still cost ~4-9 us of CPU per line in writes (bench/README.md "Metrics and access logs"). Default 65536.
   */
  bufferBytes: number;
  /** Buffered lines are written at least this often, ms. Default 1000. */
  flushIntervalMs: number;
}

export interface EchoConfig {
  /** Start the built-in echo backend in this process (demos): TCP address, or null. */
  tcp: string | null;
  /** HTTP echo backend address, or null. */
  http: string | null;
}

export interface Config {
  /**
   * Worker processes running the listeners: a number, or `auto` (one per core). Default 1. Above 1,
   * a primary process holds the store, the admin API and `/metrics` (src/cluster/primary.ts); at 1,
   * one process runs everything unless `admin.separateProcess` is true.
   */
  workers: number | 'auto';
  logging: LoggingConfig;
  admin: AdminConfig;
  store: StoreConfig;
  /** Close live connections whose client a list change no longer allows. Default true. */
  revokeLive: boolean;
  shutdown: { /** Time open connections get to finish after SIGTERM. Default 30000. */ drainTimeoutMs: number };
  /** Pod, node and service CIDRs: peers from these on a public listener suggest source NAT. */
  clusterNetworks: string[];
  /** Named allowlists and who owns each (AllowlistConfig). Default `{}`. */
  allowlists: Record<string, AllowlistConfig>;
  listeners: ListenerConfig[];
  /** Built-in echo backend (demo only). */
  echo: EchoConfig | null;
}

const ms = { type: 'integer', minimum: 1, maximum: 86_400_000 } as const;
const cidrList = { type: 'array', items: { type: 'string' }, default: [] } as const;
const LIST_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$';
/** trustedSources / trustedProxies: CIDRs, or the name of an allowlist. */
const cidrsOrList = { anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'string', pattern: LIST_NAME_PATTERN }], default: [] } as const;
const entry = {
  anyOf: [
    { type: 'string' },
    {
      type: 'object',
      additionalProperties: false,
      required: ['cidr'],
      properties: {
        cidr: { type: 'string' },
        action: { enum: ['allow', 'deny'] },
        comment: { type: 'string', maxLength: 1024 },
        expiresAt: { type: 'string' },
      },
    },
  ],
} as const;

export const configSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['listeners'],
  properties: {
    workers: { anyOf: [{ type: 'integer', minimum: 1, maximum: 256 }, { const: 'auto' }], default: 1 },
    logging: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        level: { enum: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], default: 'info' },
        format: { enum: ['json', 'pretty'], default: 'json' },
        access: { type: 'boolean', default: true },
        denialSummaryIntervalMs: { type: 'integer', minimum: 0, maximum: 86_400_000, default: 10_000 },
        denialSummaryMaxAddresses: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 4096 },
        denialLinesPerInterval: { type: 'integer', minimum: 0, maximum: 100_000, default: 100 },
        bufferBytes: { type: 'integer', minimum: 0, maximum: 16_777_216, default: 65_536 },
        flushIntervalMs: { type: 'integer', minimum: 10, maximum: 60_000, default: 1000 },
      },
    },
    admin: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        listen: { type: ['string', 'null'], default: '127.0.0.1:9901' },
        tokenFile: { type: ['string', 'null'], default: null },
        tokenEnv: { type: 'string', minLength: 1, default: 'IPGATE_ADMIN_TOKEN' },
        tokensFile: { type: ['string', 'null'], default: null },
        auditHistory: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 1000 },
        bodyLimit: { type: 'integer', minimum: 1024, maximum: 67_108_864, default: 1_048_576 },
        separateProcess: { type: 'boolean', default: false },
        allowedHosts: { type: 'array', items: { type: 'string' }, maxItems: 256, default: [] },
      },
    },
    store: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: {
        type: { enum: ['file', 'kubernetes', 'memory'], default: 'file' },
        path: { type: 'string', minLength: 1, default: './data/allowlists.json' },
        namespace: { type: ['string', 'null'], default: null },
        configMap: { type: 'string', minLength: 1, default: 'ipgate-allowlists' },
        pollIntervalMs: { type: 'integer', minimum: 100, maximum: 3_600_000, default: 2000 },
      },
    },
    revokeLive: { type: 'boolean', default: true },
    shutdown: {
      type: 'object',
      additionalProperties: false,
      default: {},
      properties: { drainTimeoutMs: { ...ms, default: 30_000 } },
    },
    clusterNetworks: cidrList,
    allowlists: {
      type: 'object',
      default: {},
      propertyNames: { pattern: LIST_NAME_PATTERN },
      // Defaults inside anyOf are not applied by Ajv: validate.ts fills them (AllowlistConfig).
      additionalProperties: {
        anyOf: [
          { type: 'array', items: entry },
          {
            type: 'object',
            additionalProperties: false,
            required: ['source'],
            properties: {
              source: { enum: ['config', 'store'] },
              entries: { type: 'array', items: entry },
              file: { type: 'string', minLength: 1 },
              configMap: ListConfigMapSchema,
              allowTemporary: { type: 'boolean' },
            },
          },
        ],
      },
    },
    listeners: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'listen', 'allowlist'],
        properties: {
          name: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$' },
          mode: { enum: ['tcp', 'http'], default: 'tcp' },
          listen: { type: 'string' },
          allowlist: { type: 'string' },
          proxyProtocol: {
            type: 'object',
            additionalProperties: false,
            default: {},
            properties: {
              mode: { enum: ['off', 'optional', 'required'], default: 'off' },
              trustedSources: cidrsOrList,
              headerTimeoutMs: { ...ms, default: 5_000 },
              maxV2Length: { type: 'integer', minimum: 232, maximum: 65_551, default: 4_096 },
            },
          },
          upstreams: { type: 'array', items: { type: 'string' }, default: [] },
          ...listenerRouteProperties,
          outboundProxyProtocol: { enum: ['none', 'v1', 'v2'], default: 'none' },
          timeouts: {
            type: 'object',
            additionalProperties: false,
            default: {},
            properties: {
              connectMs: { ...ms, default: 5_000 },
              idleMs: { ...ms, default: 600_000 },
            },
          },
          http: {
            type: 'object',
            additionalProperties: false,
            default: {},
            properties: {
              trustedProxies: cidrsOrList,
              xForwardedFor: { enum: ['append', 'replace'], default: 'append' },
              forwarded: { type: 'boolean', default: false },
              deniedBody: { type: 'string', maxLength: 65_536, default: 'Forbidden\n' },
              denied: { type: 'object', additionalProperties: false, default: {}, properties: { keepAlive: { type: 'boolean', default: true } } },
              requestId: { type: 'boolean', default: true },
              stripHeaders: { type: 'array', items: { type: 'string', pattern: '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$' }, default: [] },
              requestHeaderTimeoutMs: { ...ms, default: 10_000 },
              maxHeaderBytes: { type: 'integer', minimum: 1024, maximum: 1_048_576, default: 16_384 },
              keepAliveTimeoutMs: { ...ms, default: 60_000 },
              maxRequestsPerConnection: { type: 'integer', minimum: 0, default: 1000 },
              upstreamTimeoutMs: { ...ms, default: 60_000 },
              upstreamMaxSockets: { type: 'integer', minimum: 1, maximum: 65_536, default: 128 },
              upstreamIdleTimeoutMs: { ...ms, default: 4_000 },
              upstreamDnsTtlMs: { ...ms, default: 10_000 },
              engine: { enum: ['relay', 'http-proxy', 'undici'], default: 'relay' },
            },
          },
        },
      },
    },
    echo: {
      type: ['object', 'null'],
      additionalProperties: false,
      default: null,
      properties: {
        tcp: { type: ['string', 'null'], default: null },
        http: { type: ['string', 'null'], default: null },
      },
    },
  },
} as const;
