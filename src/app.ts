/**
 * Wiring: builds each stage with its dependencies and starts the listeners. No logic of its own.
 */
import type { Logger } from 'pino';
import { AccessLog } from './access-log/access-log';
import type { Config } from './schema/config';
import { startEcho, type EchoServers } from './echo/echo-server';
import { TcpForwarder } from './forward/tcp/tcp-forwarder';
import { HttpForwarder } from './forward/http/http-forwarder';
import { Listener, type ConnectionHandler } from './listener/listener';
import { ListenerStats } from './metrics/listener-stats';
import { Metrics } from './metrics/metrics';
import { LiveLists } from './store/live-lists';
import type { AllowlistService } from './store/allowlist-service';
import { startAllowlistService } from './store/start-service';
import type { AdminServer } from './admin/admin-server';
import { VERSION } from './version';
import { SelfChecks } from './selfcheck/self-checks';
import { CertStore } from './tls/cert-store';
import type { TicketKeys } from './tls/session-tickets';
import { TlsTerminator } from './tls/terminate';
import { TlsStats } from './metrics/tls-stats';
import type { RouteReceiver } from './route/route-receiver';
import { RoutesInForce, routesVersion, swapRoutes, type RouteSwapResult, type RoutesUpdate } from './route/routes-in-force';
import { LimitZones } from './limit/limit-zones';

export interface App {
  readonly config: Config;
  readonly lists: LiveLists;
  readonly listeners: readonly Listener[];
  /** The allowlist store and its write path (admin API, external edits). */
  readonly service: AllowlistService;
  /** The admin API, or null when `admin.listen` is null. */
  readonly admin: AdminServer | null;
  /** Source NAT suspicion and PROXY trust counts per listener (/readyz, metrics, log). */
  readonly selfChecks: SelfChecks;
  /** Every metric of this process (served at the admin API's /metrics). */
  readonly metrics: Metrics;
  /** The per-client limits' zones (a cluster worker shares them with the others). */
  readonly limits: LimitZones;
  /** The listeners' routes in force (admin API: GET /v1/routes, explain). */
  readonly routes: RoutesInForce;
  /**
   * Replace the listeners' routes (a config reload, already validated and planned:
   * route/routes-in-force.ts): all listeners compile, then all swap; on problems nothing changes.
   */
  replaceRoutes(update: RoutesUpdate): RouteSwapResult;
  /** Stop accepting, wait up to `drainTimeoutMs` for open connections, then close the rest. */
  shutdown(drainTimeoutMs?: number): Promise<void>;
}

interface AppOptions {
  logger: Logger;
  /** The config file: watched for `source: config` lists, named in the 409 of an API write to one. */
  configFile?: string | null;
  /**
   * Session ticket keys by listener name, owned elsewhere (a cluster worker's, which the primary
   * sends: tls/session-tickets.ts). A TLS listener not in it makes and rotates its own.
   */
  ticketKeys?: ReadonlyMap<string, TicketKeys>;
}

export async function startApp(config: Config, { logger, configFile = null, ticketKeys }: AppOptions): Promise<App> {
  const lists = new LiveLists();
  // The store is loaded and applied before any listener accepts.
  const service = await startAllowlistService(config, lists, logger, configFile);

  const echo: EchoServers | null = config.echo ? await startEcho(config.echo) : null;

  const selfChecks = new SelfChecks(config.clusterNetworks, logger);
  const metrics = new Metrics({ version: VERSION });
  metrics.setAllowlists(lists, service.store);
  metrics.setSelfChecks(selfChecks);
  // The access log's lines (logging.access), or with them off the denial summary.
  const access = AccessLog.wanted(config.logging) ? new AccessLog(logger, config.logging) : null;
  const listeners: Listener[] = [];
  // Every limit zone of this process (src/limit/limit-zones.ts); a cluster worker connects it to
  // the others (cluster/worker.ts).
  const limits = new LimitZones();
  metrics.setLimits(limits);
  const certStores: CertStore[] = [];
  const receivers = new Map<string, RouteReceiver>();
  for (const lc of config.listeners) {
    const stats = new ListenerStats(lc.name);
    metrics.addListener(stats, lc.mode);
    const accessLog = access?.forListener(lc.name, lc.mode, lists.get(lc.allowlist), lc.mode === 'tcp' && lc.routes !== undefined) ?? null;
    let handler: ConnectionHandler;
    if (lc.mode === 'tcp') handler = new TcpForwarder(lc, logger, stats, lists, limits);
    else handler = new HttpForwarder(lc, logger, stats, lists.get(lc.allowlist), accessLog, config.revokeLive, limits);
    let tls: TlsTerminator | null = null;
    if (lc.tls !== null) {
      const store = new CertStore(lc.name, lc.tls, logger, ticketKeys?.get(lc.name));
      certStores.push(store);
      tls = new TlsTerminator(lc.tls, store, new TlsStats(lc.name), logger, lc.http.http2.enabled);
      metrics.addTls(tls.stats, store);
    }
    const listener = new Listener(lc, {
      list: lists.get(lc.allowlist),
      logger,
      handler,
      stats,
      selfCheck: selfChecks.add(lc, stats, lists),
      accessLog,
      tls,
      revokeLive: config.revokeLive,
    });
    listeners.push(listener);
    receivers.set(lc.name, listener.routeReceiver);
  }
  const routes = new RoutesInForce(config.listeners, routesVersion(config.listeners));
  const replaceRoutes = (update: RoutesUpdate): RouteSwapResult => {
    const r = swapRoutes(receivers, update);
    if (r.problems.length === 0) routes.set(update);
    return r;
  };

  if (config.revokeLive) {
    lists.on('change', ({ list }) => {
      for (const l of listeners) {
        const { untrusted, revoked } = l.listChanged(list);
        if (untrusted > 0)
          logger.info({ listener: l.name, list: list.name, closed: untrusted }, 'closed connections from peers no longer trusted');
        if (revoked > 0) logger.info({ listener: l.name, list: list.name, closed: revoked }, 'closed connections no longer allowed');
      }
    });
  }

  let admin: AdminServer | null = null;
  try {
    for (const l of listeners) {
      const addr = await l.listen();
      logger.info(
        {
          listener: l.name,
          mode: l.config.mode,
          address: addr.address,
          port: addr.port,
          allowlist: l.config.allowlist,
          proxyProtocol: l.config.proxyProtocol.mode,
          // libuv handles, or net.Sockets (TLS, TCP upstream names, IPGATE_TCP_HANDLES=0, a Node without them)
          sockets: l.rawSockets ? 'handles' : 'net',
        },
        'listening',
      );
    }
    for (const s of certStores) {
      s.start();
      logger.info({ listener: s.listener, certificates: s.describe() }, 'TLS certificates loaded');
    }
    selfChecks.start();
    access?.start();
    if (config.admin.listen !== null) {
      // Loaded only when used: a cluster worker (admin.listen null) never loads fastify and the
      // admin routes, which keeps its memory down (bench/README.md "Admin API in its own process").
      const { startAdmin } = require('./admin/start-admin') as typeof import('./admin/start-admin');
      admin = await startAdmin(config, service, listeners, logger, selfChecks, metrics, routes);
    }
  } catch (err) {
    for (const s of certStores) s.stop();
    selfChecks.stop();
    access?.stop();
    await service.close();
    for (const l of listeners) l.stopAccepting();
    await echo?.close();
    throw err;
  }

  let shuttingDown: Promise<void> | null = null;
  const shutdown = (drainTimeoutMs = config.shutdown.drainTimeoutMs): Promise<void> => {
    shuttingDown ??= (async () => {
      await admin?.close();
      selfChecks.stop();
      for (const l of listeners) l.stopAccepting();
      for (const s of certStores) s.stop();
      const deadline = Date.now() + drainTimeoutMs;
      const open = (): number => listeners.reduce((n, l) => n + l.connections.size, 0);
      while (open() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const left = open();
      if (left > 0) logger.warn({ connections: left }, 'drain timeout: closing remaining connections');
      for (const l of listeners) l.destroyAll('drain');
      access?.stop();
      lists.close();
      await service.close();
      await echo?.close();
    })();
    return shuttingDown;
  };

  return { config, lists, listeners, service, admin, selfChecks, metrics, routes, replaceRoutes, shutdown, limits };
}
