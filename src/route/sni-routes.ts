/**
 * The route stage of a TCP listener with routes (docs/routes-and-sni.md "TCP listeners with
 * routes"): the ClientHello's SNI picks a route -- exact, then the longest wildcard, then the
 * default `*`; no SNI takes the default -- and the route gives the upstream group (its own round
 * robin and failover) and the allowlist (its own, or the listener's) that the admission step then
 * decides on. No route: a `route_no_host` miss, which closes the connection.
 *
 * An SniRoutes is compiled once from the config, then immutable: the route table
 * (route-table.ts, the one matcher HTTP listeners use too) and each route's group and list sit in
 * one object, so a reload swaps them together in one assignment (Listener.replaceRoutes).
 */
import { NO_UPSTREAM_HEALTH, type UpstreamHealthConfig } from '../schema/edge';
import type { RouteConfig } from '../schema/routes';
import type { CheckContext } from '../upstream/active-check';
import { buildGroup, groupKey, type UpstreamGroup } from '../upstream/upstream-group';
import type { Connection, ConnectionRoute } from '../connection/connection';
import type { HealthSource, ListenerStats, RouteCounts } from '../metrics/listener-stats';
import type { LiveList } from '../store/live-lists';
import { RouteTable, type RouteMatch, type RouteMiss } from './route-table';

/** One compiled route: what a connection it takes is decided and forwarded by. */
interface SniRoute extends ConnectionRoute {
  readonly index: number;
  /** The allowlist's name (its own, or the listener's): explain and logs. */
  readonly allowlist: string;
}

/** The stage's answer: a route (with the host entry that matched), or a miss. */
type SniDecision = { readonly kind: 'route'; readonly route: SniRoute; readonly match: RouteMatch } | RouteMiss;

/** What compiling needs of the listener's config. */
interface SniRoutesSource {
  readonly name: string;
  readonly allowlist: string;
  readonly upstreams: readonly string[];
  readonly upstreamHealth?: Readonly<UpstreamHealthConfig>;
  readonly routes?: readonly RouteConfig[];
}

export class SniRoutes {
  private constructor(
    readonly table: RouteTable,
    /** In config order (route-table's routeIndex). */
    readonly routes: readonly SniRoute[],
    /** The groups with health rules by targets and rules (the next compile reuses them: their state and checks). */
    readonly groups: ReadonlyMap<string, UpstreamGroup>,
    /** The groups with health rules, by the first route using each ('' the listener's): the target gauge. */
    readonly health: readonly HealthSource[],
  ) {
    Object.freeze(this);
  }

  /**
   * Compile `config.routes` (throws RouteTableError with every problem, as config validation
   * does; validate-routes.ts has already refused a bad config, so at start-up this cannot fail).
   * `lists` resolves allowlist names (LiveLists); `stats` gives each route its counters;
   * `previous`: the routes in force, whose groups are kept when their targets and rules are.
   */
  static compile(
    config: SniRoutesSource,
    lists: { get(name: string): LiveList },
    stats: ListenerStats,
    previous: SniRoutes | null = null,
  ): SniRoutes {
    const specs = config.routes ?? [];
    const table = RouteTable.compile(specs, { kind: 'sni', at: `listeners.${config.name}.routes` });
    const groups = new Map<string, UpstreamGroup>();
    const health: HealthSource[] = [];
    const listenerRules = config.upstreamHealth ?? NO_UPSTREAM_HEALTH;
    // A group with health rules is shared by the routes with the same targets and rules, and kept
    // by a reload that keeps both (its targets' state, its checks); one without is a fresh round
    // robin per route, as it always was.
    const group = (targets: readonly string[], rules: Readonly<UpstreamHealthConfig>, route: string): UpstreamGroup => {
      if ((rules.passive ?? null) === null && (rules.active ?? null) === null) return buildGroup(targets, rules);
      const key = groupKey(targets, rules);
      let g = groups.get(key);
      if (g !== undefined) return g;
      g = previous?.groups.get(key) ?? buildGroup(targets, rules);
      health.push({ route, targets: g.targets });
      groups.set(key, g);
      return g;
    };
    let listenerGroup: UpstreamGroup | null = null;
    const routes = specs.map((r, index): SniRoute => {
      const allowlist = r.allowlist ?? config.allowlist;
      let upstreams: UpstreamGroup;
      if (r.upstreams !== undefined || r.upstreamHealth !== undefined) {
        const targets = r.upstreams ?? config.upstreams;
        if (targets.length === 0)
          throw new Error(`listeners.${config.name}.routes[${index}].upstreams: required when the listener has none`);
        upstreams = group(targets, r.upstreamHealth ?? listenerRules, r.name);
      } else {
        if (config.upstreams.length === 0)
          throw new Error(`listeners.${config.name}.routes[${index}].upstreams: required when the listener has none`);
        listenerGroup ??= group(config.upstreams, listenerRules, '');
        upstreams = listenerGroup;
      }
      const counts: RouteCounts = stats.route(r.name);
      return Object.freeze({ name: r.name, index, allowlist, list: lists.get(allowlist), upstreams, counts });
    });
    return new SniRoutes(table, Object.freeze(routes), groups, health);
  }

  /** Start the active checks of every group (those kept from `previous` keep theirs running). */
  startChecks(ctx: Omit<CheckContext, 'route'>): void {
    for (const g of this.groups.values()) {
      const route = this.health.find((s) => s.targets === g.targets)?.route ?? '';
      g.startChecks({ ...ctx, route });
    }
  }

  /** Stop the checks of every group `next` does not keep (null: all of them, a drain). */
  stopChecks(next: SniRoutes | null): void {
    const kept = new Set(next?.groups.values() ?? []);
    for (const g of this.groups.values()) if (!kept.has(g)) g.stopChecks();
  }

  /** The route for an SNI (null: the client sent none, which takes the default route). */
  decide(sni: string | null): SniDecision {
    const m = this.table.lookupHost(sni);
    if (m.kind === 'miss') return m;
    return { kind: 'route', route: this.routes[m.routeIndex]!, match: m };
  }

  /**
   * A reload: move the open connections routed by older routes to this table's route of the same
   * name when their SNI still reaches one; return those it does not (their route is gone: the
   * listener closes them, `route_removed`). Connections not routed yet are left alone.
   */
  adopt(connections: Iterable<Connection>): Connection[] {
    const gone: Connection[] = [];
    for (const conn of connections) {
      const old = conn.route;
      if (old === null) continue;
      const d = this.decide(conn.sni);
      if (d.kind === 'route' && d.route.name === old.name) conn.route = d.route;
      else gone.push(conn);
    }
    return gone;
  }

  /** Whether every upstream of every route is an IP literal (a listener on libuv handles needs that). */
  get ipLiteralsOnly(): boolean {
    return this.routes.every((r) => r.upstreams.targets.every((t) => t.family !== 0));
  }
}
