/**
 * Bytes both ways between two sockets: the one relay of the data path, for a TCP listener's
 * connections (forward/tcp/tcp-forwarder.ts, and after its handshake watch, hello-watch.ts) and
 * an HTTP upgrade's tunnel after its 101 (forward/http/relay/tunnel.ts). Two entries, one per
 * socket model, with one contract:
 * - every chunk is written as it comes; a write the kernel did not take at once stops reads from
 *   the other side until it drains (a stalled reader never makes memory grow);
 * - a FIN is passed on (end after the queued writes) while the other direction keeps flowing;
 * - a direction whose read brings `bulk.bytes` or more at once, taken by the other side without a
 *   pause, is a bulk flow: `bulk.switch` may move it to large reads (forward/tcp/large-reads.ts);
 * - errors and closes are the caller's: each sets what one side's failure does to the other.
 *
 * `relayPair` takes ByteSockets (RawSocket, NetByteSocket, TlsByteSocket): both sockets close
 * once both directions have ended (both FINs read, both sent). `netRelayPair` takes two
 * net.Sockets as they are, with no ByteSocket wrapper: a wrapper costs six listeners and their
 * closures per socket on the short-connection path (bench/README.md "TCP relay: one socket
 * contract"); net.Sockets close by their own allowHalfOpen rules and the caller's close handlers.
 */
import type net from 'node:net';
import type { ByteSocket, Owned } from './byte-socket';

/** A direction that turns out to carry a bulk flow may switch how it reads (large-reads.ts). */
export interface BulkSwitch<S> {
  /** A read at least this large, taken at once by the other side, calls `switch`. */
  readonly bytes: number;
  switch(src: S, dst: S): void;
}

/**
 * relayPair for ByteSockets, built once per `bulk` (at module load by its callers): returns
 * `relay(a, b)`, which relays both ways and resumes both. The handlers are functions shared by
 * every pair, with the socket as `this` and the other one in its `peer` slot (byte-socket.ts):
 * closures made per pair were 7 functions and their context for the connection's life, ~350 bytes
 * that died in the old generation with it (bench/README.md "A TCP connection's relay without
 * closures").
 */
export function relayPair<S extends ByteSocket>(bulk: BulkSwitch<S> | null): (a: S, b: S) => void {
  const bytes = bulk === null ? Infinity : bulk.bytes;
  function onData(this: Owned, chunk: Buffer): void {
    const src = this as S;
    const dst = src.peer as S;
    if (!dst.write(chunk)) src.pause();
    else if (chunk.length >= bytes) bulk!.switch(src, dst);
  }
  return (a, b) => {
    a.peer = b;
    b.peer = a;
    a.onData = onData;
    b.onData = onData;
    a.onDrain = onPeerDrained;
    b.onDrain = onPeerDrained;
    a.onEnd = onEnded;
    b.onEnd = onEnded;
    a.onFinish = onFinished;
    b.onFinish = onFinished;
    a.resume();
    b.resume();
  };
}

/** `this` is the destination that drained: its source, paused by onData, is the peer. */
function onPeerDrained(this: Owned): void {
  this.peer!.resume();
}

/** This socket read the far end's FIN: pass it on to the other socket, after the writes queued there. */
function onEnded(this: Owned): void {
  const s = this as ByteSocket;
  s.peer!.end();
  closeIfDone(s);
}

function onFinished(this: Owned): void {
  closeIfDone(this as ByteSocket);
}

/** Both directions ended (both FINs read, both sent): both sockets close. */
function closeIfDone(s: ByteSocket): void {
  const p = s.peer!;
  if (s.readEnded && p.readEnded && s.writeFinished && p.writeFinished) {
    s.destroy();
    p.destroy();
  }
}

/** The other socket of a net.Socket pair, kept on the socket: the handlers below are shared. */
const PEER = Symbol('ipgate.relayPeer');
interface RelaySocket extends net.Socket {
  [PEER]?: RelaySocket;
}

/**
 * relayPair for two net.Sockets (both allowHalfOpen), built once per `bulk` (a TCP forwarder
 * builds it once per listener): returns `relay(a, b)`, which relays both ways and resumes `a`
 * (`b` flows once its 'data' handler is on). Not stream.pipe(): pipe() registers ~8 listeners
 * per direction (and removes them at the end) and allocates its closures per connection; this is
 * 3 shared functions, the peer kept on the socket. A destroyed destination makes write() return
 * false, so the source stays paused until the caller's close handlers destroy it.
 * bench/README.md "Hot path" has the before/after.
 */
export function netRelayPair(bulk: BulkSwitch<net.Socket> | null): (a: net.Socket, b: net.Socket) => void {
  const bytes = bulk === null ? Infinity : bulk.bytes;
  function onData(this: RelaySocket, chunk: Buffer): void {
    const dst = this[PEER]!;
    if (!dst.write(chunk)) this.pause();
    else if (chunk.length >= bytes) bulk!.switch(this, dst);
  }
  function one(src: RelaySocket, dst: RelaySocket): void {
    src[PEER] = dst;
    src.on('data', onData);
    src.on('end', onEnd);
    dst.on('drain', onDrain);
  }
  return (a, b) => {
    one(a, b);
    one(b, a);
    a.resume();
  };
}

function onEnd(this: RelaySocket): void {
  this[PEER]!.end();
}

/** `this` is the destination that drained: its source is the peer. */
function onDrain(this: RelaySocket): void {
  this[PEER]!.resume();
}
