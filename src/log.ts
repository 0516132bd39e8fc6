import fs from 'node:fs';
import pino, { type Logger } from 'pino';
import type { LoggingConfig } from './schema/config';

/**
 * The process logger. JSON to stdout by default (one object per line, for the cluster's log
 * pipeline); `pretty` for a terminal. Built once; components take child loggers built once too.
 */
export function createLogger(
  config: Pick<LoggingConfig, 'level' | 'format'> & Partial<Pick<LoggingConfig, 'bufferBytes' | 'flushIntervalMs'>>,
  destination?: pino.DestinationStream,
): Logger {
  const children = new Set<WeakRef<Logger>>();
  const options: pino.LoggerOptions = {
    level: config.level,
    base: { pid: process.pid },
    timestamp: isoTime,
    formatters: { level: levelLabel },
    // Every child (inherited by the children's children) is remembered weakly, so setLogLevel can
    // reach the loggers components built once at start-up (a pino child keeps the level it was
    // made with). Dead references (fastify's per-request children) are pruned as the set grows.
    onChild: (child) => {
      children.add(new WeakRef(child as Logger));
      CHILDREN.set(child as Logger, children);
      if (children.size > 4096) for (const r of children) if (r.deref() === undefined) children.delete(r);
    },
  };
  const make = (logger: Logger): Logger => {
    CHILDREN.set(logger, children);
    children.add(new WeakRef(logger));
    return logger;
  };
  if (destination) return make(pino(options, destination));
  if (config.format === 'pretty') {
    return make(
      pino({
        ...options,
        transport: { target: 'pino-pretty', options: { colorize: process.stdout.isTTY, translateTime: 'SYS:HH:MM:ss.l' } },
      }),
    );
  }
  // Buffered like nginx's `access_log ... buffer= flush=` (bench/README.md, "Metrics and access
  // logs"): lines are copied into a Buffer and written in blocks of `bufferBytes`, at least every
  // `flushIntervalMs`. 0: each line is its own write (sonic-boom, asynchronous).
  const bufferBytes = config.bufferBytes ?? 0;
  if (bufferBytes === 0) return make(pino(options, pino.destination({ dest: 1, sync: false })));
  return make(pino(options, new BlockWriter(1, bufferBytes, config.flushIntervalMs ?? 1000)));
}

const CHILDREN = new WeakMap<Logger, Set<WeakRef<Logger>>>();

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const PINNED = new WeakSet<Logger>();

/** Keep this logger's level whatever setLogLevel says (the audit log: its lines are the durable record). */
export function pinLevel(logger: Logger): Logger {
  PINNED.add(logger);
  return logger;
}

/**
 * Change the level of every logger of the family `logger` belongs to (the createLogger root and
 * every child made from it, pinned ones excepted): the admin API's `PUT /v1/log-level`, which a
 * cluster primary also sends to its workers. Returns the level before.
 */
export function setLogLevel(logger: Logger, level: LogLevel): string {
  const before = logger.level;
  const family = CHILDREN.get(logger);
  if (family === undefined) {
    logger.level = level;
    return before;
  }
  for (const r of family) {
    const l = r.deref();
    if (l !== undefined && !PINNED.has(l)) l.level = level;
  }
  return before;
}

/** pino's level formatter here: `"level":"info"` (the label, not the number). */
export function levelLabel(label: string): { level: string } {
  return { level: label };
}

/**
 * Where a logger built by `createLogger` writes its lines, and the part of each line it writes
 * before the message object (`,"pid":1,"listener":"web",...`), for a caller that builds its own
 * lines (the access log: bench/README.md "Metrics and access logs"). null for any other logger
 * (a mixin, hooks, another time or level format): that caller then goes through pino.
 */
export function rawLineTarget(logger: Logger): { stream: { write(line: string): unknown }; bindings: string } | null {
  const l = logger as unknown as Record<symbol, unknown>;
  const s = pino.symbols;
  const hooks = l[s.hooksSym] as { logMethod?: unknown; streamWrite?: unknown } | undefined;
  const formatters = l[s.formattersSym] as { level?: unknown } | undefined;
  const stream = l[s.streamSym] as { write?: unknown } | undefined;
  if (
    l[s.timeSym] !== isoTime ||
    formatters?.level !== levelLabel ||
    l[s.mixinSym] !== undefined ||
    hooks?.logMethod !== undefined ||
    hooks?.streamWrite !== undefined ||
    l[s.messageKeySym] !== 'msg' ||
    l[(s as unknown as Record<string, symbol>).msgPrefixSym!] !== undefined ||
    typeof stream?.write !== 'function' ||
    typeof l[s.chindingsSym] !== 'string'
  ) {
    return null;
  }
  return { stream: stream as { write(line: string): unknown }, bindings: l[s.chindingsSym] as string };
}

let lastMs = -1;
let lastTime = '';
let minuteMs = -1;
let minutePrefix = '';

/**
 * pino's `stdTimeFunctions.isoTime` (`,"time":"2026-11-29T16:30:12.345Z"`), built from a string
 * cached per minute and reused within a millisecond: `new Date().toISOString()` per line was
 * ~1.5-2 us of the ~6.5 us pino spends on an access line (bench/README.md "What the profiles found").
 */
export function isoTime(): string {
  const now = Date.now();
  if (now === lastMs) return lastTime;
  lastMs = now;
  const ms = now % 60_000;
  if (now - ms !== minuteMs) newMinute(now - ms);
  const s = (ms / 1000) | 0;
  const milli = ms - s * 1000;
  lastTime = `${minutePrefix}${s < 10 ? '0' : ''}${s}.${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z"`;
  return lastTime;
}

/** `,"time":"YYYY-MM-DDTHH:MM:` of the minute starting at `start` (ms), cached. */
function newMinute(start: number): void {
  minuteMs = start;
  minutePrefix = `,"time":"${new Date(start).toISOString().slice(0, 17)}`;
}

/** Lowercase hex digits as char codes (JSON.stringify's `\u00xx` escapes are lowercase). */
const HEX_DIGITS = Uint8Array.from('0123456789abcdef', (ch) => ch.charCodeAt(0));

/** Writers to flush at exit (one per logger built; one 'exit' listener for all). */
const writers = new Set<BlockWriter>();

/**
 * A pino destination that copies each line into a preallocated Buffer and writes whole blocks
 * with one asynchronous write(2). sonic-boom's buffering (`minLength`) concatenates the pending
 * lines into one string and measures it with `Buffer.byteLength` on every line, which flattens
 * the growing string (a copy of up to 16 KiB and a new string per line) and issues its write from
 * inside the line's `log.info`: at ~300-byte lines and 4 KiB blocks this cost ~8-10 us of CPU per
 * line, more than pino's serialisation (bench/README.md "What the profiles found"). Here a line costs one copy into the
 * block; full blocks queue behind the write in flight (memory is bounded by what the disk or the
 * log reader accepts, as with sonic-boom).
 */
export class BlockWriter {
  private block: Buffer;
  private used = 0;
  /** Full blocks waiting for the write in flight, oldest first. */
  private readonly queue: Buffer[] = [];
  private writing = false;
  private waiting: (() => void)[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly fd: number,
    private readonly size: number,
    flushIntervalMs: number,
  ) {
    this.block = Buffer.allocUnsafe(size);
    this.timer = setInterval(() => this.flush(), flushIntervalMs);
    this.timer.unref();
    if (writers.size === 0)
      process.once('exit', () => {
        for (const w of writers) w.flushSync();
      });
    writers.add(this);
  }

  write(line: string): boolean {
    // A UTF-16 unit is at most 3 UTF-8 bytes: check the room before copying (no byteLength scan).
    if (this.size - this.used < line.length * 3) {
      this.rotate();
      if (line.length * 3 > this.size) {
        this.queue.push(Buffer.from(line));
        this.next();
        return true;
      }
    }
    this.used += this.block.write(line, this.used);
    if (this.used >= this.size - 512) {
      this.rotate();
    }
    return true;
  }

  /**
   * Direct line writing, for callers that know their line's fields (the access log): `begin`
   * reserves room for a line of at most `maxBytes` bytes, `fragment` / `jsonString` / `number`
   * write the pieces straight into the block (no concatenated string, no flatten, no UTF-8 pass),
   * `end` closes the line. Produces the bytes `write` would for the same text (unit-tested).
   * false from `begin` (a line that could not fit in a block): the caller writes a string instead.
   */
  begin(maxBytes: number): boolean {
    if (maxBytes > this.size) return false;
    if (this.size - this.used < maxBytes) this.rotate();
    return true;
  }

  /** JSON text that is already serialised (constants, pino's bindings, a timestamp). */
  fragment(s: string): void {
    const b = this.block;
    let u = this.used;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        u += b.write(s.slice(i), u);
        break;
      }
      b[u++] = c;
    }
    this.used = u;
  }

  /**
   * pino's time field for now, the bytes `isoTime()` returns, written as digits into the block
   * (no string per line; the minute's prefix is cached as isoTime's is).
   */
  time(): void {
    const now = Date.now();
    const ms = now % 60_000;
    if (now - ms !== minuteMs) newMinute(now - ms);
    this.fragment(minutePrefix);
    const s = (ms / 1000) | 0;
    const milli = ms - s * 1000;
    const b = this.block;
    let u = this.used;
    b[u++] = 48 + ((s / 10) | 0);
    b[u++] = 48 + (s % 10);
    b[u++] = 46; // "ss."
    b[u++] = 48 + ((milli / 100) | 0);
    b[u++] = 48 + (((milli / 10) | 0) % 10);
    b[u++] = 48 + (milli % 10);
    b[u++] = 90;
    b[u++] = 34; // Z"
    this.used = u;
  }

  /** `s` as a JSON string (`null` for null/undefined), escaped as JSON.stringify escapes it. */
  jsonString(s: string | null | undefined): void {
    if (s === null || s === undefined) {
      this.fragment('null');
      return;
    }
    const b = this.block;
    let u = this.used;
    b[u++] = 34;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x20 && c < 0x80) {
        if (c === 34 || c === 92) b[u++] = 92;
        b[u++] = c;
      } else if (c < 0x20) {
        b[u++] = 92;
        const short = c === 8 ? 98 : c === 9 ? 116 : c === 10 ? 110 : c === 12 ? 102 : c === 13 ? 114 : 0;
        if (short !== 0) {
          b[u++] = short;
        } else {
          b[u++] = 117;
          b[u++] = 48;
          b[u++] = 48;
          b[u++] = HEX_DIGITS[c >> 4]!;
          b[u++] = HEX_DIGITS[c & 15]!;
        }
      } else if (c < 0x800) {
        b[u++] = 0xc0 | (c >> 6);
        b[u++] = 0x80 | (c & 63);
      } else if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
          const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          b[u++] = 0xf0 | (cp >> 18);
          b[u++] = 0x80 | ((cp >> 12) & 63);
          b[u++] = 0x80 | ((cp >> 6) & 63);
          b[u++] = 0x80 | (cp & 63);
          i++;
        } else {
          // A lone surrogate: escaped, as JSON.stringify does.
          b[u++] = 92;
          b[u++] = 117;
          b[u++] = HEX_DIGITS[c >> 12]!;
          b[u++] = HEX_DIGITS[(c >> 8) & 15]!;
          b[u++] = HEX_DIGITS[(c >> 4) & 15]!;
          b[u++] = HEX_DIGITS[c & 15]!;
        }
      } else {
        b[u++] = 0xe0 | (c >> 12);
        b[u++] = 0x80 | ((c >> 6) & 63);
        b[u++] = 0x80 | (c & 63);
      }
    }
    b[u++] = 34;
    this.used = u;
  }

  /** A number as JSON (`null` when not finite, as pino writes it). */
  number(n: number | null | undefined): void {
    if (typeof n !== 'number' || !Number.isFinite(n)) {
      this.fragment('null');
      return;
    }
    if (Number.isInteger(n) && n >= 0 && n < 1e15) {
      // Digits of a non-negative integer, written backwards then in place.
      const b = this.block;
      let u = this.used;
      if (n === 0) {
        b[u++] = 48;
      } else {
        const start = u;
        for (let v = n; v > 0; v = Math.floor(v / 10)) b[u++] = 48 + (v % 10);
        for (let x = start, y = u - 1; x < y; x++, y--) {
          const t = b[x]!;
          b[x] = b[y]!;
          b[y] = t;
        }
      }
      this.used = u;
      return;
    }
    this.fragment(`${n}`);
  }

  /** Close a line begun with `begin` (its newline is the caller's last fragment). */
  end(): void {
    if (this.used >= this.size - 512) this.rotate();
  }

  /** Write what is buffered now; `cb` once it is written. pino's logger.flush() calls this. */
  flush(cb?: (err?: Error) => void): void {
    this.rotate();
    if (cb === undefined) return;
    if (!this.writing && this.queue.length === 0) {
      process.nextTick(cb);
      return;
    }
    this.waiting.push(() => cb());
  }

  /**
   * At exit: write the blocks not yet handed to a write, synchronously (the block in flight, if
   * any, is the thread pool's: writing it again could duplicate it).
   */
  flushSync(): void {
    clearInterval(this.timer);
    writers.delete(this);
    if (this.used > 0) this.queue.push(this.block.subarray(0, this.used));
    this.used = 0;
    for (const b of this.queue.splice(this.writing ? 1 : 0)) {
      try {
        fs.writeSync(this.fd, b);
      } catch {
        return;
      }
    }
  }

  private rotate(): void {
    if (this.used === 0) return;
    this.queue.push(this.block.subarray(0, this.used));
    this.block = Buffer.allocUnsafe(this.size);
    this.used = 0;
    this.next();
  }

  private next(): void {
    if (this.writing) return;
    const b = this.queue[0];
    if (b === undefined) {
      const waiting = this.waiting;
      this.waiting = [];
      for (const w of waiting) w();
      return;
    }
    this.writing = true;
    fs.write(this.fd, b, 0, b.length, null, this.written);
  }

  private readonly written = (err: NodeJS.ErrnoException | null, n: number): void => {
    this.writing = false;
    if (err) {
      // A non-blocking pipe whose reader is behind: try again shortly (sonic-boom does the same).
      if (err.code === 'EAGAIN' || err.code === 'EBUSY') {
        this.writing = true;
        setTimeout(() => {
          this.writing = false;
          this.next();
        }, 100).unref();
        return;
      }
      // stdout gone (EPIPE, EBADF): drop what is queued; the process carries on.
      this.queue.length = 0;
      this.next();
      return;
    }
    const b = this.queue[0]!;
    if (n < b.length) this.queue[0] = b.subarray(n);
    else this.queue.shift();
    this.next();
  };
}

/** pino's numeric levels (its defaults; ipgate defines no custom levels). */
export const DEBUG_LEVEL = 20;
export const INFO_LEVEL = 30;

/**
 * Whether `log` writes lines at `level` (DEBUG_LEVEL, INFO_LEVEL), read off its numeric level on
 * every call, so a level changed at run time (setLogLevel) counts at once. The per-request checks
 * use it instead of pino's isLevelEnabled('debug'), whose lookup of the level's name in a table is
 * a megamorphic keyed load: about 140 instructions a call, three calls per denied request
 * (bench/README.md "Issue 28: the policy split, measured").
 */
export function logsAt(log: Logger, level: number): boolean {
  return log.levelVal <= level;
}
