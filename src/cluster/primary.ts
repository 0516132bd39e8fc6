/**
 * The primary process of `workers: N | auto` (N > 1), and of `workers: 1` with the admin API on
 * (`admin.separateProcess`, default true). It owns the store, the admin API and the pod-wide
 * `/metrics`; the workers own the listeners (node:cluster shares the sockets).
 *
 * Why one worker and not one process at `workers: 1`: the admin API's fastify server and the data
 * path's HTTP servers share Node's http and stream internals. In one isolate, a single admin request
 * (the chart's kubelet probes send one every 10 s) gives those functions a second set of hidden
 * classes; V8 re-optimises them polymorphic and the HTTP data path stays 13-16% dearer per request
 * for the rest of the process life (bench/README.md "Simultaneous pairs ..."). A separate process
 * is a separate isolate. `processModel` (process-model.ts) decides; `admin.separateProcess: false`
 * or no admin API keeps one process (main.ts).
 *
 * - An admin write is stored, applied here, sent to every worker, and acknowledged only once every
 *   live worker has acked it (ClusterAllowlistService). A worker that does not ack within
 *   APPLY_TIMEOUT_MS is killed and replaced; the replacement starts from the current lists.
 * - The TLS listeners' session ticket keys are made and rotated here and sent to every worker, a
 *   replacement included (tls/session-tickets.ts): a ticket resumes on any worker, whichever one
 *   issued it.
 * - A crashed worker is replaced with backoff (worker-pool.ts).
 * - SIGTERM/SIGINT: the admin API closes, every worker drains (bounded by drainTimeoutMs), then the
 *   primary exits. A second signal kills the workers.
 * - What the admin API reports about the listeners comes from the workers: /readyz asks them for
 *   their self-checks and /v1/connections for their connections (IPC, 1 s timeout each);
 *   /v1/explain decides here, from the listener configs and the primary's copy of the lists.
 *
 * Scheduling (`schedulingFor`): with several workers SCHED_RR (the primary accepts and passes each
 * handle to the next worker), measured against SCHED_NONE (the kernel hands each accept to
 * whichever worker wakes first) in bench/README.md "Workers": RR spreads long-lived keep-alive
 * connections evenly, which is what HTTP throughput depended on. With one worker there is nothing
 * to spread, and RR would only add an accept plus an IPC hand-off in the primary per connection:
 * SCHED_NONE, the worker accepts on the shared socket itself. NODE_CLUSTER_SCHED_POLICY=rr|none
 * overrides either choice.
 */
import cluster from 'node:cluster';
import type { Logger } from 'pino';
import type { AllowEntry } from '../allowlist/entry';
import { buildAdminApp } from '../admin/admin-app';
import { startAdminServer, type AdminServer } from '../admin/admin-server';
import { loadTokens } from '../admin/auth';
import { mergeConnectionPages } from '../admin/routes/connections';
import type { MetricsEndpoint } from '../admin/routes/metrics';
import { logAdminListening, readiness } from '../admin/start-admin';
import { AuditLog } from '../audit/audit-log';
import type { Config } from '../schema/config';
import { startEcho, type EchoServers } from '../echo/echo-server';
import { clusterExposition } from '../metrics/cluster';
import { Metrics } from '../metrics/metrics';
import { AllowlistService, type ChangeResult, type Precondition } from '../store/allowlist-service';
import { createStore } from '../store/create-store';
import { declaredLists, listSources } from '../store/start-service';
import type { ConfigMapLists } from '../config/configmap-lists';
import { ConfigWatcher } from '../config/watch';
import { watchHealth, type ReloadStatus } from '../config/reload-status';
import { routeReloader, RoutesInForce, routesVersion } from '../route/routes-in-force';
import { LiveLists } from '../store/live-lists';
import type { AllowlistStore } from '../store/store';
import { ClusterTicketKeys, ROTATE_MS } from '../tls/session-tickets';
import { VERSION } from '../version';
import { setLogLevel } from '../log';
import { explainTargets, mergeSelfChecks } from './diagnostics';
import { schedulingFor } from './process-model';
import { WorkerPool } from './worker-pool';

/** The service the admin API writes through: each change is acknowledged after every worker applied it. */
class ClusterAllowlistService extends AllowlistService {
  constructor(
    store: AllowlistStore,
    lists: LiveLists,
    audit: AuditLog,
    logger: Logger,
    private readonly pool: WorkerPool,
  ) {
    super(store, lists, audit, logger);
  }

  override async replace(name: string, entries: readonly AllowEntry[], ifMatch: Precondition, who: string): Promise<ChangeResult> {
    const r = await super.replace(name, entries, ifMatch, who);
    await this.pool.settled();
    return r;
  }

  override async add(
    name: string,
    entries: readonly AllowEntry[],
    ifMatch: Precondition,
    who: string,
    replace = false,
  ): Promise<ChangeResult> {
    const r = await super.add(name, entries, ifMatch, who, replace);
    await this.pool.settled();
    return r;
  }

  override async create(name: string, entries: readonly AllowEntry[], who: string): Promise<ChangeResult> {
    const r = await super.create(name, entries, who);
    await this.pool.settled();
    return r;
  }

  override async deleteList(name: string, ifMatch: Precondition, who: string): Promise<ChangeResult> {
    const r = await super.deleteList(name, ifMatch, who);
    await this.pool.settled();
    return r;
  }

  override async remove(name: string, cidr: string, ifMatch: Precondition, who: string): Promise<ChangeResult> {
    const r = await super.remove(name, cidr, ifMatch, who);
    await this.pool.settled();
    return r;
  }
}

/** Run the primary with `n` workers until it is stopped; resolves with the exit code. */
export async function runPrimary(
  config: Config,
  logger: Logger,
  n: number,
  reason = `workers: ${n}`,
  configFile: string | null = null,
  configMaps: ConfigMapLists | null = null,
  reloads: ReloadStatus | null = null,
): Promise<number> {
  // Read by node:cluster at the first fork; the environment variable, when set, has already chosen.
  if (process.env.NODE_CLUSTER_SCHED_POLICY === undefined) {
    cluster.schedulingPolicy = schedulingFor(n) === 'rr' ? cluster.SCHED_RR : cluster.SCHED_NONE;
  }
  const lists = new LiveLists();
  const pool = new WorkerPool(lists, logger);
  // The TLS listeners' session ticket keys are made and rotated here and handed to every worker
  // (a replacement too), so a ticket resumes on whichever worker the client reaches next; nginx's
  // master does the same for its workers (tls/session-tickets.ts, docs/tls.md "Session resumption").
  const tickets = new ClusterTicketKeys(
    config.listeners.filter((l) => l.tls?.sessionTickets === true).map((l) => l.name),
    (keys) => {
      pool.setTicketKeys(keys);
      logger.info({ listeners: [...keys.keys()] }, 'TLS session ticket keys rotated and sent to the workers');
    },
  );
  if (tickets.listeners.length > 0) pool.setTicketKeys(tickets.current());
  const store = createStore(config.store, logger);
  const service = new ClusterAllowlistService(store, lists, new AuditLog(logger, config.admin.auditHistory), logger, pool);
  const metrics = new Metrics({ version: VERSION });
  metrics.setAllowlists(lists, store);
  if (reloads !== null) metrics.setReloads(reloads);
  metrics.setWatches(() => watchHealth(configMaps, store));
  // The primary has no listeners: the admin API reads the routes here, the workers swap their own.
  const routes = new RoutesInForce(config.listeners, routesVersion(config.listeners));
  let admin = null as AdminServer | null; // set by startAdminApi (a closure: no narrowing to null)
  // The demo echo backend runs once, here (workers start without it).
  let echo: EchoServers | null = null;
  try {
    const { seed, options } = listSources(config, configFile);
    await service.start(seed, options);
    if (config.echo) echo = await startEcho(config.echo);
    logger.info({ workers: n, reason, scheduling: cluster.schedulingPolicy === cluster.SCHED_RR ? 'rr' : 'none' }, 'starting workers');
    if (tickets.listeners.length > 0) {
      tickets.start();
      logger.info({ listeners: tickets.listeners, rotateMs: ROTATE_MS }, 'TLS session ticket keys made here and shared by the workers');
    }
    const startAdminApi = async (listen: string): Promise<void> => {
      const endpoint: MetricsEndpoint = {
        contentType: metrics.contentType,
        scrape: async () => clusterExposition(metrics, await pool.scrape()),
        adminRequest: (route, method, status) => metrics.adminRequest(route, method, status),
        adminAuthFailure: (reason) => metrics.adminAuthFailure(reason),
      };
      const tokens = loadTokens(config.admin);
      const app = await buildAdminApp({
        service,
        tokens,
        logger,
        bodyLimit: config.admin.bodyLimit,
        version: VERSION,
        metrics: endpoint,
        allowedHosts: config.admin.allowedHosts,
        readiness: async () => {
          const r = readiness(service, []);
          const ready = pool.readyCount;
          r.checks[0] =
            ready === n
              ? { name: 'listeners', status: 'ok', message: `${n} worker(s) listening` }
              : { name: 'listeners', status: 'error', message: `${ready} of ${n} worker(s) listening` };
          r.ready = r.ready && ready === n;
          // The self-checks (source NAT, PROXY trust) live where the connections are: ask the workers.
          const answers = await pool.selfChecks();
          r.checks.push(...mergeSelfChecks(answers));
          if (answers.length < ready) {
            r.checks.push({
              name: 'self_checks',
              status: 'warn',
              message: `${ready - answers.length} of ${ready} listening worker(s) did not report their self-checks in time`,
            });
          }
          return r;
        },
        explainTargets: explainTargets(config, lists),
        routes,
        logLevel: {
          get: () => logger.level,
          set: (level) => {
            pool.setLogLevel(level);
            return setLogLevel(logger, level);
          },
        },
        connections: {
          names: config.listeners.map((l) => l.name),
          page: async (listener, limit) =>
            mergeConnectionPages(
              (await pool.connections(listener, limit)).map((a) => ({ worker: a.worker, page: a.reply })),
              limit,
            ),
        },
      });
      admin = await startAdminServer(app, listen);
      logAdminListening(admin, tokens, config, logger);
    };
    // The admin API is built while the workers start (each side spends hundreds of milliseconds
    // loading and compiling code, in separate processes); /readyz says not ready until they listen.
    const started = await Promise.allSettled([pool.start(n), config.admin.listen !== null ? startAdminApi(config.admin.listen) : null]);
    for (const r of started) if (r.status === 'rejected') throw r.reason;
  } catch (err) {
    logger.fatal({ err }, (err as Error).message);
    tickets.stop();
    pool.kill();
    await admin?.close();
    await echo?.close();
    await service.close();
    lists.close();
    await configMaps?.close();
    return 1;
  }
  logger.info({ workers: n }, 'ready');
  // source: config lists follow the file (and the ConfigMaps it names): applied here, sent to every
  // worker like any list change. One watch per pod, not per worker. Routes too: checked here against
  // the listeners the workers bound, then sent to every worker.
  const watcher =
    configFile === null
      ? null
      : new ConfigWatcher({
          file: configFile,
          logger,
          initial: config,
          configMaps,
          reloads,
          onConfig: async (next) => {
            await service.setDeclared(declaredLists(next, configFile));
          },
          onRoutes: routeReloader(config, logger, (update) => {
            // The tables compiled once already (config validation); a throw here must refuse, not crash.
            try {
              routes.set(update);
            } catch (err) {
              return { problems: [(err as Error).message], closed: {} };
            }
            pool.setRoutes(update);
            return { problems: [], closed: {} };
          }),
          onRefusal: (problems) => {
            service.configRefusal = problems;
          },
        });
  if (configMaps) service.declaredWatches = configMaps.status.bind(configMaps);
  watcher?.start();
  // SIGHUP: re-read the config file now (as a change of it would).
  process.on('SIGHUP', () => void watcher?.reload());

  return new Promise<number>((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (++signals > 1) {
        logger.warn({ signal }, 'second signal: killing the workers without waiting for connections');
        pool.kill();
        resolve(1);
        return;
      }
      logger.info(
        { signal, drainTimeoutMs: config.shutdown.drainTimeoutMs, workers: pool.size },
        'stopping: workers drain their connections',
      );
      watcher?.close();
      tickets.stop();
      void (async () => {
        await admin?.close();
        // Each worker closes what is left at drainTimeoutMs itself; the margin covers its exit.
        await pool.drain(config.shutdown.drainTimeoutMs + 5_000);
        await echo?.close();
        await service.close();
        lists.close();
        logger.info('stopped');
        resolve(0);
      })();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
