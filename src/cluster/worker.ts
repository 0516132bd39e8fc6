/**
 * A worker process (node:cluster): the data path only. It binds the listeners (the primary shares
 * the sockets), enforces the lists and uses the TLS session ticket keys the primary sends, answers
 * metrics scrapes and the admin API's diagnostics (self-checks for /readyz, live connections), and
 * drains on request.
 * No store, no admin API: the primary owns both, so a write is stored once and reaches every worker
 * over IPC before it is acknowledged (protocol.ts).
 */
import type { Logger } from 'pino';
import { liveConnections } from '../admin/routes/connections';
import { startApp, type App } from '../app';
import type { Config } from '../schema/config';
import { workerMetricsInParts } from '../metrics/cluster';
import { setLogLevel } from '../log';
import { TicketKeys } from '../tls/session-tickets';
import { workerCount } from './process-model';
import { decodeTicketKeys, isIpgateMessage, type ListState, type ToPrimary, type ToWorker } from './protocol';
import type { RoutesUpdate } from '../route/routes-in-force';

/**
 * A message to the primary. If the primary is gone the channel is closed: with a callback the
 * EPIPE goes to it instead of an unhandled 'error' on process (a crash with a stack trace); the
 * 'disconnect' handler below stops the worker.
 */
function send(m: ToPrimary): void {
  process.send?.(m, undefined, undefined, ignoreSendError);
}

function ignoreSendError(): void {}

/** Run one worker until it is drained; resolves with the exit code. */
export function runWorker(config: Config, logger: Logger): Promise<number> {
  let app: App | null = null;
  let seq = 0;
  /** Changes that arrived while the app was starting: applied right after, before `ready`. */
  const pending: Array<Extract<ToWorker, { t: 'ipgate:list' }>> = [];
  let resolveExit: (code: number) => void = () => undefined;
  const exited = new Promise<number>((r) => (resolveExit = r));
  let stopping = false;
  /** Routes that arrived while the app was starting: applied right after. */
  let pendingRoutes: RoutesUpdate | null = null;
  // The primary compiled these too (its config validation builds the same tables), so a refusal
  // here is unexpected; the worker keeps its routes and says so.
  const applyRoutes = (update: RoutesUpdate): void => {
    const r = app!.replaceRoutes(update);
    if (r.problems.length > 0) for (const p of r.problems) logger.error({ problem: p }, `routes not applied in this worker: ${p}`);
    else logger.debug({ routesVersion: update.version.hash, closed: r.closed }, 'routes applied');
  };

  // The TLS listeners' session ticket keys: the primary's (it sends them before the lists, so the
  // listeners start with them, and again at each rotation). A listener it sends none for (the
  // config file changed since the primary started) keeps making and rotating its own.
  const ticketKeys = new Map<string, TicketKeys>();
  for (const l of config.listeners) if (l.tls?.sessionTickets === true) ticketKeys.set(l.name, new TicketKeys());
  const adoptTicketKeys = (keys: Record<string, string>): void => {
    const adopted: string[] = [];
    for (const [name, key] of decodeTicketKeys(keys)) {
      const mine = ticketKeys.get(name);
      if (mine === undefined) continue;
      try {
        mine.adopt(key);
        adopted.push(name);
      } catch (err) {
        // The primary runs this same code, so this is our own fault; the key is not logged.
        logger.error(
          { listener: name, err: (err as Error).message },
          "TLS session ticket key from the primary refused: this worker's own stays",
        );
      }
    }
    logger.debug({ listeners: adopted }, 'TLS session ticket keys from the primary in force');
  };

  const versions = (): Record<string, string> => {
    const out: Record<string, string> = {};
    if (app) for (const name of app.lists.names()) if (app.lists.has(name)) out[name] = app.lists.get(name).version;
    return out;
  };

  const applyList = (m: Extract<ToWorker, { t: 'ipgate:list' }>): void => {
    if (m.entries === null) app!.lists.remove(m.name);
    else app!.lists.apply(m.name, m.entries, m.version);
    seq = Math.max(seq, m.seq);
  };

  const start = async (first: ListState[], firstSeq: number): Promise<void> => {
    // The worker's own store is a memory store seeded with the primary's lists, so the listeners
    // enforce them from their first connection; the primary's versions are then set on top.
    const allowlists: Config['allowlists'] = {};
    // Every list is a plain store list here: the primary owns the sources and sends the result.
    for (const l of first)
      allowlists[l.name] = {
        source: 'store',
        entries: l.entries.map((e) => ({ ...e })),
        file: null,
        configMap: null,
        allowTemporary: false,
      };
    const own: Config = {
      ...config,
      allowlists,
      store: { ...config.store, type: 'memory' },
      admin: { ...config.admin, listen: null },
      echo: null,
    };
    try {
      app = await startApp(own, { logger, ticketKeys });
    } catch (err) {
      logger.fatal({ err }, (err as Error).message);
      resolveExit(1);
      return;
    }
    // The limits are shared with the other workers through the primary (src/limit/limit-zones.ts);
    // a lone worker (workers: 1, the admin API apart) has no one to tell.
    if (workerCount(config.workers) > 1) app.limits.connect((ops) => send({ t: 'ipgate:limit', ops }));
    for (const l of first) app.lists.apply(l.name, l.entries, l.version);
    seq = firstSeq;
    for (const m of pending.splice(0)) applyList(m);
    if (pendingRoutes !== null) applyRoutes(pendingRoutes);
    pendingRoutes = null;
    send({ t: 'ipgate:applied', seq, versions: versions() });
    send({ t: 'ipgate:ready' });
    if (stopping) void drain();
  };

  const drain = async (): Promise<void> => {
    stopping = true;
    if (app === null) return; // start() drains once it is up (or has failed)
    await app.shutdown();
    resolveExit(0);
  };

  process.on('message', (m: unknown) => {
    if (!isIpgateMessage<ToWorker>(m)) return;
    switch (m.t) {
      case 'ipgate:ticket-keys':
        adoptTicketKeys(m.keys);
        break;
      case 'ipgate:lists':
        if (app === null) void start(m.lists, m.seq);
        break;
      case 'ipgate:list':
        if (app === null) {
          pending.push(m);
          break;
        }
        applyList(m);
        send({ t: 'ipgate:applied', seq, versions: versions() });
        break;
      case 'ipgate:metrics':
        if (app === null) break;
        // In parts, read in slices: one message of a large registry was a stall of this worker's
        // traffic (metrics/cluster.ts PART_SAMPLES).
        void workerMetricsInParts(app.metrics, (json) => send({ t: 'ipgate:metrics-part', id: m.id, json })).then((json) =>
          send({ t: 'ipgate:metrics', id: m.id, json }),
        );
        break;
      case 'ipgate:checks':
        if (app === null) break;
        send({ t: 'ipgate:checks', id: m.id, checks: app.selfChecks.readinessChecks() });
        break;
      case 'ipgate:connections':
        if (app === null) break;
        send({ t: 'ipgate:connections', id: m.id, page: liveConnections(app.listeners, m.listener ?? undefined, m.limit) });
        break;
      case 'ipgate:log-level':
        setLogLevel(logger, m.level);
        break;
      case 'ipgate:routes': {
        if (app === null) {
          pendingRoutes = m.update;
          break;
        }
        applyRoutes(m.update);
        break;
      }
      case 'ipgate:drain':
        void drain();
        break;
      case 'ipgate:limit':
        app?.limits.applyRemote(m.ops);
        break;
    }
  });
  // The primary is gone (killed): nobody will send lists or drain; stop at once.
  process.on('disconnect', () => {
    if (app === null) resolveExit(1);
    else void app.shutdown(0).then(() => resolveExit(0));
  });
  // A signal to the whole process group (Ctrl-C) reaches the workers too: drain, as the primary asks.
  process.on('SIGTERM', () => void drain());
  process.on('SIGINT', () => void drain());
  // SIGHUP to the process group reloads the config in the primary, which sends the routes here;
  // Node's default for SIGHUP would end the worker.
  process.on('SIGHUP', () => undefined);
  send({ t: 'ipgate:hello' });
  return exited;
}
