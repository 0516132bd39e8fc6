/**
 * The HTTP/1.1 parsing layer of the relay engine: llhttp (the parser inside node:http), compiled to
 * WebAssembly, as shipped inside the installed `undici` package, driven straight from socket reads.
 *
 * Why llhttp in wasm: node:http's own llhttp binding is not reachable from user code.
 * `process.binding('http_parser')` is deprecated on Node 20 (DEP0111) and gone on Node 24 (both
 * checked), and node:http around it (IncomingMessage, streams, undici on the upstream side) is what keeps the
 * HTTP path below the performance target. undici's wasm build is the same parser, maintained and
 * updated with undici, and callable per read with no streams in between.
 *
 * API
 *   const p = new HttpParser('request' | 'response', sink, { maxHeaderBytes?, pauseAfterMessage? });
 *   p.execute(buf)      -> { kind: 'ok' }                  all of buf parsed, wants more
 *                        | { kind: 'paused', consumed }    a message completed at buf[consumed]; call
 *                                                          resume(), then feed buf.subarray(consumed)
 *                        | { kind: 'upgrade', consumed }   buf.subarray(consumed) belongs to the
 *                                                          upgraded protocol (Upgrade, CONNECT, 101)
 *                        | { kind: 'error', code, reason, status: 400 | 431 }
 *   p.finish()          at EOF: ends a body delimited by connection close; an error if a message
 *                       was cut short.
 *   p.setRequestMethod(m)  response parsers: the method of the request this response answers
 *                       (HEAD: no body whatever the headers say; CONNECT: a 2xx is a tunnel).
 *                       Cleared when a final response completes.
 *   p.resume(), p.resumeAfterUpgrade() (an upgrade the relay declined), p.free().
 *   HttpParser.take(type, sink, options)  as `new`, but a parser given back by release() if any
 *   p = p.release()     gives the parser back for another connection's take(); what it returns
 *                       (a parser that is always freed) is what the caller holds from then on.
 *   sink.onHead(head)   RequestHead { method, url, ... } or ResponseHead { statusCode, reason, ... }
 *   sink.onBody(chunk)  decoded body bytes (chunk framing removed); a view of the Buffer given to
 *                       execute, not a copy
 *   sink.onMessageComplete(keepAlive, rawTrailers)
 *
 * Behaviour
 * - Strict: none of llhttp's lenient flags are set. Content-Length with Transfer-Encoding, duplicate
 *   Content-Length, obs-fold, bare LF, whitespace before a colon, bad chunk sizes, a request whose
 *   Transfer-Encoding does not end in chunked: all errors (status 400). That is the smuggling
 *   defence, so nothing here may relax it. On top of llhttp: only HTTP/1.x (llhttp also takes
 *   HTTP/0.9-style and 2.0 request lines) and a Content-Length above 2^53 - 1 (which a JS number
 *   cannot hold exactly) are errors.
 * - The parser pauses after every complete message by default (a relay answers pipelined requests
 *   one at a time); `pauseAfterMessage: false` parses them back to back.
 * - maxHeaderBytes (default 16384) bounds the head: every byte from the start line to the blank
 *   line, across reads (CR/LF before a request line, which llhttp skips, are not counted). Exceeding
 *   it is HPE_HEADER_OVERFLOW, status 431; llhttp has no such limit itself. The trailer section is
 *   bounded by the same number, counted as the bytes of trailer names and values only.
 * - Header values lose trailing spaces and tabs (llhttp strips only the leading ones; RFC 9110 5.5
 *   excludes both). Names keep their case; values are latin1 strings of the bytes received.
 * - 1xx responses (not 101) reach onHead and never onMessageComplete; the final response follows
 *   on the same parser. Every other head is followed by onMessageComplete, or by an error result
 *   (a body error, or llhttp's check of a request's Transfer-Encoding, which runs after the head).
 * - After an error the parser only repeats that error; the caller closes the connection. A sink
 *   method that throws kills the parser; execute()/finish() rethrow its exception as is.
 * - Trailers are accepted and handed to onMessageComplete. Chunk extensions are validated by
 *   llhttp and dropped (the wasm build has no callback for them). Methods are llhttp's list only.
 *
 * Limits: sink methods must not call execute() or finish() on any parser (one input buffer and one
 * "current parser" are shared, see below); free() from inside a sink method is deferred to the end
 * of that execute(). A sink cannot pause mid-read: one execute() delivers all the body bytes of the
 * read it is given (backpressure is the caller not reading its socket). The shared input buffer
 * grows to the largest read and stays that size; execute() throws only if wasm malloc fails.
 */
import { Buffer } from 'node:buffer';

/** The exports of undici's llhttp build used here: llhttp's C API plus the libc allocator. */
interface LlhttpExports {
  memory: { buffer: ArrayBuffer };
  malloc(size: number): number;
  free(ptr: number): void;
  llhttp_alloc(type: number): number;
  llhttp_free(parser: number): void;
  llhttp_reset(parser: number): void;
  llhttp_execute(parser: number, at: number, len: number): number;
  llhttp_finish(parser: number): number;
  llhttp_resume(parser: number): void;
  llhttp_resume_after_upgrade(parser: number): void;
  llhttp_get_error_pos(parser: number): number;
  llhttp_get_error_reason(parser: number): number;
  llhttp_errno_name(errno: number): number;
  llhttp_get_method(parser: number): number;
  llhttp_get_http_major(parser: number): number;
  llhttp_get_http_minor(parser: number): number;
  llhttp_should_keep_alive(parser: number): number;
  llhttp_message_needs_eof(parser: number): number;
}

/** The few WebAssembly globals needed (the project's `lib` has no WebAssembly typings). */
interface WasmGlobal {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
}

interface LlhttpConstants {
  TYPE: { REQUEST: number; RESPONSE: number };
  ERROR: { OK: number; PAUSED: number; PAUSED_UPGRADE: number };
  METHODS: Record<string, number>;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const K = require('undici/lib/llhttp/constants.js') as LlhttpConstants;
const E_OK = K.ERROR.OK;
const E_PAUSED = K.ERROR.PAUSED;
const E_PAUSED_UPGRADE = K.ERROR.PAUSED_UPGRADE;

/** llhttp_get_method returns an index into llhttp's method enum; its names, by index. */
const METHOD_NAMES: string[] = [];
for (const [name, index] of Object.entries(K.METHODS)) METHOD_NAMES[index] = name;

export type ParserType = 'request' | 'response';

interface HeadCommon {
  versionMajor: number;
  versionMinor: number;
  /** Name, value, name, value ...: latin1, names as received, values without surrounding blanks. */
  rawHeaders: string[];
  /** llhttp's verdict on the connection after this message (version, Connection header, framing). */
  keepAlive: boolean;
  /** The bytes after this message belong to another protocol (Upgrade, CONNECT, 101, CONNECT 2xx). */
  upgrade: boolean;
  /** The Content-Length header's value, or null without one (framing as the parser saw it). */
  contentLength: number | null;
  /** The last transfer coding is chunked: the body is chunked on the wire (onBody gets it decoded). */
  chunked: boolean;
  /** A response body that ends only when the connection closes (finish() completes it). */
  untilEof: boolean;
}

export interface RequestHead extends HeadCommon {
  method: string;
  url: string;
}

export interface ResponseHead extends HeadCommon {
  statusCode: number;
  reason: string;
}

type HeadOf<T extends ParserType> = T extends 'request' ? RequestHead : ResponseHead;

export interface ParserSink<H> {
  onHead(head: H): void;
  onBody(chunk: Buffer): void;
  onMessageComplete(keepAlive: boolean, rawTrailers: string[]): void;
}

interface ParseError {
  kind: 'error';
  /** llhttp's error name (HPE_INVALID_HEADER_TOKEN ...), or HPE_HEADER_OVERFLOW for the head limit. */
  code: string;
  reason: string;
  /** What a server answers a client with (a response parser's caller answers 502 instead). */
  status: 400 | 431;
}

export type ExecuteResult = { kind: 'ok' } | { kind: 'paused'; consumed: number } | { kind: 'upgrade'; consumed: number } | ParseError;

export interface ParserOptions {
  /** Bytes allowed from the first byte of a start line to the end of the blank line. */
  maxHeaderBytes?: number;
  /** Pause after every complete message (default true). */
  pauseAfterMessage?: boolean;
}

const DEFAULT_MAX_HEADER_BYTES = 16384;

function maxHeaderBytesOf(options: ParserOptions): number {
  const max = options.maxHeaderBytes ?? DEFAULT_MAX_HEADER_BYTES;
  if (!Number.isInteger(max) || max < 1) throw new RangeError(`HttpParser: maxHeaderBytes ${max}`);
  return max;
}

const OK_RESULT: { kind: 'ok' } = Object.freeze({ kind: 'ok' });
const NO_TRAILERS: string[] = Object.freeze([]) as unknown as string[];
const EMPTY = Buffer.alloc(0);
/** The end of a head: llhttp (strict) allows CR or LF nowhere else in it, so the first one is it. */
const BLANK_LINE = Buffer.from('\r\n\r\n', 'latin1');

/** A pooled parser's header list until its next message (never written: frozen). */
const NO_HEADERS: string[] = Object.freeze([]) as unknown as string[];
/** A recycled header list longer than this (entries: names and values) is not kept in the pool. */
const SPARE_MAX = 64;
/** A pooled parser's sink: a pooled parser is never executed (its state is `freed`). */
const NO_SINK: ParserSink<never> = {
  onHead() {},
  onBody() {},
  onMessageComplete() {},
};

// ---- the one wasm instance ----------------------------------------------------------------------

let L: LlhttpExports | null = null;
/** A view of wasm memory; replaced when memory grows (growth detaches the old ArrayBuffer). */
let heap = new Uint8Array(0);
/** One input buffer in wasm memory for all parsers, grown (never shrunk) to the largest read. */
let inputPtr = 0;
let inputCap = 0;

/**
 * The parser inside llhttp_execute / llhttp_finish, and its input. A module variable rather than a
 * Map from llhttp pointer to parser: the callbacks run synchronously inside execute and execute is
 * never re-entered (enforced), so the parser is known without a lookup on every callback (five or
 * more per message); the pointer llhttp passes is still compared, as a cheap consistency check.
 * `input` is the caller's Buffer: callbacks slice it (`at - inputPtr` is the same offset in it), so
 * nothing is copied back out of wasm memory. `inputStart` is where the current llhttp_execute call
 * began in `input` (a message boundary or the middle of a message, never past a message start).
 */
let current: HttpParser<ParserType> | null = null;
let input: Buffer = EMPTY;
let inputStart = 0;

function memory(): Uint8Array {
  const buf = L!.memory.buffer;
  if (heap.buffer !== buf) heap = new Uint8Array(buf);
  return heap;
}

/** A NUL-terminated string in wasm memory (llhttp's error names and reasons). */
function cString(ptr: number): string {
  if (ptr === 0) return '';
  const m = memory();
  const end = m.indexOf(0, ptr);
  return Buffer.from(m.buffer, ptr, (end < 0 ? m.length : end) - ptr).toString('latin1');
}

function reserveInput(len: number): number {
  const l = L!;
  if (len > inputCap) {
    if (inputPtr !== 0) l.free(inputPtr);
    inputPtr = 0;
    inputCap = 0;
    const cap = Math.ceil(len / 16384) * 16384;
    const ptr = l.malloc(cap);
    if (ptr === 0) throw new Error(`llhttp: wasm malloc(${cap}) failed`);
    inputPtr = ptr;
    inputCap = cap;
  }
  return inputPtr;
}

/** Parsers dropped without free(): their llhttp state is freed when they are collected. */
const leaked = new FinalizationRegistry<number>((ptr) => L?.llhttp_free(ptr));

/**
 * How many released parsers of each type are kept for take(). A burst of reconnections (every
 * keep-alive client reaching `maxRequestsPerConnection` within a few ms) is served from the pool
 * up to this many; each kept parser holds ~0.5 KB of V8's heap and its llhttp state in wasm
 * memory, so the pool costs at most ~0.3 MiB in all.
 */
export const PARSER_POOL_MAX = 256;

type ParserState = 'active' | 'paused' | 'upgraded' | 'errored' | 'freed';
type State = ParserState;

/** Where a skip-body head waits for on_message_complete (see HttpParser.#onHeadersComplete). */
type AnyHead = RequestHead | ResponseHead;

function overflowError(): ParseError {
  return { kind: 'error', code: 'HPE_HEADER_OVERFLOW', reason: 'Header overflow', status: 431 };
}

function badRequest(code: string, reason: string): ParseError {
  return { kind: 'error', code, reason, status: 400 };
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/** Only SP and HTAB: String#trim would also eat NBSP (0xA0), which is valid obs-text in a value. */
function trimBlanks(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && isBlank(s.charCodeAt(a))) a++;
  while (b > a && isBlank(s.charCodeAt(b - 1))) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

/** Drops the trailing blanks llhttp leaves on the last value of a name/value list of `n` entries. */
function trimLastValue(list: string[], n: number = list.length): void {
  const i = n - 1;
  if (i < 1 || (i & 1) === 0) return; // empty, or ends in a name
  const v = list[i]!;
  if (v.length > 0 && isBlank(v.charCodeAt(v.length - 1))) list[i] = trimBlanks(v);
}

/**
 * The longest piece compared with the previous message's (see `repeat`): past about 24 chars a
 * char-by-char comparison costs more than the native Buffer#toString it saves (bench/README.md
 * "Repeated head pieces").
 */
const REPEAT_MAX = 24;

/**
 * `prev` if it is the latin1 text of `len` bytes of `input` at `a`, else a new string of them. A
 * keep-alive connection's messages repeat most of their short pieces (the Host line, the path,
 * Connection, Content-Type, a response's status text): the same string again costs no native call
 * and no allocation, and the Host memo downstream compares one pointer (request-host.ts). Exact:
 * latin1 maps each byte to the char of the same code, so equal codes are equal bytes.
 */
function repeat(prev: string | undefined, a: number, len: number): string {
  if (prev !== undefined && prev.length === len && len <= REPEAT_MAX) {
    let i = 0;
    while (i < len && input[a + i] === prev.charCodeAt(i)) i++;
    if (i === len) return prev;
  }
  return len === 0 ? '' : input.toString('latin1', a, a + len);
}

/**
 * `s` is `lower` (lower-case ASCII) but for ASCII case, without a lower-case copy of `s`: header
 * names as the parser gave them, here and in the engine (relay-conn.ts).
 */
export function isName(s: string, lower: string): boolean {
  const n = lower.length;
  if (s.length !== n) return false;
  if (s === lower) return true;
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    if (c !== lower.charCodeAt(i)) return false;
  }
  return true;
}

/** A header name in the two spellings peers send most: `content-length` and `Content-Length`. */
export class NameForms {
  readonly title: string;
  constructor(readonly lower: string) {
    this.title = lower.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase());
  }
}

/**
 * `isName(s, name.lower)`, with the usual spellings compared whole first: `===` against a string
 * of the same length is one native compare, where the case-folding loop costs two char reads and
 * a representation check a char (~35 instructions; bench/README.md "Header names as bytes").
 */
export function isNameOf(s: string, name: NameForms): boolean {
  return s.length === name.lower.length && (s === name.lower || s === name.title || isName(s, name.lower));
}

export const CONTENT_LENGTH = new NameForms('content-length');
export const TRANSFER_ENCODING = new NameForms('transfer-encoding');

/** The state of the blank-line matcher ("\r\n\r\n") after byte c, from state s (0..3). */
function blankLineStep(s: number, c: number): number {
  if (c === 13) return s === 2 ? 3 : 1;
  if (c === 10) return s === 1 ? 2 : s === 3 ? 4 : 0;
  return 0;
}

export class HttpParser<T extends ParserType> {
  readonly type: T;
  #ptr: number;
  #sink: ParserSink<HeadOf<T>>;
  #maxHeaderBytes: number;
  #pauseAfterMessage: boolean;
  #state: State = 'active';
  #error: ParseError | null = null;
  /** An error decided here rather than by llhttp (header limit, version), reported over llhttp's. */
  #ownError: ParseError | null = null;
  /** An exception from a sink method, rethrown once llhttp has returned. */
  #thrown: { error: unknown } | null = null;
  #freeRequested = false;
  /** The free asked for from inside a callback is a release() (to the pool), not a free(). */
  #releaseRequested = false;
  #requestMethod: string | null = null;
  /** Set by on_message_complete: the PAUSED that follows goes to the caller (else: resumed here). */
  #stopAfter = false;
  #finishing = false;

  // The message being parsed.
  #inMessage = false;
  #inHead = false;
  /** Head bytes in earlier reads, and where the head's bytes start in the current one. */
  #headBytes = 0;
  #headFrom = 0;
  /** How much of "\r\n\r\n" the head's bytes so far end with (a blank line split across reads). */
  #blankLine = 0;
  #text = '';
  /** The previous message's start-line text (URL or status text): see `repeat`. */
  #prevText = '';
  /**
   * The head's header list; only its first #count entries are this message's. The rest, in a
   * list given back by recycle(), are the previous message's, kept until overwritten so that a
   * repeated piece can reuse its string (`repeat`); cut off when the head completes.
   */
  #raw: string[] = [];
  #count = 0;
  /** A header list given back by recycle(): the next message's. */
  #spare: string[] | null = null;
  #trailers: string[] | null = null;
  #trailerBytes = 0;
  #interim = false;
  #upgrading = false;
  #deferredHead: AnyHead | null = null;

  constructor(type: T, sink: ParserSink<HeadOf<T>>, options: ParserOptions = {}) {
    if (type !== 'request' && type !== 'response') throw new TypeError(`HttpParser: type ${String(type)}`);
    this.type = type;
    this.#sink = sink;
    this.#maxHeaderBytes = maxHeaderBytesOf(options);
    this.#pauseAfterMessage = options.pauseAfterMessage ?? true;
    const l = L ?? HttpParser.#load();
    const ptr = l.llhttp_alloc(type === 'request' ? K.TYPE.REQUEST : K.TYPE.RESPONSE);
    if (ptr === 0) throw new Error('llhttp: llhttp_alloc failed');
    this.#ptr = ptr;
    leaked.register(this, ptr, this);
  }

  /**
   * A parser for a new connection: one given back by release() and reset, else a new one. Either
   * is in the state `new HttpParser(type, sink, options)` starts in. Reusing them keeps a
   * reconnection from making (and the young generation from promoting) a parser, its header list
   * and a FinalizationRegistry cell each time, and skips llhttp's allocation (bench/README.md
   * "Parsers reused across connections").
   */
  static take<T extends ParserType>(type: T, sink: ParserSink<HeadOf<T>>, options: ParserOptions = {}): HttpParser<T> {
    const pool = (type === 'request' ? spareRequests : type === 'response' ? spareResponses : null) as HttpParser<T>[] | null;
    if (pool === null || pool.length === 0) return new HttpParser(type, sink, options);
    const max = maxHeaderBytesOf(options); // may throw: before a parser leaves the pool
    const p = pool.pop()!;
    p.#maxHeaderBytes = max;
    p.#pauseAfterMessage = options.pauseAfterMessage ?? true;
    p.#sink = sink;
    p.#state = 'active';
    return p;
  }

  /**
   * Where the parser is: only an `active` parser may be given bytes (execute() throws otherwise, a
   * caller's bug, never a peer's: callers check this before feeding what a peer sent).
   */
  get state(): ParserState {
    return this.#state;
  }

  /** Parses `data` (see the module comment for the results). Never throws on bad input. */
  execute(data: Buffer): ExecuteResult {
    if (this.#state !== 'active') {
      if (this.#state === 'errored') return this.#error!;
      throw new Error(`HttpParser.execute: parser is ${this.#state}`);
    }
    if (current !== null) throw new Error('HttpParser.execute: called from inside a parser callback');
    const len = data.length;
    if (len === 0) return OK_RESULT;
    const l = L!;
    const base = reserveInput(len);
    memory().set(data, base);
    const ptr = this.#ptr;
    let ret = E_OK;
    let off = 0;
    current = this;
    input = data;
    try {
      for (;;) {
        inputStart = off;
        if (this.#inHead) this.#headFrom = off;
        ret = l.llhttp_execute(ptr, base + off, len - off);
        if (ret !== E_PAUSED || this.#thrown !== null || this.#freeRequested) break;
        // Every message completion pauses llhttp, so that each llhttp_execute call starts at most
        // one message (the head limit needs to know where it starts). Most pauses go to the caller.
        const pos = l.llhttp_get_error_pos(ptr) - base;
        if (this.#stopAfter) {
          this.#stopAfter = false;
          this.#state = 'paused';
          return { kind: 'paused', consumed: pos };
        }
        l.llhttp_resume(ptr);
        off = pos;
        if (off === len) {
          ret = E_OK;
          break;
        }
      }
    } finally {
      current = null;
      input = EMPTY;
    }
    return this.#settle(ret, base, data, len);
  }

  /** At EOF: completes a body delimited by connection close; an error if a message is cut short. */
  finish(): { kind: 'ok' } | ParseError {
    if (this.#state === 'errored') return this.#error!;
    if (this.#state === 'freed') throw new Error('HttpParser.finish: parser is freed');
    // Between messages. llhttp's own answer would be wrong here after a pause at a message's end:
    // it marks EOF as safe only once it parses on, so a resume then EOF would be "Invalid EOF state".
    if (this.#state !== 'active' || !this.#inMessage) return OK_RESULT;
    if (current !== null) throw new Error('HttpParser.finish: called from inside a parser callback');
    let ret: number;
    current = this;
    this.#finishing = true;
    try {
      ret = L!.llhttp_finish(this.#ptr);
    } finally {
      current = null;
      this.#finishing = false;
    }
    const r = this.#settle(ret, 0, EMPTY, 0);
    return r.kind === 'error' ? r : OK_RESULT;
  }

  /** Continues after a 'paused' result; feed the unconsumed bytes next. */
  resume(): void {
    if (this.#state !== 'paused') return;
    L!.llhttp_resume(this.#ptr);
    this.#state = 'active';
  }

  /** Goes back to HTTP after an 'upgrade' result (the upgrade was refused upstream). */
  resumeAfterUpgrade(): void {
    if (this.#state !== 'upgraded') return;
    L!.llhttp_resume_after_upgrade(this.#ptr);
    this.#state = 'active';
  }

  /** Response parsers: the method of the request the next response answers. */
  setRequestMethod(method: string): void {
    if (this.type !== 'response') throw new Error('HttpParser.setRequestMethod: not a response parser');
    this.#requestMethod = method;
  }

  /**
   * The caller is done with `rawHeaders` of a head this parser gave it (nothing holds the list any
   * more): the next message's header list is that one, instead of a new array and its grown
   * backing store (~100 bytes per message: bench/README.md "Allocation per request (issue 31)"),
   * and its strings are offered again for the pieces the next message repeats (`repeat`). Only
   * the current head's list, after onHead; the list's strings are left to whoever took them.
   */
  recycle(rawHeaders: string[]): void {
    if (rawHeaders !== this.#raw) return; // not this parser's current list: never two owners of one array
    this.#spare = rawHeaders;
  }

  /** Releases the llhttp state; idempotent. Inside a sink method: done when execute() returns. */
  free(): void {
    if (this.#state === 'freed') return;
    if (current === this) {
      this.#freeRequested = true;
      return;
    }
    leaked.unregister(this);
    L!.llhttp_free(this.#ptr);
    this.#ptr = 0;
    this.#state = 'freed';
  }

  /**
   * free(), except that the parser goes back to the pool take() draws from (when the pool is not
   * full) instead of being dropped. A pooled parser becomes another connection's, so the caller
   * must not keep this one: it holds what this returns instead, a parser that is always freed
   * (execute() and finish() throw, resume() and recycle() do nothing, release() and free() again
   * are no-ops), exactly as a freed parser behaved before there was a pool:
   *
   *     this.parser = this.parser.release();
   *
   * Inside a sink method the release happens when execute() returns, as free()'s does.
   */
  release(): HttpParser<T> {
    const freed = freedParser(this.type);
    if (this.#state === 'freed') return freed;
    if (current === this) {
      this.#freeRequested = true;
      this.#releaseRequested = true;
      return freed;
    }
    this.#giveBack();
    return freed;
  }

  /** Back to the state a new parser starts in, into the pool (or freed if the pool is full). */
  #giveBack(): void {
    const pool = (this.type === 'request' ? spareRequests : spareResponses) as HttpParser<T>[];
    if (pool.length >= PARSER_POOL_MAX) {
      this.free();
      return;
    }
    L!.llhttp_reset(this.#ptr);
    this.#state = 'freed'; // until take(): a use through a reference kept by mistake throws
    this.#error = null;
    this.#ownError = null;
    this.#thrown = null;
    this.#freeRequested = false;
    this.#releaseRequested = false;
    this.#requestMethod = null;
    this.#stopAfter = false;
    this.#finishing = false;
    this.#inMessage = false;
    this.#inHead = false;
    this.#headBytes = 0;
    this.#headFrom = 0;
    this.#blankLine = 0;
    // Nothing of the last connection's messages stays reachable from the pool: its texts, its
    // last header list (the caller may still hold it) and the strings of the list it recycled.
    this.#text = '';
    this.#prevText = '';
    this.#raw = NO_HEADERS;
    this.#count = 0;
    const spare = this.#spare;
    if (spare !== null && spare.length <= SPARE_MAX) spare.fill('');
    else this.#spare = null;
    this.#trailers = null;
    this.#trailerBytes = 0;
    this.#interim = false;
    this.#upgrading = false;
    this.#deferredHead = null;
    this.#sink = NO_SINK;
    pool.push(this);
  }

  // ---- after llhttp returns ---------------------------------------------------------------------

  #settle(ret: number, base: number, data: Buffer, len: number): ExecuteResult {
    const l = L!;
    if (this.#thrown !== null) {
      const { error } = this.#thrown;
      this.#thrown = null;
      this.#fail(badRequest('HPE_USER', 'a parser callback threw'));
      throw error;
    }
    if (this.#freeRequested) {
      this.#freeRequested = false;
      if (this.#releaseRequested) this.#giveBack();
      else this.free();
      return badRequest('HPE_USER', 'parser freed during a callback');
    }
    if (ret === E_OK) {
      if (this.#inHead && len > 0) {
        // The head goes on into the next read: count this read's part, and note how much of a
        // blank line it ends with (so the next read can tell where a head split across a CRLF ends).
        const from = this.#headFrom;
        this.#headBytes += len - from;
        if (this.#headBytes > this.#maxHeaderBytes) return this.#fail(overflowError());
        let s = len - from >= 3 ? 0 : this.#blankLine;
        for (let i = Math.max(from, len - 3); i < len; i++) s = blankLineStep(s, data[i]!);
        this.#blankLine = s;
      }
      return OK_RESULT;
    }
    if (ret === E_PAUSED_UPGRADE) {
      this.#state = 'upgraded';
      return { kind: 'upgrade', consumed: l.llhttp_get_error_pos(this.#ptr) - base };
    }
    if (this.#ownError !== null) return this.#fail(this.#ownError);
    return this.#fail(badRequest(cString(l.llhttp_errno_name(ret)), cString(l.llhttp_get_error_reason(this.#ptr))));
  }

  #fail(e: ParseError): ParseError {
    this.#state = 'errored';
    this.#error = e;
    return e;
  }

  /** Where the head ends in `input` (offset after its blank line); only when the limit is close. */
  #headEnd(): number {
    const from = this.#headFrom;
    const k = this.#blankLine;
    if (k > 0) {
      // The previous read ended inside the blank line: does this one finish it straight away?
      let s = k;
      for (let i = from; i < input.length && i < from + 4 - k; i++) {
        s = blankLineStep(s, input[i]!);
        if (s === 4) return i + 1;
      }
    }
    const at = input.indexOf(BLANK_LINE, from);
    return at < 0 ? input.length : at + 4;
  }

  /** Whether the head, having reached offset `end` of `input`, is over the limit. */
  #overLimit(end: number): boolean {
    return this.#headBytes + (end - this.#headFrom) > this.#maxHeaderBytes;
  }

  #overflow(): number {
    this.#ownError = overflowError();
    return -1;
  }

  #captureThrow(error: unknown): number {
    this.#thrown = { error };
    return -1;
  }

  // ---- llhttp callbacks (inside llhttp_execute; 0 continues, -1 is an error, PAUSED pauses) --------

  static #parserFor(p: number): HttpParser<ParserType> | null {
    const s = current;
    return s !== null && s.#ptr === p && s.#thrown === null && !s.#freeRequested ? s : null;
  }

  static #onMessageBegin(p: number): number {
    const s = HttpParser.#parserFor(p);
    if (s === null) return -1;
    // llhttp skips CR/LF before a message and begins it at the first other byte; the current
    // llhttp_execute call began at a message boundary, so that byte is the first non-CR/LF one.
    let i = inputStart;
    while (i < input.length && (input[i] === 13 || input[i] === 10)) i++;
    s.#inMessage = true;
    s.#inHead = true;
    s.#headFrom = i;
    s.#headBytes = 0;
    s.#blankLine = 0;
    if (s.#text !== '') s.#prevText = s.#text;
    s.#text = '';
    const spare = s.#spare;
    if (spare !== null) {
      s.#spare = null;
      s.#raw = spare; // its entries stay until this message's overwrite them (see #raw)
    } else {
      s.#raw = [];
    }
    s.#count = 0;
    s.#trailers = null;
    s.#trailerBytes = 0;
    s.#interim = false;
    s.#upgrading = false;
    return 0;
  }

  /** URL (requests) or reason phrase (responses); may come in pieces when split across reads. */
  static #onText(p: number, at: number, len: number): number {
    const s = HttpParser.#parserFor(p);
    if (s === null) return -1;
    const a = at - inputPtr;
    if (s.#overLimit(a + len)) return s.#overflow();
    // The first piece may be the whole of the previous message's; a later one is the rest of a
    // URL split across reads.
    s.#text = s.#text === '' ? repeat(s.#prevText, a, len) : s.#text + input.toString('latin1', a, a + len);
    return 0;
  }

  /**
   * A piece of a header (or trailer) name or value. llhttp reports even empty values (a zero-length
   * span), so names and values alternate: a name after a name, or a value after a value, is the
   * rest of one that a read boundary cut.
   */
  static #onHeaderPiece(p: number, at: number, len: number, isValue: boolean): number {
    const s = HttpParser.#parserFor(p);
    if (s === null) return -1;
    const a = at - inputPtr;
    if (!s.#inHead) {
      s.#trailerBytes += len;
      if (s.#trailerBytes > s.#maxHeaderBytes) return s.#overflow();
      const list = (s.#trailers ??= []);
      const piece = input.toString('latin1', a, a + len);
      const n = list.length;
      if ((n & 1) === (isValue ? 1 : 0)) {
        if (!isValue) trimLastValue(list);
        list.push(piece);
      } else list[n - 1] += piece;
      return 0;
    }
    // Checked per piece as well, so that an oversized read stops here, not after all of it has
    // become strings (a piece's end is a lower bound for the end of the head).
    if (s.#overLimit(a + len)) return s.#overflow();
    const list = s.#raw;
    const n = s.#count;
    if ((n & 1) === (isValue ? 1 : 0)) {
      if (!isValue) trimLastValue(list, n);
      // The previous message's entry at the same place, if the list is the recycled one.
      if (n < list.length) list[n] = repeat(list[n], a, len);
      else list.push(len === 0 ? '' : input.toString('latin1', a, a + len));
      s.#count = n + 1;
    } else list[n - 1] += input.toString('latin1', a, a + len);
    return 0;
  }

  static #onHeadersComplete(p: number, status: number, upgrade: number, keepAlive: number): number {
    const s = HttpParser.#parserFor(p);
    if (s === null) return -1;
    const l = L!;
    s.#inHead = false;
    // Usually the whole read fits in the limit and the exact end does not matter.
    if (s.#overLimit(input.length) && s.#overLimit(s.#headEnd())) return s.#overflow();
    const raw = s.#raw;
    // The recycled list's entries past this head's are the previous message's: cut off.
    if (raw.length !== s.#count) raw.length = s.#count;
    trimLastValue(raw);
    const major = l.llhttp_get_http_major(p);
    const minor = l.llhttp_get_http_minor(p);
    if (major !== 1) {
      s.#ownError = badRequest('HPE_INVALID_VERSION', `HTTP/${major}.${minor} is not HTTP/1.x`);
      return -1;
    }
    // The framing llhttp acted on, read back from the headers it has already validated (one
    // Content-Length of digits; Transfer-Encoding not with it; chunked last or not at all).
    let contentLength: number | null = null;
    let te: string | null = null;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.length === 14 && isNameOf(name, CONTENT_LENGTH)) contentLength = Number(raw[i + 1]);
      else if (name.length === 17 && isNameOf(name, TRANSFER_ENCODING)) te = raw[i + 1]!;
    }
    if (contentLength !== null && !Number.isSafeInteger(contentLength)) {
      s.#ownError = badRequest('HPE_INVALID_CONTENT_LENGTH', 'Content-Length above 2^53 - 1');
      return -1;
    }
    const chunked = te !== null && trimBlanks(te.slice(te.lastIndexOf(',') + 1)).toLowerCase() === 'chunked';
    // 0: llhttp goes on; 1: no body whatever the headers say; 2: the rest is another protocol.
    let ret = 0;
    if (s.type === 'response') {
      const m = s.#requestMethod;
      if (status < 200 && status !== 101) {
        ret = 1;
        s.#interim = true;
      } else if (m === 'HEAD') ret = 1;
      else if (m === 'CONNECT' && status >= 200 && status < 300) ret = 2;
    }
    // llhttp treats every 101 as an upgrade, with or without an Upgrade header.
    const up = upgrade === 1 || ret === 2 || (s.type === 'response' && status === 101);
    s.#upgrading = up;
    const keep = keepAlive === 1;
    const untilEof = ret === 0 && l.llhttp_message_needs_eof(p) === 1;
    // Two literals rather than one object extended afterwards: one shape per head type.
    const head: AnyHead =
      s.type === 'request'
        ? {
            method: METHOD_NAMES[l.llhttp_get_method(p)] ?? '',
            url: s.#text,
            versionMajor: major,
            versionMinor: minor,
            rawHeaders: raw,
            keepAlive: keep,
            upgrade: up,
            contentLength,
            chunked,
            untilEof,
          }
        : {
            statusCode: status,
            reason: s.#text,
            versionMajor: major,
            versionMinor: minor,
            rawHeaders: raw,
            keepAlive: keep,
            upgrade: up,
            contentLength,
            chunked,
            untilEof,
          };
    if (ret === 1) {
      // llhttp's keep-alive answer here still assumes a body to EOF when there is no length (the
      // skip-body flag is set only once this returns 1); on_message_complete follows at once, with
      // the right answer, and the head goes out from there.
      s.#deferredHead = head;
      return 1;
    }
    try {
      s.#sink.onHead(head);
    } catch (e) {
      return s.#captureThrow(e);
    }
    return ret;
  }

  static #onBody(p: number, at: number, len: number): number {
    const s = HttpParser.#parserFor(p);
    if (s === null) return -1;
    const a = at - inputPtr;
    try {
      s.#sink.onBody(input.subarray(a, a + len));
    } catch (e) {
      return s.#captureThrow(e);
    }
    return 0;
  }

  static #onMessageComplete(p: number): number {
    const s = HttpParser.#parserFor(p);
    if (s === null) return -1;
    const keepAlive = L!.llhttp_should_keep_alive(p) === 1;
    s.#inMessage = false;
    const trailers = s.#trailers ?? NO_TRAILERS;
    if (trailers !== NO_TRAILERS) trimLastValue(trailers);
    const head = s.#deferredHead;
    try {
      if (head !== null) {
        s.#deferredHead = null;
        head.keepAlive = keepAlive;
        s.#sink.onHead(head);
      }
      if (s.#interim) {
        s.#interim = false;
        // Paused only to start the final response in a fresh llhttp_execute call (see execute).
        s.#stopAfter = false;
        return s.#finishing ? 0 : E_PAUSED;
      }
      s.#requestMethod = null;
      s.#sink.onMessageComplete(keepAlive, trailers);
    } catch (e) {
      return s.#captureThrow(e);
    }
    // An upgrade must not pause here: llhttp then returns PAUSED_UPGRADE at this position.
    if (s.#upgrading || s.#finishing) return 0;
    s.#stopAfter = s.#pauseAfterMessage;
    return E_PAUSED;
  }

  static #load(): LlhttpExports {
    const W = (globalThis as unknown as { WebAssembly: WasmGlobal }).WebAssembly;
    let mod: object;
    try {
      // The SIMD build first, as undici does; the plain one where SIMD is unavailable.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      mod = new W.Module(require('undici/lib/llhttp/llhttp_simd-wasm.js') as Buffer);
    } catch {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      mod = new W.Module(require('undici/lib/llhttp/llhttp-wasm.js') as Buffer);
    }
    const env = {
      wasm_on_message_begin: (p: number) => HttpParser.#onMessageBegin(p),
      wasm_on_url: (p: number, at: number, len: number) => HttpParser.#onText(p, at, len),
      wasm_on_status: (p: number, at: number, len: number) => HttpParser.#onText(p, at, len),
      wasm_on_header_field: (p: number, at: number, len: number) => HttpParser.#onHeaderPiece(p, at, len, false),
      wasm_on_header_value: (p: number, at: number, len: number) => HttpParser.#onHeaderPiece(p, at, len, true),
      wasm_on_headers_complete: (p: number, status: number, upgrade: number, keepAlive: number) =>
        HttpParser.#onHeadersComplete(p, status, upgrade, keepAlive),
      wasm_on_body: (p: number, at: number, len: number) => HttpParser.#onBody(p, at, len),
      wasm_on_message_complete: (p: number) => HttpParser.#onMessageComplete(p),
    };
    L = new W.Instance(mod, { env }).exports as LlhttpExports;
    return L;
  }
}

/** Bytes of wasm memory in use by the shared llhttp instance (0 before the first parser). */
export function llhttpMemoryBytes(): number {
  return L === null ? 0 : L.memory.buffer.byteLength;
}

/** Released parsers waiting for take(), by type (see PARSER_POOL_MAX). */
const spareRequests: HttpParser<'request'>[] = [];
const spareResponses: HttpParser<'response'>[] = [];

/** The always-freed parser release() returns, one per type (made at the first release). */
const freedParsers: { request?: HttpParser<'request'>; response?: HttpParser<'response'> } = {};

function freedParser<T extends ParserType>(type: T): HttpParser<T> {
  let p = freedParsers[type] as HttpParser<T> | undefined;
  if (p === undefined) {
    p = new HttpParser(type, NO_SINK);
    p.free();
    (freedParsers as Record<ParserType, HttpParser<ParserType>>)[type] = p;
  }
  return p;
}

/** How many released parsers of each type wait in the pool (tests, diagnostics). */
export function pooledParsers(): { request: number; response: number } {
  return { request: spareRequests.length, response: spareResponses.length };
}
