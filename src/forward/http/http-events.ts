/**
 * What an HTTP engine reports (docs/http-engines.md "The policy and its engines"), and the
 * listener's record of it: counters (metrics/listener-stats.ts), the access log's request lines,
 * the warn lines of upstream failures. The policy (http-policy.ts) decides and counts the
 * decisions; this counts what became of them.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ListenerAccessLog } from '../../access-log/access-log';
import { ListenerStats, methodIndex } from '../../metrics/listener-stats';
import type { HttpClientErrorLabel } from '../../reasons';
import type { ByteSocket } from '../../transport/byte-socket';
import { upstreamReason } from '../../upstream/upstream-reason';
import type { Exchange, HttpConn } from './exchange';
import type { RequestDecision, RequestFacts } from './http-policy';
import { requestHeadBytes } from './request-size';
import { DEBUG_LEVEL, logsAt } from '../../log';

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
  /**
   * A request is over (answered, relayed, failed or abandoned). `startedAt`: Date.now() at its
   * head. `head` and `responseBytes`: a quick denial's (no Exchange carries them), else null and 0.
   */
  finished(hc: HttpConn, d: RequestDecision, startedAt: number, head: RequestFacts | null, responseBytes: number): void;
}

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

  finished(hc: HttpConn, d: RequestDecision, startedAt: number, head: RequestFacts | null, responseBytes: number): void {
    const slot = d.slot;
    if (slot !== null) {
      // nginx limit_conn: a request counts while it is in progress (edge-rules.ts LimitSlot).
      d.slot = null;
      slot.release();
    }
    const ex = d.ex;
    if (ex === null) {
      // A quick denial (http-policy.ts): no Exchange, the connection's decision says the rest.
      this.stats.http.record(
        methodIndex(head!.method),
        403,
        (Date.now() - startedAt) / 1000,
        requestHeadBytes(head!),
        responseBytes,
        hc.protocol === 'h2',
      );
      const denial = hc.denial!;
      this.access?.deniedRequest(hc.conn.clientAddress, denial.reason!, denial.entry?.cidr ?? null);
      return;
    }
    this.record(ex);
  }

  /** Count one finished request (method, status, duration, sizes) and write its access-log line. */
  private record(ex: Exchange): void {
    const now = Date.now();
    // Routed: the route's series (route="" for a miss), metrics/listener-stats.ts.
    const counts = !ex.routed ? this.stats.http : ex.route === null ? this.stats.httpRoute('') : ex.route.stats;
    counts.record(methodIndex(ex.method), ex.status, (now - ex.startedAt) / 1000, ex.requestBytes, ex.bytesOut, ex.hc.protocol === 'h2');
    if (this.access !== null) this.access.request(ex, now);
    else if (logsAt(this.log, DEBUG_LEVEL)) {
      this.log.debug(
        {
          conn: ex.hc.conn.id,
          client: ex.client,
          via: ex.via,
          peer: ex.hc.conn.clientAddress,
          protocol: ex.hc.protocol,
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
  }
}
