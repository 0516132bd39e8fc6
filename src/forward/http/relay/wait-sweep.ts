/**
 * The waits between requests (keep-alive timeout, request-header timeout) checked by one periodic
 * sweep per listener instead of a timer per connection: a keep-alive connection changes its wait
 * twice per request (idle, then head), and a clearTimeout + setTimeout pair each time was ~2% of
 * the CPU samples of the denied workload (bench/README.md "2026-12-02: one HTTP engine, one
 * process"); here a wait is one number written. node:http enforces headersTimeout the same way
 * (a periodic check, `connectionsCheckingInterval`). A wait runs out at most one interval late;
 * the interval is a quarter of the shorter timeout, between 50 ms and 1 s.
 */
export interface Waiter {
  /** performance.now() when the wait runs out; 0 when not waiting. */
  waitDeadline: number;
  waitExpired(): void;
}

export class WaitSweep {
  private readonly waiters = new Set<Waiter>();
  private timer: NodeJS.Timeout | null = null;
  readonly intervalMs: number;

  constructor(shortestTimeoutMs: number) {
    this.intervalMs = Math.max(50, Math.min(1000, Math.floor(shortestTimeoutMs / 4)));
  }

  add(w: Waiter): void {
    this.waiters.add(w);
    if (this.timer === null) {
      this.timer = setInterval(sweep, this.intervalMs, this);
      this.timer.unref();
    }
  }

  delete(w: Waiter): void {
    this.waiters.delete(w);
    if (this.waiters.size === 0 && this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** Expire every wait whose deadline has passed (deleting from a Set while iterating it is safe). */
  run(now = performance.now()): void {
    for (const w of this.waiters) if (w.waitDeadline !== 0 && now >= w.waitDeadline) w.waitExpired();
  }
}

function sweep(s: WaitSweep): void {
  s.run();
}
