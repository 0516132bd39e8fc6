/**
 * The allowlist store: the source of truth for the named lists. The admin API writes here first and
 * acknowledges only once the write is durable; every replica applies what the store holds.
 *
 * Implementations: `file` (file-store.ts, embedded, the default), `memory` (tests and demos) and
 * `kubernetes` (a ConfigMap: separate issue). They share the contract below; the document format and
 * its validation live in document.ts so every backend accepts and refuses exactly the same content.
 *
 * Versions: each list carries its own version (the admin API's ETag). It is opaque to callers,
 * compared only for equality, and changes whenever the list's content changes — including through an
 * external edit that did not bump the counter (document.ts mixes a content hash into it), so a
 * client holding a stale ETag gets 412 even after a hand edit, and A -> B -> A is not mistaken for
 * "unchanged" (the counter moved).
 */
import type { AllowEntry } from '../allowlist/entry';

/** One list as the store holds it. Frozen. */
export interface StoredList {
  readonly name: string;
  readonly entries: readonly AllowEntry[];
  /** Opaque, strong: the ETag (without quotes). */
  readonly version: string;
}

/** Everything the store holds, at one point in time. */
export interface StoreSnapshot {
  readonly lists: ReadonlyMap<string, StoredList>;
}

/** Why the snapshot changed (for the audit line of a change nobody made through this process). */
export interface ExternalChange {
  readonly snapshot: StoreSnapshot;
  /** `file edit`, `configmap update`, ...: shown as the audit `who`. */
  readonly source: string;
}

/** Reported when the store's content was seen but refused (corrupt, invalid): the last good stays. */
export interface StoreRefusal {
  readonly reason: string;
  readonly at: number;
}

export interface AllowlistStore {
  /** `file`, `memory`, `kubernetes`: for logs and /readyz. */
  readonly kind: string;
  /** Where it lives (path, namespace/name): for logs and /readyz. */
  readonly location: string;

  /**
   * Read the store. When it holds no document yet, write `seed` (the config's lists) and return it;
   * when the document lacks a list named in `seed`, add that list (a new listener's list) too.
   * Refuses (throws StoreLoadError) a corrupt or invalid document: it is never overwritten at boot.
   */
  load(seed: ReadonlyMap<string, readonly AllowEntry[]>): Promise<StoreSnapshot>;

  /**
   * Replace one list's entries if its version is still `expectedVersion` (optimistic concurrency).
   * Resolves once the change is durable (the file renamed and its directory fsynced; the ConfigMap
   * update accepted by the API server), with the list's new version. Rejects with
   * StoreConflictError when the version moved (another writer, an external edit, another replica),
   * StoreUnknownListError when the list does not exist. Writes are serialised per store.
   * `entries` must already be valid (validateEntry) and canonical.
   */
  write(name: string, entries: readonly AllowEntry[], expectedVersion: string): Promise<StoredList>;

  /** Add a new list; StoreListExistsError when the name is taken. Resolves once durable. */
  create(name: string, entries: readonly AllowEntry[]): Promise<StoredList>;

  /**
   * Remove a list when its version is still `expectedVersion` (null: whatever it is); resolves
   * with the list as it was, once durable. StoreUnknownListError / StoreConflictError otherwise.
   */
  delete(name: string, expectedVersion: string | null): Promise<StoredList>;

  /** The last good snapshot (what load returned, plus every write and accepted external change). */
  current(): StoreSnapshot;

  /**
   * Changes made outside this process (file edit, another replica's write) once validated. Never
   * called for this process's own writes. Returns an unsubscribe function.
   */
  subscribe(onChange: (change: ExternalChange) => void): () => void;

  /** The last refusal of external content, or null when the store's content is in force. */
  lastRefusal(): StoreRefusal | null;

  /**
   * Backend detail for `/readyz` and metrics (the Kubernetes store: resourceVersion in force, last
   * sync, watch connected, last error). Optional: the file and memory stores have nothing to add.
   */
  status?(): object;

  /** Stop watching; wait for a write in flight. */
  close(): Promise<void>;
}

export class StoreError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreError';
  }
}

/** The list's version is not the expected one. */
export class StoreConflictError extends StoreError {
  constructor(
    readonly list: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super('ERR_STORE_CONFLICT', `allowlist "${list}" is at version ${actual}, not ${expected}`);
    this.name = 'StoreConflictError';
  }
}

export class StoreUnknownListError extends StoreError {
  constructor(readonly list: string) {
    super('ERR_STORE_UNKNOWN_LIST', `no allowlist "${list}"`);
    this.name = 'StoreUnknownListError';
  }
}

export class StoreListExistsError extends StoreError {
  constructor(
    readonly list: string,
    readonly version: string,
  ) {
    super('ERR_STORE_LIST_EXISTS', `allowlist "${list}" already exists (version ${version})`);
    this.name = 'StoreListExistsError';
  }
}

/** The store's content cannot be used (boot): the process must not start on a guess. */
export class StoreLoadError extends StoreError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_STORE_LOAD', message, options);
    this.name = 'StoreLoadError';
  }
}
