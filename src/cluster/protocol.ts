/**
 * The IPC messages between the primary and its workers (node:cluster, structured clone over the
 * process channel). Every message has a `t` starting with `ipgate:` so anything else on the channel
 * (Node's own cluster messages are separate, `NODE_CLUSTER` ones) is ignored.
 *
 *   worker  -> primary  hello                      handler installed: send me the lists
 *   primary -> worker   lists {seq, lists[]}       the complete set (answer to hello)
 *   primary -> worker   list {seq, name, entries|null, version}
 *                                                  one list changed (null: removed)
 *   worker  -> primary  applied {seq}              everything up to seq is compiled and in force
 *                                                  (revokeLive already ran); carries the versions
 *   worker  -> primary  ready                      listeners bound (after the first lists)
 *   primary -> worker   metrics {id}               scrape request
 *   worker  -> primary  metrics-part {id, json}    some of this worker's metrics, when they are many:
 *                                                  PART_SAMPLES samples a message (metrics/cluster.ts)
 *   worker  -> primary  metrics {id, json}         this worker's metrics as JSON (the rest, after
 *                                                  any parts; metrics/cluster.ts)
 *   primary -> worker   checks {id}                /readyz: this worker's self-checks
 *   worker  -> primary  checks {id, checks[]}      SelfChecks.readinessChecks() (source NAT, PROXY trust)
 *   primary -> worker   connections {id, listener|null, limit}
 *                                                  /v1/connections: this worker's live connections
 *   worker  -> primary  connections {id, page}     liveConnections() (admin/routes/connections.ts)
 *   primary -> worker   log-level {level}          PUT /v1/log-level: set this worker's loggers' level
 *   primary -> worker   routes {update}            the listeners' routes after a config reload (also
 *                                                  after hello, once any reload happened)
 *   primary -> worker   ticket-keys {keys}         the TLS listeners' session ticket keys (base64 by
 *                                                  listener name): sent before `lists` in the answer
 *                                                  to hello, so a worker binds with them, and again
 *                                                  at each rotation (tls/session-tickets.ts)
 *   primary -> worker   drain                      stop accepting, drain, exit 0
 *   worker  -> primary  limit {ops}                what this worker's limit zones accepted in one
 *                                                  event-loop turn: [zone key, client, n, ...]
 *                                                  (src/limit/limit-zones.ts)
 *   primary -> worker   limit {ops}                the same, from another worker (relayed to every
 *                                                  other live worker; a dead worker's requests in
 *                                                  progress given back as negative counts)
 *
 * `seq` counts the primary's broadcasts; an admin write is acknowledged once every live worker has
 * acked a seq at or past the broadcast that carried it (see WorkerPool.settled).
 */
import type { ConnectionsPage } from '../admin/routes/connections';
import type { AllowEntry } from '../allowlist/entry';
import type { MetricJson } from '../metrics/published';
import type { LogLevel } from '../log';
import type { SelfCheckReadiness } from '../selfcheck/self-checks';
import type { RoutesUpdate } from '../route/routes-in-force';

export interface ListState {
  name: string;
  entries: readonly AllowEntry[];
  version: string;
}

export type ToWorker =
  | { t: 'ipgate:lists'; seq: number; lists: ListState[] }
  | { t: 'ipgate:list'; seq: number; name: string; entries: readonly AllowEntry[] | null; version: string }
  | { t: 'ipgate:metrics'; id: number }
  | { t: 'ipgate:checks'; id: number }
  | { t: 'ipgate:connections'; id: number; listener: string | null; limit: number }
  | { t: 'ipgate:log-level'; level: LogLevel }
  | { t: 'ipgate:routes'; update: RoutesUpdate }
  | { t: 'ipgate:ticket-keys'; keys: Record<string, string> }
  | { t: 'ipgate:drain' }
  | { t: 'ipgate:limit'; ops: (string | number)[] };

export type ToPrimary =
  | { t: 'ipgate:hello' }
  | { t: 'ipgate:applied'; seq: number; versions: Record<string, string> }
  | { t: 'ipgate:ready' }
  | { t: 'ipgate:metrics-part'; id: number; json: MetricJson[] }
  | { t: 'ipgate:metrics'; id: number; json: MetricJson[] }
  | { t: 'ipgate:checks'; id: number; checks: SelfCheckReadiness[] }
  | { t: 'ipgate:connections'; id: number; page: ConnectionsPage }
  | { t: 'ipgate:limit'; ops: (string | number)[] };

export function isIpgateMessage<T extends { t: string }>(m: unknown): m is T {
  return (
    typeof m === 'object' && m !== null && typeof (m as { t?: unknown }).t === 'string' && (m as { t: string }).t.startsWith('ipgate:')
  );
}

/**
 * Ticket keys for the channel: base64 text, since the channel is JSON (node:cluster's default
 * serialization turns a Buffer into an array of numbers). The channel is the socket pair between
 * the primary and its own child: the keys never leave the pod's processes.
 */
export function encodeTicketKeys(keys: ReadonlyMap<string, Buffer>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, key] of keys) out[name] = key.toString('base64');
  return out;
}

/** The keys of a `ticket-keys` message, by listener name. */
export function decodeTicketKeys(keys: Record<string, string>): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [name, text] of Object.entries(keys)) out.set(name, Buffer.from(text, 'base64'));
  return out;
}
