/**
 * The ClientHello stage of a TCP listener with routes (docs/architecture.md "The data path": after
 * the PROXY header, before the route). The connection's first bytes are gathered
 * (connection/gather.ts, the loop the PROXY stage uses too) until readClientHello (client-hello.ts)
 * can say done or error, within the listener's hello timeout, and the listener gets one result.
 * Nothing is consumed: on `ok`, `bytes` holds the hello and whatever followed it, which the
 * forwarder sends to the backend untouched.
 *
 * The reader is called again on the whole after each chunk; it costs one step per record header,
 * not per byte, so a hello split into 1-byte writes costs O(records) per call. Its caps bound what
 * is held (at most maxHelloLength + 324 bytes: client-hello.ts), the timer bounds the time.
 */
import { ListenerStats } from '../metrics/listener-stats';
import type { Connection } from '../connection/connection';
import { gather, type GatherStage } from '../connection/gather';
import { readClientHello, type ClientHelloDone, type ReadOptions } from './client-hello';
import type { TlsReason } from './codes';

/** `sni.helloTimeoutMs` when the listener's config has no `sni` block (schema/routes.ts). */
const DEFAULT_HELLO_TIMEOUT_MS = 5000;

/**
 * The time a ClientHello may take, from the listener's config: the first one (this stage), and
 * the second after a HelloRetryRequest (forward/tcp/hello-watch.ts).
 */
export function helloTimeoutMs(config: { readonly sni?: { readonly helloTimeoutMs: number } }): number {
  return config.sni?.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS;
}

/** What the stage hands on: the hello and the bytes to forward, or why the connection must close. */
export type HelloStageResult =
  | { readonly ok: true; readonly hello: ClientHelloDone; readonly bytes: Buffer }
  | { readonly ok: false; readonly reason: TlsReason; readonly detail: string | null };

/** Who takes the result: the listener (one object, no closure per connection for the callback). */
export interface HelloSink {
  helloRead(conn: Connection, result: HelloStageResult): void;
}

interface HelloStageOptions extends ReadOptions {
  /** `sni.helloTimeoutMs`: a hello not complete by then closes the connection (`tls_timeout`). */
  timeoutMs: number;
}

/** One per listener with routes. */
export class HelloStage implements GatherStage<HelloStageResult> {
  readonly timeoutMs: number;

  constructor(
    private readonly options: HelloStageOptions,
    private readonly stats: ListenerStats,
    private readonly sink: HelloSink,
  ) {
    this.timeoutMs = options.timeoutMs;
  }

  /**
   * Read the ClientHello of `conn`, starting with `first` (the bytes after the PROXY header, maybe
   * none). The socket is paused when called and paused again before `sink.helloRead` runs, exactly
   * once, unless the socket closes first with nothing decided (then the listener's close path
   * runs). Counts the outcome in `stats.sniHellos` (`ok` or the reason).
   */
  read(conn: Connection, first: Buffer): void {
    gather(conn, first, this);
  }

  /** The reader's answer on `buf` as a stage result; null while it needs more. */
  decide(buf: Buffer): HelloStageResult | null {
    const r = readClientHello(buf, this.options);
    if (r.kind === 'need_more') return null;
    if (r.kind === 'error') return { ok: false, reason: r.reason, detail: r.message };
    return { ok: true, hello: r, bytes: buf };
  }

  timedOut(buf: Buffer): HelloStageResult {
    return { ok: false, reason: 'tls_timeout', detail: `${buf.length} bytes within ${this.timeoutMs} ms` };
  }

  ended(buf: Buffer): HelloStageResult {
    return { ok: false, reason: 'tls_truncated', detail: `the peer closed after ${buf.length} bytes` };
  }

  gathered(conn: Connection, r: HelloStageResult): void {
    ListenerStats.bump(this.stats.sniHellos, r.ok ? 'ok' : r.reason);
    this.sink.helloRead(conn, r);
  }
}
