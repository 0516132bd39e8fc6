/**
 * Watches the config file (and the list files its `source: config` lists name) and hands every
 * change, re-read and validated whole (loadConfigFile: schema, semantics, list files), to
 * `onConfig`. A file that does not validate is refused: one error line per problem, each naming
 * the field and quoting the value, and the lists in force stay (Caddy: "keep the last good").
 *
 * fs.watchFile (stat polling, `intervalMs`, default 500) rather than fs.watch: a Kubernetes
 * ConfigMap volume replaces the file by swapping the `..data` symlink, which fs.watch on the file
 * misses and stat (following the link) sees; the 500 ms poll keeps an edit within the 2 s the
 * allowlist promises (test/integration/config-lists.test.ts). SIGHUP calls `reload()` too (main.ts,
 * cluster/primary.ts). The allowlists and the listeners' routes (`onRoutes`, after the lists, so
 * a route can name a list the same edit added) are applied live; other changes are logged as
 * needing a restart. A routes change `onRoutes` refuses (a listener's `listen` or `mode` changed,
 * a table that does not compile) is logged like a bad file, one line per problem, and shown by
 * /readyz; the routes in force stay, while the file's list changes still apply.
 *
 * Lists kept in a ConfigMap key (`configMap`) are filled in by `configMaps` (configmap-lists.ts) on
 * every reload, and a change to a watched ConfigMap runs a reload: the same path, the same
 * all-or-nothing validation, the same refusal as an edit of the file.
 *
 * Each reload's outcome for the file is recorded in `reloads` (reload-status.ts: the
 * `ipgate_config_last_reload_successful` gauges; the ConfigMaps record their own in fill()).
 * Changes outside the lists and routes are compared with the config the process started with,
 * not with the previous file: a change and its revert leave nothing pending, and the revert says
 * so once instead of "applied at the next restart" a second time.
 */
import fs from 'node:fs';
import type { Logger } from 'pino';
import type { ConfigMapLists } from './configmap-lists';
import { ConfigError } from './errors';
import { loadConfigFile } from './load';
import type { ReloadStatus } from './reload-status';
import type { Config } from '../schema/config';

interface ConfigWatcherOptions {
  file: string;
  logger: Logger;
  /** The config in force at start (its list files are watched too). */
  initial: Config;
  /** A new valid config. */
  onConfig: (config: Config) => void | Promise<void>;
  /**
   * Apply the listeners' routes of a new valid config (route/routes-in-force.ts); returns the
   * problems that refused them (empty: applied or unchanged).
   */
  onRoutes?: (config: Config) => readonly string[] | Promise<readonly string[]>;
  /** A change refused (its problems), or null once a valid file is in force again: /readyz shows it. */
  onRefusal?: (problems: readonly string[] | null) => void;
  intervalMs?: number;
  /** Fills in the lists kept in ConfigMaps (the initial config is already filled); closed with the watcher. */
  configMaps?: ConfigMapLists | null;
  /** Where each reload's outcome for the file is recorded (metrics); the initial load counts as good. */
  reloads?: ReloadStatus | null;
}

export class ConfigWatcher {
  private current: Config;
  private watched = new Set<string>();
  private readonly intervalMs: number;
  private running = false;
  private again = false;
  private closed = false;
  /** The last refusal (problems), or null when the file in force is the file on disk. */
  lastRefusal: { problems: readonly string[]; at: number } | null = null;
  /** Fields changed outside the lists and routes since start, waiting for a restart (sorted). */
  private pendingRestart: readonly string[] = [];

  constructor(private readonly opts: ConfigWatcherOptions) {
    this.current = opts.initial;
    this.intervalMs = opts.intervalMs ?? 500;
    opts.reloads?.record('file', opts.file, true);
  }

  /** Fields changed in the file outside the lists and routes that only a restart applies. */
  get restartPending(): readonly string[] {
    return this.pendingRestart;
  }

  start(): void {
    this.rewatch(this.current);
    const cm = this.opts.configMaps;
    if (cm) {
      const changed = (): void => void this.reload();
      cm.onChange = changed;
      cm.start();
    }
  }

  close(): void {
    this.closed = true;
    void this.opts.configMaps?.close();
    for (const f of this.watched) fs.unwatchFile(f, this.onChange);
    this.watched.clear();
  }

  private readonly onChange = (cur: fs.Stats, prev: fs.Stats): void => {
    if (cur.mtimeMs === prev.mtimeMs && cur.size === prev.size && cur.ino === prev.ino) return;
    void this.reload('change');
  };

  private files(config: Config): string[] {
    const files = [this.opts.file];
    for (const l of Object.values(config.allowlists)) if (l.file !== null) files.push(l.file);
    return files;
  }

  private rewatch(config: Config): void {
    const want = new Set(this.files(config));
    for (const f of this.watched) if (!want.has(f)) fs.unwatchFile(f, this.onChange);
    for (const f of want) if (!this.watched.has(f)) fs.watchFile(f, { interval: this.intervalMs, persistent: false }, this.onChange);
    this.watched = want;
  }

  /**
   * Re-read now: `signal` (SIGHUP, main.ts and cluster/primary.ts) or a file `change`. Changes
   * during a reload run one more.
   */
  async reload(trigger: 'signal' | 'change' = 'signal'): Promise<void> {
    if (this.closed) return;
    this.opts.logger.info({ config: this.opts.file, trigger }, 'config file re-read');
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    try {
      do {
        this.again = false;
        await this.reloadOnce();
      } while (this.again && !this.closed);
    } finally {
      this.running = false;
    }
  }

  private async reloadOnce(): Promise<void> {
    const log = this.opts.logger;
    let next: Config;
    try {
      next = loadConfigFile(this.opts.file);
      if (this.opts.configMaps) next = await this.opts.configMaps.fill(next);
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : [(err as Error).message];
      // The file itself, or (fill) one of its ConfigMaps, which fill() has recorded.
      if (!(err instanceof ConfigError && err.source === 'configmap')) this.opts.reloads?.record('file', this.opts.file, false);
      else this.opts.reloads?.record('file', this.opts.file, true);
      this.lastRefusal = { problems, at: Date.now() };
      this.opts.onRefusal?.(problems);
      for (const p of problems) log.error({ config: this.opts.file, problem: p }, `config change refused, the lists in force stay: ${p}`);
      return;
    }
    if (this.closed) return;
    // Against the config this process runs with: what only a restart applies is what differs from it.
    const restart = changedOutsideLists(this.opts.initial, next);
    const before = this.pendingRestart;
    this.pendingRestart = restart;
    if (restart.length > 0 && restart.join() !== before.join()) {
      log.warn(
        { config: this.opts.file, fields: restart },
        `config changed outside allowlists and routes (${restart.join(', ')}): applied at the next restart; allowlists and routes are applied now`,
      );
    } else if (restart.length === 0 && before.length > 0) {
      log.info(
        { config: this.opts.file, fields: before },
        `config outside allowlists and routes is back to the one running (${before.join(', ')} reverted): nothing waits for a restart`,
      );
    }
    this.current = next;
    this.rewatch(next);
    await this.opts.onConfig(next);
    const refused = this.opts.onRoutes === undefined ? [] : await this.opts.onRoutes(next);
    if (refused.length > 0) {
      this.opts.reloads?.record('file', this.opts.file, false);
      this.lastRefusal = { problems: refused, at: Date.now() };
      this.opts.onRefusal?.(refused);
      for (const p of refused) log.error({ config: this.opts.file, problem: p }, `routes change refused, the routes in force stay: ${p}`);
      return;
    }
    this.opts.reloads?.record('file', this.opts.file, true);
    if (this.lastRefusal !== null) this.opts.onRefusal?.(null);
    this.lastRefusal = null;
  }
}

/** Top-level config fields other than `allowlists` (and the listeners' `routes`) whose value changed, sorted. */
function changedOutsideLists(a: Config, b: Config): string[] {
  const out: string[] = [];
  const withoutRoutes = (c: Config): unknown => c.listeners.map(({ routes: _routes, ...rest }) => rest);
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    if (key === 'allowlists') continue;
    if (key === 'listeners') {
      if (JSON.stringify(withoutRoutes(a)) !== JSON.stringify(withoutRoutes(b))) out.push(key);
      continue;
    }
    if (JSON.stringify((a as unknown as Record<string, unknown>)[key]) !== JSON.stringify((b as unknown as Record<string, unknown>)[key]))
      out.push(key);
  }
  return out.sort();
}
