import { FixedHistogram } from './fixed-histogram';

/**
 * TLS handshake time, seconds, from the first byte after any PROXY header to the handshake's end:
 * on loopback a full ECDSA handshake takes ~1-3 ms of CPU and an RSA 2048 one a few more; over
 * the internet add two round trips; the top buckets catch slow or stalled clients.
 */
const HANDSHAKE_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * A terminating listener's TLS counters, plain numbers on the data path published at scrape time
 * (metrics.ts), like ListenerStats.
 */
export class TlsStats {
  /** Handshakes by `result/version`: `ok/TLSv1.3`, `tls_version/unknown`, `tls_unknown_sni/TLSv1.2`, ... */
  readonly handshakes = new Map<string, number>();
  /** Handshake duration of every finished or failed handshake, seconds. */
  readonly duration = new FixedHistogram(HANDSHAKE_BUCKETS);
  /** Handshakes that resumed a session (a ticket). */
  resumed = 0;
  /** Client-initiated renegotiations refused on established connections (terminate.ts). */
  renegotiationsRefused = 0;

  constructor(readonly listener: string) {}

  handshake(result: string, version: string, seconds: number): void {
    const key = `${result}/${version}`;
    this.handshakes.set(key, (this.handshakes.get(key) ?? 0) + 1);
    this.duration.observe(seconds);
  }
}
