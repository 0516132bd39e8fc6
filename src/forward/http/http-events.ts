/**
 * What an HTTP engine reports (docs/http-engines.md "The policy and its engines"), and the
 * listener's record of it: counters (metrics/listener-stats.ts), the access log's request lines,
 * the warn lines of upstream failures. The policy (http-policy.ts) decides and counts the
 * decisions; this counts what became of them.
 */
import type { Logger } from 'pino';
import type { ListenerAccessLog } from '../../access-log/access-log';
import { ListenerStats } from '../../metrics/listener-stats';
import type { HttpClientErrorLabel } from '../../reasons';
import type { ByteSocket } from '../../transport/byte-socket';
import { upstreamReason } from '../upstream-reason';
import type { Exchange, HttpConn } from './exchange';
import type { RequestDecision } from './http-policy';

/** The engine's reports: five events, each once per occurrence. */
export interface EngineEvents {
  /**
   * A request refused as malformed (`bad_request`, `header_too_large`, `header_timeout`, and the
   * policy's `host_*`); `detail`: why, for the debug line.
   */
  clientError(hc: HttpConn, reason: HttpClientErrorLabel, detail?: string): void;
  /** An upstream attempt failed (`code`: the socket's error); `retrying`: the next target follows. */
  upstreamFailed(ex: Exchange, code: string, timedOut: boolean, retrying: boolean): void;
  /** The upstream's response head (its status, and the time since `ex.sentAt`). */
  upstreamAnswered(ex: Exchange, status: number): void;
  /** A 101 turned the connection into a tunnel to `upstream` (revocation and drain close it). */
  upgraded(ex: Exchange, upstream: ByteSocket): void;
  /** A request is over (answered, relayed, failed or abandoned). `startedAt`: Date.now() at its head. */
  finished(hc: HttpConn, d: RequestDecision, startedAt: number): void;
}

const STATUS_CLASS = ['none', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;

export class HttpRecorder implements EngineEvents {
  constructor(
    private readonly stats: ListenerStats,
    private readonly log: Logger,
    /** The access log: a line per request (null: logging.access off). */
    private readonly access: ListenerAccessLog | null,
  ) {}

  clientError(hc: HttpConn, reason: HttpClientErrorLabel, detail?: string): void {
    ListenerStats.bump(this.stats.httpClientErrors, reason);
    if (hc.conn.result === null) hc.conn.result = reason;
    this.log.debug({ conn: hc.conn.id, peer: hc.conn.clientAddress, reason, detail }, 'bad request');
  }

  upstreamFailed(ex: Exchange, code: string, timedOut: boolean, retrying: boolean): void {
    const reason = timedOut ? 'upstream_timeout' : upstreamReason({ code } as NodeJS.ErrnoException);
    // Passive health (upstream-health.ts): every failed attempt counts against its target.
    ex.upstream?.health?.failed(performance.now());
    this.stats.upstreamFailed(ex.upstream?.label, reason);
    if (retrying) {
      this.log.warn({ conn: ex.hc.conn.id, upstream: ex.upstream?.label, err: code }, 'upstream connect failed; trying next');
      return;
    }
    ex.reason = reason;
    this.log.warn({ conn: ex.hc.conn.id, client: ex.client, upstream: ex.upstream?.label, reason, err: code }, 'upstream failed');
  }

  upstreamAnswered(ex: Exchange, status: number): void {
    ex.upstreamStatus = status;
    const now = performance.now();
    const ms = now - ex.sentAt;
    ex.upstream?.health?.answered(status, now);
    ex.upstreamMs = Math.round(ms);
    if (ex.upstream !== null) this.stats.upstreamAnswered(ex.upstream.label, status, ms / 1000);
  }

  upgraded(ex: Exchange, upstream: ByteSocket): void {
    const hc = ex.hc;
    hc.upgraded = ex;
    hc.conn.upstreamSocket = upstream;
    hc.conn.upstream = ex.upstream?.label ?? null;
  }

  finished(hc: HttpConn, d: RequestDecision, startedAt: number): void {
    const ex = d.ex;
    if (ex === null) {
      // A quick denial (http-policy.ts): no Exchange, the connection's decision says the rest.
      ListenerStats.bump(this.stats.httpResponses, '4xx');
      this.stats.httpDuration.observe((Date.now() - startedAt) / 1000);
      const denial = hc.denial!;
      this.access?.deniedRequest(hc.conn.clientAddress, denial.reason!, denial.entry?.cidr ?? null);
      return;
    }
    this.record(ex);
  }

  /** Count one finished request (status class, duration) and write its access-log line. */
  private record(ex: Exchange): void {
    const cls = STATUS_CLASS[ex.status >= 100 && ex.status < 600 ? Math.floor(ex.status / 100) : 0]!;
    const now = Date.now();
    if (!ex.routed) {
      ListenerStats.bump(this.stats.httpResponses, cls);
      this.stats.httpDuration.observe((now - ex.startedAt) / 1000);
    } else {
      // Routed: the route's series (route="" for a miss), metrics/listener-stats.ts.
      const rs = ex.route === null ? this.stats.httpRoute('') : ex.route.stats;
      ListenerStats.bump(rs.responses, cls);
      rs.duration.observe((now - ex.startedAt) / 1000);
    }
    if (this.access !== null) this.access.request(ex, now);
    else if (this.log.isLevelEnabled('debug')) {
      this.log.debug({
        conn: ex.hc.conn.id, client: ex.client, via: ex.via, peer: ex.hc.conn.clientAddress, method: ex.method,
        url: ex.url, status: ex.status, reason: ex.reason, upstream: ex.upstream?.label ?? null,
        bytes: ex.bytesOut, ms: now - ex.startedAt,
      }, 'request');
    }
  }
}
