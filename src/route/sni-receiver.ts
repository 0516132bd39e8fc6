/**
 * A TCP listener's side of a routes reload (route-receiver.ts): the SNI routes compiled from the
 * new config without touching what is in force, then swapped in by Listener.replaceRoutes, and the
 * open connections re-checked against the lists of the routes that now hold them (revokeLive).
 * Turning SNI routing on or off for a listener changes its stages (ClientHello read or not), so
 * that is refused with "needs a restart", as a changed `mode` or `listen` is.
 */
import type { RouteConfig } from '../config/schema';
import type { Listener } from '../listener/listener';
import type { ListenerStats } from '../metrics/listener-stats';
import type { LiveList } from '../store/live-lists';
import type { RouteReceiver } from './route-receiver';
import { SniRoutes } from './sni-routes';

export function sniRouteReceiver(listener: Listener, lists: { get(name: string): LiveList }, stats: ListenerStats, revokeLive: boolean): RouteReceiver<SniRoutes | null> {
  const started = listener.config.routes !== undefined;
  return {
    routeKind: 'sni',
    compileRoutes(routes: readonly RouteConfig[] | undefined): SniRoutes | null {
      if ((routes !== undefined) !== started) {
        throw new Error(`SNI routing turned ${started ? 'off' : 'on'} for TCP listener "${listener.name}": its stages change, which needs a restart`);
      }
      if (routes === undefined) return null;
      const next = SniRoutes.compile({ ...listener.config, routes }, lists, stats);
      if (listener.rawSockets && !next.ipLiteralsOnly) {
        throw new Error(`listener "${listener.name}" relays on libuv handles, which dial IP addresses only: a route upstream that is a name needs a restart`);
      }
      return next;
    },
    replaceRoutes(next: SniRoutes | null): number {
      if (next === null) return 0;
      const closed = listener.replaceRoutes(next);
      return revokeLive ? closed + listener.revokeDenied() : closed;
    },
  };
}
