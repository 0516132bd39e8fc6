/**
 * Gathering a connection's first bytes for a stage that must see them whole before it can answer:
 * the PROXY header (listener/header-stage.ts) and the ClientHello (tls/hello-stage.ts), and a
 * second ClientHello after a HelloRetryRequest (forward/tcp/hello-watch.ts). One loop for all, on
 * RawSockets and net.Sockets alike:
 *
 *   - each chunk is appended and the stage's `decide` called again on everything gathered (the
 *     decoders are incremental in cost, not in state: the PROXY decoder and the ClientHello reader
 *     each bound what they need before giving up, so what is held stays small);
 *   - a timer bounds the wait (`timeoutMs`); the peer's FIN before an answer is `ended`;
 *   - the stage's `gathered` runs exactly once, with the socket paused, unless the socket closes
 *     first with nothing decided: then nothing runs and the listener's close path counts the
 *     connection.
 *
 * Per connection this costs what the PROXY stage's own loop cost before it moved here: one
 * context, a timer and the data / end / cleanup / timer callbacks (the same instructions per
 * warm connection: bench/README.md "the PROXY stage on the shared byte gatherer"). The stage is
 * one object per listener, so `decide` and the answer's sink are not closures per connection; on a
 * net.Socket the handlers are added with `on`, not `once` (end and close fire at most once anyway,
 * and `once` builds a wrapper per call).
 */
import { Buffer } from 'node:buffer';
import type { Connection } from './connection';
import { RawSocket } from '../transport/raw-socket';

/** A stage that reads a connection's first bytes whole (one object per listener). */
export interface GatherStage<R> {
  /** How long the bytes may take to arrive, in ms. */
  readonly timeoutMs: number;
  /** The answer on everything gathered so far (never empty), or null while more is needed. */
  decide(buf: Buffer): R | null;
  /** The answer when the time runs out first, given what was gathered (maybe nothing). */
  timedOut(buf: Buffer): R;
  /** The answer when the peer ends its side (FIN) first. */
  ended(buf: Buffer): R;
  /** Takes the answer, once per connection; the socket is paused, `buf` is everything gathered. */
  gathered(conn: Connection, result: R, buf: Buffer): void;
}

/**
 * Gather `conn`'s bytes, starting with `first` (bytes an earlier stage read past its own, maybe
 * none), until `stage` answers. The socket is paused when called; it is resumed only if `first`
 * does not already decide.
 */
export function gather<R>(conn: Connection, first: Buffer, stage: GatherStage<R>): void {
  if (first.length > 0) {
    const early = stage.decide(first);
    if (early !== null) {
      stage.gathered(conn, early, first);
      return;
    }
  }
  const socket = conn.socket;
  let buf = first;
  let cleanup: () => void;
  const timer = setTimeout(() => {
    cleanup();
    socket.pause();
    stage.gathered(conn, stage.timedOut(buf), buf);
  }, stage.timeoutMs);
  const onData = (chunk: Buffer): void => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const r = stage.decide(buf);
    if (r === null) return;
    cleanup();
    socket.pause();
    stage.gathered(conn, r, buf);
  };
  const onEnd = (): void => {
    cleanup();
    socket.pause();
    stage.gathered(conn, stage.ended(buf), buf);
  };
  if (socket instanceof RawSocket) {
    // Each read is a fresh buffer (raw-socket.ts; large reads start only in the forwarder), so
    // keeping `chunk` is safe.
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
    socket.on('end', onEnd);
    socket.on('close', cleanup);
  }
  socket.resume();
}
