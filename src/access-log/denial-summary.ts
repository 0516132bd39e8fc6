/**
 * Denials summarised at info: "N denials from M addresses in the last 10 s", one line per interval
 * and only when there were denials, so a scan or a flood of refused clients costs one line per
 * interval instead of one per attempt (each denial is still logged at debug).
 *
 * Memory is bounded: at most `maxAddresses` distinct addresses are remembered per interval (a scan
 * from a /8 would otherwise grow the set without limit); past the cap the line says `M+` and
 * `addressesCapped: true`. Reasons and listeners are bounded label sets already.
 */
import type { Logger } from 'pino';

export interface DenialSummaryOptions {
  /** Interval between summary lines, ms; 0 turns the summary off. */
  intervalMs: number;
  /** Distinct addresses remembered per interval. */
  maxAddresses: number;
  /** Addresses quoted in the line as examples. */
  sampleSize?: number;
}

export class DenialSummary {
  private count = 0;
  private readonly addresses = new Set<string>();
  private capped = false;
  private readonly reasons = new Map<string, number>();
  private readonly listeners = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly log: Logger, private readonly options: Readonly<DenialSummaryOptions>) {}

  add(listener: string, address: string, reason: string): void {
    this.count++;
    if (this.addresses.size < this.options.maxAddresses) this.addresses.add(address);
    else if (!this.capped && !this.addresses.has(address)) this.capped = true;
    this.reasons.set(reason, (this.reasons.get(reason) ?? 0) + 1);
    this.listeners.set(listener, (this.listeners.get(listener) ?? 0) + 1);
  }

  start(): void {
    if (this.options.intervalMs <= 0 || this.timer !== null) return;
    this.timer = setInterval(() => this.flush(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Log the interval's line (if any denials) and start a new interval. Flushes on stop too. */
  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.flush();
  }

  flush(): void {
    if (this.count === 0) return;
    const secs = Math.round(this.options.intervalMs / 100) / 10;
    const m = `${this.addresses.size}${this.capped ? '+' : ''}`;
    const sample: string[] = [];
    for (const a of this.addresses) {
      if (sample.length >= (this.options.sampleSize ?? 5)) break;
      sample.push(a);
    }
    this.log.info({
      denials: this.count, addresses: this.addresses.size, addressesCapped: this.capped, intervalMs: this.options.intervalMs,
      reasons: Object.fromEntries(this.reasons), listeners: Object.fromEntries(this.listeners), sample,
    }, `${this.count} denial${this.count === 1 ? '' : 's'} from ${m} address${m === '1' ? '' : 'es'} in the last ${secs} s`);
    this.count = 0;
    this.addresses.clear();
    this.capped = false;
    this.reasons.clear();
    this.listeners.clear();
  }
}
