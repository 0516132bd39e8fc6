/**
 * Large reads for bulk TCP relays.
 *
 * A Node socket normally reads at most 64 KiB per syscall into a freshly allocated buffer, pushes
 * it through the Readable machinery and emits 'data'. For a bulk stream that is the relay's main
 * cost after the kernel's: one allocation (and later GC) per 64 KiB, the stream bookkeeping, and
 * four syscalls per 64 KiB relayed. Node's `onread` socket option reads into one reusable buffer
 * instead and hands it to a callback, skipping all of that; with a 256 KiB buffer a relay moved
 * ~2x the bytes per CPU-second (bench/README.md "Hot path changes").
 *
 * `onread` is a documented option of `new net.Socket()` / `net.connect()`, but a server's accepted
 * sockets cannot be given it, and it would cost every short connection a large buffer. So a relay
 * direction starts with ordinary 'data' reads and switches to a buffer from a small pool once a
 * single read brings BULK_CHUNK_BYTES or more (the kernel had that much queued: a bulk flow). The
 * switch sets the same per-socket fields `onread` sets (found by their symbol descriptions on a
 * probe socket made with `onread`) and calls the handle's `useUserBuffer`, as Node's own
 * initSocketHandle does. If a Node version lacks them, `largeReads` is null and relays keep
 * 'data' reads (tested on Node 20 and 24 in CI: test/integration/tcp-large-reads.test.ts asserts
 * the switch happens there).
 *
 * The buffer is reused for every read, so a chunk may be overwritten only after its write is done:
 * after each write, if the destination still holds bytes (the kernel did not take them all), the
 * source stops reading (the onread callback returns false) until that write completes. The buffer
 * goes back to the pool once both sockets are closed (no read into it and no write from it can be
 * pending then).
 *
 * IPGATE_RELAY_READ_BUFFER (bytes, 0 = off; default 262144) is the tuning and escape hatch.
 */
import { Buffer } from 'node:buffer';
import net from 'node:net';

export const DEFAULT_READ_BUFFER_BYTES = 256 * 1024;
/** A read at least this large switches its direction to large reads (Node reads up to 64 KiB). */
export const BULK_CHUNK_BYTES = 32 * 1024;
/** Buffers kept for reuse after their relay closed; more are left to the GC. */
export const POOL_MAX = 64;

/** Parse IPGATE_RELAY_READ_BUFFER: bytes, 0 turns large reads off. */
export function parseReadBufferEnv(value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_READ_BUFFER_BYTES;
  if (!/^\d+$/.test(value)) throw new Error(`IPGATE_RELAY_READ_BUFFER: "${value}": not a whole number of bytes`);
  const n = Number(value);
  if (n !== 0 && (n < 65_536 || n > 16_777_216)) {
    throw new Error(`IPGATE_RELAY_READ_BUFFER: "${value}": must be 0 (off) or 65536..16777216 bytes`);
  }
  return n;
}

interface Internals {
  kBuffer: symbol;
  kBufferCb: symbol;
}

/** The per-socket fields behind `onread`, or null where this Node does not have them. */
function detect(): Internals | null {
  const buffer = Buffer.alloc(1);
  const callback = (): boolean => true;
  // `onread` is documented for the Socket constructor; @types/node lists it for net.connect() only.
  const probe = new net.Socket({ onread: { buffer, callback } } as net.SocketConstructorOpts);
  const symbols = Object.getOwnPropertySymbols(probe);
  const kBuffer = symbols.find((s) => s.description === 'kBuffer');
  const kBufferCb = symbols.find((s) => s.description === 'kBufferCb');
  const fields = probe as unknown as Record<symbol, unknown>;
  const ok = kBuffer !== undefined && kBufferCb !== undefined && fields[kBuffer] === buffer && fields[kBufferCb] === callback;
  probe.destroy();
  return ok ? { kBuffer, kBufferCb } : null;
}

const internals = detect();
let bufferBytes: number | undefined;

/**
 * Whether relays switch to large reads in this process (Node supports it and it is not turned
 * off). Reads the environment the first time: the TCP forwarder calls it at start, so a bad value
 * stops the start-up with its message.
 */
export function largeReadsEnabled(): boolean {
  bufferBytes ??= parseReadBufferEnv(process.env.IPGATE_RELAY_READ_BUFFER);
  return internals !== null && bufferBytes > 0;
}

/** Counters for tests and the benchmark (not hot: touched once per switched direction). */
export const largeReadStats = { switched: 0, allocated: 0, reused: 0, pooled: 0 };

const pool: Buffer[] = [];

/** A read buffer from the pool (relays on RawSockets switch with it too: tcp-forwarder.ts). */
export function takeReadBuffer(): Buffer {
  return take();
}

/** Back to the pool once no read into it and no write from it can be pending. */
export function giveReadBuffer(b: Buffer): void {
  give(b);
}

function take(): Buffer {
  const b = pool.pop();
  if (b !== undefined) {
    largeReadStats.reused++;
    largeReadStats.pooled = pool.length;
    return b;
  }
  largeReadStats.allocated++;
  // Slow: outside Node's 8 KiB pool, its own memory, which the pool below recycles whole.
  return Buffer.allocUnsafeSlow(bufferBytes!);
}

function give(b: Buffer): void {
  if (pool.length < POOL_MAX) pool.push(b);
  largeReadStats.pooled = pool.length;
}

interface Handle {
  useUserBuffer?: (buf: Uint8Array) => void;
}

/** One relay direction in large-read mode. */
class Direction {
  waiting = false;
  private closes = 0;

  constructor(
    readonly src: net.Socket,
    readonly dst: net.Socket,
    readonly buffer: Buffer,
  ) {}

  /** Write callback of every chunk: resume reading once a chunk the kernel did not take is out. */
  readonly written = (): void => {
    if (this.waiting && this.dst.writableLength === 0) {
      this.waiting = false;
      this.src.resume();
    }
  };

  readonly closed = (): void => {
    if (++this.closes === 2) give(this.buffer);
  };
}

const DIRECTION = Symbol('ipgate.largeReads');
type Switchable = net.Socket & { [DIRECTION]?: Direction; _handle?: Handle | null };

/** The onread callback (`this` is the source socket): relay `n` bytes of the reused buffer. */
function onRead(this: Switchable, n: number, buf: Buffer): boolean {
  const d = this[DIRECTION]!;
  // A destroyed destination: stay paused, as write() returning false does in the 'data' relay; the
  // forwarder's close handlers end this socket.
  if (d.dst.destroyed) return false;
  d.dst.write(buf.subarray(0, n), d.written);
  if (d.dst.writableLength === 0) return true;
  // The kernel took only part of it: the rest still points into `buf`. Stop reading until written.
  d.waiting = true;
  return false;
}

/**
 * Called from a relay's 'data' handler after a read of BULK_CHUNK_BYTES or more (a bulk flow),
 * already written to `dst`, which accepted it without asking to pause: switch `src` to large reads.
 */
export function maybeSwitch(src: Switchable, dst: net.Socket): void {
  if (src[DIRECTION] !== undefined || !largeReadsEnabled()) return;
  // Bytes already queued in the Readable would be overtaken by the next read: only switch when none.
  if (src.readableLength !== 0 || src.destroyed || dst.destroyed) return;
  const handle = src._handle;
  if (typeof handle?.useUserBuffer !== 'function') return;
  const d = new Direction(src, dst, take());
  src[DIRECTION] = d;
  const fields = src as unknown as Record<symbol, unknown>;
  fields[internals!.kBuffer] = d.buffer;
  fields[internals!.kBufferCb] = onRead;
  handle.useUserBuffer(d.buffer);
  src.once('close', d.closed);
  dst.once('close', d.closed);
  largeReadStats.switched++;
}
