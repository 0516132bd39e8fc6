/**
 * What a listener's handler implements to take new routes live (docs/routes-and-sni.md "Reload").
 * Two steps, so a reload touching several listeners is all or nothing: every listener compiles
 * first (any failure refuses the whole reload and leaves every listener as it was), then each swaps
 * its compiled routes in with one reference assignment. HTTP listeners implement it
 * (forward/http/http-routes.ts via HttpForwarder); a TCP listener routing on SNI implements the
 * same two calls with `kind: 'sni'` tables.
 */
import type { RouteConfig } from '../schema/config';

/** Which routes are in force: a hash of the config's routes and when they were loaded. */
export interface RoutesVersion {
  /** sha256 of the listeners' routes as loaded, first 16 hex digits (same file, same hash). */
  readonly hash: string;
  /** ms epoch. */
  readonly loadedAt: number;
}

export interface RouteReceiver<Compiled = unknown> {
  readonly routeKind: 'http' | 'sni';
  /**
   * Build everything the routes need (route table, upstream groups, allowlist holders) without
   * touching what is in force. `routes` undefined: the listener goes back to no routing. Throws
   * (RouteTableError, Error) on anything that cannot be built.
   */
  compileRoutes(routes: readonly RouteConfig[] | undefined, version: RoutesVersion): Compiled;
  /**
   * Swap `compiled` in (one assignment), then re-decide the open connections against it:
   * those whose route disappeared close after their in-flight response (`route_removed`), and
   * with revokeLive those the route's list in `compiled` no longer admits (`revoked`); returns
   * how many were marked.
   */
  replaceRoutes(compiled: Compiled): number;
}
