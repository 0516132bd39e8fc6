/**
 * The audit log: one structured pino line per allowlist change (who, what, when, resulting version)
 * and a bounded in-memory history for `GET /v1/audit`.
 *
 * Decision: the history is not persisted. The durable record is the log line (shipped and retained
 * by the log pipeline, like any access log); keeping it in the store would grow the source of truth
 * (a ConfigMap holds at most 1 MiB) with data no replica needs to enforce anything. The in-memory
 * ring answers "what changed recently on this replica" and starts empty after a restart.
 */
import type { Logger } from 'pino';
import { pinLevel } from '../log';
import type { AllowEntry } from '../allowlist/entry';

export type AuditAction = 'replace' | 'add' | 'remove' | 'external' | 'seed' | 'create' | 'delete' | 'config' | 'log-level';

interface AuditChange {
  /** Token name (`admin`, or a name from the tokens file), or the external source (`file edit`). */
  who: string;
  action: AuditAction;
  list: string;
  added: readonly AllowEntry[];
  removed: readonly AllowEntry[];
  /** Same CIDR, new action, comment or expiresAt. */
  changed: readonly { before: AllowEntry; after: AllowEntry }[];
  fromVersion: string;
  version: string;
}

export interface AuditRecord extends AuditChange {
  /** Increases by one per record in this process. */
  seq: number;
  /** RFC 3339. */
  time: string;
}

/** Entries that differ between two versions of a list, keyed by CIDR. */
export function diffEntries(
  before: readonly AllowEntry[],
  after: readonly AllowEntry[],
): Pick<AuditChange, 'added' | 'removed' | 'changed'> {
  const old = new Map(before.map((e) => [e.cidr, e]));
  const now = new Map(after.map((e) => [e.cidr, e]));
  const added: AllowEntry[] = [];
  const removed: AllowEntry[] = [];
  const changed: { before: AllowEntry; after: AllowEntry }[] = [];
  for (const e of after) {
    const o = old.get(e.cidr);
    if (!o) added.push(e);
    else if (o.action !== e.action || o.comment !== e.comment || o.expiresAt !== e.expiresAt) changed.push({ before: o, after: e });
  }
  for (const e of before) if (!now.has(e.cidr)) removed.push(e);
  return { added, removed, changed };
}

export class AuditLog {
  private readonly ring: AuditRecord[] = [];
  private seq = 0;
  private readonly log: Logger;

  /** `capacity`: records kept for the API (oldest dropped first). */
  constructor(
    logger: Logger,
    readonly capacity = 1000,
  ) {
    // At info whatever the runtime log level (PUT /v1/log-level): the audit lines are the record.
    this.log = pinLevel(logger.child({ audit: true }, { level: 'info' }));
  }

  record(change: AuditChange, now = new Date()): AuditRecord {
    const rec: AuditRecord = { seq: ++this.seq, time: now.toISOString(), ...change };
    this.ring.push(rec);
    if (this.ring.length > this.capacity) this.ring.splice(0, this.ring.length - this.capacity);
    this.log.info(
      {
        seq: rec.seq,
        who: rec.who,
        action: rec.action,
        list: rec.list,
        added: rec.added,
        removed: rec.removed,
        changed: rec.changed,
        fromVersion: rec.fromVersion,
        version: rec.version,
        time: rec.time,
      },
      'allowlist changed',
    );
    return rec;
  }

  /** A setting changed through the admin API (the log level): `fromVersion` / `version` hold the values. */
  recordSetting(who: string, action: 'log-level', from: string, to: string, now = new Date()): AuditRecord {
    const rec: AuditRecord = {
      seq: ++this.seq,
      time: now.toISOString(),
      who,
      action,
      list: '',
      added: [],
      removed: [],
      changed: [],
      fromVersion: from,
      version: to,
    };
    this.ring.push(rec);
    if (this.ring.length > this.capacity) this.ring.splice(0, this.ring.length - this.capacity);
    this.log.info({ seq: rec.seq, who, action, from, to, time: rec.time }, `${action} changed from ${from} to ${to}`);
    return rec;
  }

  /** Newest first, optionally one list only. */
  history(opts: { list?: string; limit?: number } = {}): AuditRecord[] {
    const out: AuditRecord[] = [];
    for (let i = this.ring.length - 1; i >= 0 && out.length < (opts.limit ?? this.capacity); i--) {
      const r = this.ring[i]!;
      if (opts.list === undefined || r.list === opts.list) out.push(r);
    }
    return out;
  }
}
