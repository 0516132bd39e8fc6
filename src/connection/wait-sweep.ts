/**
 * Deadlines of a listener's connections checked by one periodic sweep instead of a timer per
 * connection: the HTTP engine's waits between requests (keep-alive, request header) and idle
 * bounds (forward/http/relay/relay-conn.ts), and a TLS listener's handshake timeout
 * (tls/terminate.ts). A keep-alive connection changes its wait twice per request (idle, then
 * head), and a clearTimeout + setTimeout pair each time was ~2% of the CPU samples of the denied
 * workload (bench/README.md "One HTTP engine, one process"); here a wait is one number
 * written. node:http enforces headersTimeout the same way (a periodic check,
 * `connectionsCheckingInterval`). A deadline is acted on at most one interval late; the interval
 * is a quarter of the shortest timeout, between 50 ms and 1 s.
 */
import { type Linked, LinkedSet } from './linked-set';

export interface Waiter extends Linked<Waiter> {
  /** Called every interval with performance.now(): act on whatever has run out by then. */
  check(now: number): void;
}

export class WaitSweep {
  /** A LinkedSet, not a Set: a waiter is added and deleted per connection (linked-set.ts says why). */
  private readonly waiters = new LinkedSet<Waiter>();
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

  /**
   * The timer is not stopped here when the last waiter leaves but by the next sweep that finds
   * none: connections that come one at a time (a client that opens, asks, closes) would otherwise
   * pay a setInterval and a clearInterval each, ~5 us of a TLS connection's CPU on Node 20
   * (bench/README.md "What ipgate adds to a new TLS handshake"). The idle timer is
   * unref'd and stops within one interval.
   */
  delete(w: Waiter): void {
    this.waiters.delete(w);
  }

  /** Whether the sweep timer is running (tests). */
  get running(): boolean {
    return this.timer !== null;
  }

  /** Check every waiter (a check may delete its waiter). */
  run(now = performance.now()): void {
    this.waiters.walk((w) => w.check(now));
  }

  /** The interval's tick: check the waiters, or stop when there are none. */
  tick(): void {
    if (this.waiters.size === 0) {
      if (this.timer !== null) clearInterval(this.timer);
      this.timer = null;
      return;
    }
    this.run();
  }
}

function sweep(s: WaitSweep): void {
  s.tick();
}
