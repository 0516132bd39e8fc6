/**
 * One socket contract for the relays: what the HTTP engine (forward/http/relay/) and its tunnels
 * use of a connection, whatever carries it. Two implementations:
 * - RawSocket (raw-socket.ts): a TCP connection on its libuv handle, no net.Socket. Plaintext HTTP
 *   listeners and upstreams given as IP literals run on it where Node has the bindings.
 * - NetByteSocket (below): a net.Socket behind the same callbacks. TLS client connections (a
 *   TLSSocket is a net.Socket), upstreams named by DNS (net.connect's lookup), and every socket
 *   when handles are unavailable or turned off (IPGATE_TCP_HANDLES=0).
 *
 * Callbacks, not events: each socket has one owner at a time (the listener's stages, then the
 * engine, then a tunnel), so one field per event is enough; the close hooks are a list because the
 * listener, the engine and the forwarder each need to know.
 *
 * Every callback and close hook is called with the socket as `this`, and the socket's `owner`
 * field is free for whoever installs them: a function shared by every socket then finds its
 * connection there, where a closure made per socket would be ~56 bytes and its context more, kept
 * for the connection's life and dying in the old generation with it (bench/README.md "What a
 * connection leaves in the old generation"). Arrow functions ignore `this` and work as well.
 * `record` is the same for the hooks of the stages that stay for the connection's life without
 * owning its callbacks (the listener's, the HTTP forwarder's): the connection's record, set once.
 */
import { performance } from 'node:perf_hooks';
import type net from 'node:net';

/** What a callback or close hook gets as `this`: the socket, with the owner its installer set. */
export interface Owned {
  /** Set by whoever installs the callbacks, for functions shared by every socket (see above). */
  owner: object | null;
  /**
   * A client socket's connection record (connection/connection.ts), set by the listener when it
   * accepts the socket (and by the HTTP forwarder on the socket a TLS handshake gives it), for
   * the close hooks and error handler shared by every connection of a listener (see above); on a
   * TCP listener's relayed upstream socket, its client's, for the forwarder's error handler.
   */
  record: object | null;
  /**
   * The other socket of a relay (transport/relay-pair.ts), set when the relay starts, for the
   * relay's handlers, which are shared by every pair. Not `owner`: an HTTP tunnel's client socket
   * keeps its RelayConn there.
   */
  peer: ByteSocket | null;
}

/** A callback without an argument, called with the socket as `this`. */
export type SocketCallback = (this: Owned) => void;

export interface ByteSocket extends Owned {
  /** Called per read with a buffer the callee may keep. */
  onData: ((this: Owned, chunk: Buffer) => void) | null;
  /** The peer sent FIN (reads have stopped; writes may go on). */
  onEnd: SocketCallback | null;
  /** Everything written so far has been taken by the kernel, after a write() that returned false. */
  onDrain: SocketCallback | null;
  /** A read, write or connect failed with this code; the socket is destroyed (or being destroyed). */
  onError: ((this: Owned, code: string) => void) | null;
  /** Our FIN went out (after every queued write). */
  onFinish: SocketCallback | null;
  readonly destroyed: boolean;
  /** The peer's FIN was read. */
  readonly readEnded: boolean;
  /** Our FIN went out. */
  readonly writeFinished: boolean;
  /** performance.now() of the last read or write (idle timeouts are checked against it). */
  readonly lastActive: number;
  readonly bytesRead: number;
  readonly bytesWritten: number;
  /** Bytes accepted by write() that the kernel has not taken yet (a stalled peer: upstream send timeouts). */
  readonly pendingBytes: number;
  /** Not reading (paused, or never resumed): a peer silent while paused is not timed out for it. */
  isPaused(): boolean;
  /** Write `buf`. False when it could not all go out at once: stop the source until onDrain. */
  write(buf: Buffer): boolean;
  /** write() for a string whose chars are bytes (HTTP heads: the parser gives header bytes as latin1). */
  writeLatin1(text: string): boolean;
  /** Half-close: FIN after the queued writes. */
  end(): void;
  /** Close now (queued writes are dropped). Idempotent. */
  destroy(): void;
  pause(): void;
  resume(): void;
  /** Run `fn` once the socket is closed (every hook once, in the order added, `this` the socket). */
  onClose(fn: SocketCallback): void;
}

/**
 * `onClose` as every ByteSocket keeps it: hooks run once each, in the order added, when the
 * implementation calls `closed()`; a hook added after that runs in a microtask.
 */
export abstract class CloseHooks implements Owned {
  owner: object | null = null;
  record: object | null = null;
  peer: ByteSocket | null = null;
  /**
   * The first three hooks in fields and the rest in a list made at the fourth: an HTTP client
   * socket has three (the listener's, the forwarder's and the relay's), and a list per socket was
   * ~180 bytes that died in the old generation with the connection (bench/README.md "What a
   * connection leaves in the old generation").
   */
  private hook0: SocketCallback | null = null;
  private hook1: SocketCallback | null = null;
  private hook2: SocketCallback | null = null;
  private moreHooks: SocketCallback[] | null = null;
  private hooksRun = false;

  onClose(fn: SocketCallback): void {
    if (this.hooksRun) queueMicrotask(() => fn.call(this));
    else if (this.hook0 === null) this.hook0 = fn;
    else if (this.hook1 === null) this.hook1 = fn;
    else if (this.hook2 === null) this.hook2 = fn;
    else (this.moreHooks ??= []).push(fn);
  }

  /** The socket is closed: run the hooks (a second call does nothing). */
  protected closed(): void {
    if (this.hooksRun) return;
    this.hooksRun = true;
    const h0 = this.hook0;
    const h1 = this.hook1;
    const h2 = this.hook2;
    const more = this.moreHooks;
    this.hook0 = this.hook1 = this.hook2 = this.moreHooks = null;
    if (h0 !== null) h0.call(this);
    if (h1 !== null) h1.call(this);
    if (h2 !== null) h2.call(this);
    if (more !== null) for (const h of more) h.call(this);
  }
}

/** A net.Socket (or TLSSocket) behind the ByteSocket callbacks. */
export class NetByteSocket extends CloseHooks implements ByteSocket {
  onData: ((this: Owned, chunk: Buffer) => void) | null = null;
  onEnd: SocketCallback | null = null;
  onDrain: SocketCallback | null = null;
  onError: ((this: Owned, code: string) => void) | null = null;
  onFinish: SocketCallback | null = null;
  readEnded = false;
  writeFinished = false;
  lastActive = performance.now();
  /**
   * Bytes this wrapper handed to the socket. net.Socket's own `bytesWritten` is a getter that
   * walks the stream's write queue through a copy of it: ~1,200 instructions a call on Node 20,
   * twice per HTTPS request (bench/README.md "HTTPS keep-alive: the socket's byte count"). The
   * engine only reads differences of this count, and every write of a relayed exchange goes
   * through here.
   */
  private written = 0;

  constructor(readonly socket: net.Socket) {
    super();
    socket.on('data', (d: Buffer) => {
      this.lastActive = performance.now();
      this.onData?.(d);
    });
    socket.on('end', () => {
      this.readEnded = true;
      this.onEnd?.();
    });
    socket.on('drain', () => {
      this.lastActive = performance.now();
      this.onDrain?.();
    });
    socket.on('finish', () => {
      this.writeFinished = true;
      this.onFinish?.();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => this.onError?.(err.code ?? 'ECONNRESET'));
    socket.once('close', () => this.closed());
  }

  get destroyed(): boolean {
    return this.socket.destroyed;
  }

  get bytesRead(): number {
    return this.socket.bytesRead;
  }

  get bytesWritten(): number {
    return this.written;
  }

  get pendingBytes(): number {
    return this.socket.writableLength;
  }

  isPaused(): boolean {
    return this.socket.isPaused();
  }

  write(buf: Buffer): boolean {
    if (this.socket.destroyed) return false;
    if (this.socket.writableEnded) return true; // dropped, as RawSocket drops writes after end()
    this.lastActive = performance.now();
    this.written += buf.length;
    return this.socket.write(buf);
  }

  writeLatin1(text: string): boolean {
    if (this.socket.destroyed) return false;
    if (this.socket.writableEnded) return true;
    this.lastActive = performance.now();
    this.written += text.length; // latin1: a byte per char
    return this.socket.write(text, 'latin1');
  }

  end(): void {
    if (!this.socket.destroyed) this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    if (!this.socket.destroyed) this.socket.resume();
  }
}
