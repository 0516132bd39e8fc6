/**
 * Allowlist changes end to end: precondition -> store (durable) -> compiled matcher swapped in
 * (LiveLists, whose 'change' event revokes live connections) -> audit -> the caller acknowledges.
 * External changes the store reports (a file edit, another replica) take the same apply + audit path.
 *
 * The admin API calls this; it knows nothing of HTTP. Failures are ServiceError with a stable code
 * the API maps to a status.
 *
 * Who owns a list (config `allowlists.NAME.source`, docs/architecture.md "Allowlist"):
 * - `store`: the store's list is the list. The config only seeds an empty store; a seed that
 *   differs from what the store holds is a warning (logged once at start-up, shown in /readyz).
 * - `config`: the config's entries ("declared") are the list, replaced whole by `setDeclared` when
 *   the config file changes. The admin API's writes are refused (`managed_by_config`, 409), except,
 *   with `allowTemporary`, entries that carry a future `expiresAt`: those are kept in the store
 *   under the list's name (so they are durable and reach every replica like any store write) and
 *   compiled after the declared ones. Store entries of a config list without `expiresAt` (left
 *   from when it was a store list) are ignored, with a warning at start-up.
 *   Its version (the ETag) is `c<hash of the declared entries>.<store version>`: either side moving
 *   changes it.
 */
import type { Logger } from 'pino';
import { createHash } from 'node:crypto';
import { parseAddress } from '../allowlist/cidr';
import { parseRfc3339, type AllowEntry } from '../allowlist/entry';
import type { DenialReason } from '../allowlist/matcher';
import { type AuditLog, diffEntries, type AuditAction, type AuditRecord } from '../audit/audit-log';
import type { LiveLists } from './live-lists';
import { duplicateCidr, LIST_NAME, MAX_ENTRIES, seedList } from './document';
import {
  StoreConflictError,
  StoreError,
  StoreListExistsError,
  StoreUnknownListError,
  type AllowlistStore,
  type StoredList,
  type StoreSnapshot,
} from './store';

export type ServiceErrorCode =
  | 'unknown_list'
  | 'entry_not_found'
  | 'precondition_failed'
  | 'conflict'
  | 'invalid_entries'
  | 'invalid_request'
  | 'store_unavailable'
  | 'entry_exists'
  | 'managed_by_config'
  | 'list_exists'
  | 'list_in_use'
  | 'too_large';

export class ServiceError extends Error {
  constructor(
    readonly code: ServiceErrorCode,
    message: string,
    readonly field?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ServiceError';
  }
}

/** `If-Match` as the API received it: null when absent, `*`, or a list of strong ETags (unquoted). */
export type Precondition = null | '*' | readonly string[];

type ListSource = 'config' | 'store';

/** A list the config owns (`source: config`). */
export interface DeclaredList {
  readonly entries: readonly AllowEntry[];
  readonly allowTemporary: boolean;
  /** Where it is edited, for the 409 message: `allowlists.NAME in /etc/ipgate/config.yaml`. */
  readonly managedIn: string;
  /**
   * Where its entries come from, as the audit's `who` of a change to them: `config file` (the
   * config or a list file it names, re-read together), `configmap <namespace>/<name> key <key>`.
   */
  readonly changedBy: string;
}

/** One list as the API shows it. A GET answer can be PUT back as is (PUT ignores the read-only fields). */
export interface ListView {
  readonly name: string;
  readonly version: string;
  readonly source: ListSource;
  /** Store list: its entries. Config list: the declared entries. */
  readonly entries: readonly AllowEntry[];
  /** Config list with allowTemporary: the API's temporary entries (each with expiresAt). */
  readonly temporary?: readonly AllowEntry[];
  readonly allowTemporary?: boolean;
  /** Config list: where it is managed. */
  readonly managedIn?: string;
}

export interface ChangeResult {
  list: ListView;
  audit: AuditRecord;
}

interface CheckResult {
  allowed: boolean;
  /** The address as ipgate compares it (canonical; IPv4-mapped IPv6 is IPv4). */
  ip: string;
  /** Index of the deciding entry (the most specific covering the address), or -1. */
  index: number;
  /** The deciding entry: an allow entry when allowed, a deny entry or null when refused. */
  entry: AllowEntry | null;
  /** null when allowed: `denied_by_entry` or `not_allowlisted`. */
  reason: DenialReason | null;
  version: string;
}

export interface ServiceStartOptions {
  /** `source: config` lists. */
  declared?: ReadonlyMap<string, DeclaredList>;
  /** The config fields that use a list (`listeners[0].allowlist`, ...): DELETE is refused while any does. */
  users?: (name: string) => string[];
}

/** Problems a start found that do not stop it: logged once, shown in /readyz. */
interface SeedWarning {
  list: string;
  message: string;
}

/**
 * POST/DELETE without If-Match re-apply their edit after a conflict with a writer outside this
 * process (a file edit, another replica) this many times, then answer `conflict` (409): the client
 * asked for no precondition, so a 412 would name one it never sent.
 */
const CONFLICT_RETRIES = 5;

/** The audit's `who` of a change the config file made. */
export const CONFIG_FILE = 'config file';

interface Declared extends DeclaredList {
  readonly hash: string;
}

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
  private declared = new Map<string, Declared>();
  private users: (name: string) => string[] = () => [];
  /** The config file's last change that was refused (config/watch.ts), or null: /readyz warns. */
  configRefusal: readonly string[] | null = null;
  /**
   * The watches of ConfigMaps holding `source: config` lists (config/configmap-lists.ts), by
   * `namespace/name`: /readyz warns while one is failing. Null: none.
   */
  declaredWatches: (() => Record<string, { readonly watchConnected: boolean; readonly lastError: string | null }>) | null = null;
  /** Seed/store mismatches and ignored store entries found at start-up (/readyz). */
  readonly startWarnings: SeedWarning[] = [];

  constructor(
    readonly store: AllowlistStore,
    readonly lists: LiveLists,
    readonly audit: AuditLog,
    logger: Logger,
  ) {
    this.log = logger;
  }

  /**
   * Load the store (seeding it with the config's store lists, and an empty list for each config
   * list, where its temporary entries go), apply every list, follow external changes.
   */
  async start(seed: ReadonlyMap<string, readonly AllowEntry[]>, options: ServiceStartOptions = {}): Promise<void> {
    this.declared = declaredMap(options.declared);
    if (options.users) this.users = options.users;
    const fullSeed = new Map(seed);
    for (const name of this.declared.keys()) fullSeed.set(name, []);
    const snapshot = await this.store.load(fullSeed);
    this.checkSeeds(seed, snapshot);
    for (const name of this.names()) this.applyName(name);
    this.unsubscribe = this.store.subscribe(({ snapshot: s, source }) => this.applyExternal(s, source));
    this.loadedAt = Date.now();
    this.log.info(
      {
        store: this.store.kind,
        location: this.store.location,
        lists: Object.fromEntries(
          this.names().map((n) => {
            const v = this.get(n);
            return [n, { source: v.source, version: v.version, entries: v.entries.length }];
          }),
        ),
      },
      'allowlist store loaded',
    );
  }

  get loaded(): boolean {
    return this.loadedAt !== null;
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    await this.store.close();
  }

  names(): string[] {
    const names = new Set(this.store.current().lists.keys());
    for (const n of this.declared.keys()) names.add(n);
    return [...names].sort();
  }

  sourceOf(name: string): ListSource {
    return this.declared.has(name) ? 'config' : 'store';
  }

  get(name: string): ListView {
    const stored = this.store.current().lists.get(name);
    const d = this.declared.get(name);
    if (d) {
      const temporary = d.allowTemporary ? temporaries(stored) : [];
      return {
        name,
        version: declaredVersion(d, stored),
        source: 'config',
        entries: d.entries,
        ...(d.allowTemporary ? { temporary } : {}),
        allowTemporary: d.allowTemporary,
        managedIn: d.managedIn,
      };
    }
    if (!stored)
      throw new ServiceError('unknown_list', `no allowlist ${JSON.stringify(name)} (known: ${this.names().join(', ') || 'none'})`, 'name');
    return { name, version: stored.version, source: 'store', entries: stored.entries };
  }

  /** The version this process enforces (can trail the store for a moment during an external change). */
  appliedVersion(name: string): string | null {
    return this.lists.has(name) ? this.lists.get(name).version : null;
  }

  replace(name: string, entries: readonly AllowEntry[], ifMatch: Precondition, who: string): Promise<ChangeResult> {
    this.refuseConfigList(name, 'replaced');
    checkEntries(entries, 'entries');
    return this.change(name, ifMatch, who, 'replace', () => entries);
  }

  /**
   * Add entries. A CIDR already listed is refused (`entry_exists`, quoting the entry there) unless
   * `replace`: then the new entry takes its place (new action, comment, expiresAt). A config list
   * takes only temporary entries (allowTemporary, a future expiresAt each).
   */
  add(name: string, entries: readonly AllowEntry[], ifMatch: Precondition, who: string, replace = false): Promise<ChangeResult> {
    checkEntries(entries, 'entries');
    const d = this.declared.get(name);
    if (d) {
      if (!d.allowTemporary) this.refuseConfigList(name, 'added to');
      const now = Date.now();
      entries.forEach((e, i) => {
        if (e.expiresAt === undefined) {
          throw new ServiceError(
            'invalid_entries',
            `allowlist "${name}" is managed in ${d.managedIn}: an entry added through the API is temporary ` +
              `and must carry expiresAt (${JSON.stringify(e.cidr)} has none)`,
            `entries[${i}].expiresAt`,
          );
        }
        if (parseRfc3339(e.expiresAt) <= now) {
          throw new ServiceError(
            'invalid_entries',
            `expiresAt ${JSON.stringify(e.expiresAt)} of ${JSON.stringify(e.cidr)} is not in the future`,
            `entries[${i}].expiresAt`,
          );
        }
        const declared = d.entries.find((x) => x.cidr === e.cidr);
        if (declared) {
          throw new ServiceError(
            'entry_exists',
            `${JSON.stringify(e.cidr)} is declared in ${d.managedIn} as ${JSON.stringify(declared)}: ` +
              'a temporary entry cannot replace it (edit the config)',
            `entries[${i}].cidr`,
          );
        }
      });
    }
    return this.change(name, ifMatch, who, 'add', (cur) => {
      // A config list's expired temporaries are dropped on the next write (they no longer match).
      const now = Date.now();
      const base = d ? cur.filter((e) => e.expiresAt === undefined || parseRfc3339(e.expiresAt) > now) : cur;
      const have = new Map(base.map((e) => [e.cidr, e]));
      if (!replace) {
        entries.forEach((e, i) => {
          const old = have.get(e.cidr);
          if (old) {
            throw new ServiceError(
              'entry_exists',
              `${JSON.stringify(e.cidr)} is already in allowlist "${name}" as ${JSON.stringify(old)}: ` +
                'replace it explicitly (?replace=true), or remove it first',
              `entries[${i}].cidr`,
            );
          }
        });
      }
      const incoming = new Map(entries.map((e) => [e.cidr, e]));
      const next = base.map((e) => incoming.get(e.cidr) ?? e);
      for (const e of entries) if (!have.has(e.cidr)) next.push(e);
      if (next.length > MAX_ENTRIES)
        throw new ServiceError('invalid_entries', `the list would hold ${next.length} entries (at most ${MAX_ENTRIES})`, 'entries');
      return next;
    });
  }

  remove(name: string, cidr: string, ifMatch: Precondition, who: string): Promise<ChangeResult> {
    const d = this.declared.get(name);
    if (d) {
      if (d.entries.some((e) => e.cidr === cidr)) {
        throw new ServiceError(
          'managed_by_config',
          `${JSON.stringify(cidr)} is declared for allowlist "${name}" in ${d.managedIn}: remove it there`,
          'cidr',
        );
      }
      if (!d.allowTemporary) this.refuseConfigList(name, 'edited');
    }
    return this.change(name, ifMatch, who, 'remove', (cur) => {
      const next = cur.filter((e) => e.cidr !== cidr);
      if (next.length === cur.length)
        throw new ServiceError('entry_not_found', `allowlist "${name}" has no entry ${JSON.stringify(cidr)}`, 'cidr');
      return next;
    });
  }

  /** A new store list (`POST /v1/allowlists`). */
  create(name: string, entries: readonly AllowEntry[], who: string): Promise<ChangeResult> {
    if (typeof name !== 'string' || !LIST_NAME.test(name)) {
      throw new ServiceError(
        'invalid_request',
        `list name ${JSON.stringify(String(name).slice(0, 80))} is not valid ` +
          '(a letter or digit, then letters, digits, "_", "-", "."; at most 63 characters)',
        'name',
      );
    }
    checkEntries(entries, 'entries');
    return this.serial(async () => {
      const d = this.declared.get(name);
      if (d) throw new ServiceError('list_exists', `allowlist "${name}" already exists: it is managed in ${d.managedIn}`, 'name');
      const existing = this.store.current().lists.get(name);
      if (existing) throw new ServiceError('list_exists', `allowlist "${name}" already exists (version ${existing.version})`, 'name');
      let written: StoredList;
      try {
        written = await this.store.create(name, entries);
      } catch (err) {
        if (err instanceof StoreListExistsError) throw new ServiceError('list_exists', err.message, 'name', { cause: err });
        throw storeFailure(err);
      }
      this.applyName(name);
      const audit = this.audit.record({
        who,
        action: 'create',
        list: name,
        ...diffEntries([], written.entries),
        fromVersion: '0',
        version: written.version,
      });
      return { list: this.get(name), audit };
    });
  }

  /** Remove a store list no listener uses (`DELETE /v1/allowlists/:name`). */
  deleteList(name: string, ifMatch: Precondition, who: string): Promise<ChangeResult> {
    return this.serial(async () => {
      const view = this.get(name);
      this.refuseConfigList(name, 'deleted');
      const users = this.users(name);
      if (users.length > 0) {
        throw new ServiceError(
          'list_in_use',
          `allowlist "${name}" is used by ${users.join(', ')} in the config: change those first`,
          'name',
        );
      }
      if (ifMatch !== null && ifMatch !== '*' && !ifMatch.includes(view.version)) {
        throw new ServiceError(
          'precondition_failed',
          `allowlist "${name}" is at version "${view.version}", not ${ifMatch.map((v) => `"${v}"`).join(', ')}`,
        );
      }
      let removed: StoredList;
      try {
        removed = await this.store.delete(name, ifMatch === null || ifMatch === '*' ? null : view.version);
      } catch (err) {
        if (err instanceof StoreConflictError)
          throw new ServiceError('precondition_failed', `allowlist "${name}" changed while deleting (now "${err.actual}")`, undefined, {
            cause: err,
          });
        if (err instanceof StoreUnknownListError) throw new ServiceError('unknown_list', err.message, 'name', { cause: err });
        throw storeFailure(err);
      }
      this.lists.remove(name);
      const audit = this.audit.record({
        who,
        action: 'delete',
        list: name,
        ...diffEntries(removed.entries, []),
        fromVersion: removed.version,
        version: '0',
      });
      return { list: { name, version: '0', source: 'store', entries: [] }, audit };
    });
  }

  /**
   * The config file changed (validated whole): its `source: config` lists are now `declared`.
   * Lists whose declared entries changed are recompiled and swapped, and the change reaches the
   * workers the way every list change does (LiveLists 'change' -> WorkerPool broadcast). Each
   * change is audited as its list's `changedBy`; a list the config no longer declares, as the
   * config file.
   */
  setDeclared(declared: ReadonlyMap<string, DeclaredList>): Promise<string[]> {
    return this.serial(async () => {
      const old = this.declared;
      this.declared = declaredMap(declared);
      const changed: string[] = [];
      const names = new Set([...old.keys(), ...this.declared.keys()]);
      for (const name of [...names].sort()) {
        const o = old.get(name);
        const n = this.declared.get(name);
        if (o && n && o.hash === n.hash && o.allowTemporary === n.allowTemporary) continue;
        if (!o || !n)
          this.log.warn({ list: name, source: n ? 'config' : 'store' }, `allowlist "${name}" is now source: ${n ? 'config' : 'store'}`);
        const before = this.lists.entries(name);
        const fromVersion = this.appliedVersion(name) ?? '0';
        if (!this.applyName(name)) continue;
        changed.push(name);
        this.audit.record({
          who: n?.changedBy ?? CONFIG_FILE,
          action: 'config',
          list: name,
          ...diffEntries(before, this.lists.entries(name)),
          fromVersion,
          version: this.appliedVersion(name) ?? '0',
        });
      }
      return changed;
    });
  }

  check(name: string, ip: string): CheckResult {
    this.get(name);
    const addr = parseAddress(ip);
    if (!addr.ok) throw new ServiceError('invalid_request', quote(ip, addr.message), 'ip');
    const live = this.lists.get(name);
    const d = live.matcher.decide(addr.address);
    return { allowed: d.allowed, ip: addr.address, index: d.index, entry: d.entry, reason: d.reason, version: live.version };
  }

  private refuseConfigList(name: string, what: string): void {
    const d = this.declared.get(name);
    if (!d) return;
    throw new ServiceError(
      'managed_by_config',
      `allowlist "${name}" is source: config, managed in ${d.managedIn}: it cannot be ${what} through the admin API` +
        (d.allowTemporary ? ' (temporary entries with expiresAt can be added)' : '; edit the config file'),
      'name',
    );
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.changing.then(fn);
    this.changing = run.catch(() => undefined);
    return run;
  }

  private change(
    name: string,
    ifMatch: Precondition,
    who: string,
    action: AuditAction,
    edit: (current: AllowEntry[]) => readonly AllowEntry[],
  ): Promise<ChangeResult> {
    return this.serial(() => this.changeNow(name, ifMatch, who, action, edit));
  }

  private async changeNow(
    name: string,
    ifMatch: Precondition,
    who: string,
    action: AuditAction,
    edit: (current: AllowEntry[]) => readonly AllowEntry[],
  ): Promise<ChangeResult> {
    for (let attempt = 0; ; attempt++) {
      const view = this.get(name);
      if (ifMatch !== null && ifMatch !== '*' && !ifMatch.includes(view.version)) {
        throw new ServiceError(
          'precondition_failed',
          `allowlist "${name}" is at version "${view.version}", not ${ifMatch.map((v) => `"${v}"`).join(', ')}`,
        );
      }
      let cur = this.store.current().lists.get(name);
      if (!cur) {
        // A config list whose store list (its temporaries) is gone: make it again.
        try {
          cur = await this.store.create(name, []);
        } catch (err) {
          if (err instanceof StoreListExistsError) continue;
          throw storeFailure(err);
        }
      }
      const next = edit([...cur.entries]);
      const appliedBefore = this.lists.entries(name);
      let written: StoredList;
      try {
        written = await this.store.write(name, next, cur.version);
      } catch (err) {
        if (err instanceof StoreConflictError) {
          // Someone else wrote in between. With If-Match the client asked for exactly that version:
          // 412. Without, the edit (add/remove) is re-applied on the new content.
          if (ifMatch === null && action !== 'replace') {
            if (attempt < CONFLICT_RETRIES) continue;
            throw new ServiceError(
              'conflict',
              `allowlist "${name}" kept changing outside this process while writing ` +
                `(${attempt + 1} attempts, now "${err.actual}"): retry the request`,
              undefined,
              { cause: err },
            );
          }
          throw new ServiceError('precondition_failed', `allowlist "${name}" changed while writing (now "${err.actual}")`, undefined, {
            cause: err,
          });
        }
        if (err instanceof StoreUnknownListError) throw new ServiceError('unknown_list', err.message, undefined, { cause: err });
        throw storeFailure(err);
      }
      this.applyName(name);
      const audit = this.audit.record({
        who,
        action,
        list: name,
        ...diffEntries(appliedBefore, this.lists.entries(name)),
        fromVersion: view.version,
        version: this.declared.has(name) ? this.get(name).version : written.version,
      });
      return { list: this.get(name), audit };
    }
  }

  /** What `name` compiles to now: store entries, or declared + temporary; null when it does not exist. */
  private compose(name: string): { entries: readonly AllowEntry[]; version: string } | null {
    const stored = this.store.current().lists.get(name);
    const d = this.declared.get(name);
    if (!d) return stored ? { entries: stored.entries, version: stored.version } : null;
    const temps = d.allowTemporary ? temporaries(stored) : [];
    return { entries: temps.length > 0 ? [...d.entries, ...temps] : d.entries, version: declaredVersion(d, stored) };
  }

  /** Compile and swap `name` if what it should be differs from what is applied. True when it changed. */
  private applyName(name: string): boolean {
    const c = this.compose(name);
    if (c === null) {
      if (!this.lists.has(name)) return false;
      this.lists.remove(name);
      return true;
    }
    if (this.appliedVersion(name) === c.version) return false;
    this.lists.apply(name, c.entries, c.version);
    return true;
  }

  private applyExternal(snapshot: StoreSnapshot, source: string): void {
    const names = new Set([...snapshot.lists.keys(), ...this.declared.keys(), ...this.lists.names().filter((n) => this.lists.has(n))]);
    for (const name of names) {
      const applied = this.appliedVersion(name);
      const before = this.lists.entries(name);
      if (!this.applyName(name)) continue;
      this.audit.record({
        who: source,
        action: 'external',
        list: name,
        ...diffEntries(before, this.lists.entries(name)),
        fromVersion: applied ?? '0',
        version: this.appliedVersion(name) ?? '0',
      });
    }
  }

  /** Start-up: a store list whose config seed differs from the store, a config list with permanent store entries. */
  private checkSeeds(seed: ReadonlyMap<string, readonly AllowEntry[]>, snapshot: StoreSnapshot): void {
    const where = `${this.store.kind} store ${this.store.location}`;
    for (const [name, entries] of seed) {
      if (this.declared.has(name) || entries.length === 0) continue;
      const stored = snapshot.lists.get(name);
      if (!stored) continue;
      const want = seedList(name, entries).entries;
      const d = diffEntries(stored.entries, want);
      if (d.added.length + d.removed.length + d.changed.length === 0) continue;
      const message =
        `allowlists.${name} in the config (${want.length} entries) differs from the ${where} (${stored.entries.length} entries: ` +
        `${d.added.length} only in the config, ${d.removed.length} only in the store, ${d.changed.length} changed): the store is the truth for a source: store list ` +
        '(the config only seeds an empty store); edit it through the admin API, or set source: config to make the config the truth';
      this.startWarnings.push({ list: name, message });
      this.log.warn({ list: name, store: this.store.location }, message);
    }
    for (const [name, d] of this.declared) {
      const stored = snapshot.lists.get(name);
      const permanent = stored ? stored.entries.filter((e) => e.expiresAt === undefined).length : 0;
      const ignored = stored ? stored.entries.length - (d.allowTemporary ? temporaries(stored).length : 0) : 0;
      if (ignored === 0) continue;
      const message =
        `allowlists.${name} is source: config (${d.managedIn}): the ${where} holds ${ignored} entries for it that are ignored ` +
        `(${permanent} without expiresAt${d.allowTemporary ? '' : ', and allowTemporary is off'})`;
      this.startWarnings.push({ list: name, message });
      this.log.warn({ list: name, store: this.store.location }, message);
    }
  }
}

/** A config list's temporary entries: the store's entries that carry expiresAt. */
function temporaries(stored: StoredList | undefined): readonly AllowEntry[] {
  return stored ? stored.entries.filter((e) => e.expiresAt !== undefined) : [];
}

function declaredVersion(d: Declared, stored: StoredList | undefined): string {
  return `c${d.hash}.${stored?.version ?? '0'}`;
}

function declaredMap(declared: ReadonlyMap<string, DeclaredList> | undefined): Map<string, Declared> {
  const out = new Map<string, Declared>();
  for (const [name, d] of declared ?? []) {
    const hash = createHash('sha256')
      .update(JSON.stringify([d.entries, d.allowTemporary]))
      .digest('hex')
      .slice(0, 12);
    out.set(
      name,
      Object.freeze({
        entries: Object.freeze([...d.entries]),
        allowTemporary: d.allowTemporary,
        managedIn: d.managedIn,
        changedBy: d.changedBy,
        hash,
      }),
    );
  }
  return out;
}

function storeFailure(err: unknown): ServiceError {
  if (err instanceof StoreError && err.code === 'ERR_STORE_TOO_LARGE')
    return new ServiceError('too_large', err.message, 'entries', { cause: err });
  return new ServiceError('store_unavailable', (err as Error).message, undefined, { cause: err });
}

/** An address or CIDR message that quotes the value (once). */
function quote(value: string, message: string): string {
  const shown = JSON.stringify(value.slice(0, 128));
  return message.includes(shown) ? message : `${shown}: ${message}`;
}

function checkEntries(entries: readonly AllowEntry[], field: string): void {
  if (entries.length > MAX_ENTRIES) throw new ServiceError('invalid_entries', `${entries.length} entries: at most ${MAX_ENTRIES}`, field);
  const dup = duplicateCidr(entries);
  if (dup)
    throw new ServiceError(
      'invalid_entries',
      `${JSON.stringify(dup.cidr)} is listed twice (one CIDR has one action)`,
      `${field}[${dup.index}].cidr`,
    );
}
