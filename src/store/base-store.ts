/**
 * What every backend shares: the last good snapshot, serialised writes with the version check, and
 * the subscribers to external changes. A backend supplies `persist` (make one new snapshot durable).
 */
import type { AllowEntry } from '../allowlist/entry';
import { makeList, revisionOf } from './document';
import {
  StoreConflictError,
  StoreListExistsError,
  StoreUnknownListError,
  type AllowlistStore,
  type ExternalChange,
  type StoredList,
  type StoreRefusal,
  type StoreSnapshot,
} from './store';

export abstract class BaseStore implements AllowlistStore {
  abstract readonly kind: string;
  abstract readonly location: string;
  protected snapshot: StoreSnapshot = { lists: new Map() };
  protected refusal: StoreRefusal | null = null;
  private readonly subscribers = new Set<(change: ExternalChange) => void>();
  private queue: Promise<unknown> = Promise.resolve();

  abstract load(seed: ReadonlyMap<string, readonly AllowEntry[]>): Promise<StoreSnapshot>;

  /** Make `next` durable; resolve only when it is. Called inside the write queue. */
  protected abstract persist(next: StoreSnapshot): Promise<void>;

  /** Pick up external changes before a write decides on its version (inside the write queue). */
  protected refresh(): Promise<void> {
    return Promise.resolve();
  }

  current(): StoreSnapshot {
    return this.snapshot;
  }

  lastRefusal(): StoreRefusal | null {
    return this.refusal;
  }

  write(name: string, entries: readonly AllowEntry[], expectedVersion: string): Promise<StoredList> {
    return this.serialise(async () => {
      await this.refresh();
      const cur = this.snapshot.lists.get(name);
      if (!cur) throw new StoreUnknownListError(name);
      if (cur.version !== expectedVersion) throw new StoreConflictError(name, expectedVersion, cur.version);
      const list = makeList(name, entries, revisionOf(cur.version) + 1);
      return this.commit(name, list);
    });
  }

  /** Persist the snapshot with `list` set under `name`, then make it current (inside serialise). */
  private async commit(name: string, list: StoredList): Promise<StoredList> {
    const lists = new Map(this.snapshot.lists);
    lists.set(name, list);
    const next: StoreSnapshot = { lists };
    await this.persist(next);
    this.snapshot = next;
    return list;
  }

  /** Add a list (refused with StoreListExistsError when the name is taken). Durable on resolve. */
  create(name: string, entries: readonly AllowEntry[]): Promise<StoredList> {
    return this.serialise(async () => {
      await this.refresh();
      if (this.snapshot.lists.has(name)) throw new StoreListExistsError(name, this.snapshot.lists.get(name)!.version);
      const list = makeList(name, entries, 1);
      return this.commit(name, list);
    });
  }

  /** Remove a list if its version is still `expectedVersion` (null: any). Durable on resolve. */
  delete(name: string, expectedVersion: string | null): Promise<StoredList> {
    return this.serialise(async () => {
      await this.refresh();
      const cur = this.snapshot.lists.get(name);
      if (!cur) throw new StoreUnknownListError(name);
      if (expectedVersion !== null && cur.version !== expectedVersion) throw new StoreConflictError(name, expectedVersion, cur.version);
      const lists = new Map(this.snapshot.lists);
      lists.delete(name);
      const next: StoreSnapshot = { lists };
      await this.persist(next);
      this.snapshot = next;
      return cur;
    });
  }

  subscribe(onChange: (change: ExternalChange) => void): () => void {
    this.subscribers.add(onChange);
    return () => this.subscribers.delete(onChange);
  }

  async close(): Promise<void> {
    await this.queue.catch(() => undefined);
  }

  /** Run `fn` after every earlier write/refresh has finished: one writer at a time. */
  protected serialise<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  protected emitExternal(change: ExternalChange): void {
    for (const s of this.subscribers) s(change);
  }
}
