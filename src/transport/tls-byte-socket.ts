/**
 * A TLS client connection after its handshake, driven on its TLSWrap handle (docs/http-engines.md,
 * "Sockets"; bench/README.md "HTTPS keep-alive on the TLS handle").
 *
 * A TLSSocket is a net.Socket: each read is pushed through a Readable (push, `data` event,
 * nextTicks to read more) and each write through a Writable (its buffer, a callback, `drain`). The
 * relay engine needs none of that: it reads in callbacks and writes what it has at once. After the
 * handshake this class takes over the TLSSocket's handle (Node's TLSWrap, the same stream-base
 * binding RawSocket drives for TCP in raw-socket.ts): reads come to `onread` as they leave
 * OpenSSL, and writes go to `writeBuffer` / `writeLatin1String` with a write request of its own.
 *
 * The TLSSocket stays the connection's owner for everything else: the handshake's callbacks (a
 * refused renegotiation is still its `secure` event, counted by terminate.ts), TLS errors (its
 * `error` event), closing (`destroy`, which closes the TLSWrap, the TCP handle under it and the
 * accepted socket the server counts), and its `close` event, which runs the close hooks.
 *
 * Three rules of the TLSWrap binding shape the write side (bench/README.md "HTTPS keep-alive on
 * the TLS handle"):
 * - One write at a time: a second write while one is in flight aborts the process (a net.Socket's
 *   Writable never issues one). Writes made meanwhile are held and go out as one `writev` when
 *   the write in flight completes.
 * - Every write completes asynchronously (after OpenSSL's records reach the socket under it):
 *   ~850,000 of ~850,000 writes in bench/README.md "HTTPS keep-alive: the socket's byte count".
 *   So, as a net.Socket does, write() says false only once 16 KiB are waiting, and onDrain
 *   follows when they are gone.
 * - A shutdown (close_notify, then FIN) must follow the last write's completion: TLSWrap encrypts
 *   the alert at once but sends encrypted output only when no write is in flight. end() waits.
 *
 * `takeTlsSocket` returns null where the binding lacks what is used here, or with
 * IPGATE_TLS_HANDLES=0: the socket then stays a NetByteSocket (byte-socket.ts).
 */
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import type tls from 'node:tls';
import { type ByteSocket, CloseHooks, type Owned, type SocketCallback } from './byte-socket';
import { ioNow, readEnded, readStarted } from './io-clock';
import { errorCode, SharedReadBuffer } from './raw-socket';

interface TlsHandle {
  onread: (arrayBuffer: ArrayBuffer | undefined) => void;
  readStart(): number;
  readStop(): number;
  writeBuffer(req: WriteReq, buf: Buffer): number;
  writeLatin1String(req: WriteReq, text: string): number;
  writev(req: WriteReq, chunks: Buffer[], allBuffers: true): number;
  shutdown(req: ShutdownReq): number;
  useUserBuffer(buf: Uint8Array): void;
  [OWNER]?: TlsByteSocket;
}
interface WriteReq {
  handle: TlsHandle;
  oncomplete: (this: WriteReq, status: number) => void;
  async: boolean;
  bytes: number;
  /** Holds what was written until the write completes, as net.Socket does. */
  buffer: Buffer | Buffer[] | null;
  owner: TlsByteSocket;
}
interface ShutdownReq {
  handle: TlsHandle;
  oncomplete: (this: ShutdownReq, status: number) => void;
  owner: TlsByteSocket;
}
interface Bindings {
  WriteWrap: new () => WriteReq;
  ShutdownWrap: new () => ShutdownReq;
  streamBaseState: Int32Array;
  kReadBytesOrError: number;
  kLastWriteWasAsync: number;
}

const OWNER = Symbol('ipgate.tlsByteSocket');
const UV_EOF = -4095;
const UV_ENOTCONN = -107;
/** What a net.Socket buffers before write() says false (its writableHighWaterMark). */
const HIGH_WATER = 16 * 1024;
const NOOP = (): void => undefined;

function load(): Bindings | null {
  try {
    const binding = (process as unknown as { binding(name: string): Record<string, unknown> }).binding;
    const stream = binding('stream_wrap');
    const tlsWrap = binding('tls_wrap');
    const b = {
      WriteWrap: stream.WriteWrap,
      ShutdownWrap: stream.ShutdownWrap,
      streamBaseState: stream.streamBaseState,
      kReadBytesOrError: stream.kReadBytesOrError,
      kLastWriteWasAsync: stream.kLastWriteWasAsync,
    } as Bindings;
    const proto = (tlsWrap.TLSWrap as { prototype?: Record<string, unknown> } | undefined)?.prototype;
    if (
      typeof b.WriteWrap !== 'function' ||
      typeof b.ShutdownWrap !== 'function' ||
      !(b.streamBaseState instanceof Int32Array) ||
      typeof b.kReadBytesOrError !== 'number' ||
      typeof b.kLastWriteWasAsync !== 'number' ||
      proto === undefined ||
      !['readStart', 'readStop', 'writeBuffer', 'writeLatin1String', 'writev', 'shutdown', 'useUserBuffer'].every(
        (m) => typeof proto[m] === 'function',
      )
    )
      return null;
    return b;
  } catch {
    return null;
  }
}

const B = load();

/**
 * The read buffer of every TlsByteSocket: TLSWrap hands each decrypted chunk to `onread` from this
 * buffer (`useUserBuffer`) instead of a fresh ArrayBuffer and backing store per read; the chunk is
 * copied out before the callback returns (reads are synchronous), so one buffer serves all.
 * 16 KiB: OpenSSL's largest record's plaintext, which is what TLSWrap reads at a time.
 */
const SHARED_READ: SharedReadBuffer | null = B !== null ? new SharedReadBuffer(16 * 1024) : null;

/** Whether this Node has what TlsByteSocket uses (probed once at load). */
export const tlsHandlesAvailable = B !== null;

/**
 * Process-wide counts of the paths taken, for the tests that prove each ran
 * (test/integration/tls-handle.test.ts): sockets taken over, writes held behind one in flight,
 * write requests reused.
 */
export const tlsHandleCounts = { taken: 0, held: 0, reused: 0 };

/**
 * The TLSSocket `socket`, just secured, as a TlsByteSocket, with the decrypted bytes its Readable
 * already holds (a request sent with the client's Finished); null where handles are unavailable
 * or turned off (IPGATE_TLS_HANDLES=0), or the socket has no handle left.
 */
export function takeTlsSocket(socket: tls.TLSSocket): { socket: TlsByteSocket; early: Buffer } | null {
  if (B === null || process.env.IPGATE_TLS_HANDLES === '0' || socket.destroyed) return null;
  const handle = (socket as unknown as { _handle: TlsHandle | null })._handle;
  // A write of the TLSSocket's own still in flight would be a second write on the handle.
  if (handle === null || handle === undefined || socket.writableLength > 0) return null;
  const chunks: Buffer[] = [];
  for (let c = socket.read() as Buffer | null; c !== null; c = socket.read() as Buffer | null) chunks.push(c);
  const early = chunks.length === 0 ? Buffer.alloc(0) : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  tlsHandleCounts.taken++;
  return { socket: new TlsByteSocket(socket, handle), early };
}

export class TlsByteSocket extends CloseHooks implements ByteSocket {
  onData: ((this: Owned, chunk: Buffer) => void) | null = null;
  onEnd: SocketCallback | null = null;
  onDrain: SocketCallback | null = null;
  onError: ((this: Owned, code: string) => void) | null = null;
  onFinish: SocketCallback | null = null;
  readEnded = false;
  writeFinished = false;
  lastActive = performance.now();
  private failed = false;
  /** end() was called: writes are dropped; the shutdown goes out once `queued` is 0. */
  private writeEnded = false;
  private shutdownSent = false;
  /** Bytes handed to the handle whose write has not completed. */
  private queued = 0;
  /** A write is on the handle, not completed: TLSWrap takes one at a time (a second aborts the process). */
  private inFlight = false;
  /** Writes made while one is in flight, in order: written together when it completes. */
  private backlog: Buffer[] | null = null;
  /** A write said false: onDrain when the queue empties. */
  private needDrain = false;
  private reading: boolean;
  private sentBytes = 0;
  private receivedBytes = 0;

  constructor(
    readonly socket: tls.TLSSocket,
    private readonly handle: TlsHandle,
  ) {
    super();
    handle[OWNER] = this;
    handle.onread = onRead;
    handle.useUserBuffer(SHARED_READ!.bytes);
    // The TLSSocket resumed its handle for the handshake and net.Socket's `reading` flag stays
    // set: its Readable never asks for a read again (nothing is pushed to it from here on).
    this.reading = (handle as unknown as { reading?: boolean }).reading === true;
    socket.on('error', (err: NodeJS.ErrnoException) => this.fail(err.code ?? 'ECONNRESET'));
    socket.once('close', () => this.closed());
  }

  get destroyed(): boolean {
    return this.socket.destroyed;
  }

  get bytesRead(): number {
    return this.receivedBytes;
  }

  get bytesWritten(): number {
    return this.sentBytes;
  }

  get pendingBytes(): number {
    return this.queued;
  }

  isPaused(): boolean {
    return !this.reading;
  }

  resume(): void {
    if (this.socket.destroyed || this.readEnded || this.reading) return;
    this.reading = true;
    const err = this.handle.readStart();
    if (err !== 0) this.failStatus(err);
  }

  pause(): void {
    if (this.socket.destroyed || !this.reading) return;
    this.reading = false;
    this.handle.readStop();
  }

  write(buf: Buffer): boolean {
    if (this.socket.destroyed) return false;
    if (this.writeEnded || buf.length === 0) return true;
    if (this.inFlight) return this.hold(buf);
    const req = this.writeReq(buf.length);
    req.buffer = buf;
    return this.dispatched(req, this.handle.writeBuffer(req, buf));
  }

  writeLatin1(text: string): boolean {
    if (this.socket.destroyed) return false;
    if (this.writeEnded || text.length === 0) return true;
    if (this.inFlight) return this.hold(Buffer.from(text, 'latin1'));
    const req = this.writeReq(text.length);
    return this.dispatched(req, this.handle.writeLatin1String(req, text));
  }

  private writeReq(bytes: number): WriteReq {
    let req = spareWrites.pop();
    if (req !== undefined) tlsHandleCounts.reused++;
    else req = new B!.WriteWrap();
    req.handle = this.handle;
    req.owner = this;
    req.oncomplete = afterWrite;
    req.async = false;
    req.bytes = bytes;
    req.buffer = null;
    return req;
  }

  /** A write while another is in flight: held for the writev that follows its completion. */
  private hold(buf: Buffer): boolean {
    tlsHandleCounts.held++;
    if (this.backlog === null) this.backlog = [buf];
    else this.backlog.push(buf);
    return this.counted(buf.length);
  }

  /** After a write()'s call on the handle: its bytes are counted as sent, and queued while in flight. */
  private dispatched(req: WriteReq, err: number): boolean {
    if (!this.issued(err)) return false;
    return this.counted(this.inFlight ? req.bytes : 0, req.bytes);
  }

  /**
   * After any write call on the handle: false when the call failed (the socket is destroyed), else
   * true with `inFlight` set, whether the write is in flight (every TLS write so far; one taken at
   * once is not, and its request is not reused, since whether the binding let go of it is not known).
   */
  private issued(err: number): boolean {
    if (err !== 0) {
      this.failStatus(err);
      return false;
    }
    this.inFlight = B!.streamBaseState[B!.kLastWriteWasAsync] !== 0;
    return true;
  }

  private counted(queued: number, sent = queued): boolean {
    this.sentBytes += sent;
    this.queued += queued;
    this.lastActive = ioNow();
    if (this.queued < HIGH_WATER) return true;
    this.needDrain = true;
    return false;
  }

  end(): void {
    if (this.socket.destroyed || this.writeEnded) return;
    this.writeEnded = true;
    if (this.queued === 0) this.shutdown();
  }

  private shutdown(): void {
    this.shutdownSent = true;
    const req = new B!.ShutdownWrap();
    req.handle = this.handle;
    req.owner = this;
    req.oncomplete = afterShutdown;
    const err = this.handle.shutdown(req);
    if (err !== 0 && err !== UV_ENOTCONN) this.failStatus(err);
  }

  destroy(): void {
    this.socket.destroy();
  }

  /** @internal */
  readDone(nread: number): void {
    if (nread > 0) {
      if (this.socket.destroyed) return;
      this.receivedBytes += nread;
      this.lastActive = ioNow();
      // The next read on any socket overwrites SHARED_READ: the callee gets a copy it may keep.
      this.onData?.(SHARED_READ!.copy(nread));
      return;
    }
    if (nread === 0) return;
    if (nread === UV_EOF) {
      if (this.readEnded) return;
      this.readEnded = true;
      this.pause();
      this.onEnd?.();
      return;
    }
    this.failStatus(nread);
  }

  /** @internal */
  writeDone(status: number, bytes: number): void {
    this.inFlight = false;
    if (this.socket.destroyed) return;
    if (status < 0) {
      this.failStatus(status);
      return;
    }
    this.queued -= bytes;
    this.lastActive = performance.now();
    const held = this.backlog;
    if (held !== null) {
      // What was written meanwhile goes out as one write (TLSWrap takes one at a time).
      this.backlog = null;
      let n = 0;
      for (const c of held) n += c.length;
      const req = this.writeReq(n);
      req.buffer = held;
      // Counted as sent and queued when held.
      if (!this.issued(this.handle.writev(req, held, true))) return;
      if (!this.inFlight) this.queued -= n;
    }
    if (this.queued > 0) return;
    this.queued = 0;
    if (this.writeEnded && !this.shutdownSent) this.shutdown();
    if (this.needDrain) {
      this.needDrain = false;
      this.onDrain?.();
    }
  }

  /** @internal */
  shutdownDone(status: number): void {
    if (this.socket.destroyed) return;
    if (status < 0 && status !== UV_ENOTCONN) {
      this.failStatus(status);
      return;
    }
    this.writeFinished = true;
    this.onFinish?.();
  }

  private failStatus(status: number): void {
    this.fail(errorCode(status));
  }

  private fail(code: string): void {
    if (this.failed) return;
    this.failed = true;
    this.handle.onread = NOOP;
    this.socket.destroy();
    this.onError?.(code);
  }
}

function onRead(this: TlsHandle): void {
  const outer = readStarted();
  try {
    this[OWNER]!.readDone(B!.streamBaseState[B!.kReadBytesOrError]!);
  } finally {
    readEnded(outer);
  }
}

function afterWrite(this: WriteReq, status: number): void {
  this.buffer = null;
  if (completionDepth === 0 && cooling.length > 0) {
    for (const req of cooling) if (spareWrites.length < MAX_SPARE_WRITES) spareWrites.push(req);
    cooling.length = 0;
  }
  if (status === 0) cooling.push(this);
  completionDepth++;
  try {
    this.owner.writeDone(status, this.bytes);
  } finally {
    completionDepth--;
  }
}

/**
 * Write requests whose write completed, for the next writes: a new WriteWrap per TLS write (each
 * one completes asynchronously, so RawSocket's reuse of a request the kernel took at once never
 * applies) is an object-template instantiation, a weak handle and its collection, ~5,400
 * instructions a request on Node 20 and ~2,800 on Node 24 (bench/README.md "HTTPS keep-alive on
 * the TLS handle"). A request is reusable once the binding has let go of it, which it does after
 * `oncomplete` returns (it detaches the request from the object then; attaching a new write to an
 * object still attached aborts the process). So a completed request cools first: it becomes spare
 * at the next completion that is not nested in another's callback (`completionDepth` 0), by which
 * time the callback that completed it has returned. Only requests that succeeded are kept.
 */
const spareWrites: WriteReq[] = [];
const cooling: WriteReq[] = [];
let completionDepth = 0;
const MAX_SPARE_WRITES = 64;

function afterShutdown(this: ShutdownReq, status: number): void {
  this.owner.shutdownDone(status);
}
