/**
 * Routes on an HTTP listener (docs/routes-and-sni.md "On HTTP listeners"): the compiled host ->
 * path table (route/route-table.ts) plus, per route, what the policy needs for each request it
 * decides: the upstream group (round robin and failover over its own targets), the allowlist
 * (the route's, or the listener's), and the per-route settings (`upstreamTimeoutMs`,
 * `requestHeaders`, `deniedBody`). Built completely by compileHttpRoutes, never changed after:
 * a reload builds a new HttpRoutes and HttpForwarder swaps the reference (route-receiver.ts).
 *
 * Upstream groups: one UpstreamGroup (round robin) per distinct target list, shared by the routes
 * that name the same list and kept across reloads (same list, same pool object and same Upstream
 * objects, so the listener's SocketPool keeps its warm sockets to them). Routes without upstreams
 * use the listener's own group.
 *
 * The request target: the table matches the path in normal form (route/path.ts), and the
 * upstream receives that normal form (with the query as sent) whenever it differs from what the
 * client sent. nginx's `proxy_pass` without a URI forwards the original; we do not, because the
 * route (and so the allowlist) was decided on the normal form: a backend shared by two routes
 * that does not resolve `%2e%2e` or `//` the same way would otherwise serve one route's path
 * under the other route's decision. A path already in normal form (the usual case) is forwarded
 * as sent, with no copy. A path with ";" parameters is refused (route_path_params) unless the
 * listener reads them as a servlet container does (`http.pathParameters: servlet`): then routes
 * match each segment cut at its ";" and the upstream gets the normal form with the parameters of
 * the segments that remain, so `/public/..;/admin/` is decided and forwarded as `/admin/`, and no
 * backend, servlet or not, resolves a dot segment the router did not.
 */
import fs from 'node:fs';
import type { Logger } from 'pino';
import type { ListenerConfig, RouteConfig } from '../../schema/config';
import { Admission } from '../../listener/admission';
import type { ListenerStats, RouteStats } from '../../metrics/listener-stats';
import type { RouteMissReason } from '../../route/codes';
import { matchForm, normalizePath, plainPathEnd } from '../../route/path';
import type { RoutesVersion } from '../../route/route-receiver';
import { RouteTable } from '../../route/route-table';
import type { LiveList, LiveLists } from '../../store/live-lists';
import type { HealthSource } from '../../metrics/listener-stats';
import { NO_UPSTREAM_HEALTH } from '../../schema/config';
import { buildGroup, groupKey, type Http2Upstream, type UpstreamGroup, type Upstream } from '../../upstream/upstream-group';
import { CannedResponses } from './canned';
import type { LimitZones } from '../../limit/limit-zones';
import { compileEdgeRules, type EdgeRules } from './edge-rules';

/** One route as the data path uses it. */
export class HttpRoute {
  /** Round robin over the group: the first target to try. */
  readonly pick: () => number;
  readonly targets: readonly Upstream[];

  constructor(
    readonly name: string,
    readonly index: number,
    readonly config: Readonly<RouteConfig>,
    /** The allowlist this route enforces (read live: `.matcher` per decision). */
    readonly list: LiveList,
    /** Decide, count and log against `list` (counters are the listener's). */
    readonly admission: Admission,
    readonly group: UpstreamGroup,
    /** `routes[].http.upstreamTimeoutMs`, else the listener's `http.upstreamTimeoutMs`. */
    readonly upstreamTimeoutMs: number,
    /** `routes[].http.requestHeaders`, names lower-cased; null without any. */
    readonly requestHeaders: readonly (readonly [string, string])[] | null,
    /** The 403s (`routes[].http.deniedBody`, else the listener's). */
    readonly canned: CannedResponses,
    readonly stats: RouteStats,
    /** The route's edge rules (edge-rules.ts), null without any: its requests pay one null check. */
    readonly rules: EdgeRules | null,
  ) {
    this.targets = group.targets;
    const pick = (): number => group.start();
    this.pick = pick;
  }
}

/** A request's route, and the target the upstream receives (null: as the client sent it). */
interface RouteHit {
  route: HttpRoute;
  path: string | null;
  /** The path entry that matched (an exact path, or a prefix without its trailing "/"), "/" for a route without paths: what a rewrite replaces. */
  match: string;
}

export class HttpRoutes {
  /** Every list a route enforces (a change to one re-checks this listener's connections). */
  readonly lists: ReadonlySet<LiveList>;

  constructor(
    readonly table: RouteTable,
    readonly routes: readonly HttpRoute[],
    readonly version: RoutesVersion,
    /** The upstream groups by target list (reused by the next compile). */
    readonly groups: ReadonlyMap<string, UpstreamGroup>,
    /** The groups with health rules, by the first route using each (the target gauge). */
    readonly health: readonly HealthSource[],
  ) {
    this.lists = new Set(routes.map((r) => r.list));
  }

  /**
   * The route for a request's Host (header, or the absolute-form authority) and its target (path
   * and query, origin form), or why none: route_no_host / route_no_path (404), route_bad_path and
   * route_path_params (400).
   */
  lookup(host: string, target: string): RouteHit | RouteMissReason {
    let path: string | null = null;
    let lookupTarget = target;
    if (plainPathEnd(target) < 0) {
      const normal = normalizePath(target, this.table.pathParameters);
      if (typeof normal !== 'string') return normal.reason;
      const q = target.indexOf('?');
      path = q === -1 ? normal : normal + target.slice(q);
      lookupTarget = matchForm(normal);
    }
    const r = this.table.lookup(host, lookupTarget);
    if (r.kind === 'miss') return r.reason;
    return { route: this.routes[r.routeIndex]!, path, match: r.path?.path ?? '/' };
  }
}

interface HttpRouteDeps {
  listener: Readonly<ListenerConfig>;
  lists: LiveLists;
  stats: ListenerStats;
  log: Logger;
  /** The listener's own group (routes without upstreams) and 403s (routes without deniedBody). */
  listenerGroup: UpstreamGroup;
  listenerCanned: CannedResponses;
  /** The groups of the routes in force (reused when a target list is unchanged), or null. */
  previous: HttpRoutes | null;
  /** The process's limit zones (a reload's routes keep their buckets); absent: zones of their own. */
  limits?: LimitZones;
}

/** Build every route of a listener (throws RouteTableError or Error, touching nothing in force). */
export function compileHttpRoutes(routes: readonly RouteConfig[], version: RoutesVersion, deps: HttpRouteDeps): HttpRoutes {
  const table = RouteTable.compile(routes, {
    kind: 'http',
    at: `listeners (${deps.listener.name}).routes`,
    pathParameters: deps.listener.http.pathParameters,
  });
  const groups = new Map<string, UpstreamGroup>();
  const prior = deps.previous?.groups;
  const h = deps.listener.http;
  const health: HealthSource[] = [];
  if (deps.listenerGroup.health !== null) health.push({ route: '', targets: deps.listenerGroup.targets });
  const compiled = routes.map((rc, i) => {
    let group = deps.listenerGroup;
    const protocol = rc.http?.upstreamProtocol;
    if (
      rc.upstreams !== undefined ||
      rc.upstreamHealth !== undefined ||
      (protocol !== undefined && protocol !== h.upstreamProtocol) ||
      rc.http?.upstreamCA !== undefined
    ) {
      // A group of its own: its targets, or the listener's under other health rules or spoken in
      // another protocol. Kept across reloads by targets, rules and protocol (a target's health
      // state survives a reload that keeps them).
      const targets = rc.upstreams ?? deps.listener.upstreams;
      const rules = rc.upstreamHealth ?? deps.listener.upstreamHealth ?? NO_UPSTREAM_HEALTH;
      const p = protocol ?? h.upstreamProtocol;
      const ca = p === 'h2' ? (rc.http?.upstreamCA ?? h.upstreamCA) : null;
      const key = `${p === 'http1' ? '' : `${p} ${ca ?? ''} `}${groupKey(targets, rules)}`;
      let g = groups.get(key) ?? prior?.get(key);
      if (g === undefined) g = buildGroup(targets, rules, http2Upstream(p, ca));
      if (g.health !== null && !groups.has(key)) health.push({ route: rc.name, targets: g.targets });
      groups.set(key, g);
      group = g;
    }
    const list = deps.lists.get(rc.allowlist ?? deps.listener.allowlist);
    const headers = rc.http?.requestHeaders;
    const requestHeaders =
      headers === undefined || Object.keys(headers).length === 0
        ? null
        : Object.freeze(Object.entries(headers).map(([k, v]) => Object.freeze([k.toLowerCase(), v] as const)));
    const canned = rc.http?.deniedBody !== undefined ? new CannedResponses(rc.http.deniedBody) : deps.listenerCanned;
    const rules = compileEdgeRules({
      listener: deps.listener,
      route: rc,
      canned,
      stats: deps.stats,
      group,
      limits: deps.limits,
      lists: deps.lists,
    });
    return new HttpRoute(
      rc.name,
      i,
      rc,
      list,
      new Admission(list, deps.stats, deps.log),
      group,
      rc.http?.upstreamTimeoutMs ?? h.upstreamTimeoutMs,
      requestHeaders,
      canned,
      deps.stats.httpRoute(rc.name),
      rules,
    );
  });
  return new HttpRoutes(table, compiled, version, groups, health);
}

/**
 * An upstream group's HTTP/2 side (`upstreamProtocol`), or null for HTTP/1.1. The CA file was
 * checked at config load (validate.ts); it is read here once per group built.
 */
export function http2Upstream(protocol: 'http1' | 'h2c' | 'h2', caFile: string | null): Http2Upstream | null {
  if (protocol === 'http1') return null;
  return Object.freeze({ tls: protocol === 'h2', ca: protocol === 'h2' && caFile !== null ? fs.readFileSync(caFile) : null });
}
