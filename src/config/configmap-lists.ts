/**
 * `source: config` lists kept in a ConfigMap key (`allowlists.<name>.configMap`, list-configmap.ts),
 * read and watched through the API server. A mounted ConfigMap reaches the pod only on the kubelet's
 * sync period (about a minute); a watch event arrives within milliseconds of the edit, so a values
 * change is in force in every pod within about a second (test/integration/config-lists-configmap.test.ts).
 *
 * `fill(config)` is the ConfigMap counterpart of reading a list `file` in validate.ts: it puts each
 * such list's entries into the config, checked exactly as a file's (parseListText,
 * validateListEntries), and throws ConfigError with one problem per bad entry, naming the list, the
 * ConfigMap, the key and the value. The config watcher (watch.ts) calls it on every reload and
 * re-runs a reload whenever a watched ConfigMap changes, so a bad edit is refused like a bad file
 * (one log line per problem, the lists in force stay, /readyz shows it).
 *
 * One watch per ConfigMap named (the chart puts every declarative list in one), in the process that
 * owns the lists: the primary with several workers or `admin.separateProcess`, which sends each
 * change to every worker; the only process otherwise. Workers never talk to the API.
 */
import type { Logger } from 'pino';
import type { AllowEntryConfig, Config } from '../schema/config';
import { ConfigError } from './errors';
import { problem } from '../schema/problem';
import type { ReloadStatus } from './reload-status';
import { parseListText, validateListEntries } from './validate';
import { ConfigMapWatch, explain, type ConfigMapObject, type ConfigMapWatchOptions } from '../kube/configmap-watch';
import { KubeClient } from '../kube/kube-client';
import type { KubeAccess } from '../kube/kubeconfig';
import { resolveTarget } from '../store/kubernetes-target';

interface ConfigMapListsOptions {
  logger: Logger;
  /** KUBECONFIG, POD_NAMESPACE, HOME. Default process.env. */
  env?: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
  /** Use this instead of resolving a kubeconfig / the in-cluster service account (tests). */
  access?: KubeAccess;
  /** Per API request. Default 10000. */
  requestTimeoutMs?: number;
  /** Reading a ConfigMap not watched yet (at start-up): keep retrying an unreachable or failing API this long. Default 30000. */
  loadTimeoutMs?: number;
  /** Passed to each watch (kube/configmap-watch.ts; defaults there). */
  watch?: Pick<ConfigMapWatchOptions, 'backoff' | 'resyncIntervalMs' | 'watchTimeoutSeconds' | 'watchIdleTimeoutMs'>;
  /** Where each fill() records every ConfigMap's outcome (`kind: configmap`, `namespace/name`). */
  reloads?: ReloadStatus | null;
}

interface Watched {
  readonly watch: ConfigMapWatch;
  /** The ConfigMap as last seen; null: it does not exist. */
  obj: ConfigMapObject | null;
}

export class ConfigMapLists {
  private client: KubeClient | null = null;
  private access: KubeAccess | null;
  private readonly watched = new Map<string, Watched>();
  private started = false;
  private closed = false;
  /** A watched ConfigMap changed: re-fill (the config watcher reloads). */
  onChange: (() => void) | null = null;

  constructor(private readonly opts: ConfigMapListsOptions) {
    this.access = opts.access ?? null;
  }

  /** How many ConfigMaps are watched, and each one's watch (for logs and tests). */
  status(): Record<string, ReturnType<ConfigMapWatch['status']>> {
    const out: Record<string, ReturnType<ConfigMapWatch['status']>> = {};
    for (const [key, w] of this.watched) out[key] = w.watch.status();
    return out;
  }

  /**
   * `config` with the entries of its ConfigMap lists filled in (and each `configMap.namespace` the
   * namespace used); `config` itself when it has none. Reads a ConfigMap it does not watch yet.
   * Throws ConfigError naming every problem.
   */
  async fill(config: Config): Promise<Config> {
    const refs = Object.entries(config.allowlists).filter(([, l]) => l.configMap !== null);
    if (refs.length === 0) {
      await this.retain(new Set());
      return config;
    }
    const problems: string[] = [];
    const namespaces = new Map<string, string>();
    for (const [name, l] of refs) {
      try {
        namespaces.set(name, this.namespaceOf(l.configMap!.namespace, `allowlists.${name}.configMap.namespace`));
      } catch (err) {
        problems.push(problem(`allowlists.${name}.configMap`, l.configMap, (err as Error).message));
      }
    }
    if (problems.length > 0) throw new ConfigError(problems, undefined, 'configmap');

    const wanted = new Map<string, string>(); // ns/name -> the first list naming it (for messages)
    /** ConfigMaps (ns/name) this fill found a problem in: recorded as refused, the others as good. */
    const bad = new Set<string>();
    const record = (): void => {
      const r = this.opts.reloads;
      if (!r) return;
      for (const key of wanted.keys()) r.record('configmap', key, !bad.has(key));
    };
    for (const [name, l] of refs) {
      const key = `${namespaces.get(name)!}/${l.configMap!.name}`;
      if (!wanted.has(key)) wanted.set(key, name);
    }
    const deadline = Date.now() + (this.opts.loadTimeoutMs ?? 30_000);
    await Promise.all(
      [...wanted]
        .filter(([key]) => !this.watched.has(key))
        .map(async ([key, list]) => {
          const [ns, cmName] = key.split('/') as [string, string];
          const entry: Watched = { obj: null, watch: null as unknown as ConfigMapWatch };
          let loaded = false;
          const watch = new ConfigMapWatch({
            ...this.opts.watch,
            client: this.kubeClient(),
            namespace: ns,
            name: cmName,
            logger: this.opts.logger,
            onObject: (obj) => {
              entry.obj = obj;
              if (loaded) this.onChange?.();
            },
          });
          (entry as { watch: ConfigMapWatch }).watch = watch;
          try {
            await watch.load(deadline);
          } catch (err) {
            await watch.close();
            bad.add(key);
            problems.push(problem(`allowlists.${list}.configMap.name`, cmName, `cannot read ConfigMap ${key}: ${explain(err, cmName)}`));
            return;
          }
          loaded = true;
          if (this.closed) {
            await watch.close();
            return;
          }
          this.watched.set(key, entry);
          if (this.started) watch.start();
        }),
    );
    if (problems.length > 0) {
      record();
      throw new ConfigError(problems, undefined, 'configmap');
    }

    const allowlists: Config['allowlists'] = { ...config.allowlists };
    for (const [name, l] of refs) {
      const ref = l.configMap!;
      const ns = namespaces.get(name)!;
      const key = `${ns}/${ref.name}`;
      const where = `ConfigMap ${key}`;
      const obj = this.watched.get(key)!.obj;
      if (obj === null) {
        bad.add(key);
        problems.push(problem(`allowlists.${name}.configMap.name`, ref.name, `${where} does not exist (create it; the chart does)`));
        continue;
      }
      const text = obj.data?.[ref.key];
      if (typeof text !== 'string') {
        bad.add(key);
        const keys = Object.keys(obj.data ?? {}).sort();
        problems.push(
          problem(
            `allowlists.${name}.configMap.key`,
            ref.key,
            `${where} has no such key (keys: ${keys.length > 0 ? keys.join(', ') : 'none'})`,
          ),
        );
        continue;
      }
      const items = parseListText(text);
      if (typeof items === 'string') {
        bad.add(key);
        problems.push(problem(`allowlists.${name}.configMap.key`, ref.key, `${where} key ${ref.key} ${items}`));
        continue;
      }
      const before = problems.length;
      const entries = validateListEntries(`allowlists.${name}.configMap(${ns}/${ref.name}:${ref.key})`, items, problems);
      if (problems.length > before) bad.add(key);
      allowlists[name] = Object.freeze({ ...l, entries: freezeEntries(entries), configMap: Object.freeze({ ...ref, namespace: ns }) });
    }
    record();
    if (problems.length > 0) throw new ConfigError(problems, undefined, 'configmap');
    await this.retain(new Set(wanted.keys()));
    return Object.freeze({ ...config, allowlists: Object.freeze(allowlists) });
  }

  /** Start watching what fill() read (and, from now on, what it reads next). */
  start(): void {
    this.started = true;
    for (const w of this.watched.values()) w.watch.start();
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.watched.values()].map((w) => w.watch.close()));
    this.watched.clear();
    this.client?.close();
  }

  /** Stop watching (and reporting) ConfigMaps the config no longer names. */
  private async retain(keys: ReadonlySet<string>): Promise<void> {
    for (const key of this.opts.reloads?.sourcesOf('configmap') ?? []) if (!keys.has(key)) this.opts.reloads!.forget('configmap', key);
    const gone = [...this.watched].filter(([key]) => !keys.has(key));
    for (const [key] of gone) this.watched.delete(key);
    await Promise.all(gone.map(([, w]) => w.watch.close()));
  }

  /** The namespace to use for `namespace` (null: the pod's own); throws Error naming what to set. */
  private namespaceOf(namespace: string | null, field: string): string {
    const target = resolveTarget({
      namespace,
      namespaceField: field,
      env: this.opts.env ?? process.env,
      serviceAccountDir: this.opts.serviceAccountDir,
      access: this.access ?? undefined,
    });
    this.access ??= target.access;
    return target.namespace;
  }

  private kubeClient(): KubeClient {
    this.client ??= new KubeClient(this.access!, { timeoutMs: this.opts.requestTimeoutMs ?? 10_000, userAgent: 'ipgate-lists' });
    return this.client;
  }
}

function freezeEntries(entries: AllowEntryConfig[]): AllowEntryConfig[] {
  for (const e of entries) Object.freeze(e);
  return Object.freeze(entries) as AllowEntryConfig[];
}
