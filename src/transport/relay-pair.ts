/**
 * Bytes both ways between two ByteSockets: a TCP listener's connection on libuv handles
 * (forward/tcp/tcp-forwarder.ts) and an HTTP upgrade's tunnel after its 101
 * (forward/http/relay/tunnel.ts). One contract for both:
 * - every chunk is written as it comes; a write the kernel did not take at once stops reads from
 *   the other side until it drains (a stalled reader never makes memory grow);
 * - a FIN is passed on (end after the queued writes) while the other direction keeps flowing;
 * - both sockets close once both directions have ended (both FINs read, both sent).
 * Errors and closes are the caller's: each sets what one side's failure does to the other.
 */
import type { ByteSocket } from './byte-socket';

/** A direction that turns out to carry a bulk flow may switch how it reads (large-reads.ts). */
export interface BulkSwitch {
  /** A read at least this large, taken at once by the other side, calls `switch`. */
  readonly bytes: number;
  switch(src: ByteSocket, dst: ByteSocket): void;
}

export function relayPair(a: ByteSocket, b: ByteSocket, bulk: BulkSwitch | null = null): void {
  const closeIfDone = (): void => {
    if (a.readEnded && b.readEnded && a.writeFinished && b.writeFinished) {
      a.destroy();
      b.destroy();
    }
  };
  a.onData = (chunk) => {
    if (!b.write(chunk)) a.pause();
    else if (bulk !== null && chunk.length >= bulk.bytes) bulk.switch(a, b);
  };
  b.onData = (chunk) => {
    if (!a.write(chunk)) b.pause();
    else if (bulk !== null && chunk.length >= bulk.bytes) bulk.switch(b, a);
  };
  b.onDrain = () => a.resume();
  a.onDrain = () => b.resume();
  a.onEnd = () => {
    b.end();
    closeIfDone();
  };
  b.onEnd = () => {
    a.end();
    closeIfDone();
  };
  a.onFinish = closeIfDone;
  b.onFinish = closeIfDone;
  a.resume();
  b.resume();
}
