/**
 * A minimal HTTP/1.1 keep-alive relay for bench/load/compare.ts: the ceiling of an engine that
 * parses with llhttp (the WebAssembly build that ships in undici) straight off `net` sockets and
 * relays the bytes, with no node:http on either side. Not a proxy to use: no allowlist, no identity
 * (PROXY protocol, trusted hops; X-Real-IP / X-Forwarded-For are the socket's peer), no timeouts,
 * no metrics, no limits (header or body size, queued bytes, upstream sockets), no CONNECT or
 * Upgrade (400), no trailers, no backpressure, and a pooled upstream socket that the backend has
 * closed gives a 502 rather than a retry.
 *
 *   node dist/bench/load/http-relay-min.js PORT UPSTREAM_PORT
 *
 * One llhttp instance per process, one parser per socket (REQUEST on clients, RESPONSE on
 * upstreams). A request head goes upstream as one string, hop-by-hop headers dropped and
 * X-Real-IP / X-Forwarded-For set; bodies are relayed as llhttp hands them over (decoded, so a
 * chunked body is re-chunked). Upstream sockets are a LIFO pool, one request in flight on each.
 * What one read produces for the other side (head, body, chunk framing) goes out in one `write`.
 * A pipelined request waits, its parser paused, until the response before it is complete. The
 * response gets no header of the relay's own except `connection: close` when the client connection
 * ends after it (not keep-alive, HTTP/1.0 and a chunked response, a body ended by upstream EOF) and
 * `connection: keep-alive` for an HTTP/1.0 keep-alive client.
 */
import net from 'node:net';

/** The llhttp exports used here (undici's wasm build: llhttp's C API, plus malloc / free). */
interface Llhttp {
  memory: { buffer: ArrayBuffer };
  malloc(n: number): number;
  free(p: number): void;
  llhttp_alloc(type: number): number;
  llhttp_free(parser: number): void;
  llhttp_execute(parser: number, at: number, len: number): number;
  llhttp_finish(parser: number): number;
  llhttp_resume(parser: number): void;
  llhttp_get_error_pos(parser: number): number;
  llhttp_get_method(parser: number): number;
  llhttp_get_http_major(parser: number): number;
  llhttp_get_http_minor(parser: number): number;
  llhttp_should_keep_alive(parser: number): number;
  llhttp_message_needs_eof(parser: number): number;
}
type Wasm = { Module: new (b: Buffer) => object; Instance: new (m: object, i: object) => { exports: unknown } };

// eslint-disable-next-line @typescript-eslint/no-require-imports
const K = require('undici/lib/llhttp/constants.js') as {
  TYPE: { REQUEST: number; RESPONSE: number };
  ERROR: { OK: number; PAUSED: number };
  METHODS: Record<string, number>;
};
const { OK, PAUSED } = K.ERROR;
const HEAD = K.METHODS.HEAD!;
const CONNECT = K.METHODS.CONNECT!;
/** llhttp_get_method returns an index into llhttp's method enum (DELETE = 0, GET = 1, ...). */
const METHOD: string[] = [];
for (const [name, i] of Object.entries(K.METHODS)) METHOD[i] = name;

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']);
/** The client's own X-Real-IP / X-Forwarded-For are replaced, not passed on. */
const REQ_DROP = new Set([...HOP, 'x-real-ip', 'x-forwarded-for']);
const CHUNKED = /(?:^|,)\s*chunked\s*$/i;
const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n';
const BAD_GATEWAY = 'HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n';

// The parser inside llhttp_execute / llhttp_finish and the bytes it parses. The callbacks receive
// the parser pointer, but execute is never re-entered (all follow-up work runs after it returns),
// so `cur` is that parser's object; `at` is a pointer into wasm memory, `at - BUF` the same offset
// in `chunk` (sliced there without copying back out of wasm memory).
let cur: Side | null = null;
let chunk: Buffer = Buffer.alloc(0);
let BUF = 0;
let BUF_SIZE = 0;
let view = new Uint8Array(0);

const L = ((): Llhttp => {
  const W = (globalThis as unknown as { WebAssembly: Wasm }).WebAssembly;
  let mod: object;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = new W.Module(require('undici/lib/llhttp/llhttp_simd-wasm.js') as Buffer); // what undici picks first
  } catch {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = new W.Module(require('undici/lib/llhttp/llhttp-wasm.js') as Buffer);
  }
  const span = (f: (s: Side, a: number, b: number) => number) => (_p: number, at: number, len: number) => f(cur!, at - BUF, at - BUF + len);
  const env = {
    wasm_on_message_begin: () => cur!.begin(),
    wasm_on_url: span((s, a, b) => s.text(a, b)),
    wasm_on_status: span((s, a, b) => s.text(a, b)),
    wasm_on_header_field: span((s, a, b) => s.field(a, b)),
    wasm_on_header_value: span((s, a, b) => s.value(a, b)),
    wasm_on_headers_complete: (_p: number, status: number, upgrade: number, keepAlive: number) => cur!.headers(status, upgrade, keepAlive),
    wasm_on_body: span((s, a, b) => s.body(a, b)),
    wasm_on_message_complete: () => cur!.complete(),
  };
  return new W.Instance(mod, { env }).exports as Llhttp;
})();

/** Run `s`'s parser over `data` (copied into the one wasm input buffer); an llhttp error code. */
function exec(s: Side, data: Buffer): number {
  if (data.length > BUF_SIZE) {
    if (BUF !== 0) L.free(BUF);
    BUF_SIZE = Math.ceil(data.length / 16384) * 16384;
    BUF = L.malloc(BUF_SIZE);
  }
  if (view.buffer !== L.memory.buffer) view = new Uint8Array(L.memory.buffer); // memory grew
  view.set(data, BUF);
  cur = s;
  chunk = data;
  try {
    return L.llhttp_execute(s.ptr, BUF, data.length);
  } finally {
    cur = null;
  }
}

/** One write for what a parse produced: a string, one Buffer, or a corked run if large. */
function flush(sock: net.Socket, out: (string | Buffer)[]): void {
  const n = out.length;
  if (n === 0) return;
  if (n === 1) sock.write(out[0]!, 'latin1');
  else {
    let len = 0;
    let strings = true;
    for (const x of out) (len += x.length), (strings &&= typeof x === 'string');
    if (strings) sock.write(out.join(''), 'latin1');
    else if (len <= 65536) {
      const b = Buffer.allocUnsafe(len);
      let o = 0;
      for (const x of out) o += typeof x === 'string' ? b.write(x, o, 'latin1') : x.copy(b, o);
      sock.write(b);
    } else {
      sock.cork();
      for (const x of out) sock.write(x, 'latin1');
      sock.uncork();
    }
  }
  out.length = 0;
}

/** A parser and its side of the relay. Callbacks return 0, -1 (error), or PAUSED. */
abstract class Side {
  /** Header names and values, flat; a name or value split across reads is appended to. */
  h: string[] = [];
  /** The URL (requests) or reason phrase (responses). */
  t = '';
  /** Bytes for the other side produced by the current parse, written by `flush`. */
  out: (string | Buffer)[] = [];
  constructor(public ptr: number) {}
  begin(): number {
    this.h = [];
    this.t = '';
    return 0;
  }
  text(a: number, b: number): number {
    this.t += chunk.toString('latin1', a, b);
    return 0;
  }
  field(a: number, b: number): number {
    const h = this.h;
    if ((h.length & 1) === 0) h.push(chunk.toString('latin1', a, b));
    else h[h.length - 1] += chunk.toString('latin1', a, b);
    return 0;
  }
  value(a: number, b: number): number {
    const h = this.h;
    if ((h.length & 1) === 1) h.push(chunk.toString('latin1', a, b));
    else h[h.length - 1] += chunk.toString('latin1', a, b);
    return 0;
  }
  abstract headers(status: number, upgrade: number, keepAlive: number): number;
  abstract body(a: number, b: number): number;
  abstract complete(): number;
}

/** A client connection: its REQUEST parser, the exchange in flight, what waits behind it. */
class Client extends Side {
  readonly ip: string;
  up: Upstream | null = null;
  /** Bytes read behind a complete request whose response is not complete yet (pipelining). */
  pending: Buffer | null = null;
  paused = false;
  http11 = true;
  keepAlive = true;
  isHead = false;
  chunked = false;
  /** The request is complete / a final response head was sent / end the socket after it. */
  done = false;
  sent = false;
  closing = false;

  constructor(readonly sock: net.Socket) {
    super(L.llhttp_alloc(K.TYPE.REQUEST));
    sock.setNoDelay(true);
    this.ip = (sock.remoteAddress ?? '').replace(/^::ffff:/, '');
    sock.on('data', (d: Buffer) => {
      if (!this.paused) return this.run(d);
      this.pending = this.pending === null ? d : Buffer.concat([this.pending, d]);
      sock.pause();
    });
    sock.on('error', () => sock.destroy());
    sock.on('close', () => {
      const up = this.up;
      this.up = null;
      if (up !== null) (up.client = null), up.sock.destroy();
      L.llhttp_free(this.ptr);
    });
  }

  run(d: Buffer): void {
    const ret = exec(this, d);
    if (this.up !== null) flush(this.up.sock, this.out);
    this.out.length = 0;
    if (ret === OK) return;
    if (ret === PAUSED) {
      // Paused at message complete: keep what follows for after the response.
      this.paused = true;
      const rest = d.subarray(L.llhttp_get_error_pos(this.ptr) - BUF);
      if (rest.length > 0) this.pending = rest;
    } else if (this.up !== null || this.sent) this.sock.destroy();
    else this.sock.end(BAD_REQUEST);
  }

  override headers(_status: number, upgrade: number, keepAlive: number): number {
    const m = L.llhttp_get_method(this.ptr);
    if (upgrade === 1 || m === CONNECT) return -1;
    this.http11 = L.llhttp_get_http_major(this.ptr) === 1 && L.llhttp_get_http_minor(this.ptr) === 1;
    this.keepAlive = keepAlive === 1;
    this.isHead = m === HEAD;
    this.chunked = this.done = this.sent = false;
    let head = `${METHOD[m]} ${this.t} HTTP/1.1\r\n`;
    const h = this.h;
    for (let i = 0; i < h.length; i += 2) {
      const k = h[i]!.toLowerCase();
      if (REQ_DROP.has(k)) continue;
      if (k === 'transfer-encoding' && CHUNKED.test(h[i + 1]!)) this.chunked = true;
      head += `${h[i]}: ${h[i + 1]}\r\n`;
    }
    this.out.push(`${head}x-real-ip: ${this.ip}\r\nx-forwarded-for: ${this.ip}\r\n\r\n`);
    let up = free.pop();
    while (up?.sock.destroyed) up = free.pop();
    this.up = up ?? new Upstream();
    this.up.client = this;
    return 0;
  }

  override body(a: number, b: number): number {
    if (this.chunked) this.out.push(`${(b - a).toString(16)}\r\n`, chunk.subarray(a, b), '\r\n');
    else this.out.push(chunk.subarray(a, b));
    return 0;
  }

  override complete(): number {
    this.done = true;
    if (this.chunked) this.out.push('0\r\n\r\n');
    return PAUSED; // the next request waits for this response
  }

  /** The response is complete: end, or parse the next request. Never inside exec. */
  next(): void {
    this.up = null;
    this.sent = false;
    if (this.closing) {
      this.sock.end();
      return;
    }
    L.llhttp_resume(this.ptr);
    this.paused = false;
    this.sock.resume();
    const p = this.pending;
    this.pending = null;
    if (p !== null && !this.sock.destroyed) this.run(p);
  }
}

/** Idle upstream sockets, most recently used last. */
const free: Upstream[] = [];
let upstreamPort = 0;

/** A pooled keep-alive upstream socket and its RESPONSE parser; `client` while in use. */
class Upstream extends Side {
  readonly sock: net.Socket = net.connect(upstreamPort, '127.0.0.1');
  client: Client | null = null;
  status = 0;
  chunkOut = false;
  /** The response is complete / llhttp says the upstream connection may be reused. */
  done = false;
  keepAlive = false;

  constructor() {
    super(L.llhttp_alloc(K.TYPE.RESPONSE));
    const sock = this.sock;
    sock.setNoDelay(true);
    sock.on('data', (d: Buffer) => this.read(d));
    sock.on('end', () => {
      // EOF ends a response without length or chunking: llhttp_finish calls on_message_complete.
      const c = this.client;
      if (c !== null && !this.done) {
        cur = this;
        try {
          L.llhttp_finish(this.ptr);
        } finally {
          cur = null;
        }
        flush(c.sock, this.out);
        if (this.done) this.finish(false);
      }
      sock.destroy();
    });
    sock.on('error', () => sock.destroy());
    sock.on('close', () => {
      const i = free.indexOf(this);
      if (i >= 0) free.splice(i, 1);
      const c = this.client;
      this.client = null;
      if (c !== null && !c.sock.destroyed) {
        c.up = null;
        if (c.sent) c.sock.destroy();
        else c.sock.end(BAD_GATEWAY);
      }
      L.llhttp_free(this.ptr);
    });
  }

  read(d: Buffer): void {
    const c = this.client;
    if (c === null) return void this.sock.destroy(); // nothing asked for
    const ret = exec(this, d);
    flush(c.sock, this.out);
    if (ret === PAUSED) {
      const rest = d.length - (L.llhttp_get_error_pos(this.ptr) - BUF);
      L.llhttp_resume(this.ptr);
      this.finish(rest === 0 && this.keepAlive);
    } else if (ret !== OK) this.sock.destroy(); // 'close' answers the client
  }

  override headers(status: number, upgrade: number): number {
    const c = this.client!;
    if (upgrade === 1) return -1; // 101: not relayed
    this.status = status;
    let head = `HTTP/1.1 ${status} ${this.t}\r\n`;
    let chunked = false;
    const h = this.h;
    for (let i = 0; i < h.length; i += 2) {
      const k = h[i]!.toLowerCase();
      if (HOP.has(k)) continue;
      // An HTTP/1.0 client gets the decoded body, delimited by closing the connection.
      if (k === 'transfer-encoding' && CHUNKED.test(h[i + 1]!) && ((chunked = true), !c.http11)) continue;
      head += `${h[i]}: ${h[i + 1]}\r\n`;
    }
    if (status < 200) {
      if (c.http11) this.out.push(`${head}\r\n`); // 100 Continue, 103 Early Hints
      return 1;
    }
    // No length and no chunking: the body ends at upstream EOF, so the client's connection must too.
    const eof = !c.isHead && L.llhttp_message_needs_eof(this.ptr) === 1;
    c.closing = !c.keepAlive || eof || (chunked && !c.http11);
    if (c.closing) head += 'connection: close\r\n';
    else if (!c.http11) head += 'connection: keep-alive\r\n';
    this.chunkOut = chunked && c.http11 && !c.isHead && status !== 204 && status !== 304;
    c.sent = true;
    this.out.push(`${head}\r\n`);
    return c.isHead ? 1 : 0; // 1: llhttp skips the body (a HEAD response has none)
  }

  override body(a: number, b: number): number {
    if (this.chunkOut) this.out.push(`${(b - a).toString(16)}\r\n`, chunk.subarray(a, b), '\r\n');
    else this.out.push(chunk.subarray(a, b));
    return 0;
  }

  override complete(): number {
    if (this.status < 200) return 0; // the final response follows
    if (this.chunkOut) this.out.push('0\r\n\r\n');
    this.done = true;
    // Asked here, not in headers(): a HEAD response without a length counts only once skipped.
    this.keepAlive = L.llhttp_should_keep_alive(this.ptr) === 1;
    return PAUSED; // read() releases the socket once execute has returned
  }

  /** The response is complete: back to the pool or closed, and the client goes on. */
  finish(reuse: boolean): void {
    const c = this.client!;
    this.client = null;
    this.done = false;
    // A response before the whole request body: this socket is mid-request, drop both.
    if (!c.done) (c.closing = true), (reuse = false);
    if (reuse) free.push(this);
    else this.sock.destroy();
    c.next();
  }
}

const [port, up] = process.argv.slice(2).map(Number) as [number, number];
upstreamPort = up;
net.createServer((c) => new Client(c)).listen(port, '127.0.0.1');
