/**
 * Kubernetes store (`store.type: kubernetes`): the allowlists in one ConfigMap, under the data key
 * `allowlists.json`, in the document format every backend shares (document.ts), so a list valid in
 * the file store is valid here and nothing else is.
 *
 * The chart creates the ConfigMap empty and never writes lists (a `helm upgrade` must not undo admin
 * edits); the Role allows get, list, watch, update, patch on that one name and nothing else (no
 * create, no delete). So:
 * - load: list it (with `fieldSelector=metadata.name=<name>`: the API server applies `resourceNames`
 *   to list and watch only with that selector; without it, 403). Missing: a boot error. Empty: fill
 *   it from the config's lists with a PUT carrying its resourceVersion; two replicas racing get one
 *   200 and one 409, and the loser re-reads and adopts the winner's document.
 * - write: PUT with `metadata.resourceVersion` (optimistic concurrency). On 409 the ConfigMap is
 *   re-read; the change is retried only if the list's version is still the one the caller expected
 *   (another list changed, or only metadata); otherwise StoreConflictError (the API's 412): a change
 *   made on a stale version is refused, never written over the other one.
 * - watch: the project's one list-then-watch (kube/configmap-watch.ts) from the resourceVersion the
 *   load ended at: bookmarks, re-watch with backoff, relist on 410 Gone, a periodic relist as the
 *   safety net. Each version it sees is examined in the write queue, after any write in flight.
 * - a document that is corrupt, invalid or drops a list is refused (lastRefusal, one error log
 *   line per distinct content) and the last good lists stay in force, as when the API is unreachable.
 *
 * API access is src/kube's own client, not @kubernetes/client-node (see kube-client.ts for why).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { AllowEntry } from '../allowlist/entry';
import { backoffDelay, type BackoffPolicy } from '../kube/backoff';
import { isNewerVersion, isTransient, KubeStatusError } from '../kube/errors';
import { ConfigMapWatch, explain as explainKube } from '../kube/configmap-watch';
import { KubeClient, statusError } from '../kube/kube-client';
import type { KubeAccess } from '../kube/kubeconfig';
import { BaseStore } from './base-store';
import { entryBytes, parseDocument, seedList, serializeDocument } from './document';
import { resolveTarget } from './kubernetes-target';
import { StoreError, StoreLoadError, type StoredList, type StoreSnapshot } from './store';

export const DATA_KEY = 'allowlists.json';
/** What the API server accepts in one ConfigMap (data + binaryData). */
const MAX_CONFIGMAP_BYTES = 1024 * 1024;

export interface KubernetesStoreOptions {
  /** `store.namespace`: null for the pod's own (POD_NAMESPACE, then the service account's). */
  namespace: string | null;
  /** `store.configMap`. */
  configMap: string;
  logger: Logger;
  /** KUBECONFIG, POD_NAMESPACE, HOME. Default process.env. */
  env?: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
  /** Use this instead of resolving a kubeconfig / the in-cluster service account (tests). */
  access?: KubeAccess;
  /** Per API request. Default 10000. */
  requestTimeoutMs?: number;
  /** Re-watch, relist and transient write retries. Default 500 ms doubling to 30 s. */
  backoff?: BackoffPolicy;
  /** Relist even while the watch is healthy. Default 300000 (5 minutes). */
  resyncIntervalMs?: number;
  /** Attempts per write (409 on an unrelated change, 429, 5xx, connection failure). Default 6. */
  writeAttempts?: number;
  /** Asked of the server per watch (it then ends the stream; re-watched at once). Default 300, +/- jitter. */
  watchTimeoutSeconds?: number;
  /** No byte on the watch for this long (bookmarks come about every minute) = a dead connection. Default 150000. */
  watchIdleTimeoutMs?: number;
  /** At boot, keep retrying an unreachable or failing (5xx, 429) API this long. Default 30000. */
  loadTimeoutMs?: number;
}

/** What a replica reports about its store: for the metrics and /readyz. */
interface KubernetesStoreStatus {
  /** resourceVersion of the ConfigMap whose document is in force (a refused one does not count). */
  readonly resourceVersion: string | null;
  /** Last time the API confirmed our view (list, watch event or bookmark, write), ms epoch. */
  readonly lastSyncAt: number | null;
  readonly watchConnected: boolean;
  /** The last API failure since the watch was last healthy, or null. */
  readonly lastError: string | null;
  /** `namespace/name` of the ConfigMap (ipgate_configmap_watch_healthy{use="store"}). */
  readonly configMap: string;
}

type ConfigMap = {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [k: string]: unknown };
  data?: Record<string, string> | null;
  [k: string]: unknown;
};

/** 409 on a PUT, the re-read ConfigMap adopted: write() retries through BaseStore's version check. */
class ConfigMapMoved extends Error {}

export class KubernetesStore extends BaseStore {
  readonly kind = 'kubernetes';
  private readonly opts: KubernetesStoreOptions;
  private readonly log: Logger;
  private readonly backoff: BackoffPolicy;
  private namespace: string | null;
  private client: KubeClient | null = null;
  /** The ConfigMap as last seen (applied or refused): its resourceVersion is what a PUT carries. */
  private obj: ConfigMap | null = null;
  /** resourceVersion of the ConfigMap whose document is in force. */
  private appliedRV: string | null = null;
  private lastText: string | null = null;
  private refusedText: string | null = null;
  private lastSyncAt: number | null = null;
  /** The last failure of a write since one succeeded (the watch keeps its own). */
  private lastError: string | null = null;
  private watch: ConfigMapWatch | null = null;
  /** Where the watch starts: the resourceVersion the load ended at. */
  private watchFrom = '';
  private readonly stop = new AbortController();
  private closed = false;

  constructor(opts: KubernetesStoreOptions) {
    super();
    this.opts = opts;
    this.namespace = opts.namespace;
    this.backoff = opts.backoff ?? { initialMs: 500, maxMs: 30_000 };
    this.log = opts.logger.child({ store: 'kubernetes', configMap: opts.configMap });
  }

  get location(): string {
    return `configmap ${this.namespace ?? '(pod namespace)'}/${this.opts.configMap} key ${DATA_KEY}`;
  }

  status(): KubernetesStoreStatus {
    const w = this.watch?.status();
    return {
      resourceVersion: this.appliedRV,
      lastSyncAt: this.lastSyncAt,
      watchConnected: w?.watchConnected ?? false,
      lastError: w?.lastError ?? this.lastError,
      configMap: `${this.namespace ?? '(pod namespace)'}/${this.opts.configMap}`,
    };
  }

  async load(seed: ReadonlyMap<string, readonly AllowEntry[]>): Promise<StoreSnapshot> {
    try {
      const target = resolveTarget({
        namespace: this.opts.namespace,
        env: this.opts.env ?? process.env,
        serviceAccountDir: this.opts.serviceAccountDir,
        access: this.opts.access,
      });
      this.namespace = target.namespace;
      this.client = new KubeClient(target.access, { timeoutMs: this.opts.requestTimeoutMs ?? 10_000, userAgent: 'ipgate-store' });
      this.log.debug(
        { namespace: target.namespace, from: target.namespaceSource, api: target.access.server.origin, credentials: target.access.source },
        'allowlist store: Kubernetes API',
      );
    } catch (err) {
      throw new StoreLoadError(`allowlist store ${this.location}: ${(err as Error).message}`, { cause: err });
    }
    const deadline = Date.now() + (this.opts.loadTimeoutMs ?? 30_000);
    for (let attempt = 0; ; attempt++) {
      try {
        if (await this.loadOnce(seed)) break;
      } catch (err) {
        if (err instanceof StoreLoadError) throw err;
        if (!isTransient(err) || Date.now() >= deadline || this.closed) {
          throw new StoreLoadError(`allowlist store ${this.location}: ${explain(err, this.opts.configMap)}`, { cause: err });
        }
        this.log.warn({ err: (err as Error).message }, 'allowlist store: Kubernetes API not answering; retrying');
        await this.pause(backoffDelay(this.backoff, attempt));
        continue;
      }
      // A lost seeding race (409): re-read at once, the winner's document is there.
      if (attempt >= 10) throw new StoreLoadError(`allowlist store ${this.location}: the ConfigMap kept changing while loading`);
    }
    if (!this.closed) this.follow();
    return this.snapshot;
  }

  /** One load attempt: true when done, false after a 409 (re-read); throws for anything else. */
  private async loadOnce(seed: ReadonlyMap<string, readonly AllowEntry[]>): Promise<boolean> {
    const { obj, resourceVersion } = await this.list();
    if (obj === null) {
      throw new StoreLoadError(
        `allowlist store: ConfigMap ${this.namespace}/${this.opts.configMap} not found: ` +
          'create it (empty) or install the chart, which creates it (ipgate has no permission to create it)',
      );
    }
    const text = dataText(obj);
    const lists = new Map<string, StoredList>();
    if (text !== null) {
      const parsed = parseDocument(text);
      if (!parsed.ok) {
        throw new StoreLoadError(
          `allowlist store ${this.location} is refused: ${parsed.reason} ` +
            `(fix it with kubectl edit, or remove the ${DATA_KEY} key to seed from the config; ipgate never overwrites it)`,
        );
      }
      for (const [name, list] of parsed.lists) lists.set(name, list);
    }
    const added: string[] = [];
    for (const [name, entries] of seed) {
      if (lists.has(name)) continue;
      lists.set(name, seedList(name, entries));
      added.push(name);
    }
    const snapshot: StoreSnapshot = { lists };
    if (added.length === 0) {
      this.accept(obj, text, snapshot);
      this.watchFrom = resourceVersion || rvOf(obj);
      return true;
    }
    const res = await this.put(obj, serializeDocument(snapshot, true));
    if (res.status === 409) {
      this.log.info('allowlist store: another replica wrote the ConfigMap first; re-reading it');
      return false;
    }
    this.accept(res.obj, dataText(res.obj), snapshot);
    this.watchFrom = rvOf(res.obj);
    this.log.info(
      { lists: added, created: text === null, resourceVersion: this.appliedRV },
      text === null
        ? 'allowlist store: empty ConfigMap filled from the config'
        : 'allowlist store: lists named in the config but missing from the ConfigMap were added',
    );
    return true;
  }

  /** BaseStore's version check and write, again after a 409 that left the list's version as expected. */
  override async write(name: string, entries: readonly AllowEntry[], expectedVersion: string): Promise<StoredList> {
    const attempts = this.opts.writeAttempts ?? 6;
    for (let attempt = 1; ; attempt++) {
      try {
        return await super.write(name, entries, expectedVersion);
      } catch (err) {
        if (!(err instanceof ConfigMapMoved)) throw err;
        if (attempt >= attempts) {
          throw new StoreError(
            'ERR_STORE_BUSY',
            `allowlist store ${this.location}: the ConfigMap changed ${attempt} times while writing; try again`,
          );
        }
        await this.pause(backoffDelay({ initialMs: 50, maxMs: 1000 }, attempt - 1));
      }
    }
  }

  /** Inside the write queue: PUT `next` on the ConfigMap as last seen. */
  protected async persist(next: StoreSnapshot): Promise<void> {
    const text = serializeDocument(next, true);
    // The object limit covers every key: count the others (metadata is small and left out).
    let others = 0;
    for (const [k, v] of Object.entries(this.obj?.data ?? {}))
      if (k !== DATA_KEY) others += Buffer.byteLength(k) + Buffer.byteLength(String(v));
    const size = Buffer.byteLength(text) + others;
    if (size > MAX_CONFIGMAP_BYTES) {
      // How many entries of this shape fit: the limit less what is not entries, per entry's bytes.
      const { entries, bytes } = entryBytes(next);
      const fit = bytes === 0 ? 0 : Math.max(0, Math.floor((entries * (MAX_CONFIGMAP_BYTES - (size - bytes))) / bytes));
      throw new StoreError(
        'ERR_STORE_TOO_LARGE',
        `allowlist store ${this.location}: the document would be ${size} bytes with ${entries} entries; ` +
          `a ConfigMap holds at most ${MAX_CONFIGMAP_BYTES} bytes (1 MiB): about ${fit} entries like these fit`,
      );
    }
    const attempts = this.opts.writeAttempts ?? 6;
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new StoreError('ERR_STORE_CLOSED', 'the store is closed');
      try {
        const base = this.obj ?? (await this.getObject());
        if (base === null)
          throw new StoreError(
            'ERR_STORE_WRITE',
            `ConfigMap ${this.namespace}/${this.opts.configMap} does not exist: recreate it (helm upgrade) to write`,
          );
        const res = await this.put(base, text);
        if (res.status !== 409) {
          this.accept(res.obj, text, next);
          return;
        }
        const latest = await this.getObject();
        if (latest === null) throw new StoreError('ERR_STORE_WRITE', `ConfigMap ${this.namespace}/${this.opts.configMap} was deleted`);
        const latestText = dataText(latest);
        if (latestText === text) {
          // Our earlier attempt did land (its answer was lost).
          this.accept(latest, text, next);
          return;
        }
        const moved = this.examine(latest, 'configmap update');
        this.obj = latest;
        // Someone else's document is now in force: BaseStore checks the expected version against it.
        if (moved) throw new ConfigMapMoved();
        // Only metadata moved, or the new content is refused (not in force): write over it.
        this.log.debug({ attempt }, 'allowlist store: 409 without a change to the lists; writing again');
      } catch (err) {
        if (err instanceof ConfigMapMoved || err instanceof StoreError) throw err;
        if (!isTransient(err) || attempt >= attempts) {
          throw new StoreError(
            'ERR_STORE_WRITE',
            `cannot write the allowlist store ${this.location}: ${explain(err, this.opts.configMap)}`,
            { cause: err },
          );
        }
        this.noteError(err, 'write');
        await this.pause(backoffDelay(this.backoff, attempt - 1));
        continue;
      }
      if (attempt >= attempts) throw new ConfigMapMoved();
    }
  }

  override async close(): Promise<void> {
    this.closed = true;
    this.stop.abort();
    await this.watch?.close();
    await super.close();
    this.client?.close();
  }

  // --- watch ------------------------------------------------------------------------------------

  /** Follow the ConfigMap from where the load left it (kube/configmap-watch.ts). */
  private follow(): void {
    this.watch = new ConfigMapWatch({
      client: this.client!,
      namespace: this.namespace!,
      name: this.opts.configMap,
      logger: this.log,
      label: 'allowlist store',
      verbs: 'get, list, watch, update',
      backoff: this.backoff,
      resyncIntervalMs: this.opts.resyncIntervalMs,
      watchTimeoutSeconds: this.opts.watchTimeoutSeconds,
      watchIdleTimeoutMs: this.opts.watchIdleTimeoutMs,
      onSync: () => {
        // The API answers again: a write's failure is history (the watch keeps its own).
        this.lastSyncAt = Date.now();
        this.lastError = null;
      },
      // In the write queue: a version is examined after the write in flight, never beside it.
      onObject: (obj, gone) =>
        void this.serialise(async () => {
          if (obj !== null) {
            this.examine(obj as ConfigMap, 'configmap update');
            return;
          }
          this.obj = null;
          this.refuse(
            gone === 'deleted'
              ? 'the ConfigMap was deleted: recreate it (helm upgrade); the last good lists stay in force'
              : 'the ConfigMap is missing: recreate it (helm upgrade); the last good lists stay in force',
            null,
          );
        }).catch((err) => this.noteError(err, 'watch event')),
    });
    this.watch.resume(this.watchFrom);
  }

  /**
   * A ConfigMap seen outside our own writes: apply its document if valid, refuse it otherwise.
   * True when a new document was applied.
   */
  private examine(obj: ConfigMap, source: string): boolean {
    const rv = rvOf(obj);
    if (this.obj !== null && !isNewerVersion(rv, rvOf(this.obj))) return false; // ours, or older than what we hold
    this.obj = obj;
    const text = dataText(obj);
    if (text === this.lastText) {
      this.appliedRV = rv;
      this.clearRefusal();
      return false;
    }
    if (text === null) {
      this.refuse(`the ConfigMap has no ${DATA_KEY}: the next change through the admin API writes it again`, null);
      return false;
    }
    if (text === this.refusedText) return false;
    const parsed = parseDocument(text);
    if (!parsed.ok) {
      this.refuse(parsed.reason, text);
      return false;
    }
    const dropped = [...this.snapshot.lists.keys()].filter((n) => !parsed.lists.has(n));
    if (dropped.length > 0) {
      this.refuse(
        `list(s) ${dropped.join(', ')} missing: a list cannot be removed by editing the ConfigMap (empty its entries instead)`,
        text,
      );
      return false;
    }
    this.lastText = text;
    this.appliedRV = rv;
    this.clearRefusal();
    this.snapshot = { lists: parsed.lists };
    this.log.info({ resourceVersion: rv }, 'allowlist store: ConfigMap changed; applying');
    this.emitExternal({ snapshot: this.snapshot, source });
    return true;
  }

  /** Our own document is in the ConfigMap `obj` (load, write). */
  private accept(obj: ConfigMap, text: string | null, snapshot: StoreSnapshot): void {
    this.obj = obj;
    this.lastText = text;
    this.appliedRV = rvOf(obj);
    this.lastSyncAt = Date.now();
    this.snapshot = snapshot;
    this.clearRefusal();
  }

  private refuse(reason: string, text: string | null): void {
    this.refusedText = text;
    if (this.refusal?.reason === reason) return;
    this.refusal = { reason, at: Date.now() };
    this.log.error(
      { reason, resourceVersion: this.obj ? rvOf(this.obj) : null },
      'allowlist store ConfigMap refused; the last good lists stay in force',
    );
  }

  private clearRefusal(): void {
    if (this.refusal) this.log.info('allowlist store ConfigMap is valid again');
    this.refusal = null;
    this.refusedText = null;
  }

  private noteError(err: unknown, during: string): void {
    const message = `${during}: ${explain(err, this.opts.configMap)}`;
    // One warning per distinct failure: an API down for an hour is not a log flood.
    if (message !== this.lastError)
      this.log.warn({ err: message }, 'allowlist store: Kubernetes API failure; the last good lists stay in force');
    this.lastError = message;
  }

  private pause(ms: number): Promise<void> {
    // Referenced: a write waiting out a retry holds an admin request open. close() aborts it.
    return sleep(ms, undefined, { signal: this.stop.signal }).catch(() => undefined);
  }

  // --- API calls --------------------------------------------------------------------------------

  /** Always with the field selector: the Role's resourceNames covers list and watch only with it. */
  private listPath(): string {
    return `/api/v1/namespaces/${encodeURIComponent(this.namespace!)}/configmaps?fieldSelector=${encodeURIComponent(`metadata.name=${this.opts.configMap}`)}`;
  }

  private objectPath(): string {
    return `/api/v1/namespaces/${encodeURIComponent(this.namespace!)}/configmaps/${encodeURIComponent(this.opts.configMap)}`;
  }

  private async list(): Promise<{ obj: ConfigMap | null; resourceVersion: string }> {
    const r = await this.client!.listWithVersion<ConfigMap>(this.listPath());
    if (r === null) throw new KubeStatusError(404, this.listPath(), 'the configmaps resource is not served');
    const obj = r.items.find((i) => i.metadata?.name === this.opts.configMap) ?? null;
    return { obj, resourceVersion: r.resourceVersion };
  }

  private getObject(): Promise<ConfigMap | null> {
    return this.client!.getObject<ConfigMap>(this.objectPath());
  }

  /** PUT `base` with data[DATA_KEY] = text: the stored object on 2xx, `{status: 409}` on a conflict. */
  private async put(base: ConfigMap, text: string): Promise<{ status: 200; obj: ConfigMap } | { status: 409 }> {
    const body: ConfigMap = { ...base, apiVersion: 'v1', kind: 'ConfigMap', data: { ...(base.data ?? {}), [DATA_KEY]: text } };
    const res = await this.client!.request('PUT', this.objectPath(), body);
    if (res.status === 409) return { status: 409 };
    if (res.status >= 200 && res.status < 300) return { status: 200, obj: res.body as ConfigMap };
    throw statusError(res, this.objectPath(), 'PUT');
  }
}

function dataText(obj: ConfigMap): string | null {
  const text = obj.data?.[DATA_KEY];
  return typeof text === 'string' && text.trim() !== '' ? text : null;
}

function rvOf(obj: ConfigMap): string {
  return obj.metadata?.resourceVersion ?? '';
}

/** A failure as an operator can act on it (the store writes too: its Role has update). */
function explain(err: unknown, name: string): string {
  return explainKube(err, name, 'get, list, watch, update');
}
