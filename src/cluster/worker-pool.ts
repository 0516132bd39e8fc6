/**
 * The primary's view of its workers: forks them, replaces a crashed one (with backoff), sends every
 * allowlist change to all of them and knows which change each has applied, hands them the TLS
 * session ticket keys, gathers their metrics, self-checks and live connections for the admin API,
 * and drains them.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { backoffDelay, type BackoffPolicy } from '../kube/backoff';
import type { ConnectionsPage } from '../admin/routes/connections';
import type { MetricJson } from '../metrics/published';
import { joinMetricParts } from '../metrics/cluster';
import type { SelfCheckReadiness } from '../selfcheck/self-checks';
import type { LiveLists } from '../store/live-lists';
import type { LogLevel } from '../log';
import type { RoutesUpdate } from '../route/routes-in-force';
import { encodeTicketKeys, isIpgateMessage, type ListState, type ToPrimary, type ToWorker } from './protocol';

/** Replacement delay after a crash: 100 ms doubling to 10 s; reset once a worker lived a minute. */
const RESPAWN_BACKOFF: BackoffPolicy = { initialMs: 100, maxMs: 10_000 };
const STABLE_MS = 60_000;
/** A worker that has not applied a change within this time is killed and replaced (it gets the lists at start). */
export const APPLY_TIMEOUT_MS = 5_000;
/** The same for a worker still starting (Node start-up and compiling the lists): replaced after this. */
const START_TIMEOUT_MS = 30_000;
/** A scrape waits this long for each worker's metrics; a silent worker is left out. */
const SCRAPE_TIMEOUT_MS = 2_000;
/**
 * /readyz and /v1/connections wait this long for each worker; a silent worker is left out (and
 * reported by /readyz). Below the chart's probe timeout (2 s), so a hung worker cannot fail the
 * probe by timeout: it shows as a missing answer instead.
 */
const DIAGNOSTICS_TIMEOUT_MS = 1_000;

interface Slot {
  worker: Worker;
  /** Highest broadcast seq this worker has applied (-1: none yet). */
  applied: number;
  versions: Record<string, string>;
  ready: boolean;
  startedAt: number;
  /** Its requests in progress per concurrency zone and client (`key \0 client`), given back if it dies. */
  held: Map<string, number>;
}

export class WorkerPool {
  private readonly slots = new Map<number, Slot>();
  private seq = 0;
  private waiters: Array<() => void> = [];
  private requestId = 0;
  /** Requests to workers waiting for their answer (metrics, self-checks, connections), by id. */
  private readonly requests = new Map<number, (reply: unknown) => void>();
  /** The metrics parts received so far for a scrape request, by request id (metrics/cluster.ts). */
  private readonly metricParts = new Map<number, MetricJson[][]>();
  private crashes = 0;
  /** Set at runtime (PUT /v1/log-level): sent to each new worker too. null: the config's. */
  private logLevel: LogLevel | null = null;
  /** The routes of the last config reload (null: none since the start). */
  private routes: RoutesUpdate | null = null;
  /** The TLS listeners' session ticket keys in force (null: none, no listener has tickets). */
  private ticketKeys: Record<string, string> | null = null;
  private stopping = false;
  private readonly exitWaiters: Array<() => void> = [];
  private readyWaiter: { n: number; resolve: () => void; reject: (e: Error) => void } | null = null;

  constructor(
    private readonly lists: LiveLists,
    private readonly logger: Logger,
  ) {
    // Every applied change of the primary's lists goes to every worker. Expiry is not sent: each
    // worker holds the entries and rebuilds at expiresAt itself (LiveLists' own timer).
    lists.on('change', ({ list, cause }) => {
      if (cause !== 'update') return;
      const seq = ++this.seq;
      const entries = lists.has(list.name) ? lists.entries(list.name) : null;
      this.broadcast({ t: 'ipgate:list', seq, name: list.name, entries, version: list.version });
    });
  }

  get size(): number {
    return this.slots.size;
  }

  get readyCount(): number {
    let n = 0;
    for (const s of this.slots.values()) if (s.ready) n++;
    return n;
  }

  /** Per worker: pid, ready, and the list versions it has applied (readiness, tests). */
  state(): Array<{ id: number; pid: number | undefined; ready: boolean; applied: number; versions: Record<string, string> }> {
    return [...this.slots.values()].map((s) => ({
      id: s.worker.id,
      pid: s.worker.process.pid,
      ready: s.ready,
      applied: s.applied,
      versions: s.versions,
    }));
  }

  /** Fork `n` workers and wait until every one has bound its listeners; a worker dying first fails the start. */
  start(n: number): Promise<void> {
    cluster.on('exit', (worker, code, signal) => this.onExit(worker, code, signal));
    const ready = new Promise<void>((resolve, reject) => (this.readyWaiter = { n, resolve, reject }));
    for (let i = 0; i < n; i++) this.fork();
    return ready;
  }

  /** Resolves once every live worker has applied every change broadcast so far (or died). */
  settled(): Promise<void> {
    const target = this.seq;
    if (this.allApplied(target)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      // A running worker that does not ack in time is replaced; a starting one (its listeners may
      // already accept) acks when it is up, so it gets the longer start timeout.
      const laggards = (starting: boolean): void => {
        for (const s of this.slots.values()) {
          if (s.applied >= target || s.ready === starting) continue;
          const ms = starting ? START_TIMEOUT_MS : APPLY_TIMEOUT_MS;
          this.logger.error(
            { worker: s.worker.id, pid: s.worker.process.pid, seq: target, applied: s.applied },
            `worker did not apply an allowlist change within ${ms} ms: replacing it`,
          );
          s.worker.process.kill('SIGKILL');
        }
      };
      const timers = [setTimeout(() => laggards(false), APPLY_TIMEOUT_MS), setTimeout(() => laggards(true), START_TIMEOUT_MS)];
      const check = (): void => {
        if (!this.allApplied(target)) {
          this.waiters.push(check);
          return;
        }
        for (const t of timers) clearTimeout(t);
        resolve();
      };
      this.waiters.push(check);
    });
  }

  /** Every worker's metrics as JSON (the ones that answered within the timeout). */
  async scrape(): Promise<MetricJson[][]> {
    return (await this.ask<MetricJson[]>((id) => ({ t: 'ipgate:metrics', id }), SCRAPE_TIMEOUT_MS)).map((a) => a.reply);
  }

  /** Every ready worker's self-checks for /readyz (SelfChecks.readinessChecks), with its id. */
  selfChecks(): Promise<Array<{ worker: number; reply: SelfCheckReadiness[] }>> {
    return this.ask<SelfCheckReadiness[]>((id) => ({ t: 'ipgate:checks', id }), DIAGNOSTICS_TIMEOUT_MS);
  }

  /** Every ready worker's live connections for /v1/connections, with its id. */
  connections(listener: string | undefined, limit: number): Promise<Array<{ worker: number; reply: ConnectionsPage }>> {
    return this.ask<ConnectionsPage>((id) => ({ t: 'ipgate:connections', id, listener: listener ?? null, limit }), DIAGNOSTICS_TIMEOUT_MS);
  }

  /** Send a request to every ready worker; the answers that came within `timeoutMs`. */
  private async ask<T>(request: (id: number) => ToWorker, timeoutMs: number): Promise<Array<{ worker: number; reply: T }>> {
    const asks = [...this.slots.values()]
      .filter((s) => s.ready)
      .map(
        (s) =>
          new Promise<{ worker: number; reply: T } | null>((resolve) => {
            const id = ++this.requestId;
            const timer = setTimeout(() => {
              this.requests.delete(id);
              this.metricParts.delete(id);
              resolve(null);
            }, timeoutMs);
            this.requests.set(id, (reply) => {
              clearTimeout(timer);
              this.requests.delete(id);
              resolve({ worker: s.worker.id, reply: reply as T });
            });
            this.send(s.worker, request(id));
          }),
      );
    return (await Promise.all(asks)).filter((a): a is { worker: number; reply: T } => a !== null);
  }

  /** Ask every worker to drain; resolves when all have exited, SIGKILLing the rest after `timeoutMs`. */
  async drain(timeoutMs: number): Promise<void> {
    this.stopping = true;
    if (this.slots.size === 0) return;
    for (const s of this.slots.values()) this.send(s.worker, { t: 'ipgate:drain' });
    const all = new Promise<void>((resolve) => this.exitWaiters.push(resolve));
    const timer = setTimeout(() => {
      for (const s of this.slots.values()) {
        this.logger.warn({ worker: s.worker.id }, 'worker did not finish draining: killing it');
        s.worker.process.kill('SIGKILL');
      }
    }, timeoutMs);
    await all;
    clearTimeout(timer);
  }

  /** Stop at once (second signal): SIGKILL every worker. */
  kill(): void {
    this.stopping = true;
    for (const s of this.slots.values()) s.worker.process.kill('SIGKILL');
  }

  private fork(): void {
    const worker = cluster.fork();
    const slot: Slot = { worker, applied: -1, versions: {}, ready: false, startedAt: Date.now(), held: new Map() };
    this.slots.set(worker.id, slot);
    worker.on('message', (m: unknown) => this.onMessage(slot, m));
    // A worker's IPC channel can fail while it dies (EPIPE): the exit event handles it.
    worker.on('error', (err) => this.logger.debug({ worker: worker.id, err: err.message }, 'worker channel error'));
  }

  private onMessage(slot: Slot, m: unknown): void {
    if (!isIpgateMessage<ToPrimary>(m)) return;
    switch (m.t) {
      case 'ipgate:hello':
        // The keys first: the worker starts its listeners when the lists arrive, and the channel
        // keeps the order, so its first handshake already uses the keys every other worker has.
        if (this.ticketKeys !== null) this.send(slot.worker, { t: 'ipgate:ticket-keys', keys: this.ticketKeys });
        this.send(slot.worker, { t: 'ipgate:lists', seq: this.seq, lists: this.snapshot() });
        if (this.logLevel !== null) this.send(slot.worker, { t: 'ipgate:log-level', level: this.logLevel });
        // A worker loads the config file at its start; the routes in force may be another version.
        if (this.routes !== null) this.send(slot.worker, { t: 'ipgate:routes', update: this.routes });
        break;
      case 'ipgate:applied':
        slot.applied = Math.max(slot.applied, m.seq);
        slot.versions = m.versions;
        this.wake();
        break;
      case 'ipgate:ready':
        slot.ready = true;
        this.limitSnapshot(slot);
        this.logger.debug({ worker: slot.worker.id, pid: slot.worker.process.pid }, 'worker ready');
        if (this.readyWaiter !== null && this.readyCount >= this.readyWaiter.n) {
          this.readyWaiter.resolve();
          this.readyWaiter = null;
        }
        break;
      case 'ipgate:metrics-part': {
        if (!this.requests.has(m.id)) break; // timed out
        const parts = this.metricParts.get(m.id);
        if (parts === undefined) this.metricParts.set(m.id, [m.json]);
        else parts.push(m.json);
        break;
      }
      case 'ipgate:metrics': {
        const parts = this.metricParts.get(m.id);
        this.metricParts.delete(m.id);
        this.requests.get(m.id)?.(parts === undefined ? m.json : joinMetricParts([...parts, m.json]));
        break;
      }
      case 'ipgate:checks':
        this.requests.get(m.id)?.(m.checks);
        break;
      case 'ipgate:connections':
        this.requests.get(m.id)?.(m.page);
        break;
      case 'ipgate:limit':
        this.limitOps(slot, m.ops);
        break;
    }
  }

  /**
   * A worker's limit accepts (src/limit/limit-zones.ts): relayed to every other worker at once;
   * its requests in progress (concurrency zones, keys `c|...`) are tallied, to be given back if it dies.
   */
  private limitOps(from: Slot, ops: (string | number)[]): void {
    for (let i = 0; i + 2 < ops.length; i += 3) {
      const key = ops[i] as string;
      if (key.charCodeAt(0) !== 0x63) continue; // 'c'
      const k = `${key}\0${ops[i + 1] as string}`;
      const n = (from.held.get(k) ?? 0) + (ops[i + 2] as number);
      if (n === 0) from.held.delete(k);
      else from.held.set(k, n);
    }
    const m: ToWorker = { t: 'ipgate:limit', ops };
    for (const s of this.slots.values()) if (s !== from) this.send(s.worker, m);
  }

  /**
   * A worker that just started (a replacement) learns the requests in progress the others hold,
   * so its limit_conn counts them from its first request (src/limit/limit-zones.ts).
   */
  private limitSnapshot(to: Slot): void {
    const ops: (string | number)[] = [];
    for (const s of this.slots.values()) {
      if (s === to) continue;
      for (const [k, n] of s.held) {
        const cut = k.indexOf('\0');
        ops.push(k.slice(0, cut), k.slice(cut + 1), n);
      }
    }
    if (ops.length > 0) this.send(to.worker, { t: 'ipgate:limit', ops });
  }

  private onExit(worker: Worker, code: number | null, signal: string | null): void {
    const slot = this.slots.get(worker.id);
    if (!slot) return;
    this.slots.delete(worker.id);
    if (slot.held.size > 0) {
      // Its requests in progress are over: the other workers stop counting them.
      const ops: (string | number)[] = [];
      for (const [k, n] of slot.held) {
        const cut = k.indexOf('\0');
        ops.push(k.slice(0, cut), k.slice(cut + 1), -n);
      }
      slot.held.clear();
      const m: ToWorker = { t: 'ipgate:limit', ops };
      for (const s of this.slots.values()) this.send(s.worker, m);
    }
    this.wake();
    if (this.stopping) {
      if (this.slots.size === 0) for (const w of this.exitWaiters.splice(0)) w();
      return;
    }
    if (this.readyWaiter !== null) {
      // Dying before the first ready is a start failure (bind error, bad config): no crash loop.
      const waiter = this.readyWaiter;
      this.readyWaiter = null;
      this.kill();
      waiter.reject(new Error(`worker ${worker.id} exited during start (code ${code}, signal ${signal})`));
      return;
    }
    if (Date.now() - slot.startedAt > STABLE_MS) this.crashes = 0;
    const delay = backoffDelay(RESPAWN_BACKOFF, this.crashes++);
    this.logger.error({ worker: worker.id, pid: worker.process.pid, code, signal, respawnInMs: delay }, 'worker exited: replacing it');
    setTimeout(() => {
      if (!this.stopping) this.fork();
    }, delay).unref();
  }

  private snapshot(): ListState[] {
    return this.lists
      .names()
      .filter((n) => this.lists.has(n))
      .map((name) => ({ name, entries: this.lists.entries(name), version: this.lists.get(name).version }));
  }

  /**
   * Every worker, starting ones included: a worker still starting binds its listeners before it
   * applies the changes that arrived meanwhile (worker.ts), so it must be waited for too. One that
   * has not said hello yet will get a snapshot that already holds the change, and acks it.
   */
  private allApplied(seq: number): boolean {
    for (const s of this.slots.values()) if (s.applied < seq) return false;
    return true;
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /**
   * The runtime log level for every worker, now and for those forked later (PUT /v1/log-level).
   * Sent like a list change; not acknowledged (a worker that misses it logs at the old level).
   */
  setLogLevel(level: LogLevel): void {
    this.logLevel = level;
    this.broadcast({ t: 'ipgate:log-level', level });
  }

  /**
   * The listeners' routes after a config reload, to every worker now and to those forked later.
   * Not acknowledged: each worker compiles and swaps on its own (cluster/worker.ts).
   */
  setRoutes(update: RoutesUpdate): void {
    this.routes = update;
    this.broadcast({ t: 'ipgate:routes', update });
  }

  /**
   * The TLS listeners' session ticket keys, to every worker now and to those forked later
   * (tls/session-tickets.ts ClusterTicketKeys calls it at start and at each rotation). Not
   * acknowledged: a worker that misses a rotation (it was dying) is replaced and gets the keys
   * at its hello.
   */
  setTicketKeys(keys: ReadonlyMap<string, Buffer>): void {
    this.ticketKeys = encodeTicketKeys(keys);
    this.broadcast({ t: 'ipgate:ticket-keys', keys: this.ticketKeys });
  }

  private broadcast(m: ToWorker): void {
    for (const s of this.slots.values()) this.send(s.worker, m);
  }

  private send(worker: Worker, m: ToWorker): void {
    if (worker.isConnected()) worker.send(m);
  }
}
