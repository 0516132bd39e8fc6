/**
 * The rate limit on the access log's denial and rejection lines (access-log.ts): nginx writes
 * every 403 to its access log, and so does ipgate, up to `perSecond` lines in each second of a
 * process (`logging.deniedLinesPerSecond`); past that, a denial is counted instead of written, and
 * one line a second says how many were ("412 access lines of denials and rejections suppressed in
 * the last 1 s ..."), so a scan or a flood costs a bounded number of lines and the operator still
 * sees that it happened. ipgate_denied_total counts every denial either way.
 *
 * Cost per denial: a Date.now() and two comparisons; the count line is written by a timer started
 * by the first suppression of a second (unref'd; none while nothing is suppressed), and at stop.
 */
import type { Logger } from 'pino';

const WINDOW_MS = 1000;

export class DenialLines {
  /** Start of the current one-second window, ms epoch. */
  private windowStart = 0;
  /** Lines written in the current window. */
  private used = 0;
  /** Lines not written since the last count line. */
  private suppressed = 0;
  private since = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly log: Logger,
    readonly perSecond: number,
  ) {}

  /** Whether a line may be written now (without taking it). */
  available(now: number): boolean {
    return now - this.windowStart >= WINDOW_MS || this.used < this.perSecond;
  }

  /** Take a line: true to write it; false when the rate is used up (the line is counted as suppressed). */
  take(now: number): boolean {
    if (now - this.windowStart >= WINDOW_MS) {
      this.windowStart = now;
      this.used = 0;
    }
    if (this.used < this.perSecond) {
      this.used++;
      return true;
    }
    this.suppress(now);
    return false;
  }

  /** A denial that got no line for the rate (also the HTTP quick path's, which never asked). */
  suppress(now = Date.now()): void {
    if (this.suppressed === 0) this.since = now;
    this.suppressed++;
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), WINDOW_MS);
      this.timer.unref();
    }
  }

  /** Write the count of suppressed lines, if any. */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const n = this.suppressed;
    if (n === 0) return;
    this.suppressed = 0;
    const secs = Math.max(1, Math.round((Date.now() - this.since) / 100) / 10);
    this.log.info(
      { suppressed: n, intervalMs: Date.now() - this.since, deniedLinesPerSecond: this.perSecond },
      `${n} access line${n === 1 ? '' : 's'} of denials and rejections suppressed in the last ${secs} s (logging.deniedLinesPerSecond: ${this.perSecond}); ipgate_denied_total counts every one`,
    );
  }

  stop(): void {
    this.flush();
  }
}
