/**
 * Limit zones: one per limit in the config (a listener's, or a route's own), as an nginx
 * `limit_req_zone` / `limit_conn_zone`, by a key that names its place and the parameters that shape
 * its table. A route compiled again by a reload with the same limit gets the same zone, so its
 * clients' buckets carry over (nginx keeps a zone across reloads the same way); a reload that
 * changes the rate, burst or size starts a new one. Held weakly: once no compiled route names a
 * zone, it goes with them.
 *
 * Across cluster workers (docs/edge-rules.md "Rate and connection limits"): every worker decides
 * each request at once from its own copy of each zone, and tells the others what it accepted
 * (LimitShare: one IPC message per worker per event-loop turn, relayed by the primary,
 * cluster/worker-pool.ts). A rate zone adds the other workers' accepted requests to its buckets as
 * if it had accepted them (RateTable.add), a concurrency zone counts the other workers' requests
 * in progress (ConcurrencyTable.addOthers). The data path never waits for the IPC: the copies
 * differ by what the other workers accepted during one propagation delay (about a millisecond),
 * which is the error, measured in test/integration/edge-limits-cluster.test.ts; the long-run rate
 * still holds, since whatever is accepted twice at once stays in the bucket's excess and is
 * refused later. A stalled primary leaves each worker enforcing the limit on its own share of the
 * traffic (never an outage); a worker that dies has its in-progress counts given back by the
 * primary.
 */
import { performance } from 'node:perf_hooks';
import type { ConcurrencyConfig, ConnectionRateConfig, RequestRateConfig } from '../schema/config';
import { ConcurrencyTable, RateTable } from './rate-table';

/** The `limit` label of the metrics and the last part of a zone's place. */
export type LimitKind = 'requests' | 'concurrent' | 'connection_rate';

/** A zone key's place (`listener/route/limit`), the metrics' `zone` label. */
export function zonePlace(key: string): string {
  return key.split('|')[1] ?? key;
}

/** A refusal, from RateZone.take. */
export const REFUSED = -1;

/** Requests (or connections) per second of nginx's rate form `10r/s` / `30r/m` (the schema checked the form). */
export function parseRate(rate: string): number {
  const n = Number(rate.slice(0, -3));
  return rate.endsWith('/m') ? n / 60 : n;
}

/** Where the other workers hear of this one's accepts (null: one process, nothing to tell). */
export interface LimitShare {
  /** `n` accepted (rate), or +1 / -1 in progress (concurrency), of `client` in zone `key`. */
  note(key: string, client: string, n: number): void;
}

export class RateZone {
  readonly table: RateTable;

  constructor(
    readonly key: string,
    readonly kind: LimitKind,
    /** Requests per second. */
    readonly rate: number,
    burst: number,
    maxClients: number,
    private readonly share: LimitShare | null,
  ) {
    this.table = new RateTable(rate, burst, maxClients);
  }

  /**
   * One request (or connection) of `client` now: REFUSED, or accepted after a delay in ms (0: at
   * once): nginx delays a request whose excess is past `delay` by (excess - delay) / rate
   * (ngx_http_limit_req_handler); `delay` Infinity: never (nodelay).
   */
  take(client: string, delay: number): number {
    if (!this.table.take(client, performance.now())) return REFUSED;
    if (this.share !== null) this.share.note(this.key, client, 1);
    const e = this.table.excessNow;
    return e <= delay ? 0 : Math.ceil(((e - delay) / this.rate) * 1000);
  }

  /** Another worker accepted `n` of `client`'s. */
  remote(client: string, n: number): void {
    this.table.add(client, performance.now(), n);
  }
}

export class ConcurrencyZone {
  readonly table: ConcurrencyTable;

  constructor(
    readonly key: string,
    readonly kind: LimitKind,
    readonly perClient: number,
    maxClients: number,
    private readonly share: LimitShare | null,
  ) {
    this.table = new ConcurrencyTable(maxClients);
  }

  /** 1: held (release it once), 0: refused, -1: let through uncounted (the table is full). */
  acquire(client: string): number {
    const r = this.table.acquire(client, this.perClient);
    if (r === 1 && this.share !== null) this.share.note(this.key, client, 1);
    return r;
  }

  release(client: string): void {
    this.table.release(client);
    if (this.share !== null) this.share.note(this.key, client, -1);
  }

  remote(client: string, n: number): void {
    this.table.addOthers(client, n);
  }
}

/**
 * The zones of one process, and its side of the sharing: `connect` (a cluster worker) makes every
 * zone tell the others, `applyRemote` applies what they told.
 */
export class LimitZones implements LimitShare {
  private readonly zones = new Map<string, WeakRef<RateZone | ConcurrencyZone>>();
  private readonly gone = new FinalizationRegistry<string>((key) => {
    if (this.zones.get(key)?.deref() === undefined) this.zones.delete(key);
  });
  private send: ((ops: (string | number)[]) => void) | null = null;
  /** Accepts of this turn not yet told: zone key -> client -> n. */
  private pending = new Map<string, Map<string, number>>();
  private scheduled = false;
  private readonly flushFn = (): void => this.flush();

  /** A cluster worker: tell the other workers through `send` (the primary relays). */
  connect(send: (ops: (string | number)[]) => void): void {
    this.send = send;
  }

  rate(place: string, kind: LimitKind, c: RequestRateConfig | ConnectionRateConfig): RateZone {
    const rate = parseRate(c.rate);
    const key = `r|${place}|${rate}|${c.burst}|${c.maxClients}`;
    const z = this.zones.get(key)?.deref();
    if (z instanceof RateZone) return z;
    const made = new RateZone(key, kind, rate, c.burst, c.maxClients, this);
    this.keep(key, made);
    return made;
  }

  concurrency(place: string, c: ConcurrencyConfig): ConcurrencyZone {
    const key = `c|${place}|${c.perClient}|${c.maxClients}`;
    const z = this.zones.get(key)?.deref();
    if (z instanceof ConcurrencyZone) return z;
    const made = new ConcurrencyZone(key, 'concurrent', c.perClient, c.maxClients, this);
    this.keep(key, made);
    return made;
  }

  /** Every live zone (metrics), one per place: the latest made (a reload's), not one a route no longer names. */
  all(): (RateZone | ConcurrencyZone)[] {
    const byPlace = new Map<string, RateZone | ConcurrencyZone>();
    for (const r of this.zones.values()) {
      const z = r.deref();
      if (z !== undefined) byPlace.set(zonePlace(z.key), z);
    }
    return [...byPlace.values()];
  }

  note(key: string, client: string, n: number): void {
    if (this.send === null) return;
    let m = this.pending.get(key);
    if (m === undefined) this.pending.set(key, (m = new Map()));
    m.set(client, (m.get(client) ?? 0) + n);
    if (!this.scheduled) {
      this.scheduled = true;
      // After this turn's I/O: every request read in it goes in one message.
      setImmediate(this.flushFn);
    }
  }

  /** What another worker told (`[key, client, n, ...]`); a zone this process does not have is skipped. */
  applyRemote(ops: readonly (string | number)[]): void {
    for (let i = 0; i + 2 < ops.length; i += 3) {
      const z = this.zones.get(ops[i] as string)?.deref();
      if (z !== undefined) z.remote(ops[i + 1] as string, ops[i + 2] as number);
    }
  }

  private keep(key: string, z: RateZone | ConcurrencyZone): void {
    this.zones.set(key, new WeakRef(z));
    this.gone.register(z, key);
  }

  private flush(): void {
    this.scheduled = false;
    const pending = this.pending;
    if (pending.size === 0 || this.send === null) return;
    this.pending = new Map();
    const ops: (string | number)[] = [];
    for (const [key, m] of pending) for (const [client, n] of m) if (n !== 0) ops.push(key, client, n);
    if (ops.length > 0) this.send(ops);
  }
}
