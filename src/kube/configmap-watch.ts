/**
 * Follow one ConfigMap through the API server: list it, then watch it from the list's
 * resourceVersion, and call `onObject` each time a newer version (or its absence) is seen. The one
 * list-then-watch of the project: the declarative lists' ConfigMaps (config/configmap-lists.ts)
 * and the ConfigMap store (store/kubernetes-store.ts, which writes through its own PUTs and
 * follows everyone's changes through this). Read
 * only: for the declarative allowlists kept in a ConfigMap (config/configmap-lists.ts).
 *
 * The same protocol as the ConfigMap store (store/kubernetes-store.ts; the supervision of the watch,
 * kube/watch-loop.ts, is shared with it):
 * - list and watch carry `fieldSelector=metadata.name=<name>`: the API server applies a Role's
 *   `resourceNames` to list and watch only with it, so get/list/watch on that one name suffices;
 * - bookmarks keep the resume point fresh; a stream the server ends (timeoutSeconds, spread by
 *   +/- 20% so replicas do not re-watch together) is resumed at once from the last resourceVersion;
 * - a dropped or refused watch is retried with exponential backoff and jitter (kube/backoff.ts);
 * - 410 Gone (an ERROR event, or HTTP 410) means the resume point is older than the API server
 *   keeps: list again, watch from the list;
 * - a periodic relist is the safety net for anything a watch missed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { backoffDelay, type BackoffPolicy } from './backoff';
import { isNewerVersion, isTransient, KubeStatusError } from './errors';
import type { KubeClient, WatchEnd, WatchEvent, Watch } from './kube-client';
import { runWatchLoop } from './watch-loop';

export interface ConfigMapObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [k: string]: unknown };
  data?: Record<string, string> | null;
  [k: string]: unknown;
}

export interface ConfigMapWatchOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  logger: Logger;
  /**
   * A newer version of the ConfigMap, or null once it is gone (`deleted` by a watch event, or
   * `missing` at a list).
   */
  onObject: (obj: ConfigMapObject | null, gone: 'deleted' | 'missing' | null) => void;
  /** The API confirmed the view: a list, a watch opened, an event or a bookmark. */
  onSync?: () => void;
  /** What the log lines call this follower. Default "declarative lists". */
  label?: string;
  /** What a 403 says the Role needs on the ConfigMap. Default "get, list, watch". */
  verbs?: string;
  /** Re-watch and relist after failures. Default 500 ms doubling to 30 s. */
  backoff?: BackoffPolicy;
  /** Relist even while the watch is healthy. Default 300000 (5 minutes). */
  resyncIntervalMs?: number;
  /** Asked of the server per watch. Default 300, +/- 20%. */
  watchTimeoutSeconds?: number;
  /** No byte on the watch for this long (bookmarks come about every minute) = a dead connection. Default 150000. */
  watchIdleTimeoutMs?: number;
}

interface ConfigMapWatchStatus {
  /** resourceVersion of the last version handed to onObject. */
  readonly resourceVersion: string | null;
  readonly watchConnected: boolean;
  /** The last API failure since the watch was last healthy, or null. */
  readonly lastError: string | null;
  /**
   * Last time the API answered (a list, a watch opened, an event or a bookmark: bookmarks come
   * about every minute), ms epoch; null before the first (ipgate_configmap_watch_last_success_timestamp_seconds).
   */
  readonly lastSuccessAt: number | null;
}

export class ConfigMapWatch {
  private readonly backoff: BackoffPolicy;
  private readonly log: Logger;
  /** Where the next watch starts (advanced by events and bookmarks). */
  private watchRV = '';
  /** The version last handed to onObject ('' for "absent"), null before the first. */
  private seenRV: string | null = null;
  private watchConnected = false;
  private lastError: string | null = null;
  private lastSuccessAt: number | null = null;
  private streamError: { code: number; message: string } | null = null;
  private watch: Watch | null = null;
  private loop: Promise<void> | null = null;
  private resyncTimer: NodeJS.Timeout | null = null;
  private readonly stop = new AbortController();
  private closed = false;

  constructor(private readonly opts: ConfigMapWatchOptions) {
    this.backoff = opts.backoff ?? { initialMs: 500, maxMs: 30_000 };
    this.log = opts.logger.child({ configMap: `${opts.namespace}/${opts.name}` });
  }

  get where(): string {
    return `ConfigMap ${this.opts.namespace}/${this.opts.name}`;
  }

  /**
   * Watch from `resourceVersion` on, the caller having listed the ConfigMap itself (the store's
   * load, which may write it first): no list of ours, that version counts as seen.
   */
  resume(resourceVersion: string): void {
    this.watchRV = resourceVersion;
    this.seenRV ??= resourceVersion;
    this.start();
  }

  status(): ConfigMapWatchStatus {
    return {
      resourceVersion: this.seenRV,
      watchConnected: this.watchConnected,
      lastError: this.lastError,
      lastSuccessAt: this.lastSuccessAt,
    };
  }

  /**
   * List it once, retrying an unreachable or failing API (5xx, 429) until `deadline` (ms epoch);
   * hands the result to onObject. Throws the last error otherwise (403, 401, the deadline).
   */
  async load(deadline: number): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.relist(true);
        return;
      } catch (err) {
        if (!isTransient(err) || Date.now() >= deadline || this.closed) throw err;
        this.noteError(err, 'list');
        await this.pause(Math.min(backoffDelay(this.backoff, attempt), Math.max(0, deadline - Date.now())));
      }
    }
  }

  /** Watch from the last list on (load() first). */
  start(): void {
    if (this.loop !== null || this.closed) return;
    this.loop = this.run();
    this.resyncTimer = setInterval(
      () => void this.relist().catch((err) => this.noteError(err, 'resync')),
      this.opts.resyncIntervalMs ?? 300_000,
    );
    this.resyncTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stop.abort();
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.resyncTimer = null;
    this.watch?.stop();
    await this.loop;
  }

  private run(): Promise<void> {
    return runWatchLoop({
      backoff: this.backoff,
      closed: () => this.closed,
      relist: () => this.relist(true),
      watchOnce: async () => {
        this.streamError = null;
        const end = await this.watchOnce();
        this.watchConnected = false;
        return { end, streamError: this.streamError as { code: number; message: string } | null };
      },
      expired: () => this.log.info({ resourceVersion: this.watchRV }, `${this.label}: watch expired (410 Gone); relisting`),
      noteError: (err, during) => this.noteError(err, during),
      pause: (ms) => this.pause(ms),
    });
  }

  private watchOnce(): Promise<WatchEnd> {
    const base = this.opts.watchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.max(1, Math.round(base * (0.8 + Math.random() * 0.4)));
    const path = `${this.listPath()}&watch=1&resourceVersion=${encodeURIComponent(this.watchRV)}&allowWatchBookmarks=true&timeoutSeconds=${timeoutSeconds}`;
    const watch = this.opts.client.watch(path, {
      idleTimeoutMs: this.opts.watchIdleTimeoutMs ?? 150_000,
      onOpen: () => {
        if (!this.watchConnected && this.lastError !== null)
          this.log.info({ resourceVersion: this.watchRV }, `${this.label}: watching the ConfigMap again`);
        this.watchConnected = true;
        this.lastError = null;
        this.lastSuccessAt = Date.now();
        this.opts.onSync?.();
      },
      onEvent: (event) => this.onEvent(event),
    });
    this.watch = watch;
    return watch.done;
  }

  private onEvent(event: WatchEvent): void {
    if (event.type === 'ERROR') {
      const s = event.object as { code?: unknown; message?: unknown };
      this.streamError = { code: typeof s.code === 'number' ? s.code : 0, message: String(s.message ?? '') };
      throw new Error(`watch ERROR event: ${this.streamError.message}`);
    }
    this.lastSuccessAt = Date.now();
    const obj = event.object as ConfigMapObject;
    const rv = obj.metadata?.resourceVersion ?? '';
    if (rv !== '') this.watchRV = rv;
    this.opts.onSync?.();
    if (event.type === 'BOOKMARK' || obj.metadata?.name !== this.opts.name) return;
    if (event.type === 'DELETED') this.see(null, rv, 'deleted');
    else this.see(obj, rv, null);
  }

  /** `resetWatch`: the next watch starts from the list's resourceVersion (at load, after 410). */
  private async relist(resetWatch = false): Promise<void> {
    if (this.closed) return;
    const r = await this.opts.client.listWithVersion<ConfigMapObject>(this.listPath());
    if (r === null) throw new KubeStatusError(404, this.listPath(), 'the configmaps resource is not served');
    this.lastSuccessAt = Date.now();
    const obj = r.items.find((i) => i.metadata?.name === this.opts.name) ?? null;
    if (resetWatch) this.watchRV = r.resourceVersion || (obj?.metadata?.resourceVersion ?? this.watchRV);
    this.opts.onSync?.();
    if (obj === null) this.see(null, '', 'missing');
    else this.see(obj, obj.metadata?.resourceVersion ?? '', null);
  }

  /** Hand on a version not seen yet (a relist or a replayed event can repeat one). */
  private see(obj: ConfigMapObject | null, rv: string, gone: 'deleted' | 'missing' | null): void {
    const key = obj === null ? '' : rv;
    if (key === this.seenRV) return;
    if (obj !== null && this.seenRV !== null && this.seenRV !== '' && !isNewerVersion(rv, this.seenRV)) return;
    this.seenRV = key;
    this.opts.onObject(obj, gone);
  }

  private get label(): string {
    return this.opts.label ?? 'declarative lists';
  }

  private noteError(err: unknown, during: string): void {
    const message = `${during}: ${explain(err, this.opts.name, this.opts.verbs)}`;
    // One warning per distinct failure: an API down for an hour is not a log flood.
    if (message !== this.lastError) this.log.warn({ err: message }, `${this.label}: Kubernetes API failure; the lists in force stay`);
    this.lastError = message;
  }

  private pause(ms: number): Promise<void> {
    return sleep(ms, undefined, { signal: this.stop.signal }).catch(() => undefined);
  }

  private listPath(): string {
    return `/api/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/configmaps?fieldSelector=${encodeURIComponent(`metadata.name=${this.opts.name}`)}`;
  }
}

/** A failure as an operator can act on it. */
export function explain(err: unknown, name: string, verbs = 'get, list, watch'): string {
  if (err instanceof KubeStatusError) {
    if (err.status === 403) {
      return (
        `HTTP 403: ${err.reason} (the Role needs ${verbs} on configmaps with resourceNames [${name}]; ` +
        'the chart grants them for its ConfigMaps; list and watch are sent with fieldSelector=metadata.name)'
      );
    }
    if (err.status === 401) return `HTTP 401: ${err.reason} (the service account token or kubeconfig credentials are not accepted)`;
  }
  return (err as Error).message;
}
