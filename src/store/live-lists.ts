/**
 * The allowlists in force: one compiled, immutable matcher per named list, swapped in by a single
 * reference assignment so a lookup never sees a half-built list (Caddy: build the new config fully,
 * swap, then clean up). Listeners hold the LiveList object and read `.matcher` per decision.
 */
import { EventEmitter } from 'node:events';
import type { AllowEntry } from '../allowlist/entry';
import { Matcher } from '../allowlist/matcher';

export class LiveList {
  /** Replaced whole on every change; never mutated. */
  matcher: Matcher = Matcher.EMPTY;
  /** Opaque version of the list content (the store's ETag). */
  version = '0';
  /** When this list was last (re)compiled, ms epoch. */
  appliedAt = 0;
  /** `owner`: the LiveLists holding it, so a listener given this list can resolve others by name (list-ref.ts). */
  constructor(
    readonly name: string,
    readonly owner: LiveLists,
  ) {}
}

interface ListChange {
  list: LiveList;
  previous: Matcher;
  /** `update` (a write), `expiry` (an entry's expiresAt passed). */
  cause: 'update' | 'expiry';
}

export class LiveLists extends EventEmitter<{ change: [ListChange] }> {
  private readonly lists = new Map<string, LiveList>();
  private entriesByName = new Map<string, readonly AllowEntry[]>();
  private expiryTimer: NodeJS.Timeout | null = null;

  names(): string[] {
    return [...this.lists.keys()];
  }

  /** The holder for a name, created empty (denies everyone) if the list does not exist yet. */
  get(name: string): LiveList {
    let list = this.lists.get(name);
    if (!list) {
      list = new LiveList(name, this);
      this.lists.set(name, list);
    }
    return list;
  }

  has(name: string): boolean {
    return this.lists.has(name) && this.entriesByName.has(name);
  }

  entries(name: string): readonly AllowEntry[] {
    return this.entriesByName.get(name) ?? [];
  }

  /** Compile `entries` completely, then swap. Listeners see the new matcher on their next lookup. */
  apply(name: string, entries: readonly AllowEntry[], version: string, now = Date.now()): LiveList {
    const matcher = Matcher.compile(entries, now);
    const list = this.get(name);
    const previous = list.matcher;
    this.entriesByName.set(name, entries);
    list.matcher = matcher;
    list.version = version;
    list.appliedAt = now;
    this.scheduleExpiry();
    this.emit('change', { list, previous, cause: 'update' });
    return list;
  }

  /** Drop a list: its listeners then deny everyone (closed by default). */
  remove(name: string): void {
    const list = this.lists.get(name);
    if (!list) return;
    const previous = list.matcher;
    this.entriesByName.delete(name);
    list.matcher = Matcher.EMPTY;
    list.version = '0';
    this.emit('change', { list, previous, cause: 'update' });
  }

  close(): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.expiryTimer = null;
  }

  /** Entries with expiresAt stop matching at that time without anyone asking: rebuild then. */
  private scheduleExpiry(): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.expiryTimer = null;
    let next = Infinity;
    for (const list of this.lists.values()) {
      if (list.matcher.nextExpiry !== null) next = Math.min(next, list.matcher.nextExpiry);
    }
    if (next === Infinity) return;
    // setTimeout's limit is 2^31-1 ms; a later expiry just re-arms.
    const delay = Math.min(Math.max(next - Date.now(), 0), 2_147_483_647);
    this.expiryTimer = setTimeout(() => this.expire(), delay);
    this.expiryTimer.unref();
  }

  private expire(): void {
    this.expiryTimer = null;
    const now = Date.now();
    for (const list of this.lists.values()) {
      const due = list.matcher.nextExpiry;
      if (due === null || due > now) continue;
      const previous = list.matcher;
      list.matcher = Matcher.compile(this.entriesByName.get(list.name) ?? [], now);
      list.appliedAt = now;
      this.emit('change', { list, previous, cause: 'expiry' });
    }
    this.scheduleExpiry();
  }
}
