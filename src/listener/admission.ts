/**
 * The allowlist decision, one step for the TCP and the HTTP paths alike: match the client against
 * the list in force, and for a refusal count it (`ipgate_denied_total{reason}`: `not_allowlisted`,
 * or `denied_by_entry` when a deny entry decided) and log it at debug: a deny is a decision, not an
 * error, and scans must not flood the log (a rate-limited summary reaches info,
 * access-log/denial-summary.ts). Revocations (an open connection cut by a list change) are counted
 * and logged here too. The Listener uses it for connection-level decisions (TCP), HttpForwarder
 * for its per-connection and per-request ones. A connection an SNI route took (`conn.route`) is
 * decided by the route's list; every other by the listener's.
 */
import type { Logger } from 'pino';
import type { AllowEntry } from '../allowlist/entry';
import { denialReason, type Decision } from '../allowlist/matcher';
import { ListenerStats } from '../metrics/listener-stats';
import type { AllowlistRefusal } from '../reasons';
import type { LiveList } from '../store/live-lists';
import type { Connection, Via } from '../connection/connection';
import { DEBUG_LEVEL, logsAt } from '../log';

export class Admission {
  constructor(
    /** The list that decides (read live: `.matcher` per decision). */
    readonly list: LiveList,
    private readonly stats: ListenerStats,
    private readonly log: Logger,
  ) {}

  /** The entry that admits `client` now (canonical address), or null: refused. */
  match(client: string): AllowEntry | null {
    return this.list.matcher.match(client);
  }

  /** The entry that admits `conn`'s client now, by its route's list or the listener's; null: refused. */
  matchConnection(conn: Connection): AllowEntry | null {
    const route = conn.route;
    return (route === null ? this.list : route.list).matcher.match(conn.clientAddress);
  }

  /**
   * The decision for `client` now with the entry that made it: for a refusal, its reason and deny
   * entry are carried with the connection, so its denied requests need no second lookup.
   */
  decide(client: string): Decision {
    return this.list.matcher.decide(client);
  }

  /**
   * Count and log one refusal of `client` on `conn` (an HTTP request's `method` and `url` too). No
   * object is built unless debug is on: this runs once per denied request. `reason`: the one
   * carried from `decide` (else the list in force, its route's or the listener's, is asked again).
   */
  refused(
    client: string,
    conn: Connection,
    via: Via,
    method: string | null = null,
    url: string | null = null,
    reason: AllowlistRefusal | null = null,
  ): AllowlistRefusal {
    const route = conn.route;
    if (reason === null) reason = denialReason((route === null ? this.list : route.list).matcher, client);
    ListenerStats.bump(this.stats.denied, reason);
    if (route !== null) ListenerStats.bump(route.counts.denied, reason);
    if (logsAt(this.log, DEBUG_LEVEL)) {
      this.log.debug(
        {
          conn: conn.id,
          client,
          peer: conn.peerAddress,
          via,
          reason,
          ...(method !== null ? { method, url } : {}),
          ...(route !== null ? { route: route.name, sni: conn.sni } : {}),
        },
        'denied',
      );
    }
    return reason;
  }

  /** Count and log one revocation of `conn`. */
  revoked(conn: Connection): void {
    ListenerStats.bump(this.stats.denied, 'revoked');
    if (conn.route !== null) ListenerStats.bump(conn.route.counts.denied, 'revoked');
    if (logsAt(this.log, DEBUG_LEVEL)) this.log.debug({ conn: conn.id, client: conn.clientAddress }, 'revoked');
  }
}
