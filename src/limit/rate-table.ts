/**
 * One rate limit's buckets: nginx `limit_req` per client, in a table of fixed capacity
 * (docs/edge-rules.md "Rate and connection limits").
 *
 * The bucket (ngx_http_limit_req_module.c, ngx_http_limit_req_lookup): per client an `excess` (in
 * requests) and the time it was last updated. A request arriving `dt` ms later sees
 *   e = max(0, excess - rate * dt + 1)
 * and is refused when e > burst (the bucket unchanged), else accepted with excess = e; a client's
 * first request is accepted with excess 0. So a client may send `burst + 1` requests at once, then
 * one per 1/rate. nginx delays an accepted request by (e - delay) / rate when e > delay
 * (limit-zone.ts applies that).
 *
 * Bounded under a flood of distinct addresses: at most `capacity` clients are held, in typed
 * arrays that grow by doubling up to it (a limit that sees few clients stays small), found through
 * one Map (a hash lookup: the cost does not grow with the number held; bench/micro/rate-table.ts)
 * and kept in least-recently-used order by an index-linked list (no allocation per request). A new
 * client in a full table takes the slot of the least recently used one. That client's bucket has
 * usually drained (excess + 1 <= rate * idle time: its next request would be accepted with excess
 * 0 anyway, so forgetting it changes nothing: `evictedIdle`); if not, its excess is forgotten
 * (`evictedActive`: the table is too small for the traffic).
 */
const INITIAL = 256;

export class RateTable {
  /** The excess of the request the last take() accepted (delays read it). */
  excessNow = 0;
  evictedIdle = 0;
  evictedActive = 0;
  private readonly slots = new Map<string, number>();
  private keys: string[] = [];
  private excess = new Float64Array(INITIAL);
  private last = new Float64Array(INITIAL);
  /** Least-recently-used order: `head` the most recent, `tail` the least; -1 ends the list. */
  private prev = new Int32Array(INITIAL);
  private next = new Int32Array(INITIAL);
  private head = -1;
  private tail = -1;
  /** Requests per millisecond. */
  private readonly perMs: number;

  constructor(
    /** Requests per second. */
    readonly rate: number,
    readonly burst: number,
    readonly capacity: number,
  ) {
    this.perMs = rate / 1000;
  }

  /** Clients held now. */
  get size(): number {
    return this.slots.size;
  }

  /**
   * One request of `key` at `now` (performance.now() ms): accepted (true; `excessNow` its excess)
   * or refused (the bucket unchanged).
   */
  take(key: string, now: number): boolean {
    const slot = this.slots.get(key);
    if (slot === undefined) {
      this.insert(key, now, 0);
      this.excessNow = 0;
      return true;
    }
    let e = this.excess[slot]! - this.perMs * (now - this.last[slot]!) + 1;
    if (e < 0) e = 0;
    this.touch(slot);
    if (e > this.burst) return false;
    this.excess[slot] = e;
    this.last[slot] = now;
    this.excessNow = e;
    return true;
  }

  /**
   * `n` requests of `key` another process accepted (limit-zone.ts: the workers share their
   * accepts): added as take() would have added them, without the burst check, so the excess may
   * pass the burst by what the processes accepted at once; this client is then refused until it
   * drains back under (the long-run rate still holds).
   */
  add(key: string, now: number, n: number): void {
    const slot = this.slots.get(key);
    if (slot === undefined) {
      this.insert(key, now, n - 1);
      return;
    }
    let e = this.excess[slot]! - this.perMs * (now - this.last[slot]!) + 1;
    if (e < 0) e = 0;
    this.excess[slot] = e + n - 1;
    this.last[slot] = now;
    this.touch(slot);
  }

  /** Whether `key`'s bucket still holds anything at `now` (drained: its next request sees excess 0). */
  holds(key: string, now: number): boolean {
    const slot = this.slots.get(key);
    return slot !== undefined && !this.drained(slot, now);
  }

  private drained(slot: number, now: number): boolean {
    return this.excess[slot]! + 1 <= this.perMs * (now - this.last[slot]!);
  }

  /** A slot for `key`: a free one (growing the arrays up to `capacity`), else the least recently used one's. */
  private insert(key: string, now: number, excess: number): void {
    let slot: number;
    const used = this.keys.length;
    if (used < this.capacity) {
      if (used === this.excess.length) this.grow();
      slot = used;
      this.keys.push(key);
    } else {
      slot = this.tail;
      if (this.drained(slot, now)) this.evictedIdle++;
      else this.evictedActive++;
      this.slots.delete(this.keys[slot]!);
      this.keys[slot] = key;
      this.unlink(slot);
    }
    this.slots.set(key, slot);
    this.excess[slot] = excess;
    this.last[slot] = now;
    this.pushFront(slot);
  }

  private grow(): void {
    const n = Math.min(this.capacity, this.excess.length * 2);
    const excess = new Float64Array(n);
    excess.set(this.excess);
    this.excess = excess;
    const last = new Float64Array(n);
    last.set(this.last);
    this.last = last;
    const prev = new Int32Array(n);
    prev.set(this.prev);
    this.prev = prev;
    const next = new Int32Array(n);
    next.set(this.next);
    this.next = next;
  }

  private touch(slot: number): void {
    if (slot === this.head) return;
    this.unlink(slot);
    this.pushFront(slot);
  }

  private unlink(slot: number): void {
    const p = this.prev[slot]!;
    const n = this.next[slot]!;
    if (p >= 0) this.next[p] = n;
    else this.head = n;
    if (n >= 0) this.prev[n] = p;
    else this.tail = p;
  }

  private pushFront(slot: number): void {
    this.prev[slot] = -1;
    this.next[slot] = this.head;
    if (this.head >= 0) this.prev[this.head] = slot;
    this.head = slot;
    if (this.tail < 0) this.tail = slot;
  }
}

/**
 * Requests in progress (HTTP) or open connections (TCP) per client: nginx `limit_conn`. A client
 * is held only while it has one (so the table is bounded by what is open, and by `capacity`);
 * past `capacity` clients a new one is let through uncounted (`overflow`) rather than refusing
 * every new client. `others`: what the other workers hold (limit-zone.ts), counted against the
 * limit too.
 */
export class ConcurrencyTable {
  overflow = 0;
  private readonly mine = new Map<string, number>();
  private readonly others = new Map<string, number>();

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.mine.size + this.others.size;
  }

  /** One more for `key` if under `limit`: 1 (counted: release it), 0 (refused), or -1 (the table is full: let through uncounted). */
  acquire(key: string, limit: number): number {
    const c = this.mine.get(key) ?? 0;
    const o = this.others.get(key) ?? 0;
    if (c + o >= limit) return 0;
    if (c === 0) {
      if (this.mine.size >= this.capacity) {
        this.overflow++;
        return -1;
      }
    }
    this.mine.set(key, c + 1);
    return 1;
  }

  release(key: string): void {
    const c = this.mine.get(key);
    if (c === undefined) return;
    if (c <= 1) this.mine.delete(key);
    else this.mine.set(key, c - 1);
  }

  /** Another worker's change of `key`'s count by `n` (+1 acquired, -1 released; a dead worker's all). */
  addOthers(key: string, n: number): void {
    const c = (this.others.get(key) ?? 0) + n;
    if (c <= 0) this.others.delete(key);
    else this.others.set(key, c);
  }

  count(key: string): number {
    return (this.mine.get(key) ?? 0) + (this.others.get(key) ?? 0);
  }
}
