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
import type { RouteConfig } from '../schema/routes';
import { parseUpstreams, UpstreamGroup } from '../upstream/upstream-group';
import type { Connection, ConnectionRoute } from '../connection/connection';
import type { ListenerStats, RouteCounts } from '../metrics/listener-stats';
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
  readonly routes?: readonly RouteConfig[];
}

export class SniRoutes {
  private constructor(
    readonly table: RouteTable,
    /** In config order (route-table's routeIndex). */
    readonly routes: readonly SniRoute[],
  ) {
    Object.freeze(this);
  }

  /**
   * Compile `config.routes` (throws RouteTableError with every problem, as config validation
   * does; validate-routes.ts has already refused a bad config, so at start-up this cannot fail).
   * `lists` resolves allowlist names (LiveLists); `stats` gives each route its counters.
   */
  static compile(config: SniRoutesSource, lists: { get(name: string): LiveList }, stats: ListenerStats): SniRoutes {
    const specs = config.routes ?? [];
    const table = RouteTable.compile(specs, { kind: 'sni', at: `listeners.${config.name}.routes` });
    const listenerGroup = config.upstreams.length > 0 ? new UpstreamGroup(parseUpstreams(config.upstreams)) : null;
    const routes = specs.map((r, index): SniRoute => {
      const allowlist = r.allowlist ?? config.allowlist;
      const upstreams = r.upstreams !== undefined ? new UpstreamGroup(parseUpstreams(r.upstreams)) : listenerGroup;
      if (upstreams === null) throw new Error(`listeners.${config.name}.routes[${index}].upstreams: required when the listener has none`);
      const counts: RouteCounts = stats.route(r.name);
      return Object.freeze({ name: r.name, index, allowlist, list: lists.get(allowlist), upstreams, counts });
    });
    return new SniRoutes(table, Object.freeze(routes));
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
