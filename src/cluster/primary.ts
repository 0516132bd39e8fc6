/**
 * `workers: N | auto` (N > 1): the primary process. It owns the store, the admin API and the
 * pod-wide `/metrics`; the workers own the listeners (node:cluster shares the sockets).
 *
 * - An admin write is stored, applied here, sent to every worker, and acknowledged only once every
 *   live worker has acked it (ClusterAllowlistService). A worker that does not ack within
 *   APPLY_TIMEOUT_MS is killed and replaced; the replacement starts from the current lists.
 * - A crashed worker is replaced with backoff (worker-pool.ts).
 * - SIGTERM/SIGINT: the admin API closes, every worker drains (bounded by drainTimeoutMs), then the
 *   primary exits. A second signal kills the workers.
 *
 * Scheduling: SCHED_RR (the primary accepts and passes each handle to the next worker) measured
 * against SCHED_NONE (the kernel hands each accept to whichever worker wakes first) in
 * bench/README.md "Workers": RR spreads long-lived keep-alive connections evenly, which is what
 * HTTP throughput depended on; NODE_CLUSTER_SCHED_POLICY=rr|none overrides the choice.
 */
import cluster from 'node:cluster';
import os from 'node:os';
import type { Logger } from 'pino';
import type { AllowEntry } from '../allowlist/entry';
import { buildAdminApp } from '../admin/admin-app';
import { startAdminServer, type AdminServer } from '../admin/admin-server';
import { loadTokens } from '../admin/auth';
import type { MetricsEndpoint } from '../admin/routes/metrics';
import { readiness, VERSION } from '../admin/start-admin';
import { AuditLog } from '../audit/audit-log';
import type { Config } from '../config/schema';
import { startEcho, type EchoServers } from '../echo/echo-server';
import { clusterExposition } from '../metrics/cluster';
import { Metrics } from '../metrics/metrics';
import { AllowlistService, type ChangeResult, type Precondition } from '../store/allowlist-service';
import { createStore } from '../store/create-store';
import { LiveLists } from '../store/live-lists';
import type { AllowlistStore } from '../store/store';
import { WorkerPool } from './worker-pool';

/** The scheduling policy chosen with bench/load (see the file comment). */
export const SCHEDULING: 'rr' | 'none' = 'rr';

/** `workers` from the config as a process count: `auto` is one per available core. */
export function workerCount(workers: number | 'auto', cores = os.availableParallelism()): number {
  return workers === 'auto' ? Math.max(1, cores) : workers;
}

/** The service the admin API writes through: each change is acknowledged after every worker applied it. */
export class ClusterAllowlistService extends AllowlistService {
  constructor(store: AllowlistStore, lists: LiveLists, audit: AuditLog, logger: Logger, private readonly pool: WorkerPool) {
    super(store, lists, audit, logger);
  }

  override async replace(name: string, entries: readonly AllowEntry[], ifMatch: Precondition, who: string): Promise<ChangeResult> {
    const r = await super.replace(name, entries, ifMatch, who);
    await this.pool.settled();
    return r;
  }

  override async add(name: string, entries: readonly AllowEntry[], ifMatch: Precondition, who: string): Promise<ChangeResult> {
    const r = await super.add(name, entries, ifMatch, who);
    await this.pool.settled();
    return r;
  }

  override async remove(name: string, cidr: string, ifMatch: Precondition, who: string): Promise<ChangeResult> {
    const r = await super.remove(name, cidr, ifMatch, who);
    await this.pool.settled();
    return r;
  }
}

/** Run the primary until it is stopped; resolves with the exit code. */
export async function runPrimary(config: Config, logger: Logger, n: number): Promise<number> {
  if (process.env.NODE_CLUSTER_SCHED_POLICY === undefined) {
    cluster.schedulingPolicy = SCHEDULING === 'rr' ? cluster.SCHED_RR : cluster.SCHED_NONE;
  }
  const lists = new LiveLists();
  const pool = new WorkerPool(lists, logger);
  const store = createStore(config.store, logger);
  const service = new ClusterAllowlistService(store, lists, new AuditLog(logger, config.admin.auditHistory), logger, pool);
  const metrics = new Metrics({ version: VERSION });
  metrics.setAllowlists(lists, store);
  let admin: AdminServer | null = null;
  // The demo echo backend runs once, here (workers start without it).
  let echo: EchoServers | null = null;
  try {
    await service.start(new Map<string, readonly AllowEntry[]>(Object.entries(config.allowlists)));
    if (config.echo) echo = await startEcho(config.echo);
    logger.info({ workers: n, scheduling: cluster.schedulingPolicy === cluster.SCHED_RR ? 'rr' : 'none' }, 'starting workers');
    await pool.start(n);
    if (config.admin.listen !== null) {
      const endpoint: MetricsEndpoint = {
        contentType: metrics.contentType,
        scrape: async () => clusterExposition(metrics, await pool.scrape()),
        adminRequest: (route, method, status) => metrics.adminRequest(route, method, status),
      };
      const tokens = loadTokens(config.admin);
      const app = await buildAdminApp({
        service, tokens, logger, bodyLimit: config.admin.bodyLimit, version: VERSION, metrics: endpoint,
        readiness: () => {
          const r = readiness(service, []);
          const ready = pool.readyCount;
          r.checks[0] = ready === n
            ? { name: 'listeners', status: 'ok', message: `${n} worker(s) listening` }
            : { name: 'listeners', status: 'error', message: `${ready} of ${n} worker(s) listening` };
          r.ready = r.ready && ready === n;
          return r;
        },
      });
      admin = await startAdminServer(app, config.admin.listen);
      logger.info({ address: admin.address.address, port: admin.address.port, tokens: tokens.entries.map((e) => e.name) }, 'admin API listening');
    }
  } catch (err) {
    logger.fatal({ err }, (err as Error).message);
    pool.kill();
    await admin?.close();
    await echo?.close();
    await service.close();
    lists.close();
    return 1;
  }
  logger.info({ workers: n }, 'ready');

  return new Promise<number>((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (++signals > 1) {
        logger.warn({ signal }, 'second signal: killing the workers without waiting for connections');
        pool.kill();
        resolve(1);
        return;
      }
      logger.info({ signal, drainTimeoutMs: config.shutdown.drainTimeoutMs, workers: pool.size }, 'stopping: workers drain their connections');
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
