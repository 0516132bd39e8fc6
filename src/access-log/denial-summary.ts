/**
 * With the access log off (`logging.access: false`; with it on, every denial has its own line,
 * access-log.ts), denials summarised at info: "N denials from M addresses in the last 10 s", one line per interval
 * and only when there were denials, so a scan or a flood of refused clients costs one line per
 * interval instead of one per attempt (each denial is still logged at debug).
 *
 * Memory is bounded: at most `maxAddresses` distinct addresses are remembered per interval (a scan
 * from a /8 would otherwise grow the set without limit); past the cap the line says `M+` and
 * `addressesCapped: true`. Reasons and listeners are bounded label sets already.
 *
 * Per address (`linesPerInterval` > 0): the first denial of an address in an interval is also
 * logged at info at once ("denied 198.51.100.7 (denied_by_entry 198.51.100.0/24)"), so an
 * operator sees who is refused without turning debug on or restarting; its later denials in the
 * interval are only counted. At most `linesPerInterval` such lines per interval (a scan of many
 * addresses is one line per address up to the cap, then only the summary), and the memory is the
 * same bounded address set: an address first seen past `maxAddresses` gets no line.
 */
import type { Logger } from 'pino';
import { INFO_LEVEL, logsAt } from '../log';

interface DenialSummaryOptions {
  /** Interval between summary lines, ms; 0 turns the summary off. */
  intervalMs: number;
  /** Distinct addresses remembered per interval. */
  maxAddresses: number;
  /** Addresses quoted in the line as examples. */
  sampleSize?: number;
  /** Info lines for an address's first denial per interval (0: none, only the summary). */
  linesPerInterval?: number;
}

export class DenialSummary {
  private count = 0;
  private readonly addresses = new Set<string>();
  private capped = false;
  private readonly reasons = new Map<string, number>();
  private readonly listeners = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private lines = 0;
  private suppressed = 0;

  constructor(
    private readonly log: Logger,
    private readonly options: Readonly<DenialSummaryOptions>,
  ) {}

  /** One denial: `list` the allowlist that refused, `route` the route that took it (null: none). */
  add(
    listener: string,
    address: string,
    reason: string,
    entry: string | null = null,
    list: string | null = null,
    route: string | null = null,
  ): void {
    // Its lines are at info: below it (logging.level warn, as under load tests), nothing to count
    // (a level raised at run time counts from then on).
    if (!logsAt(this.log, INFO_LEVEL)) return;
    this.count++;
    if (this.addresses.size < this.options.maxAddresses) {
      const size = this.addresses.size;
      this.addresses.add(address);
      if (this.addresses.size > size) this.firstDenial(listener, address, reason, entry, list, route);
    } else if (!this.capped && !this.addresses.has(address)) this.capped = true;
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

  private firstDenial(
    listener: string,
    address: string,
    reason: string,
    entry: string | null,
    list: string | null,
    route: string | null,
  ): void {
    const max = this.options.linesPerInterval ?? 0;
    if (max <= 0) return;
    if (this.lines >= max) {
      this.suppressed++;
      return;
    }
    this.lines++;
    const by = `${list !== null ? ` by list ${list}` : ''}${route !== null ? ` on route ${route}` : ''}`;
    this.log.info(
      {
        listener,
        ...(route !== null ? { route } : {}),
        ...(list !== null ? { list } : {}),
        client: address,
        reason,
        ...(entry !== null ? { entry } : {}),
      },
      `denied ${address} (${reason}${entry !== null ? ` ${entry}` : ''})${by}; further denials of it this interval are counted in the summary`,
    );
  }

  flush(): void {
    const suppressed = this.suppressed;
    this.lines = 0;
    this.suppressed = 0;
    if (this.count === 0) return;
    const secs = Math.round(this.options.intervalMs / 100) / 10;
    const m = `${this.addresses.size}${this.capped ? '+' : ''}`;
    const sample: string[] = [];
    for (const a of this.addresses) {
      if (sample.length >= (this.options.sampleSize ?? 5)) break;
      sample.push(a);
    }
    this.log.info(
      {
        denials: this.count,
        addresses: this.addresses.size,
        addressesCapped: this.capped,
        intervalMs: this.options.intervalMs,
        reasons: Object.fromEntries(this.reasons),
        listeners: Object.fromEntries(this.listeners),
        sample,
        ...(suppressed > 0 ? { addressLinesSuppressed: suppressed } : {}),
      },
      `${this.count} denial${this.count === 1 ? '' : 's'} from ${m} address${m === '1' ? '' : 'es'} in the last ${secs} s`,
    );
    this.count = 0;
    this.addresses.clear();
    this.capped = false;
    this.reasons.clear();
    this.listeners.clear();
  }
}
