/**
 * The routes in force, per listener, and the reload that replaces them (docs/routes-and-sni.md
 * "Reload"). The config file is the source: on SIGHUP or a change of the file (config/watch.ts),
 * the new file is validated whole first (schema and semantics, loadConfigFile); then
 * `planRoutes` refuses what cannot change live (a listener added, removed, or with another
 * `listen` or `mode`: a restart is needed), every listener compiles its new routes, and only if
 * all compiled does each swap them in (route-receiver.ts). A refusal leaves every listener's
 * routes as they were.
 *
 * RoutesInForce is what the admin API reads (GET /v1/routes, POST /v1/explain): the config's
 * routes and a compiled table per listener, the version hash and when it was loaded. In a
 * cluster the primary keeps one (it has no listeners) and each worker swaps its own listeners.
 */
import { createHash } from 'node:crypto';
import type { Config, ListenerConfig, RouteConfig } from '../schema/config';
import type { PathParameters } from './path';
import type { RouteReceiver, RoutesVersion } from './route-receiver';
import { RouteTable, RouteTableError } from './route-table';

interface ListenerRoutes {
  readonly listener: string;
  readonly mode: 'tcp' | 'http';
  /** The listener's own allowlist and upstreams (what routes without theirs use). */
  readonly allowlist: string;
  readonly upstreams: readonly string[];
  /** How the listener reads ";" in request paths (`http.pathParameters`), which the table applies. */
  readonly pathParameters: PathParameters;
  /** null: the listener does not route. */
  readonly routes: readonly RouteConfig[] | null;
  readonly table: RouteTable | null;
}

/** The listeners' routes as one message (cluster IPC) or one reload. */
export interface RoutesUpdate {
  readonly version: RoutesVersion;
  readonly listeners: ReadonlyArray<{ readonly name: string; readonly routes: RouteConfig[] | null }>;
}

export function routesUpdate(config: Pick<Config, 'listeners'>, version: RoutesVersion): RoutesUpdate {
  return { version, listeners: config.listeners.map((l) => ({ name: l.name, routes: l.routes ?? null })) };
}

export class RoutesInForce {
  private byName = new Map<string, ListenerRoutes>();
  version: RoutesVersion;

  constructor(listeners: readonly Readonly<ListenerConfig>[], version: RoutesVersion) {
    this.version = version;
    for (const l of listeners) this.byName.set(l.name, entry(l, l.routes ?? null));
  }

  get(name: string): ListenerRoutes | undefined {
    return this.byName.get(name);
  }

  all(): ListenerRoutes[] {
    return [...this.byName.values()];
  }

  /** Swap in an update (already applied to the listeners, or about to be: it compiled). */
  set(update: RoutesUpdate): void {
    const next = new Map<string, ListenerRoutes>();
    for (const l of update.listeners) {
      const prior = this.byName.get(l.name);
      if (prior === undefined) continue;
      next.set(l.name, {
        ...prior,
        routes: l.routes,
        table: l.routes === null ? null : compileTable(l.routes, prior.mode, prior.pathParameters),
      });
    }
    this.byName = next;
    this.version = update.version;
  }
}

function entry(l: Readonly<ListenerConfig>, routes: readonly RouteConfig[] | null): ListenerRoutes {
  const pathParameters = l.http.pathParameters;
  return {
    listener: l.name,
    mode: l.mode,
    allowlist: l.allowlist,
    upstreams: l.upstreams,
    pathParameters,
    routes,
    table: routes === null ? null : compileTable(routes, l.mode, pathParameters),
  };
}

function compileTable(routes: readonly RouteConfig[], mode: 'tcp' | 'http', pathParameters: PathParameters): RouteTable {
  return RouteTable.compile(routes, { kind: mode === 'tcp' ? 'sni' : 'http', pathParameters });
}

/**
 * What in `next` cannot be applied live, relative to `current` (one message each, naming the
 * listener and saying a restart is needed); empty when the routes can be reloaded.
 */
export function planRoutes(current: Pick<Config, 'listeners'>, next: Pick<Config, 'listeners'>): string[] {
  const problems: string[] = [];
  const before = new Map(current.listeners.map((l) => [l.name, l]));
  const after = new Set(next.listeners.map((l) => l.name));
  next.listeners.forEach((l, i) => {
    const b = before.get(l.name);
    if (b === undefined) {
      problems.push(`listeners[${i}] (${l.name}): a new listener needs a restart (routes are reloaded live, listeners are not)`);
      return;
    }
    if (b.listen !== l.listen)
      problems.push(`listeners[${i}] (${l.name}).listen: ${JSON.stringify(b.listen)} -> ${JSON.stringify(l.listen)} needs a restart`);
    if (b.mode !== l.mode)
      problems.push(`listeners[${i}] (${l.name}).mode: ${JSON.stringify(b.mode)} -> ${JSON.stringify(l.mode)} needs a restart`);
  });
  for (const name of before.keys()) if (!after.has(name)) problems.push(`listeners: removing listener "${name}" needs a restart`);
  return problems;
}

/** Whether any listener's routes differ between two configs. */
export function routesChanged(a: Pick<Config, 'listeners'>, b: Pick<Config, 'listeners'>): boolean {
  const routes = (c: Pick<Config, 'listeners'>): string => JSON.stringify(c.listeners.map((l) => [l.name, l.routes ?? null]));
  return routes(a) !== routes(b);
}

export interface RouteSwapResult {
  /** Problems that refused the swap (nothing changed), empty when applied. */
  problems: string[];
  /** Connections marked to close (their route is gone, or its list no longer admits them), per listener. */
  closed: Record<string, number>;
}

/**
 * Compile every listener's routes, then swap them all (all or nothing). `receivers`: the
 * listeners of this process that take routes, by name.
 */
export function swapRoutes(receivers: ReadonlyMap<string, RouteReceiver>, update: RoutesUpdate): RouteSwapResult {
  const compiled: Array<[RouteReceiver, unknown, string]> = [];
  const problems: string[] = [];
  for (const l of update.listeners) {
    const r = receivers.get(l.name);
    if (r === undefined) continue;
    try {
      compiled.push([r, r.compileRoutes(l.routes ?? undefined, update.version), l.name]);
    } catch (err) {
      if (err instanceof RouteTableError) problems.push(...err.problems);
      else problems.push(`listeners (${l.name}).routes: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0) return { problems, closed: {} };
  const closed: Record<string, number> = {};
  for (const [r, c, name] of compiled) closed[name] = r.replaceRoutes(c);
  return { problems, closed };
}

/**
 * The config watcher's `onRoutes` (config/watch.ts): plan against the config the listeners were
 * started with, skip when no route changed, else `apply` (swap here, or send to the workers) and
 * log the version now in force. Returns the problems that refused the change.
 */
export function routeReloader(
  started: Pick<Config, 'listeners'>,
  log: { info(o: object, msg: string): void },
  apply: (update: RoutesUpdate) => RouteSwapResult,
): (next: Config) => string[] {
  let inForce: Pick<Config, 'listeners'> = started;
  return (next) => {
    const plan = planRoutes(started, next);
    if (plan.length > 0) return plan;
    if (!routesChanged(inForce, next)) return [];
    const update = routesUpdate(next, versionOf(next));
    const r = apply(update);
    if (r.problems.length > 0) return r.problems;
    inForce = next;
    log.info({ routesVersion: update.version.hash, closed: r.closed }, 'routes reloaded');
    return [];
  };
}

function versionOf(config: Pick<Config, 'listeners'>): RoutesVersion {
  return routesVersion(config.listeners);
}

/** The version of a set of listeners' routes: a hash of what was loaded, and when. */
export function routesVersion(
  listeners: ReadonlyArray<{ name: string; routes?: readonly RouteConfig[] | undefined }>,
  loadedAt = Date.now(),
): RoutesVersion {
  const hash = createHash('sha256')
    .update(JSON.stringify(listeners.map((l) => [l.name, l.routes ?? null])))
    .digest('hex')
    .slice(0, 16);
  return Object.freeze({ hash, loadedAt });
}
