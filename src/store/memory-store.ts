/**
 * In-memory store (`store.type: memory`): tests and demos. Same contract as the file store, nothing
 * survives a restart. `replaceExternally` plays the part of another writer (a hand edit, a replica).
 */
import type { AllowEntry } from '../allowlist/entry';
import { BaseStore } from './base-store';
import { makeList, revisionOf, seedList } from './document';
import type { StoreSnapshot } from './store';

export class MemoryStore extends BaseStore {
  readonly kind = 'memory';
  readonly location = 'memory';

  load(seed: ReadonlyMap<string, readonly AllowEntry[]>): Promise<StoreSnapshot> {
    const lists = new Map(this.snapshot.lists);
    for (const [name, entries] of seed) if (!lists.has(name)) lists.set(name, seedList(name, entries));
    this.snapshot = { lists };
    return Promise.resolve(this.snapshot);
  }

  protected persist(): Promise<void> {
    return Promise.resolve();
  }

  /** A change made by someone else: subscribers hear of it as an external change. */
  replaceExternally(name: string, entries: readonly AllowEntry[], source = 'external'): Promise<void> {
    return this.serialise(() => {
      const cur = this.snapshot.lists.get(name);
      const lists = new Map(this.snapshot.lists);
      lists.set(name, makeList(name, entries, revisionOf(cur?.version ?? '0') + 1));
      this.snapshot = { lists };
      this.emitExternal({ snapshot: this.snapshot, source });
      return Promise.resolve();
    });
  }
}
