/**
 * The floor of an HTTP/1.1 keep-alive proxy in Node, for bench/load/compare.ts (`--proxies
 * ...,http-raw-min`, workloads `http` and `http-denied`): JavaScript driving Node's TCP handles
 * (process.binding('tcp_wrap'), as src/transport/raw-socket.ts and bench/load/tcp-raw-min.ts do)
 * with the least work a request can cost there. It answers one question for issue 31: what share of
 * nginx's work per CPU-second can any Node process reach on this machine for these two jobs?
 *
 *   node dist/bench/load/http-raw-min.js HTTP_PORT DENIED_PORT UPSTREAM_PORT [parse]
 *
 * `parse` (compare.ts proxy `http-parse-min`): every request and response also goes through
 * ipgate's own parser (src/forward/http/relay/llhttp-parser.ts, llhttp in wasm, header lists given
 * back with `recycle` as ipgate does), which frames the responses and whose verdict closes a
 * connection on a malformed message. The bytes forwarded are the same; what it adds is the least a
 * proxy that validates both heads pays for it (bench/README.md "The floor of a validating proxy").
 *
 * - HTTP_PORT relays: each client connection gets its own upstream connection, opened at accept
 *   (no pool, no allowlist). A request head is found by its blank line, gets `X-Real-IP` and
 *   `X-Forwarded-For` (the socket's peer) before that line, and goes upstream in one write. The
 *   response is framed by the blank line and `Content-Length` (searched in the head's bytes) and
 *   relayed as read, one write per read.
 * - DENIED_PORT answers every request head with one prebuilt keep-alive 403 (what nginx's `deny`
 *   sends), one write per read.
 *
 * Not a proxy to use: it handles only what wrk sends here (heads without bodies, each within 8 KiB,
 * responses with Content-Length), has no timeouts, no backpressure (wrk has one request in flight
 * per connection), no header validation, no limits. Its numbers are an upper bound for ipgate, whose
 * engine does everything this leaves out (bench/README.md "The floor of a Node HTTP proxy").
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
import { HttpParser, type ParserSink } from '../../src/forward/http/relay/llhttp-parser';
import { listenRaw } from './raw-listen';

const PARSE = process.argv[5] === 'parse';

const binding = (process as any).binding as (name: string) => any;
const { TCP, TCPConnectWrap, constants: TCPConstants } = binding('tcp_wrap');
const { WriteWrap, streamBaseState, kReadBytesOrError, kArrayBufferOffset } = binding('stream_wrap');

const NOOP = (): void => undefined;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
const CONTENT_LENGTH = Buffer.from('\r\ncontent-length:', 'latin1');
const DENIED = Buffer.from(
  'HTTP/1.1 403 Forbidden\r\nServer: min\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nConnection: keep-alive\r\n\r\nforbidden\n',
  'latin1',
);

interface Handle {
  onread: (ab: ArrayBuffer | undefined) => void;
  readStart(): number;
  writeBuffer(req: unknown, buf: Buffer): number;
  writeLatin1String(req: unknown, s: string): number;
  close(cb?: () => void): void;
  connect(req: unknown, addr: string, port: number): number;
  getpeername(out: { address?: string; port?: number }): number;
  setNoDelay(on: boolean): number;
}

function readBuffer(ab: ArrayBuffer | undefined): Buffer | null {
  const n = streamBaseState[kReadBytesOrError] as number;
  if (n <= 0 || ab === undefined) return null;
  return Buffer.from(ab, streamBaseState[kArrayBufferOffset] as number, n);
}

/** One write of a Buffer or a latin1 string; `onError` if it fails now or later. */
function write(h: Handle, data: Buffer | string, onError: () => void): void {
  const req = new WriteWrap();
  req.handle = h;
  req.oncomplete = (status: number) => {
    if (status < 0) onError();
  };
  req.async = false;
  if (typeof data === 'string') {
    if (h.writeLatin1String(req, data) !== 0) onError();
    return;
  }
  req.buffer = data;
  if (h.writeBuffer(req, data) !== 0) onError();
}

/** A case-insensitive search for `\r\ncontent-length:` in head[0, end): the value, or -1. */
function contentLength(head: Buffer, end: number): number {
  outer: for (let i = 0; i + CONTENT_LENGTH.length <= end; i++) {
    for (let j = 0; j < CONTENT_LENGTH.length; j++) {
      const c = head[i + j]!;
      if ((c >= 65 && c <= 90 ? c + 32 : c) !== CONTENT_LENGTH[j]) continue outer;
    }
    let k = i + CONTENT_LENGTH.length;
    while (head[k] === 32) k++;
    let v = 0;
    while (head[k]! >= 48 && head[k]! <= 57) v = v * 10 + head[k++]! - 48;
    return v;
  }
  return -1;
}

/** A parser that counts the heads it completes and gives each head's list back. */
class Counted<T extends 'request' | 'response'> {
  heads = 0;
  readonly parser: HttpParser<T>;
  constructor(type: T) {
    const sink: ParserSink<{ rawHeaders: string[] }> = {
      onHead: (head) => {
        this.heads++;
        this.parser.recycle(head.rawHeaders);
      },
      onBody: NOOP,
      onMessageComplete: NOOP,
    };
    this.parser = new HttpParser(type, sink as never);
  }

  /** Parses all of `data` (pausing after each message, as ipgate's parser does); false if it is malformed. */
  parse(data: Buffer): boolean {
    const p = this.parser;
    let at = 0;
    for (;;) {
      const r = p.execute(at === 0 ? data : data.subarray(at));
      if (r.kind === 'ok') return true;
      if (r.kind !== 'paused') return false;
      at += r.consumed;
      p.resume();
      if (at >= data.length) return true;
    }
  }
}

class Relay {
  /** Request bytes not yet a whole head. */
  partial: Buffer | null = null;
  /** Heads written before the upstream connection completed. */
  pending: string[] = [];
  connected = false;
  closed = false;
  /** Response body bytes still to relay before the next head. */
  bodyLeft = 0;
  readonly forwarded: string;
  readonly requests = PARSE ? new Counted('request') : null;
  readonly responses = PARSE ? new Counted('response') : null;
  readonly close = (): void => {
    if (this.closed) return;
    this.closed = true;
    this.requests?.parser.free();
    this.responses?.parser.free();
    this.client.onread = NOOP;
    this.up.onread = NOOP;
    this.client.close();
    this.up.close();
  };

  constructor(
    readonly client: Handle,
    readonly up: Handle,
    ip: string,
  ) {
    this.forwarded = `X-Real-IP: ${ip}\r\nX-Forwarded-For: ${ip}\r\n\r\n`;
  }

  onClient(buf: Buffer | null): void {
    if (buf === null) {
      this.close();
      return;
    }
    if (this.requests !== null && !this.requests.parse(buf)) {
      this.close();
      return;
    }
    let data = buf;
    if (this.partial !== null) {
      data = Buffer.concat([this.partial, buf]);
      this.partial = null;
    }
    let out = '';
    let at = 0;
    for (;;) {
      const end = data.indexOf(CRLFCRLF, at);
      if (end < 0) break;
      out += data.toString('latin1', at, end + 2) + this.forwarded;
      at = end + 4;
    }
    if (at < data.length) this.partial = data.subarray(at);
    if (out === '') return;
    if (this.connected) write(this.up, out, this.close);
    else this.pending.push(out);
  }

  onUpstream(buf: Buffer | null): void {
    if (buf === null) {
      this.close();
      return;
    }
    if (this.responses !== null) {
      // The parser frames the responses (the relay forwards the bytes as read).
      if (!this.responses.parse(buf)) {
        this.close();
        return;
      }
      write(this.client, buf, this.close);
      return;
    }
    // Framing only (the relay forwards the bytes as read): skip bodies, find each head's length.
    let at = 0;
    while (at < buf.length) {
      if (this.bodyLeft > 0) {
        const n = Math.min(this.bodyLeft, buf.length - at);
        this.bodyLeft -= n;
        at += n;
        continue;
      }
      const end = buf.indexOf(CRLFCRLF, at);
      if (end < 0) break; // a head split across reads: relayed; the benchmark's fit in one
      const len = contentLength(buf.subarray(at), end - at);
      at = end + 4;
      this.bodyLeft = Math.max(len, 0);
    }
    write(this.client, buf, this.close);
  }
}

function main(): void {
  const [httpPort, deniedPort, upPort] = process.argv.slice(2).map(Number) as [number, number, number];
  const peer: { address?: string; port?: number } = {};
  listenRaw<Handle>(httpPort, (client) => {
    client.getpeername(peer);
    client.setNoDelay(true);
    const up: Handle = new TCP(TCPConstants.SOCKET);
    const relay = new Relay(client, up, peer.address!);
    client.onread = (ab) => relay.onClient(readBuffer(ab));
    client.readStart();
    const req = new TCPConnectWrap();
    req.oncomplete = (status: number) => {
      if (status < 0 || relay.closed) {
        relay.close();
        return;
      }
      relay.connected = true;
      up.setNoDelay(true);
      up.onread = (ab) => relay.onUpstream(readBuffer(ab));
      up.readStart();
      if (relay.pending.length > 0) write(up, relay.pending.join(''), relay.close);
      relay.pending = [];
    };
    req.address = '127.0.0.1';
    req.port = upPort;
    if (up.connect(req, '127.0.0.1', upPort) !== 0) relay.close();
  });
  listenRaw<Handle>(deniedPort, (client) => {
    client.setNoDelay(true);
    let partial: Buffer | null = null;
    const requests = PARSE ? new Counted('request') : null;
    const close = (): void => {
      client.onread = NOOP;
      client.close();
      requests?.parser.free();
    };
    client.onread = (ab) => {
      const buf = readBuffer(ab);
      if (buf === null) {
        close();
        return;
      }
      if (requests !== null) {
        // The parser finds the heads (and refuses a malformed one: the connection closes).
        if (!requests.parse(buf)) {
          close();
          return;
        }
        const heads = requests.heads;
        requests.heads = 0;
        if (heads > 0) write(client, heads === 1 ? DENIED : Buffer.concat(new Array<Buffer>(heads).fill(DENIED)), close);
        return;
      }
      const data: Buffer = partial === null ? buf : Buffer.concat([partial, buf]);
      partial = null;
      let heads = 0;
      let at = 0;
      for (;;) {
        const end = data.indexOf(CRLFCRLF, at);
        if (end < 0) break;
        heads++;
        at = end + 4;
      }
      if (at < data.length) partial = Buffer.from(data.subarray(at));
      if (heads === 0) return;
      write(client, heads === 1 ? DENIED : Buffer.concat(new Array<Buffer>(heads).fill(DENIED)), close);
    };
    client.readStart();
  });
}

main();
