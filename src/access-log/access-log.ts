/**
 * The access log (docs/architecture.md "Observability"): one pino JSON line per TCP connection, written when it
 * closes, and one per HTTP request, written when the response closes. Message `access`; fields:
 *
 *   kind       `tcp` | `http`
 *   listener   listener name
 *   conn       connection id (joins the lines of one HTTP keep-alive connection, and debug lines)
 *   client     the real client address (canonical), `clientPort` for TCP
 *   via        how it was learned: socket | proxy-v1 | proxy-v2 | xff
 *   peer       the socket peer (a load balancer, a trusted proxy, or the client itself)
 *   decision   allow | deny (allowlist; reason denied_by_entry, not_allowlisted or revoked) | reject (PROXY header
 *              pp_<code>, ClientHello tls_<code> (the first, or a second one after a HelloRetryRequest),
 *              no route route_no_host)
 *   entry      the allowlist entry (CIDR) that decided: the allow entry that admits the client
 *              (decision allow), or the deny entry that refused it (reason denied_by_entry)
 *   reason     why it was denied or rejected (= the ipgate_denied_total reason)
 *   result     TCP: how it closed (= the ipgate_connections_closed_total result: ok, upstream_refused, ...);
 *              HTTP: ok, or the failure (upstream_refused, upstream_timeout, client_abort, ...)
 *   upstream   `host:port` chosen, or null
 *   route, sni TCP listeners with routes only: the route's name (null: none chosen) and the
 *              ClientHello's SNI (null: none sent, or no hello read); the SNI is never a metric label
 *   status     HTTP status sent (0: none)
 *   upstreamStatus  HTTP: the upstream's own status (null: ipgate answered, or no answer)
 *   upstreamMs HTTP: milliseconds from the request sent upstream to its response head (null: none)
 *   protocol   HTTP: `h1` (HTTP/1.x) or `h2` (an HTTP/2 stream)
 *   method, path  HTTP request line (path cut at 256 characters)
 *   host, userAgent  HTTP: the Host and User-Agent headers (cut at 256 characters)
 *   requestId  HTTP: the X-Request-ID sent upstream (a trusted proxy's, or ipgate's)
 *   route      HTTP listeners with routes only: the route's name, null when none matched (then
 *              decision `none` and result route_no_host / route_no_path / route_bad_path /
 *              route_path_params); a
 *              listener without routes writes no `route` field, its lines unchanged
 *   bytesIn, bytesOut  bytes from / to the client (HTTP: bytesOut only, response bytes on the wire)
 *   durationMs from accept (TCP) or request head (HTTP) to close
 *   tls        HTTP over a terminating listener: {version, sni, cipher, resumed, clientCert?}
 *              (the connection's handshake; src/connection/tls-facts.ts); absent on plaintext
 *
 *   list       denials: the allowlist that refused (the route's, or the listener's)
 *
 * Levels: every connection and request at info, denied and rejected ones included, as nginx writes
 * every 403 to its access log: a denial's line names the route, the list, the deny entry (null: no
 * entry covers the client) and the reason. Denial and rejection lines are rate-limited per process
 * past `logging.deniedLinesPerSecond` (denial-lines.ts): a scan costs that many lines a second plus
 * one line with the count of those suppressed; ipgate_denied_total counts every one. With the
 * access log off (`logging.access: false`), denials are summarised instead (DenialSummary: "N
 * denials from M addresses in the last 10 s", and the first denial of each address), and each is
 * at debug. `entry` on an allowed line is the entry that admitted the client, carried from the
 * decision (a list change re-checks live connections and updates it; a request's is the one that
 * admitted that request).
 *
 * Hot path: one child logger per listener built once; past the denial lines' rate, no line and no
 * object for a denial (and an HTTP client refused for its whole connection takes the quick path
 * again, HttpForwarder.quickDenial). The allowed lines (allowed connections and requests) are built as text, in
 * pino's format and field order, and written to the logger's destination: pino's object walk was
 * most of a line's cost (bench/README.md "Metrics and access logs"). When the destination is
 * the BlockWriter (the default, `logging.bufferBytes` > 0), the line is written into its block
 * field by field instead (no concatenated string to flatten and re-encode: that was most of the
 * line's cost inside a loaded server); the bytes are the same. A logger not made by
 * `createLogger` (see `rawLineTarget`) goes through pino.
 */
import type { Logger } from 'pino';
import { BlockWriter, isoTime, rawLineTarget } from '../log';
import type { AllowEntry } from '../allowlist/entry';
import type { Connection, Via } from '../connection/connection';
import type { Reason } from '../reasons';
import type { DenialReason } from '../allowlist/matcher';
import type { LiveList } from '../store/live-lists';
import { DenialSummary } from './denial-summary';
import { DenialLines } from './denial-lines';
import type { TlsFacts } from '../connection/tls-facts';
import { DEBUG_LEVEL, INFO_LEVEL, logsAt } from '../log';

function tlsFields(t: TlsFacts): Record<string, unknown> {
  return {
    version: t.version,
    sni: t.sni,
    cipher: t.cipher,
    resumed: t.resumed,
    ...(t.clientCert !== null ? { clientCert: t.clientCert } : {}),
  };
}

const MAX_PATH = 256;

/**
 * What a request's line is written from: forward/http/exchange.ts Exchange is one (declared here so
 * that the log reads a record without depending on the engine that fills it).
 */
interface RequestRecord {
  readonly hc: { readonly conn: Connection; readonly protocol: 'h1' | 'h2' };
  readonly client: string;
  readonly via: Via;
  readonly method: string;
  readonly url: string;
  readonly host: string | null;
  readonly userAgent: string | null;
  readonly requestId: string | null;
  readonly entry: AllowEntry | null;
  readonly routed: boolean;
  readonly route: { readonly name: string; readonly list: LiveList } | null;
  readonly reason: Reason | null;
  readonly status: number;
  readonly upstream: { readonly label: string } | null;
  readonly upstreamStatus: number;
  readonly upstreamMs: number | null;
  readonly startedAt: number;
  readonly bytesOut: number;
}

export class ListenerAccessLog {
  private readonly log: Logger;
  private readonly http: boolean;
  /** Where the info lines go as text, and the line's bindings (null: through pino). */
  private readonly raw: { stream: { write(line: string): unknown }; bindings: string } | null;
  /** The raw target when it is a BlockWriter: lines are then written into its block field by field. */
  private readonly direct: BlockWriter | null;
  /** A TCP listener with routes: its lines carry `route` and `sni`. */
  private readonly routed: boolean;
  /** `logging.access`: a line per connection and request; false: only the denial summary (and debug lines). */
  readonly lines: boolean;
  /** The denial lines' rate limit (null: the access log is off). */
  private readonly denials: DenialLines | null;

  constructor(
    readonly listener: string,
    mode: 'tcp' | 'http',
    logger: Logger,
    private readonly summary: DenialSummary | null,
    /** The list the listener enforces: a denial line names the deny entry that decided (null: not known). */
    private readonly list: LiveList | null = null,
    routed = false,
    /** `logging.access`: false: no lines, only the summary (and debug lines). */
    lines = true,
    /** The denial lines' rate limit, shared by the process's listeners (default: one of this log's own, 100/s). */
    denials: DenialLines | null = null,
  ) {
    this.http = mode === 'http';
    this.routed = routed;
    this.lines = lines;
    this.denials = lines ? (denials ?? new DenialLines(logger, 100)) : null;
    this.log = logger.child({ listener, kind: mode });
    this.raw = rawLineTarget(this.log);
    this.direct = this.raw !== null && this.raw.stream instanceof BlockWriter ? this.raw.stream : null;
  }

  /**
   * A connection closed (Listener). TCP listeners: the connection's line. HTTP listeners: only
   * connections refused before the HTTP layer took them (PROXY header faults); the others have a
   * line per request. `bytesIn` / `bytesOut`: the socket's counts, read once by the listener at
   * close (`bytesWritten` is a getter that copies the socket's write queue).
   */
  connection(conn: Connection, bytesIn: number, bytesOut: number): void {
    if (this.http && conn.decidedPerRequest) return;
    const result = conn.result ?? 'ok';
    let decision: string;
    let reason: string | null = null;
    let denyEntry: string | null = null;
    const list = conn.route?.list ?? this.list;
    if (result === 'denied') {
      decision = 'deny';
      ({ reason, entry: denyEntry } = this.denial(conn.clientAddress, list));
    } else if (result === 'revoked') {
      decision = 'deny';
      reason = 'revoked';
    } else if (
      (conn.entry === null && (result.startsWith('pp_') || result.startsWith('route_'))) ||
      (result.startsWith('tls_') && result !== 'tls_bad_server_hello')
    ) {
      // A tls_ code after the allowlist admitted the client is the handshake watch's refusal of a
      // second ClientHello (forward/tcp/hello-watch.ts): a rejection too, not an allowed stream.
      // tls_bad_server_hello is the backend's fault: an allowed connection that failed, as
      // upstream_<code> results are.
      decision = 'reject';
      reason = result;
    } else if (conn.entry === null) {
      // Closed before the allowlist decision (drain, peer gone while the PROXY header was awaited).
      decision = 'none';
    } else {
      decision = 'allow';
    }
    if (decision === 'allow') {
      if (!this.lines) return;
      const raw = this.raw;
      const entry = conn.entry?.cidr ?? null;
      if (raw !== null) {
        if (!logsAt(this.log, INFO_LEVEL)) return;
        const durationMs = Date.now() - conn.startedAt;
        const w = this.direct;
        // Field by field into the block, as for HTTP below. Worst case per character: a 6-byte \u escape.
        if (
          w?.begin(
            512 +
              3 * raw.bindings.length +
              6 *
                (len(conn.clientAddress) +
                  len(conn.via) +
                  len(conn.peerAddress) +
                  len(entry) +
                  len(result) +
                  len(conn.upstream) +
                  len(conn.route?.name) +
                  len(conn.sni)),
          )
        ) {
          w.fragment('{"level":"info"');
          w.time();
          w.fragment(raw.bindings);
          w.fragment(',"conn":');
          w.number(conn.id);
          w.fragment(',"client":');
          w.jsonString(conn.clientAddress);
          w.fragment(',"clientPort":');
          w.number(conn.clientPort);
          w.fragment(',"via":');
          w.jsonString(conn.via);
          w.fragment(',"peer":');
          w.jsonString(conn.peerAddress);
          w.fragment(',"decision":"allow","entry":');
          w.jsonString(entry);
          w.fragment(',"result":');
          w.jsonString(result);
          w.fragment(',"upstream":');
          w.jsonString(conn.upstream);
          if (this.routed) {
            w.fragment(',"route":');
            w.jsonString(conn.route?.name ?? null);
            w.fragment(',"sni":');
            w.jsonString(conn.sni);
          }
          w.fragment(',"bytesIn":');
          w.number(bytesIn);
          w.fragment(',"bytesOut":');
          w.number(bytesOut);
          w.fragment(',"durationMs":');
          w.number(durationMs);
          w.fragment(',"msg":"access"}\n');
          w.end();
          return;
        }
        raw.stream.write(
          `{"level":"info"${isoTime()}${raw.bindings},"conn":${num(conn.id)},"client":${str(conn.clientAddress)}` +
            `,"clientPort":${num(conn.clientPort)},"via":${str(conn.via)},"peer":${str(conn.peerAddress)},"decision":"allow"` +
            `,"entry":${str(entry)},"result":${str(result)},"upstream":${str(conn.upstream)}` +
            (this.routed ? `,"route":${str(conn.route?.name ?? null)},"sni":${str(conn.sni)}` : '') +
            `,"bytesIn":${num(bytesIn)},"bytesOut":${num(bytesOut)}` +
            `,"durationMs":${num(durationMs)},"msg":"access"}\n`,
        );
        return;
      }
      this.log.info(
        {
          conn: conn.id,
          client: conn.clientAddress,
          clientPort: conn.clientPort,
          via: conn.via,
          peer: conn.peerAddress,
          decision,
          entry,
          result,
          upstream: conn.upstream,
          ...(this.routed ? { route: conn.route?.name ?? null, sni: conn.sni } : {}),
          bytesIn,
          bytesOut,
          durationMs: Date.now() - conn.startedAt,
        },
        'access',
      );
      return;
    }
    if (!this.lines && reason !== null)
      this.summary?.add(
        this.listener,
        conn.clientAddress,
        reason,
        denyEntry,
        decision === 'deny' ? (list?.name ?? null) : null,
        conn.route?.name ?? null,
      );
    const level = this.denialLevel(reason !== null);
    if (level === null) return;
    this.log[level](
      {
        conn: conn.id,
        client: conn.clientAddress,
        clientPort: conn.clientPort,
        via: conn.via,
        peer: conn.peerAddress,
        decision,
        reason,
        ...(decision === 'deny' ? { list: list?.name ?? null, entry: denyEntry } : {}),
        result,
        upstream: conn.upstream,
        ...(this.routed ? { route: conn.route?.name ?? null, sni: conn.sni } : {}),
        bytesIn,
        bytesOut,
        durationMs: Date.now() - conn.startedAt,
      },
      'access',
    );
  }

  /**
   * The level of a denied or rejected line (`counted`: a denial or rejection, not a close before
   * any decision), or null for none: with the access log on, info within the denial lines' rate
   * (denial-lines.ts), past it debug when debug is on, else nothing (counted as suppressed); with
   * it off, debug when on (the summary counts them at info).
   */
  private denialLevel(counted: boolean): 'info' | 'debug' | null {
    const d = this.denials;
    if (d !== null && counted && logsAt(this.log, INFO_LEVEL)) {
      if (d.take(Date.now())) return 'info';
    }
    return logsAt(this.log, DEBUG_LEVEL) ? 'debug' : null;
  }

  /**
   * Why `client` was denied and by which entry: the list in force decides again (the decision was
   * moments ago; a list change in between is what revokeLive handles). Denial path only.
   */
  private denial(client: string, list: LiveList | null): { reason: DenialReason; entry: string | null } {
    if (list === null) return { reason: 'not_allowlisted', entry: null };
    const d = list.matcher.decide(client);
    return d.reason === 'denied_by_entry'
      ? { reason: 'denied_by_entry', entry: d.entry!.cidr }
      : { reason: 'not_allowlisted', entry: null };
  }

  /**
   * A denied request would get its own line now (debug on, or the access log on at info with room
   * under the denial lines' rate): the HTTP path then keeps the full exchange for it (its host,
   * user agent, request id); otherwise a client refused for its connection takes the quick path.
   */
  wantsDenialLines(): boolean {
    if (logsAt(this.log, DEBUG_LEVEL)) return true;
    return this.denials !== null && logsAt(this.log, INFO_LEVEL) && this.denials.available(Date.now());
  }

  /**
   * A denied HTTP request finished on the quick path (HttpForwarder.relayQuickRecord), with the
   * reason and deny entry carried from the connection's decision: no line was wanted (past the
   * denial lines' rate: counted as suppressed), or the access log is off (the summary counts it).
   */
  deniedRequest(client: string, reason: string, entry: string | null): void {
    if (this.denials !== null) {
      if (logsAt(this.log, INFO_LEVEL)) this.denials.suppress();
      return;
    }
    this.summary?.add(this.listener, client, reason, entry, this.list?.name ?? null, null);
  }

  /** An HTTP request finished (HttpForwarder.record); `now` = Date.now() at that moment. */
  request(ex: RequestRecord, now: number): void {
    const conn = ex.hc.conn;
    const denied = ex.reason === 'denied' || ex.reason === 'revoked';
    const path = ex.url === undefined ? null : ex.url.length > MAX_PATH ? ex.url.slice(0, MAX_PATH) : ex.url;
    if (!denied) {
      if (!this.lines) {
        // The access log off: the line HttpForwarder writes at debug without one.
        if (logsAt(this.log, DEBUG_LEVEL)) {
          this.log.debug(
            {
              conn: conn.id,
              client: ex.client,
              via: ex.via,
              peer: conn.peerAddress,
              method: ex.method,
              url: ex.url,
              status: ex.status,
              reason: ex.reason,
              upstream: ex.upstream?.label ?? null,
              bytes: ex.bytesOut,
              ms: now - ex.startedAt,
            },
            'request',
          );
        }
        return;
      }
      // A listener with routes: the `route` field after `entry` (null when no route matched, the
      // decision then `none`); a listener without routes writes neither.
      const routed = ex.routed;
      const route = routed ? (ex.route?.name ?? null) : null;
      const decision = routed && ex.route === null ? 'none' : 'allow';
      const raw = this.raw;
      if (raw !== null) {
        if (!logsAt(this.log, INFO_LEVEL)) return;
        const entry = ex.entry?.cidr ?? null;
        const result = ex.reason ?? 'ok';
        const upstream = ex.upstream?.label ?? null;
        const method = ex.method;
        const protocol = ex.hc.protocol === 'h2' ? 'h2' : 'h1';
        const bytesOut = ex.bytesOut;
        const host = cut(ex.host);
        const ua = cut(ex.userAgent);
        const upstreamStatus = ex.upstreamStatus === 0 ? null : ex.upstreamStatus;
        const w = this.direct;
        // Field by field into the block: in a loaded server the concatenated line, its flatten
        // and its UTF-8 copy cost 10-20 us (bench/README.md "where an access line's time goes").
        // Worst case per character: a 6-byte \u escape; a line too long for a block is a string.
        if (
          w?.begin(
            512 +
              3 * raw.bindings.length +
              6 *
                (len(ex.client) +
                  len(ex.via) +
                  len(conn.peerAddress) +
                  len(entry) +
                  len(result) +
                  len(upstream) +
                  len(method) +
                  len(path) +
                  len(host) +
                  len(ua) +
                  len(ex.requestId) +
                  len(route)) +
              (conn.tls !== null ? 3 * conn.tls.json.length : 0),
          )
        ) {
          w.fragment('{"level":"info"');
          w.time();
          w.fragment(raw.bindings);
          w.fragment(',"conn":');
          w.number(conn.id);
          w.fragment(',"client":');
          w.jsonString(ex.client);
          w.fragment(',"via":');
          w.jsonString(ex.via);
          w.fragment(',"peer":');
          w.jsonString(conn.peerAddress);
          w.fragment(decision === 'allow' ? ',"decision":"allow","entry":' : ',"decision":"none","entry":');
          w.jsonString(entry);
          if (routed) {
            w.fragment(',"route":');
            w.jsonString(route);
          }
          w.fragment(',"result":');
          w.jsonString(result);
          w.fragment(',"upstream":');
          w.jsonString(upstream);
          w.fragment(protocol === 'h2' ? ',"protocol":"h2","method":' : ',"protocol":"h1","method":');
          w.jsonString(method);
          w.fragment(',"path":');
          w.jsonString(path);
          w.fragment(',"status":');
          w.number(ex.status);
          w.fragment(',"upstreamStatus":');
          w.number(upstreamStatus);
          w.fragment(',"upstreamMs":');
          w.number(ex.upstreamMs);
          w.fragment(',"host":');
          w.jsonString(host);
          w.fragment(',"userAgent":');
          w.jsonString(ua);
          w.fragment(',"requestId":');
          w.jsonString(ex.requestId);
          w.fragment(',"bytesOut":');
          w.number(bytesOut);
          w.fragment(',"durationMs":');
          w.number(now - ex.startedAt);
          if (conn.tls !== null) w.fragment(conn.tls.json);
          w.fragment(',"msg":"access"}\n');
          w.end();
          return;
        }
        raw.stream.write(
          `{"level":"info"${isoTime()}${raw.bindings},"conn":${num(conn.id)},"client":${str(ex.client)}` +
            `,"via":${str(ex.via)},"peer":${str(conn.peerAddress)},"decision":"${decision}","entry":${str(entry)}` +
            `${routed ? `,"route":${str(route)}` : ''},"result":${str(result)},"upstream":${str(upstream)},"protocol":"${protocol}","method":${str(method)}` +
            `,"path":${str(path)},"status":${num(ex.status)},"upstreamStatus":${num(upstreamStatus)}` +
            `,"upstreamMs":${num(ex.upstreamMs)},"host":${str(host)},"userAgent":${str(ua)},"requestId":${str(ex.requestId)}` +
            `,"bytesOut":${num(bytesOut)}` +
            `,"durationMs":${num(now - ex.startedAt)}${conn.tls !== null ? conn.tls.json : ''},"msg":"access"}\n`,
        );
        return;
      }
      this.log.info(
        {
          conn: conn.id,
          client: ex.client,
          via: ex.via,
          peer: conn.peerAddress,
          decision,
          entry: ex.entry?.cidr ?? null,
          ...(routed ? { route } : {}),
          result: ex.reason ?? 'ok',
          upstream: ex.upstream?.label ?? null,
          protocol: ex.hc.protocol,
          method: ex.method,
          path,
          status: ex.status,
          upstreamStatus: ex.upstreamStatus === 0 ? null : ex.upstreamStatus,
          upstreamMs: ex.upstreamMs,
          host: cut(ex.host),
          userAgent: cut(ex.userAgent),
          requestId: ex.requestId,
          bytesOut: ex.bytesOut,
          durationMs: now - ex.startedAt,
          ...(conn.tls !== null ? { tls: tlsFields(conn.tls) } : {}),
        },
        'access',
      );
      return;
    }
    const list = ex.route?.list ?? this.list;
    const { reason, entry } = ex.reason === 'denied' ? this.denial(ex.client, list) : { reason: 'revoked', entry: null };
    const route = ex.routed ? (ex.route?.name ?? null) : null;
    if (!this.lines) this.summary?.add(this.listener, ex.client, reason, entry, list?.name ?? null, route);
    const level = this.denialLevel(true);
    if (level === null) return;
    this.log[level](
      {
        conn: conn.id,
        client: ex.client,
        via: ex.via,
        peer: conn.peerAddress,
        decision: 'deny',
        reason,
        list: list?.name ?? null,
        entry,
        ...(ex.routed ? { route } : {}),
        result: ex.reason,
        upstream: null,
        protocol: ex.hc.protocol,
        method: ex.method,
        path,
        status: ex.status,
        host: cut(ex.host),
        userAgent: cut(ex.userAgent),
        requestId: ex.requestId,
        bytesOut: ex.bytesOut,
        durationMs: now - ex.startedAt,
        ...(conn.tls !== null ? { tls: tlsFields(conn.tls) } : {}),
      },
      'access',
    );
  }
}

/**
 * A string as JSON: quoted as is when nothing in it needs escaping (addresses, CIDRs, names,
 * methods, most paths), else JSON.stringify. Lone surrogates are escaped too (pino writes them raw).
 */
function str(s: string | null | undefined): string {
  if (s === null || s === undefined) return 'null';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 32 || c === 34 || c === 92 || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return `"${s}"`;
}

/** A header value as logged: at most MAX_PATH characters (a client chooses its length). */
function cut(s: string | null): string | null {
  return s === null || s === undefined || s.length <= MAX_PATH ? (s ?? null) : s.slice(0, MAX_PATH);
}

/** Length of a field that the types say is a string, 0 if it is not (a line must never throw). */
function len(s: string | null | undefined): number {
  return typeof s === 'string' ? s.length : 0;
}

/** A number as JSON (pino writes non-finite numbers as null too). */
function num(n: number | null | undefined): string {
  return typeof n === 'number' && Number.isFinite(n) ? `${n}` : 'null';
}

interface AccessLogOptions {
  /** `logging.access`: a line per connection and request (default true); false: denials summarised. */
  access?: boolean;
  /** `logging.deniedLinesPerSecond`: denial and rejection lines per second past which they are counted, not written. */
  deniedLinesPerSecond?: number;
  /** `logging.denialSummaryIntervalMs`: 0 = no summary line (denials only at debug). */
  denialSummaryIntervalMs: number;
  /** `logging.denialSummaryMaxAddresses`. */
  denialSummaryMaxAddresses: number;
  /** `logging.denialLinesPerInterval`: info lines for first denials of an address per interval. */
  denialLinesPerInterval?: number;
}

/**
 * The access log of a process: a ListenerAccessLog per listener, and shared by them the denial
 * lines' rate limit (the access log on) or the denial summary (off).
 */
export class AccessLog {
  readonly summary: DenialSummary | null;
  readonly denials: DenialLines | null;

  /** Whether `options` ask for anything: lines, or (the access log off) a denial summary. */
  static wanted(options: Readonly<AccessLogOptions>): boolean {
    return options.access !== false || options.denialSummaryIntervalMs > 0;
  }

  constructor(
    private readonly logger: Logger,
    options: Readonly<AccessLogOptions>,
  ) {
    const log = logger.child({ component: 'access' });
    const lines = options.access !== false;
    this.denials = lines ? new DenialLines(log, options.deniedLinesPerSecond ?? 100) : null;
    this.summary =
      !lines && options.denialSummaryIntervalMs > 0
        ? new DenialSummary(log, {
            intervalMs: options.denialSummaryIntervalMs,
            maxAddresses: options.denialSummaryMaxAddresses,
            linesPerInterval: options.denialLinesPerInterval ?? 0,
          })
        : null;
  }

  forListener(name: string, mode: 'tcp' | 'http', list: LiveList | null = null, routed = false): ListenerAccessLog {
    return new ListenerAccessLog(name, mode, this.logger, this.summary, list, routed, this.denials !== null, this.denials);
  }

  start(): void {
    this.summary?.start();
  }

  /** Stop the summary timer and write the last interval's line (and the count of suppressed denial lines). */
  stop(): void {
    this.summary?.stop();
    this.denials?.stop();
  }
}
