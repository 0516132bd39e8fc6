/**
 * Allowlist changes end to end: precondition -> store (durable) -> compiled matcher swapped in
 * (LiveLists, whose 'change' event revokes live connections) -> audit -> the caller acknowledges.
 * External changes the store reports (a file edit, another replica) take the same apply + audit path.
 *
 * The admin API calls this; it knows nothing of HTTP. Failures are ServiceError with a stable code
 * the API maps to a status.
 */
import type { Logger } from 'pino';
import { parseAddress } from '../allowlist/cidr';
import type { AllowEntry } from '../allowlist/entry';
import { AuditLog, diffEntries, type AuditAction, type AuditRecord } from '../audit/audit-log';
import type { LiveLists } from './live-lists';
import { duplicateCidr, MAX_ENTRIES } from './document';
import { StoreConflictError, StoreUnknownListError, type AllowlistStore, type StoredList, type StoreSnapshot } from './store';

export type ServiceErrorCode = 'unknown_list' | 'entry_not_found' | 'precondition_failed' | 'conflict' | 'invalid_entries' | 'invalid_request' | 'store_unavailable';

export class ServiceError extends Error {
  constructor(readonly code: ServiceErrorCode, message: string, readonly field?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ServiceError';
  }
}

/** `If-Match` as the API received it: null when absent, `*`, or a list of strong ETags (unquoted). */
export type Precondition = null | '*' | readonly string[];

export interface ChangeResult {
  list: StoredList;
  audit: AuditRecord;
}

export interface CheckResult {
  allowed: boolean;
  /** The address as ipgate compares it (canonical; IPv4-mapped IPv6 is IPv4). */
  ip: string;
  /** Index of the most specific matching entry, or -1. */
  index: number;
  entry: AllowEntry | null;
  version: string;
}

/**
 * POST/DELETE without If-Match re-apply their edit after a conflict with a writer outside this
 * process (a file edit, another replica) this many times, then answer `conflict` (409): the client
 * asked for no precondition, so a 412 would name one it never sent.
 */
const CONFLICT_RETRIES = 5;

export class AllowlistService {
  private loadedAt: number | null = null;
  private unsubscribe: (() => void) | null = null;
  private readonly log: Logger;
  /**
   * Changes through this process run one at a time, from reading the current list to the write:
   * the store serialises writes, but a read taken before another change's write made every edit of
   * a burst but one conflict (12 concurrent POSTs: 6 answered 412 after exhausting their retries).
   * Serialised here, a conflict can only come from outside the process.
   */
  private changing: Promise<unknown> = Promise.resolve();

  constructor(
    readonly store: AllowlistStore,
    readonly lists: LiveLists,
    readonly audit: AuditLog,
    logger: Logger,
  ) {
    this.log = logger;
  }

  /** Load the store (seeding it from the config), apply every list, follow external changes. */
  async start(seed: ReadonlyMap<string, readonly AllowEntry[]>): Promise<void> {
    const snapshot = await this.store.load(seed);
    for (const list of snapshot.lists.values()) this.lists.apply(list.name, list.entries, list.version);
    this.unsubscribe = this.store.subscribe(({ snapshot: s, source }) => this.applyExternal(s, source));
    this.loadedAt = Date.now();
    this.log.info({ store: this.store.kind, location: this.store.location,
      lists: Object.fromEntries([...snapshot.lists.values()].map((l) => [l.name, { version: l.version, entries: l.entries.length }])) },
    'allowlist store loaded');
  }

  get loaded(): boolean {
    return this.loadedAt !== null;
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    await this.store.close();
  }

  names(): string[] {
    return [...this.store.current().lists.keys()].sort();
  }

  get(name: string): StoredList {
    const list = this.store.current().lists.get(name);
    if (!list) throw new ServiceError('unknown_list', `no allowlist "${name}" (known: ${this.names().join(', ') || 'none'})`);
    return list;
  }

  /** The version this process enforces (can trail the store for a moment during an external change). */
  appliedVersion(name: string): string | null {
    return this.lists.has(name) ? this.lists.get(name).version : null;
  }

  replace(name: string, entries: readonly AllowEntry[], ifMatch: Precondition, who: string): Promise<ChangeResult> {
    checkEntries(entries, 'entries');
    return this.change(name, ifMatch, who, 'replace', () => entries);
  }

  /** Add entries; an entry whose CIDR is already listed replaces it (new comment/expiresAt). */
  add(name: string, entries: readonly AllowEntry[], ifMatch: Precondition, who: string): Promise<ChangeResult> {
    checkEntries(entries, 'entries');
    return this.change(name, ifMatch, who, 'add', (cur) => {
      const incoming = new Map(entries.map((e) => [e.cidr, e]));
      const next = cur.map((e) => incoming.get(e.cidr) ?? e);
      const have = new Set(cur.map((e) => e.cidr));
      for (const e of entries) if (!have.has(e.cidr)) next.push(e);
      if (next.length > MAX_ENTRIES) throw new ServiceError('invalid_entries', `the list would hold ${next.length} entries (at most ${MAX_ENTRIES})`, 'entries');
      return next;
    });
  }

  remove(name: string, cidr: string, ifMatch: Precondition, who: string): Promise<ChangeResult> {
    return this.change(name, ifMatch, who, 'remove', (cur) => {
      const next = cur.filter((e) => e.cidr !== cidr);
      if (next.length === cur.length) throw new ServiceError('entry_not_found', `allowlist "${name}" has no entry ${cidr}`, 'cidr');
      return next;
    });
  }

  check(name: string, ip: string): CheckResult {
    this.get(name);
    const addr = parseAddress(ip);
    if (!addr.ok) throw new ServiceError('invalid_request', addr.message, 'ip');
    const live = this.lists.get(name);
    const matcher = live.matcher;
    const index = matcher.lookup(addr.address);
    return { allowed: index >= 0, ip: addr.address, index, entry: index >= 0 ? matcher.entries[index] ?? null : null, version: live.version };
  }

  private change(name: string, ifMatch: Precondition, who: string, action: AuditAction,
    edit: (current: AllowEntry[]) => readonly AllowEntry[]): Promise<ChangeResult> {
    const run = this.changing.then(() => this.changeNow(name, ifMatch, who, action, edit));
    this.changing = run.catch(() => undefined);
    return run;
  }

  private async changeNow(name: string, ifMatch: Precondition, who: string, action: AuditAction,
    edit: (current: AllowEntry[]) => readonly AllowEntry[]): Promise<ChangeResult> {
    for (let attempt = 0; ; attempt++) {
      const cur = this.get(name);
      if (ifMatch !== null && ifMatch !== '*' && !ifMatch.includes(cur.version)) {
        throw new ServiceError('precondition_failed', `allowlist "${name}" is at version "${cur.version}", not ${ifMatch.map((v) => `"${v}"`).join(', ')}`);
      }
      const next = edit([...cur.entries]);
      let written: StoredList;
      try {
        written = await this.store.write(name, next, cur.version);
      } catch (err) {
        if (err instanceof StoreConflictError) {
          // Someone else wrote in between. With If-Match the client asked for exactly that version:
          // 412. Without, the edit (add/remove) is re-applied on the new content.
          if (ifMatch === null && action !== 'replace') {
            if (attempt < CONFLICT_RETRIES) continue;
            throw new ServiceError('conflict', `allowlist "${name}" kept changing outside this process while writing ` +
              `(${attempt + 1} attempts, now "${err.actual}"): retry the request`, undefined, { cause: err });
          }
          throw new ServiceError('precondition_failed', `allowlist "${name}" changed while writing (now "${err.actual}")`, undefined, { cause: err });
        }
        if (err instanceof StoreUnknownListError) throw new ServiceError('unknown_list', err.message, undefined, { cause: err });
        throw new ServiceError('store_unavailable', (err as Error).message, undefined, { cause: err });
      }
      this.applyFromStore(name);
      const audit = this.audit.record({ who, action, list: name, ...diffEntries(cur.entries, written.entries),
        fromVersion: cur.version, version: written.version });
      return { list: written, audit };
    }
  }

  /** Apply what the store holds now for `name` (newer than our write if an external change followed). */
  private applyFromStore(name: string): void {
    const list = this.store.current().lists.get(name);
    if (list && this.appliedVersion(name) !== list.version) this.lists.apply(name, list.entries, list.version);
  }

  private applyExternal(snapshot: StoreSnapshot, source: string): void {
    for (const list of snapshot.lists.values()) {
      const applied = this.appliedVersion(list.name);
      if (applied === list.version) continue;
      const before = this.lists.entries(list.name);
      this.lists.apply(list.name, list.entries, list.version);
      this.audit.record({ who: source, action: 'external', list: list.name, ...diffEntries(before, list.entries),
        fromVersion: applied ?? '0', version: list.version });
    }
  }
}

function checkEntries(entries: readonly AllowEntry[], field: string): void {
  if (entries.length > MAX_ENTRIES) throw new ServiceError('invalid_entries', `at most ${MAX_ENTRIES} entries`, field);
  const dup = duplicateCidr(entries);
  if (dup) throw new ServiceError('invalid_entries', `${dup.cidr} is listed twice`, `${field}[${dup.index}].cidr`);
}
