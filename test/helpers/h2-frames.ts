/**
 * HTTP/2 frames by hand, for the tests that must send what no well-behaved client sends
 * (test/integration/h2-conformance.test.ts, h2-protections.test.ts): frames (RFC 9113 4.1),
 * an HPACK encoder that writes literal fields without indexing (RFC 7541 6.2.2; enough to build any
 * header block, including invalid ones byte by byte), and an HPACK decoder (static and dynamic
 * table, Huffman: RFC 7541 Appendix A and B) to read the server's responses. A RawH2 client
 * connects over TLS (ALPN h2) or plaintext (h2c prior knowledge) and records every frame it reads.
 */
import net from 'node:net';
import tls from 'node:tls';

export const FRAME = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;
export const ERR = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  SETTINGS_TIMEOUT: 4,
  STREAM_CLOSED: 5,
  FRAME_SIZE_ERROR: 6,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  CONNECT_ERROR: 10,
  ENHANCE_YOUR_CALM: 11,
} as const;
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

/** One frame: 9-byte header (length, type, flags, R + stream id), then the payload. */
export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0), lengthOverride?: number): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(lengthOverride ?? payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream >>> 0, 5);
  return Buffer.concat([h, payload]);
}

export function settings(pairs: [number, number][] = [], ack = false): Buffer {
  const p = Buffer.alloc(pairs.length * 6);
  pairs.forEach(([id, v], i) => {
    p.writeUInt16BE(id, i * 6);
    p.writeUInt32BE(v >>> 0, i * 6 + 2);
  });
  return frame(FRAME.SETTINGS, ack ? FLAG.ACK : 0, 0, p);
}

export function ping(data = Buffer.alloc(8), ack = false): Buffer {
  return frame(FRAME.PING, ack ? FLAG.ACK : 0, 0, data);
}

export function rst(stream: number, code: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code >>> 0);
  return frame(FRAME.RST_STREAM, 0, stream, p);
}

export function windowUpdate(stream: number, increment: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(increment >>> 0);
  return frame(FRAME.WINDOW_UPDATE, 0, stream, p);
}

export function goaway(last: number, code: number): Buffer {
  const p = Buffer.alloc(8);
  p.writeUInt32BE(last >>> 0);
  p.writeUInt32BE(code >>> 0, 4);
  return frame(FRAME.GOAWAY, 0, 0, p);
}

export function priority(stream: number, dependsOn: number, weight = 15): Buffer {
  const p = Buffer.alloc(5);
  p.writeUInt32BE(dependsOn >>> 0);
  p[4] = weight;
  return frame(FRAME.PRIORITY, 0, stream, p);
}

export function data(stream: number, payload: Buffer | string, end = false): Buffer {
  return frame(FRAME.DATA, end ? FLAG.END_STREAM : 0, stream, Buffer.isBuffer(payload) ? payload : Buffer.from(payload));
}

/** An HPACK integer with an N-bit prefix (RFC 7541 5.1), the prefix byte's high bits `first`. */
export function hpackInt(value: number, prefixBits: number, first = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([first | value]);
  const out = [first | max];
  value -= max;
  while (value >= 128) {
    out.push((value % 128) + 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return Buffer.from(out);
}

function hpackString(s: string | Buffer): Buffer {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s, 'latin1');
  return Buffer.concat([hpackInt(b.length, 7, 0), b]);
}

/** Literal header fields without indexing, new names (RFC 7541 6.2.2), in order. */
export function block(fields: [string, string][]): Buffer {
  return Buffer.concat(fields.map(([n, v]) => Buffer.concat([Buffer.from([0]), hpackString(n), hpackString(v)])));
}

/** A literal field with incremental indexing, new name (RFC 7541 6.2.1): enters the dynamic table. */
export function indexedLiteral(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0x40]), hpackString(name), hpackString(value)]);
}

/** An indexed field (RFC 7541 6.1): index 1..61 static, 62.. dynamic. */
export function indexed(index: number): Buffer {
  return hpackInt(index, 7, 0x80);
}

export function headers(stream: number, blockBytes: Buffer, flags: number = FLAG.END_HEADERS | FLAG.END_STREAM): Buffer {
  return frame(FRAME.HEADERS, flags, stream, blockBytes);
}

export function continuation(stream: number, blockBytes: Buffer, end = true): Buffer {
  return frame(FRAME.CONTINUATION, end ? FLAG.END_HEADERS : 0, stream, blockBytes);
}

/** A GET's fields (or `method`), with `extra` after the pseudo-headers. */
export function request(authority: string, path = '/', extra: [string, string][] = [], method = 'GET'): [string, string][] {
  return [[':method', method], [':scheme', 'https'], [':path', path], [':authority', authority], ...extra];
}

// ---- HPACK decoding (the server's responses) ---------------------------------------------------

const STATIC: [string, string][] = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];

/** RFC 7541 Appendix B: code and length of each symbol (256 is EOS). */
const HUFFMAN_CODES = [
  0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8, 0xffffea, 0x3ffffffc, 0xfffffe9, 0xfffffea,
  0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4,
  0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa,
  0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18, 0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb,
  0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f,
  0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74,
  0x75, 0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc,
  0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4, 0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde,
  0xffffeb, 0x7fffdf, 0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3, 0x7fffe4, 0x1fffdc, 0x3fffd8,
  0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea,
  0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1,
  0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4, 0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1,
  0x3fffe7, 0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2,
  0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3,
  0x7ffffe4, 0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3, 0x3fffea, 0x3fffeb, 0x1ffffee,
  0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb, 0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9,
  0x7ffffea, 0x7ffffeb, 0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee, 0x3fffffff,
];
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10,
  12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7,
  7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22,
  23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22,
  23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20,
  24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/** code -> symbol, keyed by `${length}:${code}`. */
const HUFFMAN = new Map<string, number>();
for (let i = 0; i < 257; i++) HUFFMAN.set(`${HUFFMAN_LENGTHS[i]!}:${HUFFMAN_CODES[i]!}`, i);

function huffmanDecode(b: Buffer): string {
  let out = '';
  let code = 0;
  let len = 0;
  for (const byte of b) {
    for (let bit = 7; bit >= 0; bit--) {
      code = code * 2 + ((byte >> bit) & 1);
      len++;
      const sym = HUFFMAN.get(`${len}:${code}`);
      if (sym !== undefined) {
        out += String.fromCharCode(sym);
        code = 0;
        len = 0;
      }
    }
  }
  return out;
}

/** One connection's HPACK decoder (its dynamic table). */
export class HpackDecoder {
  private table: [string, string][] = [];
  private max = 4096;

  decode(b: Buffer): [string, string][] {
    const out: [string, string][] = [];
    let i = 0;
    const int = (prefix: number): number => {
      const mask = (1 << prefix) - 1;
      let v = b[i]! & mask;
      i++;
      if (v < mask) return v;
      let m = 0;
      for (;;) {
        const c = b[i++]!;
        v += (c & 127) * 2 ** m;
        m += 7;
        if ((c & 128) === 0) return v;
      }
    };
    const str = (): string => {
      const huff = (b[i]! & 0x80) !== 0;
      const n = int(7);
      const s = b.subarray(i, i + n);
      i += n;
      return huff ? huffmanDecode(s) : s.toString('latin1');
    };
    const at = (index: number): [string, string] => (index <= STATIC.length ? STATIC[index - 1]! : this.table[index - STATIC.length - 1]!);
    while (i < b.length) {
      const c = b[i]!;
      if (c & 0x80) {
        out.push(at(int(7)));
      } else if (c & 0x40) {
        const idx = int(6);
        const name = idx === 0 ? str() : at(idx)[0];
        const f: [string, string] = [name, str()];
        out.push(f);
        this.table.unshift(f);
        this.evict();
      } else if (c & 0x20) {
        this.max = int(5);
        this.evict();
      } else {
        const idx = int(4);
        const name = idx === 0 ? str() : at(idx)[0];
        out.push([name, str()]);
      }
    }
    return out;
  }

  private evict(): void {
    let size = this.table.reduce((n, [a, v]) => n + a.length + v.length + 32, 0);
    while (size > this.max && this.table.length > 0) {
      const [a, v] = this.table.pop()!;
      size -= a.length + v.length + 32;
    }
  }
}

// ---- a client that sends bytes as given and records what comes back -----------------------------

export interface Event {
  frame: Frame;
  /** HEADERS (with its CONTINUATIONs): the decoded fields. */
  fields?: [string, string][];
}

export class RawH2 {
  readonly events: Event[] = [];
  closed = false;
  private buf = Buffer.alloc(0);
  private readonly hpack = new HpackDecoder();
  private pendingHeaders: { stream: number; parts: Buffer[]; frame: Frame } | null = null;
  private wake: (() => void) | null = null;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.parse();
      this.wake?.();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.wake?.();
    });
  }

  /** Connect (TLS with ALPN h2 unless `plain`), send the preface and `first` (default: an empty SETTINGS). */
  static async connect(
    port: number,
    opts: { plain?: boolean; localAddress?: string; servername?: string; first?: Buffer | null } = {},
  ): Promise<RawH2> {
    const socket =
      opts.plain === true
        ? net.connect({ port, host: '127.0.0.1', localAddress: opts.localAddress })
        : tls.connect({
            port,
            host: '127.0.0.1',
            localAddress: opts.localAddress,
            servername: opts.servername ?? 'web.test',
            ALPNProtocols: ['h2'],
            rejectUnauthorized: false,
          } as tls.ConnectionOptions);
    await new Promise<void>((resolve, reject) => {
      socket.once(opts.plain === true ? 'connect' : 'secureConnect', () => resolve());
      socket.once('error', reject);
    });
    const c = new RawH2(socket);
    if (opts.first !== null) c.send(Buffer.concat([PREFACE, opts.first ?? settings()]));
    return c;
  }

  send(...bufs: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(bufs));
  }

  private parse(): void {
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) return;
      const f: Frame = {
        type: this.buf[3]!,
        flags: this.buf[4]!,
        stream: this.buf.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(this.buf.subarray(9, 9 + len)),
      };
      this.buf = this.buf.subarray(9 + len);
      if (f.type === FRAME.HEADERS || (f.type === FRAME.CONTINUATION && this.pendingHeaders !== null)) {
        let body = f.payload;
        if (f.type === FRAME.HEADERS) {
          let off = 0;
          let pad = 0;
          if (f.flags & FLAG.PADDED) {
            pad = body[0]!;
            off = 1;
          }
          if (f.flags & FLAG.PRIORITY) off += 5;
          body = body.subarray(off, body.length - pad);
          this.pendingHeaders = { stream: f.stream, parts: [], frame: f };
        }
        this.pendingHeaders!.parts.push(body);
        if (f.flags & FLAG.END_HEADERS) {
          const p = this.pendingHeaders!;
          this.pendingHeaders = null;
          let fields: [string, string][] = [];
          try {
            fields = this.hpack.decode(Buffer.concat(p.parts));
          } catch {
            fields = [['x-test-decode', 'failed']];
          }
          this.events.push({ frame: p.frame, fields });
        }
        continue;
      }
      this.events.push({ frame: f });
    }
  }

  /** Wait until `pred` holds over the events (or the connection closes: then `pred` is asked once more). */
  async until(pred: (c: RawH2) => boolean, ms = 5000): Promise<boolean> {
    const deadline = Date.now() + ms;
    for (;;) {
      if (pred(this)) return true;
      if (this.closed || Date.now() >= deadline) return pred(this);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.wake = () => {
          clearTimeout(timer);
          this.wake = null;
          resolve();
        };
      });
    }
  }

  /** The GOAWAY received, if any: its last stream id and error code. */
  goaway(): { last: number; code: number } | null {
    const e = this.events.find((x) => x.frame.type === FRAME.GOAWAY);
    return e === undefined ? null : { last: e.frame.payload.readUInt32BE(0) & 0x7fffffff, code: e.frame.payload.readUInt32BE(4) };
  }

  /** The RST_STREAM code received on `stream`, or null. */
  reset(stream: number): number | null {
    const e = this.events.find((x) => x.frame.type === FRAME.RST_STREAM && x.frame.stream === stream);
    return e === undefined ? null : e.frame.payload.readUInt32BE(0);
  }

  /** The :status of the response HEADERS on `stream`, or null. */
  status(stream: number): number | null {
    const e = this.events.find((x) => x.frame.type === FRAME.HEADERS && x.frame.stream === stream && x.fields !== undefined);
    const s = e?.fields?.find(([n]) => n === ':status');
    return s === undefined ? null : Number(s[1]);
  }

  close(): void {
    this.socket.destroy();
  }
}
