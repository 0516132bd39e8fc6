/**
 * A minimal TCP forwarder on libuv handles, without net.Socket, for bench/load/compare.ts
 * (`--proxies ...,tcp-raw-min`): what a connection costs when JavaScript drives Node's TCP handles
 * (process.binding('tcp_wrap'), the layer net.Socket is built on) directly, i.e. the floor under
 * `tcp-min` (two net.Sockets and pipe()). It answers one question: can a Node process reach the
 * short-connection target at all on this machine? Not a proxy to use: it trusts any PROXY v2
 * header without checking it, has no allowlist, no timeouts, no backpressure beyond stopping reads
 * while a write is queued, and handles only what the benchmark's `tcp` and `tcp-ppin` workloads
 * send (IPv4, the header in the first read).
 *
 *   node dist/bench/load/tcp-raw-min.js TCP_PORT PPIN_PORT UPSTREAM_PORT
 *
 * The internal API it uses (TCP, TCPConnectWrap, WriteWrap, ShutdownWrap, streamBaseState) is
 * Node's own and unstable (process.binding is DEP0111, documentation-only for these two); it is
 * the same on Node 20 and 24.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
import { v2 } from './min-proxy-v2';
import { listenRaw } from './raw-listen';

const binding = (process as any).binding as (name: string) => any;
const { TCP, TCPConnectWrap, constants: TCPConstants } = binding('tcp_wrap');
const { WriteWrap, ShutdownWrap, streamBaseState, kReadBytesOrError, kArrayBufferOffset, kLastWriteWasAsync } = binding('stream_wrap');

const UV_EOF = -4095;
/** `onread` must stay a function: the binding asserts on anything else (a process abort). */
const NOOP = (): void => undefined;

interface Handle {
  onread: (ab: ArrayBuffer | undefined) => void;
  readStart(): number;
  readStop(): number;
  writeBuffer(req: unknown, buf: Buffer): number;
  shutdown(req: unknown): number;
  close(cb?: () => void): void;
  connect(req: unknown, addr: string, port: number): number;
  getpeername(out: { address?: string; port?: number }): number;
  getsockname(out: { address?: string; port?: number }): number;
  setNoDelay(on: boolean): number;
  writeQueueSize: number;
}

/** One side of a relay: a handle, whether it has ended reading and writing. */
class Side {
  peer!: Side;
  readEnded = false;
  writeEnded = false;
  closed = false;
  constructor(
    readonly handle: Handle,
    readonly pair: Pair,
  ) {}
}

/** Both handles of one forwarded connection. */
class Pair {
  client: Side;
  up: Side;
  connected = false;
  /** Bytes for upstream before its connect completed. */
  pending: Buffer[] = [];
  constructor(clientHandle: Handle, upHandle: Handle) {
    this.client = new Side(clientHandle, this);
    this.up = new Side(upHandle, this);
    this.client.peer = this.up;
    this.up.peer = this.client;
  }

  destroy(): void {
    for (const s of [this.client, this.up]) {
      if (s.closed) continue;
      s.closed = true;
      s.handle.onread = NOOP;
      s.handle.close();
    }
  }
}

function write(side: Side, buf: Buffer): void {
  if (side.closed) return;
  const req = new WriteWrap();
  req.handle = side.handle;
  req.oncomplete = (status: number) => {
    if (status < 0) side.pair.destroy();
    else if (side.handle.writeQueueSize === 0 && !side.peer.readEnded && !side.peer.closed) side.peer.handle.readStart();
  };
  req.async = false;
  const err = side.handle.writeBuffer(req, buf);
  if (err !== 0) {
    side.pair.destroy();
    return;
  }
  // Queued in the kernel's stead: stop reading the other side until it drains.
  if (streamBaseState[kLastWriteWasAsync] !== 0) {
    req.buffer = buf; // the binding keeps no reference to a queued write's buffer
    if (!side.peer.closed) side.peer.handle.readStop();
  }
}

function shutdown(side: Side): void {
  if (side.closed || side.writeEnded) return;
  side.writeEnded = true;
  const req = new ShutdownWrap();
  req.handle = side.handle;
  req.oncomplete = () => {
    if (side.readEnded && side.peer.readEnded) side.pair.destroy();
  };
  if (side.handle.shutdown(req) !== 0) side.pair.destroy();
}

function onData(side: Side, ab: ArrayBuffer | undefined): void {
  const n = streamBaseState[kReadBytesOrError] as number;
  if (n > 0 && ab !== undefined) {
    const buf = Buffer.from(ab, streamBaseState[kArrayBufferOffset] as number, n);
    const pair = side.pair;
    if (side === pair.client && !pair.connected) pair.pending.push(buf);
    else write(side.peer, buf);
    return;
  }
  if (n === 0) return;
  if (n === UV_EOF) {
    side.readEnded = true;
    side.handle.readStop();
    if (side.peer.readEnded) side.pair.destroy();
    else if (side === side.pair.client && !side.pair.connected)
      return; // flushed on connect
    else shutdown(side.peer);
    return;
  }
  side.pair.destroy();
}

function forward(clientHandle: Handle, header: Buffer, rest: Buffer | null, upPort: number): Pair {
  const upHandle: Handle = new TCP(TCPConstants.SOCKET);
  const pair = new Pair(clientHandle, upHandle);
  const req = new TCPConnectWrap();
  req.oncomplete = (status: number) => {
    if (status < 0 || pair.up.closed) {
      pair.destroy();
      return;
    }
    pair.connected = true;
    upHandle.setNoDelay(true);
    const out = rest !== null && rest.length > 0 ? [header, rest, ...pair.pending] : [header, ...pair.pending];
    pair.pending = [];
    write(pair.up, out.length === 1 ? out[0]! : Buffer.concat(out));
    if (pair.client.readEnded) shutdown(pair.up);
    upHandle.onread = (ab) => onData(pair.up, ab);
    upHandle.readStart();
  };
  req.address = '127.0.0.1';
  req.port = upPort;
  if (upHandle.connect(req, '127.0.0.1', upPort) !== 0) pair.destroy();
  return pair;
}

function main(): void {
  const [tcpPort, ppinPort, upPort] = process.argv.slice(2).map(Number) as [number, number, number];
  const peer: { address?: string; port?: number } = {};
  const local: { address?: string; port?: number } = {};
  listenRaw<Handle>(tcpPort, (h) => {
    h.getpeername(peer);
    h.getsockname(local);
    const pair = forward(h, v2(peer.address!, peer.port!, local.address!, local.port!), null, upPort);
    h.onread = (ab) => onData(pair.client, ab);
    h.readStart();
  });
  listenRaw<Handle>(ppinPort, (h) => {
    let pair: Pair | null = null;
    h.onread = (ab) => {
      if (pair !== null) {
        onData(pair.client, ab);
        return;
      }
      const n = streamBaseState[kReadBytesOrError] as number;
      if (n <= 0 || ab === undefined) {
        h.onread = NOOP;
        h.close();
        return;
      }
      const d = Buffer.from(ab, streamBaseState[kArrayBufferOffset] as number, n);
      const len = 16 + d.readUInt16BE(14);
      const src = `${d[16]}.${d[17]}.${d[18]}.${d[19]}`;
      const dst = `${d[20]}.${d[21]}.${d[22]}.${d[23]}`;
      pair = forward(h, v2(src, d.readUInt16BE(24), dst, d.readUInt16BE(26)), d.subarray(len), upPort);
    };
    h.readStart();
  });
}

main();
