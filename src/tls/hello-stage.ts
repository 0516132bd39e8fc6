/**
 * The ClientHello stage of a TCP listener with routes (docs/architecture.md "The data path": after
 * the PROXY header, before the route). It gathers the connection's first bytes until
 * readClientHello (client-hello.ts) can say done or error, within the listener's hello timeout,
 * and hands the listener one result. Nothing is consumed: on `ok`, `bytes` holds the hello and
 * whatever followed it, which the forwarder sends to the backend untouched.
 *
 * Bytes are gathered as the PROXY stage gathers its header (listener.ts readHeader): each chunk
 * appended, the reader called again on the whole (it costs one step per record header, not per
 * byte, so a hello split into 1-byte writes costs O(records) per call); the reader's caps bound
 * what is held (at most maxHelloLength + 324 bytes: client-hello.ts), the timer bounds the time.
 * On RawSockets each read is a fresh buffer (raw-socket.ts), so keeping chunks is safe.
 */
import { ListenerStats } from '../metrics/listener-stats';
import type { Connection } from '../listener/connection';
import { RawSocket } from '../transport/raw-socket';
import { readClientHello, type ClientHelloDone, type ReadOptions } from './client-hello';
import type { TlsReason } from './codes';

/** What the stage hands on: the hello and the bytes to forward, or why the connection must close. */
export type HelloStageResult =
  | { readonly ok: true; readonly hello: ClientHelloDone; readonly bytes: Buffer }
  | { readonly ok: false; readonly reason: TlsReason; readonly detail: string | null };

/** Who takes the result: the listener (one object, no closure per connection for the callback). */
export interface HelloSink {
  helloRead(conn: Connection, result: HelloStageResult): void;
}

export interface HelloStageOptions extends ReadOptions {
  /** `sni.helloTimeoutMs`: a hello not complete by then closes the connection (`tls_timeout`). */
  timeoutMs: number;
}

/**
 * Read the ClientHello of `conn`, starting with `first` (the bytes after the PROXY header, maybe
 * none). The socket is paused when called and paused again before `sink.helloRead` runs, exactly
 * once, unless the socket closes first with nothing decided (then the listener's close path runs).
 * Counts the outcome in `stats.sniHellos` (`ok` or the reason).
 */
export function readHello(conn: Connection, first: Buffer, options: HelloStageOptions, stats: ListenerStats, sink: HelloSink): void {
  const early = decide(first, options);
  if (early !== null) {
    finish(conn, early, stats, sink);
    return;
  }
  const socket = conn.socket;
  let buf = first;
  let cleanup: () => void;
  const timer = setTimeout(() => {
    cleanup();
    finish(conn, { ok: false, reason: 'tls_timeout', detail: `${buf.length} bytes within ${options.timeoutMs} ms` }, stats, sink);
  }, options.timeoutMs);
  const onData = (chunk: Buffer): void => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const r = decide(buf, options);
    if (r === null) return;
    cleanup();
    socket.pause();
    finish(conn, r, stats, sink);
  };
  const onEnd = (): void => {
    cleanup();
    finish(conn, { ok: false, reason: 'tls_truncated', detail: `the peer closed after ${buf.length} bytes` }, stats, sink);
  };
  if (socket instanceof RawSocket) {
    cleanup = (): void => {
      clearTimeout(timer);
      socket.onData = null;
      socket.onEnd = null;
    };
    socket.onData = onData;
    socket.onEnd = onEnd;
    socket.onClose(cleanup);
  } else {
    cleanup = (): void => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('end', onEnd);
    };
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', cleanup);
  }
  socket.resume();
}

/** The reader's answer on `buf` as a stage result; null while it needs more. */
function decide(buf: Buffer, options: ReadOptions): HelloStageResult | null {
  if (buf.length === 0) return null;
  const r = readClientHello(buf, options);
  if (r.kind === 'need_more') return null;
  if (r.kind === 'error') return { ok: false, reason: r.reason, detail: r.message };
  return { ok: true, hello: r, bytes: buf };
}

function finish(conn: Connection, r: HelloStageResult, stats: ListenerStats, sink: HelloSink): void {
  ListenerStats.bump(stats.sniHellos, r.ok ? 'ok' : r.reason);
  sink.helloRead(conn, r);
}
