/**
 * A raw HTTP/1.1 backend for tests that must see exactly the bytes a proxy wrote upstream: a
 * net.Server (no node:http, whose parser would hide or reject what we want to observe) that frames
 * requests itself, strictly as RFC 9112 section 6 says (head up to CRLFCRLF; Transfer-Encoding
 * chunked, else Content-Length, else no body) and answers each request the way `behaviour` says:
 * well framed, close-delimited, early, reset, truncated, stalled or never.
 *
 * It is the witness for two proxy properties:
 * - what it parsed as requests, with their bodies as it framed them (`requests`): a request the
 *   proxy did not admit, or a body that is not what the client sent, shows up here;
 * - connection reuse: while a response on a connection is unfinished, or after a response whose
 *   framing leaves the connection unusable (close-delimited, truncated, stalled, `Connection:
 *   close`), the connection is tainted, and a further request head on it is a `reused` violation.
 *   A proxy that stopped sending a request body half way and reused the socket is caught by the
 *   body check instead: this backend keeps reading the body it was promised, so the next request's
 *   head lands in it.
 */
import net from 'node:net';

export type BehaviourKind =
  /** Read the whole body, answer with Content-Length. */
  | 'length'
  /** Read the whole body, answer chunked (several chunks). */
  | 'chunked'
  /** Read the whole body, answer `Connection: close` with no length, body, then close. */
  | 'close-delimited'
  /** Answer (Content-Length, keep-alive) right after the head, then go on reading the body. */
  | 'early'
  /** Answer `Connection: close` right after the head without reading the body, then close. */
  | 'early-close'
  /** Reset the connection (RST) once the head is read, before any response byte. */
  | 'reset-before-response'
  /** Send the response head and part of the body (Content-Length promises more), then reset. */
  | 'reset-mid-response'
  /** Send the response head and part of the body, then close (FIN): a truncated response. */
  | 'close-mid-response'
  /** Send the response head and part of the body, then hold the connection open for holdMs, then close. */
  | 'stall'
  /** Never answer; close after holdMs. */
  | 'hang'
  /** An upgrade request: read its body, `101`, then echo the tunnel until holdMs, then close. Else `length`. */
  | 'upgrade';

export interface Behaviour {
  kind: BehaviourKind;
  /** Wait before answering, ms (a slow backend). */
  delayMs: number;
  /** Response body bytes (what a truncated response promises). */
  size: number;
  /** The response body is written in this many pieces, `delayMs / pieces` apart. */
  pieces: number;
  /** stall / hang / upgrade: how long the connection is held before this backend closes it. */
  holdMs: number;
}

export interface SeenRequest {
  /** Backend connection number (1, 2, ...) and the request's position on it (1, 2, ...). */
  conn: number;
  seq: number;
  method: string;
  target: string;
  version: string;
  /** Header lines as received, names lower-cased. */
  headers: [string, string][];
  /** The body as this backend framed it (decoded if chunked), capped at BODY_CAP bytes. */
  body: Buffer;
  /** The body's framing completed (all Content-Length bytes, or the last chunk). */
  bodyComplete: boolean;
  behaviour: BehaviourKind | null;
  at: number;
}

export interface BackendViolation {
  kind: 'reused' | 'unparseable' | 'framing';
  conn: number;
  detail: string;
  /** What this connection carried before (target:behaviour), for the report. */
  history: string[];
}

const HEAD_CAP = 64 * 1024;
const BODY_CAP = 256 * 1024;

type Phase = 'head' | 'length' | 'chunk-size' | 'chunk-data' | 'chunk-crlf' | 'trailer' | 'tunnel' | 'dead';

interface ConnState {
  id: number;
  socket: net.Socket;
  buf: Buffer;
  phase: Phase;
  /** Body bytes (or chunk bytes) still expected. */
  remaining: number;
  req: SeenRequest | null;
  behaviour: Behaviour | null;
  /** The response has been (or is being) started for the current request. */
  answered: boolean;
  /** Why another request on this connection would be a fault; null when it may be reused. */
  taint: string | null;
  seq: number;
  history: string[];
}

export interface RawBackendOptions {
  /** How to answer a request; null: not a request the test sent (answered `length`, recorded). */
  behaviour(target: string, method: string): Behaviour | null;
}

export class RawBackend {
  readonly server: net.Server;
  readonly requests: SeenRequest[] = [];
  readonly violations: BackendViolation[] = [];
  /** Connections accepted so far, and those still open. */
  accepted = 0;
  private readonly open = new Set<ConnState>();

  constructor(private readonly options: RawBackendOptions) {
    this.server = net.createServer((socket) => this.onConnection(socket));
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this.port;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Connections the proxy still holds open to this backend. */
  get openConnections(): number {
    return this.open.size;
  }

  /** One line per open connection: its number, phase, taint and history (for a leak report). */
  describeOpen(): string[] {
    return [...this.open].map((c) => `conn ${c.id} phase=${c.phase} taint=${c.taint ?? '-'} history=[${c.history.join(' ')}]`);
  }

  close(): Promise<void> {
    for (const c of this.open) c.socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private onConnection(socket: net.Socket): void {
    const c: ConnState = {
      id: ++this.accepted,
      socket,
      buf: Buffer.alloc(0),
      phase: 'head',
      remaining: 0,
      req: null,
      behaviour: null,
      answered: false,
      taint: null,
      seq: 0,
      history: [],
    };
    this.open.add(c);
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(c, d));
    socket.on('error', () => undefined); // resets from the proxy are part of the game
    socket.once('close', () => {
      c.phase = 'dead';
      this.open.delete(c);
    });
  }

  private violation(c: ConnState, kind: BackendViolation['kind'], detail: string): void {
    this.violations.push({ kind, conn: c.id, detail, history: [...c.history] });
  }

  private onData(c: ConnState, d: Buffer): void {
    if (c.phase === 'dead') return;
    if (c.phase === 'tunnel') {
      c.socket.write(d);
      return;
    }
    c.buf = c.buf.length === 0 ? d : Buffer.concat([c.buf, d]);
    this.advance(c);
  }

  /** Consume as much of the buffer as the current framing allows. */
  private advance(c: ConnState): void {
    for (;;) {
      if (c.phase === 'dead' || c.phase === 'tunnel' || c.socket.destroyed) return;
      if (c.phase === 'head') {
        if (c.buf.length === 0) return;
        const end = c.buf.indexOf('\r\n\r\n');
        if (end < 0) {
          if (c.buf.length > HEAD_CAP) this.fail(c, 'unparseable', `no end of head within ${HEAD_CAP} bytes`);
          return;
        }
        const head = c.buf.subarray(0, end).toString('latin1');
        c.buf = c.buf.subarray(end + 4);
        if (!this.onHead(c, head)) return;
        continue;
      }
      if (c.phase === 'length') {
        if (c.buf.length === 0) return;
        const n = Math.min(c.remaining, c.buf.length);
        this.bodyBytes(c, c.buf.subarray(0, n));
        c.buf = c.buf.subarray(n);
        c.remaining -= n;
        if (c.remaining === 0) this.bodyDone(c);
        continue;
      }
      if (c.phase === 'chunk-size' || c.phase === 'trailer') {
        const eol = c.buf.indexOf('\r\n');
        if (eol < 0) {
          if (c.buf.length > 4096) this.fail(c, 'framing', 'chunk-size or trailer line longer than 4096 bytes');
          return;
        }
        const line = c.buf.subarray(0, eol).toString('latin1');
        c.buf = c.buf.subarray(eol + 2);
        if (c.phase === 'trailer') {
          if (line === '') this.bodyDone(c);
          continue;
        }
        const m = /^([0-9a-fA-F]{1,8})(?:;.*)?$/.exec(line);
        if (m === null) {
          this.fail(c, 'framing', `bad chunk-size line ${JSON.stringify(line.slice(0, 80))}`);
          return;
        }
        c.remaining = parseInt(m[1]!, 16);
        c.phase = c.remaining === 0 ? 'trailer' : 'chunk-data';
        continue;
      }
      if (c.phase === 'chunk-data') {
        if (c.buf.length === 0) return;
        const n = Math.min(c.remaining, c.buf.length);
        this.bodyBytes(c, c.buf.subarray(0, n));
        c.buf = c.buf.subarray(n);
        c.remaining -= n;
        if (c.remaining === 0) c.phase = 'chunk-crlf';
        continue;
      }
      if (c.phase === 'chunk-crlf') {
        if (c.buf.length < 2) return;
        if (c.buf[0] !== 0x0d || c.buf[1] !== 0x0a) {
          this.fail(c, 'framing', `chunk data not followed by CRLF: ${JSON.stringify(c.buf.subarray(0, 40).toString('latin1'))}`);
          return;
        }
        c.buf = c.buf.subarray(2);
        c.phase = 'chunk-size';
      }
    }
  }

  private fail(c: ConnState, kind: BackendViolation['kind'], detail: string): void {
    this.violation(c, kind, detail);
    c.phase = 'dead';
    c.socket.destroy();
  }

  /** A request head: record it, check the connection may carry it, start its framing. */
  private onHead(c: ConnState, head: string): boolean {
    const lines = head.split('\r\n');
    const m = /^([A-Z]+) (\S+) HTTP\/(1\.[01])$/.exec(lines[0]!);
    if (m === null) {
      this.fail(c, 'unparseable', `request line ${JSON.stringify(lines[0]!.slice(0, 120))}`);
      return false;
    }
    const headers: [string, string][] = [];
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0 || /\s/.test(line.slice(0, colon))) {
        this.fail(c, 'unparseable', `header line ${JSON.stringify(line.slice(0, 120))} in ${m[1]} ${m[2]}`);
        return false;
      }
      headers.push([line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]);
    }
    const [, method, target, version] = m as unknown as [string, string, string, string];
    const behaviour = this.options.behaviour(target, method);
    c.seq++;
    if (c.taint !== null) this.violation(c, 'reused', `${method} ${target} arrived after: ${c.taint}`);
    c.history.push(`${target}:${behaviour?.kind ?? 'unknown'}`);
    const req: SeenRequest = {
      conn: c.id,
      seq: c.seq,
      method,
      target,
      version,
      headers,
      body: Buffer.alloc(0),
      bodyComplete: false,
      behaviour: behaviour?.kind ?? null,
      at: Date.now(),
    };
    this.requests.push(req);
    c.req = req;
    c.behaviour = behaviour ?? { kind: 'length', delayMs: 0, size: 8, pieces: 1, holdMs: 0 };
    c.answered = false;
    // From here until the response is completely written, another request on this connection
    // would be the proxy pipelining upstream, or reusing a connection whose response it has not
    // framed to the end.
    c.taint = `the response to ${method} ${target} (${c.behaviour.kind}) was not complete`;

    const te = headers.filter(([n]) => n === 'transfer-encoding').map(([, v]) => v.toLowerCase());
    const cl = headers.filter(([n]) => n === 'content-length').map(([, v]) => v);
    if (te.length > 0 && cl.length > 0) this.violation(c, 'framing', `${method} ${target}: both Transfer-Encoding and Content-Length`);
    if (cl.length > 1 && new Set(cl).size > 1) this.violation(c, 'framing', `${method} ${target}: Content-Length ${cl.join(' / ')}`);
    if (te.length > 0) {
      if (!/(^|,)\s*chunked\s*$/.test(te.join(','))) {
        this.fail(c, 'framing', `${method} ${target}: Transfer-Encoding ${te.join(',')} without chunked last`);
        return false;
      }
      c.phase = 'chunk-size';
    } else if (cl.length > 0) {
      if (!/^\d{1,12}$/.test(cl[0]!)) {
        this.fail(c, 'framing', `${method} ${target}: Content-Length ${JSON.stringify(cl[0])}`);
        return false;
      }
      c.remaining = Number(cl[0]);
      c.phase = c.remaining > 0 ? 'length' : 'head';
    } else {
      c.phase = 'head';
    }
    const k = c.behaviour.kind;
    if (k === 'early' || k === 'early-close' || k === 'reset-before-response') {
      this.answer(c);
      if (c.socket.destroyed) return false;
    }
    if (c.phase === 'head') this.bodyDone(c);
    return true;
  }

  private bodyBytes(c: ConnState, d: Buffer): void {
    const req = c.req!;
    if (req.body.length < BODY_CAP) req.body = Buffer.concat([req.body, d.subarray(0, BODY_CAP - req.body.length)]);
  }

  private bodyDone(c: ConnState): void {
    const req = c.req!;
    req.bodyComplete = true;
    c.phase = 'head';
    if (!c.answered) {
      this.answer(c);
    }
  }

  /** Answer the current request as its behaviour says. */
  private answer(c: ConnState): void {
    c.answered = true;
    const b = c.behaviour!;
    const req = c.req!;
    const s = c.socket;
    const head = req.method === 'HEAD';
    const closeAsked = req.headers.some(([n, v]) => n === 'connection' && /(^|,)\s*close\s*(,|$)/i.test(v));
    const isUpgrade = req.headers.some(([n]) => n === 'upgrade');
    const id = req.target;
    const body = Buffer.alloc(head ? 0 : b.size, `<${id}>`);
    const later = (ms: number, fn: () => void): void => {
      setTimeout(() => {
        if (!s.destroyed) fn();
      }, ms);
    };
    // What happens to the connection once the response is written out.
    const finish = (reason: string | null): void => {
      if (reason === null && !closeAsked) {
        c.taint = null;
        return;
      }
      c.taint = reason ?? `the proxy's request ${req.method} ${id} said Connection: close`;
      s.end();
    };
    // The body in `pieces`, spread over `delayMs`, then `done`.
    const pieces = (buf: Buffer, done: () => void): void => {
      const n = Math.max(1, Math.min(b.pieces, buf.length));
      const step = Math.ceil(buf.length / n);
      let i = 0;
      const next = (): void => {
        if (i >= buf.length) {
          done();
          return;
        }
        const part = buf.subarray(i, i + step);
        i += step;
        if (i >= buf.length) {
          s.write(part);
          done();
          return;
        }
        s.write(part);
        later(Math.floor(b.delayMs / n), next);
      };
      next();
    };
    const lengthHead = (extra = '', size = b.size): string =>
      `HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\nX-Target: ${id}\r\n${extra}\r\n`;
    switch (b.kind) {
      case 'reset-before-response':
        c.taint = 'reset';
        s.resetAndDestroy();
        return;
      case 'early':
        // Written at once: an early answer is the whole point.
        s.write(lengthHead());
        s.write(body);
        finish(null);
        return;
      case 'early-close':
        c.taint = `an early answer with Connection: close to ${req.method} ${id}`;
        s.end(Buffer.concat([Buffer.from(lengthHead('Connection: close\r\n'), 'latin1'), body]));
        return;
      case 'hang':
        later(b.holdMs, () => s.destroy());
        return;
      default:
    }
    later(b.pieces > 1 ? 0 : b.delayMs, () => {
      switch (b.kind) {
        case 'upgrade':
          if (isUpgrade) {
            c.taint = `an upgrade (${id}) switched the connection to a tunnel`;
            s.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
            c.phase = 'tunnel';
            if (c.buf.length > 0) s.write(c.buf);
            c.buf = Buffer.alloc(0);
            later(b.holdMs, () => s.end());
            return;
          }
          s.write(lengthHead());
          pieces(body, () => finish(null));
          return;
        case 'length':
          s.write(lengthHead());
          pieces(body, () => finish(null));
          return;
        case 'chunked': {
          s.write(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Target: ${id}\r\n\r\n`);
          if (head) {
            finish(null);
            return;
          }
          const framed: Buffer[] = [];
          const step = Math.max(1, Math.ceil(body.length / Math.max(1, b.pieces)));
          for (let i = 0; i < body.length; i += step) {
            const part = body.subarray(i, i + step);
            framed.push(Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n'));
          }
          framed.push(Buffer.from('0\r\n\r\n'));
          pieces(Buffer.concat(framed), () => finish(null));
          return;
        }
        case 'close-delimited':
          c.taint = `a close-delimited response to ${req.method} ${id}`;
          s.write(`HTTP/1.1 200 OK\r\nConnection: close\r\nX-Target: ${id}\r\n\r\n`);
          pieces(body, () => s.end());
          return;
        case 'reset-mid-response':
        case 'close-mid-response':
        case 'stall': {
          // A truncated response promises at least one byte more than it sends: with size 0, half
          // of nothing would be the whole of a `Content-Length: 0` body, a complete response after
          // which a proxy rightly reuses the connection (it was this witness's false "reused"
          // report on fuzz seed 999546447).
          const promised = Math.max(1, b.size);
          s.write(lengthHead('', promised));
          if (head) {
            // A HEAD response is complete after its head: nothing to truncate, the connection
            // stays usable.
            finish(null);
            return;
          }
          c.taint = `a truncated response (${b.kind}) to ${req.method} ${id}`;
          s.write(body.subarray(0, Math.floor(promised / 2)));
          if (b.kind === 'reset-mid-response') s.resetAndDestroy();
          else if (b.kind === 'close-mid-response') s.end();
          else later(b.holdMs, () => s.destroy());
          return;
        }
        default:
      }
    });
  }
}
