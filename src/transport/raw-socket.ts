/**
 * TCP connections on libuv handles, without net.Socket: the short-connection path of TCP listeners.
 *
 * A net.Socket is a Duplex stream: per connection it builds a Socket, ReadableState and
 * WritableState, and every read, write, end and close goes through the stream state machine and a
 * few nextTicks. For a relay that only moves bytes between two sockets that is most of the cost of
 * a short connection: a minimal net.Socket forwarder did 0.42-0.45 of nginx's connections per
 * CPU-second here, the same forwarder on handles 0.68-0.77 (bench/README.md "Short TCP on libuv
 * handles"). RawSocket drives the handle the way net.Socket does internally (the TCP, TCPConnectWrap,
 * WriteWrap and ShutdownWrap of Node's tcp_wrap / stream_wrap bindings) and keeps only what the
 * listener and the TCP forwarder use: reads into callbacks, writes that say whether they were
 * queued, half-close (shutdown after the queued writes), close, byte counts, addresses.
 *
 * Those bindings are Node internals: `process.binding('tcp_wrap' | 'stream_wrap')` (DEP0111,
 * documentation-only; both are on the allow list it keeps, on Node 20 and 24). `rawSockets` probes
 * them once and is false where they are missing or differ; TCP listeners then use net.Socket
 * (IPGATE_TCP_HANDLES=0 chooses that too: `rawSocketsWanted`). test/integration/raw-socket.test.ts fails on a Node
 * where the probe says no, so CI on each Node says which.
 *
 * Callbacks, not events: each RawSocket has one owner (the listener until the header is read, then
 * the forwarder), so one field per event is enough and costs no EventEmitter per connection.
 */
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { getSystemErrorName } from 'node:util';
import { type ByteSocket, CloseHooks, type Owned, type SocketCallback } from './byte-socket';
import { ioNow, readEnded, readStarted } from './io-clock';

/* The binding objects are untyped: what is used of them is declared here. */
interface StreamHandle {
  onread: (arrayBuffer: ArrayBuffer | undefined) => void;
  readStart(): number;
  readStop(): number;
  writeBuffer(req: WriteReq, buf: Buffer): number;
  writeLatin1String(req: WriteReq, text: string): number;
  shutdown(req: ShutdownReq): number;
  close(cb?: () => void): void;
  connect(req: ConnectReq, address: string, port: number): number;
  connect6(req: ConnectReq, address: string, port: number): number;
  getpeername(out: SocketName): number;
  getsockname(out: SocketName): number;
  setNoDelay(on: boolean): number;
  useUserBuffer(buf: Uint8Array): void;
  readonly writeQueueSize: number;
  readonly bytesRead: number;
  readonly bytesWritten: number;
  [OWNER]?: RawSocket;
}
/** An address as the binding writes it (getpeername / getsockname set all three). */
export interface SocketName {
  address: string;
  family: string;
  port: number;
}
/**
 * Where peerName() and localName() have the binding write, reused: the binding sets `address`,
 * `family` and `port` on the object it is given, and on a fresh `{}` each of the three is a map
 * transition (V8's slow property-add path): ~6,500 instructions per call on Node 20, against
 * ~4,700 with the properties already there (callgrind, bench/README.md "Short and bulk TCP
 * (issue 31)").
 */
const NAME: SocketName = { address: '', family: '', port: 0 };
interface WriteReq {
  handle: StreamHandle;
  /** The write's size: what a queued write takes off `queued` when it completes. */
  bytes: number;
  /** Holds a queued write's buffer alive until it completes (the binding keeps no reference). */
  buffer: Buffer | null;
  oncomplete: (this: WriteReq, status: number) => void;
  async: boolean;
  owner: RawSocket;
}
interface ShutdownReq {
  handle: StreamHandle;
  oncomplete: (this: ShutdownReq, status: number) => void;
  owner: RawSocket;
}
interface ConnectReq {
  oncomplete: (this: ConnectReq, status: number) => void;
  address: string;
  port: number;
  owner: RawSocket;
  /** RawSocket.connect's `done`. */
  done: (err: string | null) => void;
}
interface Bindings {
  TCP: new (type: number) => StreamHandle;
  TCPConnectWrap: new () => ConnectReq;
  WriteWrap: new () => WriteReq;
  ShutdownWrap: new () => ShutdownReq;
  SOCKET: number;
  streamBaseState: Int32Array;
  kReadBytesOrError: number;
  kArrayBufferOffset: number;
  kLastWriteWasAsync: number;
}

const OWNER = Symbol('ipgate.rawSocket');
const UV_EOF = -4095;
/** A handle's `onread` must stay a function: the binding aborts the process on anything else. */
const NOOP = (): void => undefined;

function load(): Bindings | null {
  try {
    const binding = (process as unknown as { binding(name: string): Record<string, unknown> }).binding;
    const tcp = binding('tcp_wrap');
    const stream = binding('stream_wrap');
    const b = {
      TCP: tcp.TCP,
      TCPConnectWrap: tcp.TCPConnectWrap,
      SOCKET: (tcp.constants as Record<string, number>).SOCKET,
      WriteWrap: stream.WriteWrap,
      ShutdownWrap: stream.ShutdownWrap,
      streamBaseState: stream.streamBaseState,
      kReadBytesOrError: stream.kReadBytesOrError,
      kArrayBufferOffset: stream.kArrayBufferOffset,
      kLastWriteWasAsync: stream.kLastWriteWasAsync,
    } as Bindings;
    if (
      typeof b.TCP !== 'function' ||
      typeof b.TCPConnectWrap !== 'function' ||
      typeof b.WriteWrap !== 'function' ||
      typeof b.ShutdownWrap !== 'function' ||
      typeof b.SOCKET !== 'number' ||
      !(b.streamBaseState instanceof Int32Array) ||
      typeof b.kReadBytesOrError !== 'number' ||
      typeof b.kArrayBufferOffset !== 'number' ||
      typeof b.kLastWriteWasAsync !== 'number'
    )
      return null;
    const probe = new b.TCP(b.SOCKET);
    const ok = [
      'readStart',
      'readStop',
      'writeBuffer',
      'writeLatin1String',
      'shutdown',
      'close',
      'connect',
      'connect6',
      'getpeername',
      'getsockname',
      'setNoDelay',
    ].every((m) => typeof (probe as unknown as Record<string, unknown>)[m] === 'function');
    probe.close();
    return ok ? b : null;
  } catch {
    return null;
  }
}

const B = load();

/** Views kept by SharedReadBuffer, one per slot (a read's length modulo this). */
const VIEW_SLOTS = 256;

/**
 * A read buffer every socket of a kind shares (the handle's `useUserBuffer`): reads are
 * synchronous, and `copy` hands each read's bytes over in a Buffer of their own before its
 * callback returns, since the next read overwrites them.
 *
 * The copy is a TypedArray `set` from a view of the first n bytes, not Buffer#copy, whose argument
 * checks and the view it builds for a partial source were ~1,160 of its ~1,900 instructions a
 * request on Node 20 (bench/README.md "What an allowed request's head costs"). The views are kept
 * by length: a keep-alive client's requests are mostly one length, and making the view (and
 * reading a Buffer's `.buffer`, a C++ call on Node 24) was ~600 instructions a read.
 */
export class SharedReadBuffer {
  readonly bytes: Buffer;
  private readonly arrayBuffer: ArrayBuffer;
  private readonly views: (Uint8Array | undefined)[] = new Array<Uint8Array | undefined>(VIEW_SLOTS).fill(undefined);

  constructor(size: number) {
    this.bytes = Buffer.allocUnsafeSlow(size);
    this.arrayBuffer = this.bytes.buffer as ArrayBuffer;
  }

  /** The first `n` bytes (1 <= n <= size), in a Buffer of their own. */
  copy(n: number): Buffer {
    const slot = n & (VIEW_SLOTS - 1);
    let view = this.views[slot];
    if (view === undefined || view.length !== n) {
      view = new Uint8Array(this.arrayBuffer, this.bytes.byteOffset, n);
      this.views[slot] = view;
    }
    const chunk = Buffer.allocUnsafe(n);
    chunk.set(view);
    return chunk;
  }
}

/**
 * The read buffer of every RawSocket not in large-read mode (64 KiB: what libuv asks Node for per
 * read), set once per socket with the handle's `useUserBuffer`. Without it Node allocates 64 KiB
 * per read (malloc, then an ArrayBuffer and its backing store for the bytes read: four reads per
 * short connection, EOFs included) and frees it: ~10,000 instructions a connection, against
 * `useUserBuffer`'s one call and a copy of the bytes read into a pooled Buffer (bench/README.md
 * "Short and bulk TCP (issue 31)"). Reads are synchronous and the copy is made before the read
 * callback returns, so one buffer serves every socket. Null where the handle has no
 * useUserBuffer (a Node without it): reads then allocate as Node's own sockets do.
 */
const SHARED_READ: SharedReadBuffer | null =
  B !== null && typeof (B.TCP.prototype as Partial<StreamHandle>).useUserBuffer === 'function' ? new SharedReadBuffer(64 * 1024) : null;

/** Whether this Node has the bindings RawSocket needs (probed once at load). */
export const rawSocketsAvailable = B !== null;

/**
 * Whether a TCP listener made now should run on handles: available, and not turned off with
 * IPGATE_TCP_HANDLES=0 (read per listener, so a test can run the same suite both ways).
 */
export function rawSocketsWanted(): boolean {
  return rawSocketsAvailable && process.env.IPGATE_TCP_HANDLES !== '0';
}

/** A connection error code from a libuv status (`ECONNREFUSED`, ...). */
export function errorCode(status: number): string {
  try {
    return getSystemErrorName(status);
  } catch {
    return `E${-status}`;
  }
}

export class RawSocket extends CloseHooks implements ByteSocket {
  /** Called per read with a buffer the callee may keep (a fresh one per read). */
  onData: ((this: Owned, chunk: Buffer) => void) | null = null;
  /** The peer sent FIN (reads have stopped; writes may go on). */
  onEnd: SocketCallback | null = null;
  /** The write queue emptied after a write that had to be queued. */
  onDrain: SocketCallback | null = null;
  /** A read, write or connect failed: the socket is already destroyed. */
  onError: ((this: Owned, code: string) => void) | null = null;
  destroyed = false;
  readEnded = false;
  /** shutdown() was called: the write side is ending or ended. */
  writeEnded = false;
  /**
   * Our FIN is out, or nothing can come before it: the shutdown behind queued writes completed,
   * or end() found nothing queued (see end()).
   */
  writeFinished = false;
  /** Bytes written that the kernel had not yet taken. */
  private queued = 0;
  private reading = false;
  private sentBytes = 0;
  private receivedBytes = 0;
  /** performance.now() of the last read or write (idle timeouts). */
  lastActive = performance.now();
  /**
   * Reads go into this buffer of the socket's own (useLargeReads); else into SHARED_READ, copied
   * out per read; else (a Node without useUserBuffer) into a fresh one per read.
   */
  private readBuffer: Buffer | null = null;

  private constructor(private readonly handle: StreamHandle) {
    super();
    handle[OWNER] = this;
    handle.onread = onRead;
    if (SHARED_READ !== null) handle.useUserBuffer(SHARED_READ.bytes);
  }

  /** Wrap a handle the listener's server accepted. */
  static accepted(handle: unknown): RawSocket {
    return new RawSocket(handle as StreamHandle);
  }

  /**
   * Connect to an IP literal. `done(null)` when connected, `done(code)` on failure (the socket is
   * then destroyed). `family` is 4 or 6.
   */
  static connect(address: string, port: number, family: 4 | 6, done: (err: string | null) => void): RawSocket {
    const b = B!;
    const s = new RawSocket(new b.TCP(b.SOCKET));
    const req = new b.TCPConnectWrap();
    req.owner = s;
    req.address = address;
    req.port = port;
    req.done = done;
    req.oncomplete = afterConnect;
    const err = family === 6 ? s.handle.connect6(req, address, port) : s.handle.connect(req, address, port);
    if (err !== 0) {
      s.destroy();
      queueMicrotask(() => done(errorCode(err)));
    }
    return s;
  }

  /**
   * The peer's address (getpeername), or null when the socket is gone. The object returned is
   * shared by every RawSocket and overwritten by the next peerName() or localName(): read it at once.
   */
  peerName(): SocketName | null {
    return this.destroyed || this.handle.getpeername(NAME) !== 0 ? null : NAME;
  }

  /** The local address (getsockname), or null when the socket is gone; shared as peerName's. */
  localName(): SocketName | null {
    return this.destroyed || this.handle.getsockname(NAME) !== 0 ? null : NAME;
  }

  setNoDelay(): void {
    if (!this.destroyed) this.handle.setNoDelay(true);
  }

  /**
   * Read into `buf` from now on instead of a fresh buffer per read (large-reads.ts has why). The
   * chunk onData gets is then a view of `buf`, valid until the next read: the callee must write it
   * at once and pause() this socket while that write is queued (until the peer's onDrain), which
   * is what the relay does anyway. Returns false where the handle cannot.
   */
  useLargeReads(buf: Buffer): boolean {
    if (this.destroyed || this.readBuffer !== null || typeof this.handle.useUserBuffer !== 'function') return false;
    this.readBuffer = buf;
    this.handle.useUserBuffer(buf);
    return true;
  }

  get largeReads(): boolean {
    return this.readBuffer !== null;
  }

  get bytesRead(): number {
    return this.receivedBytes;
  }

  get bytesWritten(): number {
    return this.sentBytes;
  }

  /** Bytes accepted by write() that the kernel has not taken yet. */
  get pendingBytes(): number {
    return this.queued;
  }

  resume(): void {
    if (this.destroyed || this.readEnded || this.reading) return;
    this.reading = true;
    const err = this.handle.readStart();
    if (err !== 0) this.fail(err);
  }

  pause(): void {
    if (this.destroyed || !this.reading) return;
    this.reading = false;
    this.handle.readStop();
  }

  /** Not reading (as net.Socket's isPaused: paused, or never resumed). */
  isPaused(): boolean {
    return !this.reading;
  }

  /**
   * Write `buf`. Returns false when the kernel did not take it all at once: the caller should stop
   * reading its source until onDrain. Writes after destroy or shutdown are dropped.
   */
  write(buf: Buffer): boolean {
    if (this.destroyed || this.writeEnded || buf.length === 0) return !this.destroyed;
    const req = this.writeReq(buf.length);
    const err = this.handle.writeBuffer(req, buf);
    return this.written(req, err, buf);
  }

  /**
   * write() for a string whose chars are bytes (an HTTP head: the parser gives header bytes as
   * latin1 strings). The binding copies what the kernel did not take, so the string is not held.
   */
  writeLatin1(text: string): boolean {
    if (this.destroyed || this.writeEnded || text.length === 0) return !this.destroyed;
    const req = this.writeReq(text.length);
    const err = this.handle.writeLatin1String(req, text);
    return this.written(req, err, null);
  }

  private writeReq(bytes: number): WriteReq {
    let req = spareWriteReq;
    if (req !== null) spareWriteReq = null;
    else req = new B!.WriteWrap();
    req.handle = this.handle;
    req.owner = this;
    req.oncomplete = afterWrite;
    req.async = false;
    req.bytes = bytes;
    return req;
  }

  /** After a write call: false (and the bytes counted as queued) when it went asynchronous. */
  private written(req: WriteReq, err: number, buf: Buffer | null): boolean {
    if (err !== 0) {
      this.fail(err);
      return false;
    }
    this.sentBytes += req.bytes;
    this.lastActive = ioNow();
    const b = B!;
    if (b.streamBaseState[b.kLastWriteWasAsync] === 0) {
      spareWriteReq = req;
      return true;
    }
    req.buffer = buf;
    this.queued += req.bytes;
    return false;
  }

  /**
   * Half-close: FIN after the queued writes. Three cases (bench/README.md "A short connection's
   * last FIN and its close" has the measurements):
   * - writes queued: a shutdown request after them; onFinish when it completes;
   * - nothing queued, the peer's FIN already read: nothing is left to do but send our FIN, and
   *   close(2) sends it after what the kernel still holds, as shutdown(2) would (nothing is
   *   unread, so it is a FIN, not a reset). The socket is closed: a shutdown request there cost a
   *   ShutdownWrap, a system call and a callback into JavaScript before the close, ~8,000
   *   instructions of a short relayed connection's ~88,000;
   * - nothing queued, the peer still sending: a shutdown request without a completion callback.
   *   libuv calls shutdown(2) in the loop's next pending phase and nothing can be written before
   *   it (writes after end() are dropped); a close before then sends the FIN itself. Node calls
   *   back into JavaScript only for a request that has a completion, ~3,000 instructions.
   * With nothing queued the FIN counts as sent at once: writeFinished, and onFinish from here.
   */
  end(): void {
    if (this.destroyed || this.writeEnded) return;
    this.writeEnded = true;
    if (this.queued > 0) {
      const req = new B!.ShutdownWrap();
      req.handle = this.handle;
      req.owner = this;
      req.oncomplete = afterShutdown;
      const err = this.handle.shutdown(req);
      if (err !== 0) this.fail(err);
      return;
    }
    if (this.readEnded) {
      this.destroy();
    } else {
      const err = this.handle.shutdown(new B!.ShutdownWrap());
      if (err !== 0) {
        this.fail(err);
        return;
      }
    }
    this.writeFinished = true;
    this.onFinish?.();
  }

  /**
   * Close now (queued writes are dropped). Idempotent. The close hooks run in a microtask, after
   * the code that called destroy() (the descriptor is closed by then: libuv closes a TCP handle's
   * socket inside uv_close). The handle gets no close callback: Node calls back into JavaScript
   * for one only when it is given, and that callback was ~3,000 instructions per socket, two per
   * short relayed connection (bench/README.md "A short connection's last FIN and its close").
   */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.reading = false;
    this.handle.onread = NOOP;
    this.handle.close();
    closedLater(this);
  }

  /** @internal (runClosed) */
  runCloseHooks(): void {
    this.closed();
  }

  /** @internal */
  readDone(nread: number, arrayBuffer: ArrayBuffer | undefined): void {
    if (nread > 0) {
      this.receivedBytes += nread;
      this.lastActive = ioNow();
      const rb = this.readBuffer;
      if (rb !== null) this.onData?.(rb.subarray(0, nread));
      else if (arrayBuffer !== undefined) this.onData?.(Buffer.from(arrayBuffer, B!.streamBaseState[B!.kArrayBufferOffset], nread));
      else if (SHARED_READ !== null) {
        // The next read on any socket overwrites SHARED_READ: the callee gets a copy it may keep.
        this.onData?.(SHARED_READ.copy(nread));
      }
      return;
    }
    if (nread === 0) return;
    if (nread === UV_EOF) {
      this.readEnded = true;
      this.pause();
      this.onEnd?.();
      return;
    }
    this.fail(nread);
  }

  /** @internal */
  connectDone(status: number, done: (err: string | null) => void): void {
    if (this.destroyed) return;
    if (status < 0) {
      this.destroy();
      done(errorCode(status));
      return;
    }
    this.handle.setNoDelay(true);
    done(null);
  }

  /** @internal */
  writeDone(status: number, bytes: number): void {
    if (this.destroyed) return;
    if (status < 0) {
      this.fail(status);
      return;
    }
    this.queued -= bytes;
    this.lastActive = performance.now();
    if (this.queued <= 0) {
      this.queued = 0;
      this.onDrain?.();
    }
  }

  /** @internal */
  shutdownDone(status: number): void {
    if (this.destroyed) return;
    if (status < 0 && status !== UV_ENOTCONN) {
      this.fail(status);
      return;
    }
    this.writeFinished = true;
    this.onFinish?.();
  }

  /** Our FIN went out after every queued write (called from end() itself when nothing was queued). */
  onFinish: SocketCallback | null = null;

  private fail(status: number): void {
    if (this.destroyed) return;
    this.destroy();
    this.onError?.(errorCode(status));
  }
}

const UV_ENOTCONN = -107;

/**
 * A WriteWrap whose write the kernel took whole, for the next write to use. The binding touches
 * the request object only when a write goes asynchronous (it then attaches its request to it) or
 * fails (it sets `error`): a write that completes at once leaves it as it was, and a new one per
 * write was an object template instantiation and a native call, ~5% of a denied request's
 * instructions (bench/README.md "Repeated head pieces"). Never one that went asynchronous or
 * failed: that one belongs to its write until afterWrite.
 */
let spareWriteReq: WriteReq | null = null;

function onRead(this: StreamHandle, arrayBuffer: ArrayBuffer | undefined): void {
  const outer = readStarted();
  try {
    this[OWNER]!.readDone(B!.streamBaseState[B!.kReadBytesOrError]!, arrayBuffer);
  } finally {
    readEnded(outer);
  }
}

/**
 * The connect's completion, one function for every request (the request carries its socket and
 * `done`) rather than a function per connect.
 */
function afterConnect(this: ConnectReq, status: number): void {
  this.owner.connectDone(status, this.done);
}

function afterWrite(this: WriteReq, status: number): void {
  this.owner.writeDone(status, this.bytes);
}

function afterShutdown(this: ShutdownReq, status: number): void {
  this.owner.shutdownDone(status);
}

/**
 * Sockets destroyed since the last microtask checkpoint, whose close hooks have yet to run: one
 * queueMicrotask per batch rather than a closure per socket.
 */
const toClose: RawSocket[] = [];

function closedLater(s: RawSocket): void {
  toClose.push(s);
  if (toClose.length === 1) queueMicrotask(runClosed);
}

function runClosed(): void {
  // A hook may destroy more sockets: they join this batch (the array is not empty, so no second
  // microtask) and the loop reaches them.
  for (let i = 0; i < toClose.length; i++) {
    try {
      toClose[i]!.runCloseHooks();
    } catch (err) {
      // A hook's bug surfaces as an uncaught error, as it did from the handle's close callback,
      // without leaving the rest of the batch unclosed.
      queueMicrotask(() => {
        throw err;
      });
    }
  }
  toClose.length = 0;
}
