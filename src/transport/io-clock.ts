/**
 * The clock of the read callback running now. A socket's read callback (RawSocket, TlsByteSocket)
 * reads `performance.now()` once when it starts; what that callback stamps with a time for a
 * timeout (the socket's `lastActive` after a read and after each write it makes, a connection's
 * keep-alive or header deadline) takes that reading through `ioNow()` instead of reading the clock
 * again. Outside a read callback (a timer, a write's completion, a connection's start) `ioNow()`
 * reads the clock.
 *
 * Why: a denied keep-alive request read the clock three times in one callback (its read, the
 * 403's write, the keep-alive deadline), and on Node 24 each `performance.now()` is a brand check
 * (`hasOwnProperty`) and a fast API call, ~150-200 instructions (bench/README.md "One clock
 * reading per read callback"). A stamp is at most the callback's own run late, microseconds against
 * timeouts of seconds. Durations that are measured (a request's, an upstream's answer) read the
 * clock themselves.
 */
import { performance } from 'node:perf_hooks';

/** The reading of the read callback running now; 0 outside one. */
let current = 0;

/** The time for a timeout's stamp: the running read callback's reading, else the clock. */
export function ioNow(): number {
  return current !== 0 ? current : performance.now();
}

/**
 * A read callback starts: the clock is read for its stamps. Returns the outer reading, which
 * `readEnded` restores in the callback's `finally` (0 in practice: libuv does not nest reads).
 */
export function readStarted(): number {
  const outer = current;
  current = performance.now();
  return outer;
}

/** The read callback is over (its `finally`, so a throw does not leave its reading behind). */
export function readEnded(outer: number): void {
  current = outer;
}
