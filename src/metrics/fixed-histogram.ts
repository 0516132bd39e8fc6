/**
 * A histogram kept as fixed-bucket counts in a typed array, observed on the hot path and published
 * at scrape time (registry.ts). prom-client's Histogram.observe() costs ~0.5-0.9 us (label hashing,
 * an object per label set); this is a bounded linear walk over ~12 numbers and two additions
 * (bench/micro/metrics.ts measures both).
 *
 * Counts are per bucket (not cumulative) while observing; `cumulative()` builds the Prometheus view.
 */
export class FixedHistogram {
  /** Upper bounds, seconds, ascending; +Inf is implicit (the last slot of `counts`). */
  readonly bounds: Float64Array;
  /** Observations per bucket: counts[i] is (bounds[i-1], bounds[i]]; counts[bounds.length] is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    for (let i = 1; i < bounds.length; i++) {
      if (!(bounds[i]! > bounds[i - 1]!)) throw new Error(`histogram bounds must ascend: ${bounds.join(', ')}`);
    }
    this.bounds = Float64Array.from(bounds);
    this.counts = new Float64Array(bounds.length + 1);
  }

  /** Record one value (seconds). */
  observe(value: number): void {
    const b = this.bounds;
    const n = b.length;
    let i = 0;
    while (i < n && value > b[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  /** Cumulative counts per bound, +Inf last (= count). */
  cumulative(): number[] {
    const out = new Array<number>(this.counts.length);
    let acc = 0;
    for (let i = 0; i < this.counts.length; i++) {
      acc += this.counts[i]!;
      out[i] = acc;
    }
    return out;
  }
}

/**
 * HTTP request duration, seconds: from the request head parsed to the response finished (or the
 * client gone). Loopback requests take well under a millisecond; WAN backends up to seconds.
 */
export const HTTP_DURATION_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Upstream TCP connect time, seconds: the SYN/SYN-ACK round trip plus the dial's own cost. */
export const CONNECT_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * HTTP request and response sizes, bytes: powers of 4 from 64 B (a bodiless request head, a 304)
 * to 64 MiB (uploads, downloads). Eleven buckets: an observe walks at most twelve bounds, and a
 * typical head-only request stops at the second (ingress-nginx uses 10 B-10 MB in powers of 10,
 * which puts most requests into one bucket).
 */
export const SIZE_BUCKETS: readonly number[] = [64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864];
