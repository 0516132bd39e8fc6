/**
 * Failed admin API authentications: counted by reason (the metric) and logged at most once per
 * source address per interval, with the number suppressed since that address's last line.
 *
 * Why: a loop presenting a wrong token wrote one warn line per request (2,402 lines from one
 * client), so a script could flood the log and bury the lines that matter. Memory is bounded under a
 * scan from many addresses: at most `maxAddresses` are remembered (the oldest line's address goes
 * first), and at most `maxLinesPerInterval` lines are written per interval whatever the number of
 * addresses (an IPv6 client has a /64 of them); what they would have said goes into the next line
 * written as `suppressedOthers`. The metric counts every failure either way. When failures stop
 * inside an interval, a timer writes the suppressed counts at its end, so a loop that ran for 30 s
 * shows as two lines (its first failure, then "N more") rather than one.
 */
import type { FastifyBaseLogger } from 'fastify';

/** Bounded label values of ipgate_admin_auth_failures_total. */
type AuthFailureReason = 'missing' | 'malformed' | 'invalid';

export interface AuthFailureOptions {
  /** One line per address per this many ms. Default 60000. */
  intervalMs?: number;
  /** Addresses remembered. Default 1024. */
  maxAddresses?: number;
  /** Lines per interval over all addresses. Default 64. */
  maxLinesPerInterval?: number;
  /** Clock (tests). */
  now?: () => number;
}

interface Seen {
  /** When this address's last line was written. */
  at: number;
  /** Failures since then not logged. */
  suppressed: number;
}

export class AuthFailureLog {
  readonly counts: Record<AuthFailureReason, number> = { missing: 0, malformed: 0, invalid: 0 };
  private readonly seen = new Map<string, Seen>();
  private readonly intervalMs: number;
  private readonly maxAddresses: number;
  private readonly maxLines: number;
  private readonly now: () => number;
  private windowStart = -Infinity;
  private linesInWindow = 0;
  /** Failures not logged because the global line budget was spent or their address was evicted. */
  private suppressedOthers = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: FastifyBaseLogger,
    o: AuthFailureOptions = {},
  ) {
    this.intervalMs = o.intervalMs ?? 60_000;
    this.maxAddresses = o.maxAddresses ?? 1024;
    this.maxLines = o.maxLinesPerInterval ?? 64;
    this.now = o.now ?? Date.now;
  }

  /** Addresses remembered now (at most maxAddresses). */
  get tracked(): number {
    return this.seen.size;
  }

  /**
   * Count a failure; write a warn line for `invalid` (a wrong token: someone guessing, or a client
   * holding a rotated token) when its address has had none within the interval. A missing or
   * malformed header is a client bug, not an attack on the token: counted, logged at debug.
   */
  record(reason: AuthFailureReason, remote: string, method: string, url: string): void {
    this.counts[reason]++;
    if (reason !== 'invalid') {
      this.log.debug({ remote, method, url, reason }, 'admin API: request without a valid Authorization header');
      return;
    }
    const now = this.now();
    const prev = this.seen.get(remote);
    if (prev !== undefined && now - prev.at < this.intervalMs) {
      prev.suppressed++;
      this.arm(prev.at + this.intervalMs - now);
      return;
    }
    if (now - this.windowStart >= this.intervalMs) {
      this.windowStart = now;
      this.linesInWindow = 0;
    }
    if (this.linesInWindow >= this.maxLines) {
      this.suppressedOthers++;
      this.arm(this.windowStart + this.intervalMs - now);
      return;
    }
    this.linesInWindow++;
    this.line(remote, prev?.suppressed ?? 0, now, method, url);
  }

  /** Stop the timer (the admin app closes). */
  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * The end of an interval with failures not yet logged: a line for each address whose interval is
   * over (within the line budget), and for the failures counted as others.
   */
  flush(): void {
    this.timer = null;
    const now = this.now();
    if (now - this.windowStart >= this.intervalMs) {
      this.windowStart = now;
      this.linesInWindow = 0;
    }
    let next = Infinity;
    for (const [remote, seen] of [...this.seen]) {
      if (seen.suppressed === 0) continue;
      const due = seen.at + this.intervalMs;
      if (due > now) {
        next = Math.min(next, due - now);
      } else if (this.linesInWindow < this.maxLines) {
        this.linesInWindow++;
        this.line(remote, seen.suppressed, now, null, null);
      } else {
        next = Math.min(next, this.windowStart + this.intervalMs - now);
      }
    }
    if (this.suppressedOthers > 0 && next === Infinity) {
      if (this.linesInWindow < this.maxLines) {
        this.linesInWindow++;
        this.log.warn(
          { suppressedOthers: this.suppressedOthers, intervalMs: this.intervalMs },
          `admin API: wrong token (${this.suppressedOthers} more from addresses not logged one by one)`,
        );
        this.suppressedOthers = 0;
      } else {
        next = this.windowStart + this.intervalMs - now;
      }
    }
    if (next !== Infinity) this.arm(next);
  }

  private arm(ms: number): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => this.flush(), Math.max(ms, 1));
    this.timer.unref();
  }

  private line(remote: string, suppressed: number, now: number, method: string | null, url: string | null): void {
    // Delete then set: the Map's order is then the order of the last line per address, so the
    // first key is the one to forget when the cap is reached.
    this.seen.delete(remote);
    if (this.seen.size >= this.maxAddresses) {
      const oldest = this.seen.entries().next().value as [string, Seen];
      this.suppressedOthers += oldest[1].suppressed;
      this.seen.delete(oldest[0]);
    }
    this.seen.set(remote, { at: now, suppressed: 0 });
    const others = this.suppressedOthers;
    this.suppressedOthers = 0;
    this.log.warn(
      {
        remote,
        ...(method !== null ? { method, url } : {}),
        suppressed,
        ...(others > 0 ? { suppressedOthers: others } : {}),
        intervalMs: this.intervalMs,
      },
      suppressed > 0 ? `admin API: wrong token (${suppressed} more from this address since its last line)` : 'admin API: wrong token',
    );
  }
}
