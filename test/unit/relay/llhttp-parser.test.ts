/**
 * The relay's llhttp (wasm) parsing layer: heads, bodies and completions as a relay sees them,
 * split reads, pipelining, the smuggling vectors strict llhttp rejects (with the exact error
 * names), the head size limit, responses (HEAD, 1xx, 204/304, EOF bodies, keep-alive), upgrades,
 * many parsers on the one wasm instance, and garbage input.
 */
import t from 'tap';
import {
  type ExecuteResult,
  HttpParser,
  PARSER_POOL_MAX,
  type ParserOptions,
  type ParserSink,
  type ParserType,
  type RequestHead,
  type ResponseHead,
  llhttpMemoryBytes,
  pooledParsers,
} from '../../../src/forward/http/relay/llhttp-parser';
import { prng } from '../../helpers/prng';

type Head = RequestHead | ResponseHead;

/** A sink that keeps everything, with the order of events. */
class Recorder<H extends Head> implements ParserSink<H> {
  heads: H[] = [];
  bodies: Buffer[] = [];
  completes: { keepAlive: boolean; trailers: string[] }[] = [];
  events: string[] = [];
  onHead(head: H): void {
    this.heads.push(head);
    this.events.push('head');
  }
  onBody(chunk: Buffer): void {
    this.bodies.push(Buffer.from(chunk)); // a view of the caller's buffer: copy to keep
    this.events.push('body');
  }
  onMessageComplete(keepAlive: boolean, trailers: string[]): void {
    this.completes.push({ keepAlive, trailers: [...trailers] });
    this.events.push('complete');
  }
  body(): string {
    return Buffer.concat(this.bodies).toString('latin1');
  }
}

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

/** Splits into pieces of n bytes. */
function pieces(buf: Buffer, n: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; i += n) out.push(buf.subarray(i, i + n));
  return out;
}

/** Feeds the reads in order as a relay would: after a pause, resume and feed the rest again. */
function feed(p: HttpParser<ParserType>, reads: Buffer[]): ExecuteResult[] {
  const results: ExecuteResult[] = [];
  for (const read of reads) {
    let rest = read;
    for (;;) {
      const r = p.execute(rest);
      results.push(r);
      if (r.kind !== 'paused' || r.consumed === rest.length) break;
      p.resume();
      rest = rest.subarray(r.consumed);
    }
    const last = results[results.length - 1]!;
    if (last.kind === 'paused') p.resume();
    if (last.kind === 'error' || last.kind === 'upgrade') break;
  }
  return results;
}

function request(reads: Buffer[], opts?: ParserOptions) {
  const rec = new Recorder<RequestHead>();
  const p = new HttpParser('request', rec, opts);
  const results = feed(p, reads);
  p.free();
  return { rec, results, last: results[results.length - 1]! };
}

function response(reads: Buffer[], method?: string, opts?: ParserOptions) {
  const rec = new Recorder<ResponseHead>();
  const p = new HttpParser('response', rec, opts);
  if (method !== undefined) p.setRequestMethod(method);
  const results = feed(p, reads);
  return { rec, results, last: results[results.length - 1]!, p };
}

/** What one parse produced, to compare whole-buffer and split-read parses. */
function summary(rec: Recorder<Head>, last: ExecuteResult) {
  return { heads: rec.heads, body: rec.body(), completes: rec.completes, last: last.kind };
}

t.test('GET: method, url, version, headers as received, no body', async (t) => {
  const msg = b('GET /a/b?c=d HTTP/1.1\r\nHost: example.test\r\nX-Mixed-Case: v1\r\nX-Pad:  padded \t\r\nX-Empty:\r\n\r\n');
  const { rec, results } = request([msg]);
  t.same(results, [{ kind: 'paused', consumed: msg.length }], 'paused right after the message');
  t.equal(rec.heads.length, 1);
  const h = rec.heads[0]!;
  t.equal(h.method, 'GET');
  t.equal(h.url, '/a/b?c=d');
  t.equal(h.versionMajor, 1);
  t.equal(h.versionMinor, 1);
  t.same(
    h.rawHeaders,
    ['Host', 'example.test', 'X-Mixed-Case', 'v1', 'X-Pad', 'padded', 'X-Empty', ''],
    'names keep their case, values lose surrounding blanks, empty values kept',
  );
  t.equal(h.keepAlive, true);
  t.equal(h.upgrade, false);
  t.equal(h.contentLength, null);
  t.equal(h.chunked, false);
  t.equal(h.untilEof, false);
  t.same(rec.events, ['head', 'complete']);
  t.same(rec.completes, [{ keepAlive: true, trailers: [] }]);
});

t.test('POST with Content-Length: body delivered; byte-at-a-time gives the same', async (t) => {
  const msg = b('POST /submit HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world');
  const whole = request([msg]);
  t.equal(whole.rec.heads[0]!.method, 'POST');
  t.equal(whole.rec.heads[0]!.url, '/submit');
  t.equal(whole.rec.heads[0]!.contentLength, 11);
  t.same(whole.rec.heads[0]!.rawHeaders, ['Host', 'h', 'Content-Type', 'text/plain', 'Content-Length', '11']);
  t.equal(whole.rec.body(), 'hello world');
  t.same(whole.last, { kind: 'paused', consumed: msg.length });
  const split = request(pieces(msg, 1));
  t.same(summary(split.rec, split.last), summary(whole.rec, whole.last), 'identical head, body, completion');
  t.equal(split.rec.bodies.length, 11, 'one body callback per byte read');
  t.ok(
    split.results.slice(0, -1).every((r) => r.kind === 'ok'),
    'ok until the last byte',
  );
  for (const n of [2, 3, 7, 16, 33]) {
    const r = request(pieces(msg, n));
    t.same(summary(r.rec, r.last), summary(whole.rec, whole.last), `pieces of ${n}`);
  }
});

t.test('framing headers are read whatever the case of their names', async (t) => {
  for (const name of ['content-length', 'CONTENT-LENGTH', 'Content-length', 'cOnTeNt-LeNgTh']) {
    const { rec } = request([b(`POST / HTTP/1.1\r\nHost: a\r\n${name}: 3\r\n\r\nabc`)]);
    t.equal(rec.heads[0]!.contentLength, 3, `${name}: the length`);
    t.equal(rec.body(), 'abc', `${name}: the body`);
  }
  for (const name of ['transfer-encoding', 'TRANSFER-ENCODING', 'Transfer-encoding']) {
    const { rec } = request([b(`POST / HTTP/1.1\r\nHost: a\r\n${name}: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`)]);
    t.equal(rec.heads[0]!.chunked, true, `${name}: chunked`);
    t.equal(rec.body(), 'abc', `${name}: the body`);
  }
  // Same length, one letter off: not the framing header (and llhttp frames no body for it).
  const { rec } = request([b('GET / HTTP/1.1\r\nHost: a\r\nContent-Lengtx: 3\r\n\r\n')]);
  t.equal(rec.heads[0]!.contentLength, null, 'Content-Lengtx is not Content-Length');
});

t.test('chunked request: decoded body, chunk extensions skipped, trailers handed over', async (t) => {
  const msg = b(
    'POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n' +
      '5;ext=1\r\nhello\r\n6;a=b;c="q;x"\r\n world\r\n0\r\nX-Checksum: abc \r\nX-More: 2\r\n\r\n',
  );
  const whole = request([msg]);
  t.same(whole.last, { kind: 'paused', consumed: msg.length });
  const h = whole.rec.heads[0]!;
  t.equal(h.chunked, true);
  t.equal(h.contentLength, null);
  t.equal(whole.rec.body(), 'hello world', 'chunk sizes, extensions and CRLFs are not body');
  t.same(
    whole.rec.completes,
    [{ keepAlive: true, trailers: ['X-Checksum', 'abc', 'X-More', '2'] }],
    'trailers are tolerated and delivered, not mixed into rawHeaders',
  );
  t.same(h.rawHeaders, ['Host', 'h', 'Transfer-Encoding', 'chunked']);
  const split = request(pieces(msg, 1));
  t.same(summary(split.rec, split.last), summary(whole.rec, whole.last), 'byte at a time');
  const ci = request([b('POST / HTTP/1.1\r\nTransfer-Encoding: gzip, CHUNKED\r\n\r\n1\r\nz\r\n0\r\n\r\n')]);
  t.equal(ci.rec.heads[0]!.chunked, true, 'the last coding decides, case-insensitively');
  t.equal(ci.rec.body(), 'z');
});

t.test('pipelined requests: pause after the first, consumed is its length, resume gives the second', async (t) => {
  const first = 'POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc';
  const second = 'GET /2 HTTP/1.1\r\nHost: h\r\n\r\n';
  const data = b(first + second);
  const rec = new Recorder<RequestHead>();
  const p = new HttpParser('request', rec);
  const r1 = p.execute(data);
  t.same(r1, { kind: 'paused', consumed: first.length });
  t.equal(rec.heads.length, 1, 'the second request is not parsed yet');
  t.equal(rec.completes.length, 1);
  t.throws(() => p.execute(data.subarray(first.length)), /paused/, 'execute while paused is a caller bug');
  p.resume();
  const r2 = p.execute(data.subarray(first.length));
  t.same(r2, { kind: 'paused', consumed: second.length });
  t.same(
    rec.heads.map((h) => h.url),
    ['/1', '/2'],
  );
  t.equal(rec.body(), 'abc');
  t.same(rec.events, ['head', 'body', 'complete', 'head', 'complete']);
  p.resume();
  t.same(p.execute(b('\r\n')), { kind: 'ok' }, 'CR/LF between messages is skipped');
  p.free();

  const nonstop = request([b(first + second + first)], { pauseAfterMessage: false });
  t.same(nonstop.results, [{ kind: 'ok' }], 'pauseAfterMessage: false parses them back to back');
  t.same(
    nonstop.rec.heads.map((h) => h.url),
    ['/1', '/2', '/1'],
  );
  t.equal(nonstop.rec.body(), 'abcabc');
});

t.test("smuggling and malformed requests are rejected with 400 and llhttp's error name", async (t) => {
  const cases: [string, string, string][] = [
    [
      'Content-Length then Transfer-Encoding',
      'POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'HPE_INVALID_TRANSFER_ENCODING',
    ],
    [
      'Transfer-Encoding then Content-Length',
      'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n',
      'HPE_INVALID_CONTENT_LENGTH',
    ],
    [
      'two different Content-Length',
      'POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd',
      'HPE_UNEXPECTED_CONTENT_LENGTH',
    ],
    ['two equal Content-Length', 'POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc', 'HPE_UNEXPECTED_CONTENT_LENGTH'],
    ['Content-Length with a letter', 'POST / HTTP/1.1\r\nContent-Length: 3x\r\n\r\nabc', 'HPE_INVALID_CONTENT_LENGTH'],
    ['Content-Length with a sign', 'POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc', 'HPE_INVALID_CONTENT_LENGTH'],
    ['Content-Length list', 'POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc', 'HPE_INVALID_CONTENT_LENGTH'],
    ['empty Content-Length', 'POST / HTTP/1.1\r\nContent-Length: \r\n\r\n', 'HPE_INVALID_CONTENT_LENGTH'],
    ['Content-Length above 2^53', 'POST / HTTP/1.1\r\nContent-Length: 9007199254740993\r\n\r\n', 'HPE_INVALID_CONTENT_LENGTH'],
    ['Content-Length overflowing 64 bits', 'POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n', 'HPE_INVALID_CONTENT_LENGTH'],
    ['obs-fold (space)', 'GET / HTTP/1.1\r\nHost: a\r\n b\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['obs-fold (tab)', 'GET / HTTP/1.1\r\nHost: a\r\n\tb\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['space before the colon', 'GET / HTTP/1.1\r\nHost : a\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['space before the first header', 'GET / HTTP/1.1\r\n Host: a\r\n\r\n', 'HPE_UNEXPECTED_SPACE'],
    ['control character in a value', 'GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['DEL in a value', 'GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n', 'HPE_INVALID_HEADER_TOKEN'],
    ['bad chunk size', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n', 'HPE_INVALID_CHUNK_SIZE'],
    ['space after the chunk size', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nab\r\n0\r\n\r\n', 'HPE_INVALID_CHUNK_SIZE'],
    ['chunk longer than its size', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n', 'HPE_STRICT'],
    [
      'Transfer-Encoding: chunked, identity',
      'POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n',
      'HPE_INVALID_TRANSFER_ENCODING',
    ],
    [
      'chunked, then another Transfer-Encoding line',
      'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n',
      'HPE_INVALID_TRANSFER_ENCODING',
    ],
    [
      'chunked twice',
      'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'HPE_INVALID_TRANSFER_ENCODING',
    ],
    [
      'request Transfer-Encoding not ending in chunked',
      'POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nabc',
      'HPE_INVALID_TRANSFER_ENCODING',
    ],
    ['bare LF after the request line', 'GET / HTTP/1.1\nHost: a\r\n\r\n', 'HPE_INVALID_VERSION'],
    ['bare LF after a header', 'GET / HTTP/1.1\r\nHost: a\n\r\n', 'HPE_CR_EXPECTED'],
    ['CR without LF in a header', 'GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n', 'HPE_LF_EXPECTED'],
    ['bare LF after a chunk size', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\na\r\n0\r\n\r\n', 'HPE_CR_EXPECTED'],
    ['invalid method token', 'G@T / HTTP/1.1\r\nHost: a\r\n\r\n', 'HPE_INVALID_METHOD'],
    ['unknown method', 'FROB / HTTP/1.1\r\nHost: a\r\n\r\n', 'HPE_INVALID_METHOD'],
    ['lower-case method', 'get / HTTP/1.1\r\nHost: a\r\n\r\n', 'HPE_INVALID_METHOD'],
    ['control character in the url', 'GET /\x7f HTTP/1.1\r\n\r\n', 'HPE_INVALID_URL'],
    ['HTTP/1.2', 'GET / HTTP/1.2\r\n\r\n', 'HPE_INVALID_VERSION'],
    ['HTTP/2.0 request line (llhttp accepts it; rejected here)', 'GET / HTTP/2.0\r\n\r\n', 'HPE_INVALID_VERSION'],
    ['no version (HTTP/0.9 style; llhttp accepts it; rejected here)', 'GET /\r\n\r\n', 'HPE_INVALID_VERSION'],
    ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'HPE_PAUSED_H2_UPGRADE'],
  ];
  for (const [name, msg, code] of cases) {
    for (const split of [0, 1]) {
      const data = b(msg);
      const { rec, last } = request(split ? pieces(data, 1) : [data]);
      const how = split ? ' (byte at a time)' : '';
      t.equal(last.kind, 'error', name + how);
      if (last.kind !== 'error') continue;
      t.equal(last.code, code, name + how);
      t.equal(last.status, 400, name + how);
      t.ok(last.reason.length > 0, `${name}: a reason (${last.reason})`);
      t.equal(rec.completes.length, 0, `${name}: no message completes`);
    }
  }
  // The errors found in the head never reach onHead; those after it (body, llhttp's post-head
  // Transfer-Encoding check) do, and the caller acts on the error result.
  t.equal(request([b(cases[0]![1])]).rec.heads.length, 0, 'CL+TE: no head');
  t.equal(
    request([b('POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n')]).rec.heads.length,
    1,
    'TE gzip: the head is out before the error',
  );
});

t.test('after an error the parser is unusable', async (t) => {
  const rec = new Recorder<RequestHead>();
  const p = new HttpParser('request', rec);
  const e = p.execute(b('GET / HTTP/1.1\r\nHost : a\r\n\r\n'));
  t.equal(e.kind, 'error');
  t.same(p.execute(b('GET / HTTP/1.1\r\n\r\n')), e, 'the same error again');
  t.equal(rec.heads.length, 0);
  t.same(p.finish(), e);
  p.free();
  t.throws(() => p.execute(b('GET / HTTP/1.1\r\n\r\n')), /freed/);
  p.free(); // idempotent
});

/** A request whose head is exactly `size` bytes (padding in one header value), then `body`. */
function sizedRequest(size: number, body = ''): { msg: Buffer; head: number } {
  const start = `POST /limit HTTP/1.1\r\nHost: h\r\nContent-Length: ${body.length}\r\nX-Pad: `;
  const end = '\r\n\r\n';
  const pad = size - start.length - end.length;
  const head = start + 'p'.repeat(pad) + end;
  if (head.length !== size) throw new Error('sizedRequest');
  return { msg: b(head + body), head: size };
}

t.test('maxHeaderBytes: the whole head counted, exact at the boundary, across reads', async (t) => {
  const max = 1000;
  const at = sizedRequest(max, 'body!').msg;
  const over = sizedRequest(max + 1, 'body!').msg;
  const check = (name: string, reads: Buffer[], ok: boolean): void => {
    const { rec, last } = request(reads, { maxHeaderBytes: max });
    if (ok) {
      t.same(last, { kind: 'paused', consumed: reads[reads.length - 1]!.length }, `${name}: complete`);
      t.equal(rec.body(), 'body!', `${name}: body`);
    } else {
      t.same(last, { kind: 'error', code: 'HPE_HEADER_OVERFLOW', reason: 'Header overflow', status: 431 }, `${name}: 431`);
      t.equal(rec.heads.length, 0, `${name}: no head delivered`);
    }
  };
  check('at the limit, one read', [at], true);
  check('one over, one read', [over], false);
  check('at the limit, byte at a time', pieces(at, 1), true);
  check('one over, byte at a time', pieces(over, 1), false);
  check('at the limit, 7-byte reads', pieces(at, 7), true);
  check('one over, 7-byte reads', pieces(over, 7), false);
  // The blank line cut by a read boundary, the rest of the read being body: the end of the head is
  // found from what the previous read ended with.
  for (const cut of [1, 2, 3]) {
    const h = max - cut;
    check(`at the limit, blank line cut ${cut} from its end`, [at.subarray(0, h), at.subarray(h)], true);
    check(`one over, blank line cut ${cut} from its end`, [over.subarray(0, h + 1), over.subarray(h + 1)], false);
  }
  check('at the limit, head minus 2 then 2 + body', [at.subarray(0, max - 2), at.subarray(max - 2, max), at.subarray(max)], true);

  // Incomplete heads fail as soon as they pass the limit, without waiting for the end.
  const rec = new Recorder<RequestHead>();
  const p = new HttpParser('request', rec, { maxHeaderBytes: max });
  t.same(p.execute(b(`GET / HTTP/1.1\r\nX-Big: ${'x'.repeat(max)}`)).kind, 'error', 'one big read, head unfinished');
  p.free();
  const slow = new HttpParser('request', new Recorder<RequestHead>(), { maxHeaderBytes: max });
  let r: ExecuteResult = { kind: 'ok' };
  let fed = 0;
  for (const piece of pieces(b(`GET / HTTP/1.1\r\n${'X-H: v\r\n'.repeat(200)}`), 10)) {
    r = slow.execute(piece);
    fed += piece.length;
    if (r.kind !== 'ok') break;
  }
  t.equal(r.kind, 'error');
  t.ok(fed > max && fed <= max + 10, `failed on the read that passed the limit (${fed} bytes fed)`);
  slow.free();

  // Each pipelined message has its own count; CR/LF before a request line is not counted.
  for (const gap of ['', '\r\n', '\r\n\r\n']) {
    const two = Buffer.concat([at, b(gap), at]);
    const both = request([two], { maxHeaderBytes: max, pauseAfterMessage: false });
    t.same(both.last, { kind: 'ok' });
    t.equal(both.rec.heads.length, 2, `two heads at the limit in one read, ${JSON.stringify(gap)} between`);
    const both2 = request([two], { maxHeaderBytes: max });
    t.equal(both2.rec.heads.length, 2, 'the same, pausing between them');
  }

  // The default limit.
  const big = request([b(`GET / HTTP/1.1\r\nX-Big: ${'x'.repeat(16384)}\r\n\r\n`)]);
  t.equal(big.last.kind === 'error' && big.last.status, 431, 'default 16384');
  const fits = request([sizedRequest(16384).msg]);
  t.equal(fits.rec.heads.length, 1, 'a 16384-byte head fits the default');

  // Responses and trailers.
  const resAt = b(`HTTP/1.1 200 OK\r\nX-Pad: ${'p'.repeat(60)}\r\nContent-Length: 0\r\n\r\n`);
  const limit = resAt.length;
  t.equal(response([resAt], undefined, { maxHeaderBytes: limit }).rec.heads.length, 1, 'response at its limit');
  const resOver = response([resAt], undefined, { maxHeaderBytes: limit - 1 }).last;
  t.equal(resOver.kind === 'error' && resOver.status, 431, 'response one over');
  const trailers = b(`POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: ${'v'.repeat(200)}\r\n\r\n`);
  const tr = request([trailers], { maxHeaderBytes: 150 });
  t.equal(tr.rec.heads.length, 1);
  t.equal(tr.last.kind === 'error' && tr.last.code, 'HPE_HEADER_OVERFLOW', 'trailers are bounded too');
  t.throws(() => new HttpParser('request', new Recorder<RequestHead>(), { maxHeaderBytes: 0 }), RangeError);
});

t.test('responses: Content-Length, chunked, reason phrase', async (t) => {
  const msg = b('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello');
  const { rec, last } = response([msg], 'GET');
  t.same(last, { kind: 'paused', consumed: msg.length });
  const h = rec.heads[0]!;
  t.equal(h.statusCode, 200);
  t.equal(h.reason, 'OK');
  t.equal(h.contentLength, 5);
  t.equal(h.keepAlive, true);
  t.equal(h.untilEof, false);
  t.equal(rec.body(), 'hello');
  const split = response(pieces(msg, 1), 'GET');
  t.same(summary(split.rec, split.last), summary(rec, last), 'byte at a time');

  const chunked = b('HTTP/1.1 404 Not Found Here\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nnot\r\n9\r\n found :(\r\n0\r\n\r\n');
  const c = response([chunked]);
  t.equal(c.rec.heads[0]!.statusCode, 404);
  t.equal(c.rec.heads[0]!.reason, 'Not Found Here');
  t.equal(c.rec.heads[0]!.chunked, true);
  t.equal(c.rec.body(), 'not found :(');
  t.same(c.last, { kind: 'paused', consumed: chunked.length });
  const noReason = response([b('HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n')]);
  t.equal(noReason.rec.heads[0]!.reason, '', 'no reason phrase');
});

t.test('HEAD response: Content-Length but no body, then the next response on the same parser', async (t) => {
  const first = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n';
  const second = 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello';
  const data = b(first + second);
  const rec = new Recorder<ResponseHead>();
  const p = new HttpParser('response', rec);
  p.setRequestMethod('HEAD');
  const r1 = p.execute(data);
  t.same(r1, { kind: 'paused', consumed: first.length }, 'the HEAD response ends at its head');
  t.equal(rec.heads[0]!.contentLength, 5, 'the length is reported as sent');
  t.equal(rec.body(), '');
  t.same(rec.events, ['head', 'complete']);
  p.resume(); // the method was cleared when the HEAD response completed
  const r2 = p.execute(data.subarray(first.length));
  t.same(r2, { kind: 'paused', consumed: second.length });
  t.equal(rec.body(), 'hello', 'the second response has its body');
  p.free();

  // Without a length, llhttp's keep-alive answer at the head assumes a body to EOF: the head is
  // delivered with the answer read at completion.
  const bare = response([b('HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n')], 'HEAD');
  t.equal(bare.rec.heads[0]!.keepAlive, true, 'HEAD response without length: keep-alive in the head');
  t.same(bare.rec.completes[0], { keepAlive: true, trailers: [] }, 'and at completion');
  t.equal(bare.rec.heads[0]!.untilEof, false);
  t.same(
    bare.rec.heads.map((h) => h.statusCode),
    [200, 204],
    'the next response follows',
  );
  const closing = response([b('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n')], 'HEAD');
  t.equal(closing.rec.heads[0]!.keepAlive, false, 'Connection: close still counts');
  // The same bytes without setRequestMethod('HEAD') are a body to EOF.
  const get = response([b('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel')]);
  t.equal(get.last.kind, 'ok', 'waits for the rest of the body');
  t.equal(get.rec.body(), 'hel');
  t.throws(() => new HttpParser('request', new Recorder<RequestHead>()).setRequestMethod('HEAD'), /response/);
});

t.test('204 and 304: no body, even with a Content-Length', async (t) => {
  for (const head of [
    'HTTP/1.1 204 No Content\r\n\r\n',
    'HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n',
    'HTTP/1.1 304 Not Modified\r\n\r\n',
    'HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: "x"\r\n\r\n',
  ]) {
    const next = 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc';
    const { rec, results } = response([b(head + next)]);
    t.same(results[0], { kind: 'paused', consumed: head.length }, JSON.stringify(head));
    t.same(rec.events, ['head', 'complete', 'head', 'body', 'complete']);
    t.equal(rec.body(), 'abc', 'the following response is intact');
    t.equal(rec.heads[0]!.keepAlive, true);
    t.equal(rec.completes[0]!.keepAlive, true);
  }
});

t.test('1xx: 100 Continue and 103 are heads of their own, then the final response', async (t) => {
  const msg = b(
    'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  );
  for (const [name, reads] of [
    ['one read', [msg]],
    ['byte at a time', pieces(msg, 1)],
  ] as const) {
    const { rec, last } = response([...reads], 'POST');
    t.same(
      rec.heads.map((h) => h.statusCode),
      [100, 103, 200],
      name,
    );
    t.same(rec.heads[1]!.rawHeaders, ['Link', '</s.css>; rel=preload']);
    t.same(
      rec.events.filter((e) => e !== 'body'),
      ['head', 'head', 'head', 'complete'],
      `${name}: one completion, for the final response`,
    );
    t.equal(rec.body(), 'ok');
    t.same(last, { kind: 'paused', consumed: reads[reads.length - 1]!.length }, `${name}: paused only after the 200`);
  }
  const cl = response([b('HTTP/1.1 100 Continue\r\nContent-Length: 2\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')]);
  t.same(
    cl.rec.heads.map((h) => h.statusCode),
    [100, 200],
    'a 1xx never has a body, whatever it says',
  );
});

t.test('EOF-delimited response body: finish() completes it; an incomplete message is an error', async (t) => {
  const rec = new Recorder<ResponseHead>();
  const p = new HttpParser('response', rec);
  t.same(p.execute(b('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nabc')), { kind: 'ok' });
  t.same(p.execute(b('def')), { kind: 'ok' });
  t.equal(rec.heads[0]!.untilEof, true);
  t.equal(rec.heads[0]!.keepAlive, false);
  t.equal(rec.completes.length, 0, 'not complete before EOF');
  t.same(p.finish(), { kind: 'ok' });
  t.equal(rec.body(), 'abcdef');
  t.same(rec.completes, [{ keepAlive: false, trailers: [] }]);
  p.free();

  const te = response([b('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzz')]);
  t.equal(te.rec.heads[0]!.untilEof, true, 'a non-chunked Transfer-Encoding: body to EOF');
  t.equal(te.rec.heads[0]!.chunked, false);
  t.same(te.p.finish(), { kind: 'ok' });
  t.equal(te.rec.body(), 'zzz');

  const short = response([b('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc')]);
  const e = short.p.finish();
  t.equal(e.kind === 'error' && e.code, 'HPE_INVALID_EOF_STATE', 'Content-Length body cut short');
  t.equal(short.rec.completes.length, 0);
  const midHead = response([b('HTTP/1.1 200 OK\r\nContent-Le')]);
  t.equal(midHead.p.finish().kind, 'error', 'EOF inside a head');
  const idle = response([b('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')]);
  t.same(idle.p.finish(), { kind: 'ok' }, 'EOF between messages');
  t.same(new HttpParser('response', new Recorder<ResponseHead>()).finish(), { kind: 'ok' }, 'EOF before anything');
});

t.test('keep-alive', async (t) => {
  const cases: [string, boolean][] = [
    ['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', true],
    ['HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', false],
    ['HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\nContent-Length: 0\r\n\r\n', false],
    ['HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n', false],
    ['HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n', true],
  ];
  for (const [msg, ka] of cases) {
    const { rec } = response([b(msg)]);
    t.equal(rec.heads[0]!.keepAlive, ka, `response head: ${JSON.stringify(msg)}`);
    t.equal(rec.completes[0]!.keepAlive, ka, 'at completion');
  }
  const reqs: [string, boolean][] = [
    ['GET / HTTP/1.1\r\nHost: h\r\n\r\n', true],
    ['GET / HTTP/1.1\r\nConnection: close\r\n\r\n', false],
    ['GET / HTTP/1.0\r\n\r\n', false],
    ['GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n', true],
  ];
  for (const [msg, ka] of reqs) {
    const { rec } = request([b(msg)]);
    t.equal(rec.heads[0]!.keepAlive, ka, `request: ${JSON.stringify(msg)}`);
    t.equal(rec.completes[0]!.keepAlive, ka);
    t.equal(rec.heads[0]!.versionMinor, msg.includes('1.0') ? 0 : 1);
  }
});

t.test('upgrade: consumed at the end of the head, the rest untouched', async (t) => {
  const head = 'GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n';
  const frames = '\x81\x05hello GET / HTTP/1.1\r\n\r\n';
  const data = b(head + frames);
  const copy = Buffer.from(data);
  const rec = new Recorder<RequestHead>();
  const p = new HttpParser('request', rec);
  const r = p.execute(data);
  t.same(r, { kind: 'upgrade', consumed: head.length });
  t.equal(rec.heads[0]!.upgrade, true);
  t.same(rec.heads[0]!.rawHeaders, ['Host', 'h', 'Connection', 'Upgrade', 'Upgrade', 'websocket']);
  t.same(rec.events, ['head', 'complete'], 'the bytes after the head are not parsed as HTTP');
  t.ok(data.equals(copy), 'the buffer is not modified');
  t.equal(data.subarray(r.kind === 'upgrade' ? r.consumed : 0).toString('latin1'), frames);
  t.throws(() => p.execute(b('x')), /upgraded/, 'no more HTTP after an upgrade ...');
  p.resumeAfterUpgrade(); // ... unless the relay declined it
  t.same(p.execute(b('GET /next HTTP/1.1\r\n\r\n')), { kind: 'paused', consumed: 22 });
  t.same(
    rec.heads.map((h) => h.url),
    ['/ws', '/next'],
  );
  p.free();

  const plain = request([b('GET / HTTP/1.1\r\nConnection: Upgrade\r\n\r\n')]);
  t.equal(plain.rec.heads[0]!.upgrade, false, 'Connection: Upgrade without an Upgrade header is no upgrade');
  const connectHead = 'CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal:5432\r\n\r\n';
  const connect = request([b(`${connectHead}\x00\x01`)]);
  t.same(connect.last, { kind: 'upgrade', consumed: connectHead.length });
  t.equal(connect.rec.heads[0]!.method, 'CONNECT');
  t.equal(connect.rec.heads[0]!.url, 'db.internal:5432');
  t.equal(connect.rec.heads[0]!.upgrade, true);

  const sw = b('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x00');
  const res = response([sw], 'GET');
  t.same(res.last, { kind: 'upgrade', consumed: sw.length - 2 });
  t.equal(res.rec.heads[0]!.upgrade, true);
  const tunnelHead = 'HTTP/1.1 200 Connection Established\r\n\r\n';
  const tunnel = response([b(`${tunnelHead}\x16\x03`)], 'CONNECT');
  t.same(tunnel.last, { kind: 'upgrade', consumed: tunnelHead.length }, 'a 2xx to CONNECT is a tunnel');
  t.equal(tunnel.rec.heads[0]!.upgrade, true);
  const refused = response([b('HTTP/1.1 407 Auth\r\nContent-Length: 1\r\n\r\nx')], 'CONNECT');
  t.equal(refused.last.kind, 'paused', 'a refused CONNECT is an ordinary response');
  t.equal(refused.rec.body(), 'x');
});

t.test('many parsers at once: interleaved reads, no cross-talk; free() releases them', async (t) => {
  const n = 200;
  const parsers: { p: HttpParser<'request'>; rec: Recorder<RequestHead>; reads: Buffer[]; results: ExecuteResult[] }[] = [];
  for (let i = 0; i < n; i++) {
    const body = `body-of-${i}-`.repeat((i % 7) + 1);
    const chunked = i % 3 === 0;
    const msg = chunked
      ? `PUT /item/${i} HTTP/1.1\r\nX-Id: ${i}\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
      : `POST /item/${i} HTTP/1.1\r\nX-Id: ${i}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const rec = new Recorder<RequestHead>();
    parsers.push({ p: new HttpParser('request', rec), rec, reads: pieces(b(msg), 1 + (i % 13)), results: [] });
  }
  // Round-robin, one read per parser per turn: every execute() follows another parser's.
  for (let turn = 0; parsers.some((x) => turn < x.reads.length); turn++) {
    for (const x of parsers) if (turn < x.reads.length) x.results.push(x.p.execute(x.reads[turn]!));
  }
  parsers.forEach(({ rec, results }, i) => {
    const body = `body-of-${i}-`.repeat((i % 7) + 1);
    if (
      rec.heads.length !== 1 ||
      rec.heads[0]!.url !== `/item/${i}` ||
      rec.body() !== body ||
      rec.completes.length !== 1 ||
      results[results.length - 1]!.kind !== 'paused' ||
      rec.heads[0]!.rawHeaders[1] !== String(i) ||
      rec.heads[0]!.method !== (i % 3 === 0 ? 'PUT' : 'POST')
    ) {
      t.fail(`parser ${i}: ${JSON.stringify({ heads: rec.heads, body: rec.body(), results })}`);
    }
  });
  t.pass('200 parsers, each with its own message');
  for (const x of parsers) x.p.free();

  // Warm up (the shared input buffer, allocator bins), then alloc/parse/free must not grow memory.
  const msg = b('POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi');
  const cycle = (): boolean => {
    const rec = new Recorder<RequestHead>();
    const p = new HttpParser('request', rec);
    const r = p.execute(msg);
    p.free();
    return r.kind === 'paused' && rec.body() === 'hi';
  };
  for (let i = 0; i < 100; i++) cycle();
  const before = llhttpMemoryBytes();
  t.ok(before > 0);
  let ok = 0;
  for (let i = 0; i < 10000; i++) if (cycle()) ok++;
  t.equal(ok, 10000, 'every cycle parsed');
  t.equal(llhttpMemoryBytes(), before, `wasm memory unchanged after 10,000 alloc/free cycles (${before} bytes)`);
  // 200 parsers alive again fit in what the first 200 used.
  const again = Array.from({ length: 200 }, () => new HttpParser('response', new Recorder<ResponseHead>()));
  for (const p of again) p.free();
  t.equal(llhttpMemoryBytes(), before, 'and 200 more alive at once reuse the freed space');

  // A large read grows the shared input buffer; parsing still works across the move.
  const large = b(`POST /big HTTP/1.1\r\nContent-Length: 3000000\r\n\r\n${'z'.repeat(3000000)}`);
  const r = request([large]);
  t.equal(
    r.rec.bodies.reduce((s, x) => s + x.length, 0),
    3000000,
  );
  t.ok(llhttpMemoryBytes() > before, 'memory grew for the large read');
  t.ok(cycle(), 'small parses after the growth');
});

t.test('garbage never throws out of execute: it is an error result', async (t) => {
  const rand = prng(0x5eed);
  let errors = 0;
  for (let i = 0; i < 2000; i++) {
    const len = 16 + Math.floor(rand() * 500);
    const data = Buffer.alloc(len);
    for (let j = 0; j < len; j++) data[j] = Math.floor(rand() * 256);
    for (const type of ['request', 'response'] as const) {
      const p = new HttpParser(type, new Recorder<Head>());
      const r = p.execute(data);
      p.free();
      if (r.kind === 'error' && r.status === 400) errors++;
      // The same garbage in random pieces.
      const q = new HttpParser(type, new Recorder<Head>());
      let last: ExecuteResult = { kind: 'ok' };
      for (let at = 0; at < len && last.kind === 'ok'; ) {
        const n = 1 + Math.floor(rand() * 40);
        last = q.execute(data.subarray(at, at + n));
        at += n;
      }
      q.free();
      if (last.kind === 'error') errors++;
    }
  }
  t.equal(errors, 8000, 'every random buffer, whole or in pieces, is an error');

  // Valid messages with a few bytes changed: any result, but never an exception.
  const base = b(
    'POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n' +
      'GET /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi',
  );
  const kinds = new Set<string>();
  for (let i = 0; i < 3000; i++) {
    const data = Buffer.from(base);
    const flips = 1 + Math.floor(rand() * 3);
    for (let f = 0; f < flips; f++) data[Math.floor(rand() * data.length)] = Math.floor(rand() * 256);
    const { results } = request(pieces(data, 1 + Math.floor(rand() * 20)), { maxHeaderBytes: 40 + Math.floor(rand() * 40) });
    for (const r of results) kinds.add(r.kind);
  }
  t.ok(kinds.has('error') && kinds.has('paused'), `mutations give errors and successes (${[...kinds].join(', ')})`);
});

t.test('a sink that throws: the exception comes out of execute, the parser is dead, others unaffected', async (t) => {
  const boom = new Error('sink failed');
  const p = new HttpParser('request', {
    onHead: () => {
      throw boom;
    },
    onBody: () => undefined,
    onMessageComplete: () => undefined,
  });
  t.throws(() => p.execute(b('GET / HTTP/1.1\r\n\r\n')), boom);
  const again = p.execute(b('GET / HTTP/1.1\r\n\r\n'));
  t.equal(again.kind, 'error', 'unusable afterwards');
  p.free();
  const r = request([b('GET /fine HTTP/1.1\r\n\r\n')]);
  t.equal(r.rec.heads[0]!.url, '/fine', 'the shared instance still parses');

  // free() from inside a callback waits for execute to return.
  const rec = new Recorder<RequestHead>();
  const q: HttpParser<'request'> = new HttpParser('request', {
    onHead: (h) => {
      rec.onHead(h);
      q.free();
    },
    onBody: (c) => rec.onBody(c),
    onMessageComplete: (k, tr) => rec.onMessageComplete(k, tr),
  });
  const fr = q.execute(b('POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx'));
  t.equal(fr.kind, 'error');
  t.same(rec.events, ['head'], 'nothing after the free');
  t.throws(() => q.execute(b('GET / HTTP/1.1\r\n\r\n')), /freed/);
  // Re-entering execute from a callback is refused.
  const inner = new HttpParser('request', new Recorder<RequestHead>());
  const outer = new HttpParser('request', {
    onHead: () => {
      inner.execute(b('GET / HTTP/1.1\r\n\r\n'));
    },
    onBody: () => undefined,
    onMessageComplete: () => undefined,
  });
  t.throws(() => outer.execute(b('GET / HTTP/1.1\r\n\r\n')), /inside a parser callback/);
  t.same(inner.execute(b('GET / HTTP/1.1\r\n\r\n')), { kind: 'paused', consumed: 18 }, 'the inner parser was not touched');
  inner.free();
  outer.free();
});

/**
 * Messages that repeat and vary the last one's pieces: the same bytes, the same length with other
 * bytes (last char, first char), one byte longer or shorter, trailing blanks (trimmed only after
 * the piece is read), empty values, pieces just under, at and over the reuse limit (24 chars),
 * fewer or more headers than the message before.
 */
function repeatingMessages(type: ParserType, rand: () => number, count: number): string[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const values = ['a', 'b', 'ab', 'ba', '', 'x'.repeat(23), 'x'.repeat(24), 'y'.repeat(24), 'x'.repeat(25), 'x'.repeat(60)];
  const names = ['Host', 'Hosu', 'Xost', 'X-A', 'X-B', 'X-Long-Name-Of-24-Chars-', 'X-Long-Name-Of-24-Chars-Plus'];
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const start =
      type === 'request'
        ? `GET ${pick(['/', '/a', '/b', `/${'p'.repeat(23)}`, `/${'p'.repeat(30)}`])} HTTP/1.1\r\n`
        : `HTTP/1.1 200 ${pick(['OK', 'Ok', 'OKAY', ''])}\r\n`;
    let head = start;
    const n = Math.floor(rand() * 6);
    for (let k = 0; k < n; k++) head += `${pick(names)}: ${pick(values)}${pick(['', '', ' ', ' \t'])}\r\n`;
    out.push(`${head}Content-Length: 0\r\n\r\n`);
  }
  return out;
}

t.test('recycle: heads from a recycled list equal a fresh parse, whatever the previous message and the read boundaries', async (t) => {
  for (const type of ['request', 'response'] as const) {
    for (let seed = 1; seed <= 40; seed++) {
      const rand = prng(seed);
      const msgs = repeatingMessages(type, rand, 12);
      const whole = b(msgs.join(''));
      // The reference: one fresh parser per message, never a recycled list.
      const expected = msgs.map((m) => {
        const rec = new Recorder<Head>();
        const p = new HttpParser<ParserType>(type, rec as ParserSink<never>);
        feed(p, [b(m)]);
        p.free();
        return rec.heads[0]!;
      });
      // A relay's parser: every head's list given back at once, the bytes in reads of 1-40 bytes.
      const heads: Head[] = [];
      let parser: HttpParser<ParserType> | null = null;
      const sink: ParserSink<Head> = {
        onHead(head) {
          heads.push({ ...head, rawHeaders: [...head.rawHeaders] });
          parser!.recycle(head.rawHeaders);
        },
        onBody() {},
        onMessageComplete() {},
      };
      parser = new HttpParser<ParserType>(type, sink as ParserSink<never>);
      const reads: Buffer[] = [];
      for (let i = 0; i < whole.length; ) {
        const n = 1 + Math.floor(rand() * 40);
        reads.push(whole.subarray(i, i + n));
        i += n;
      }
      const results = feed(parser, reads);
      parser.free();
      t.not(results[results.length - 1]!.kind, 'error', `${type} seed ${seed}: parsed`);
      t.strictSame(heads, expected, `${type} seed ${seed}: every head as a fresh parser reads it`);
    }
  }
});

t.test('recycle: the next message reuses a header list given back, emptied; any other list is refused', async (t) => {
  const heads: RequestHead[] = [];
  let parser: HttpParser<'request'> | null = null;
  const sink: ParserSink<RequestHead> = {
    onHead(head) {
      heads.push({ ...head, rawHeaders: [...head.rawHeaders] });
      // A relay done with the head gives its list back at once (quickDone, finishExchange).
      if (heads.length === 1) parser!.recycle(head.rawHeaders);
      lists.push(head.rawHeaders);
    },
    onBody() {},
    onMessageComplete() {},
  };
  const lists: string[][] = [];
  parser = new HttpParser('request', sink);
  const p = parser;
  feed(p, [
    b('GET /1 HTTP/1.1\r\nHost: a\r\nX-One: 1\r\nX-Two: 2\r\n\r\nGET /2 HTTP/1.1\r\nHost: b\r\n\r\nGET /3 HTTP/1.1\r\nHost: c\r\n\r\n'),
  ]);
  t.equal(heads.length, 3);
  t.strictSame(
    heads.map((h) => [h.url, h.rawHeaders]),
    [
      ['/1', ['Host', 'a', 'X-One', '1', 'X-Two', '2']],
      ['/2', ['Host', 'b']],
      ['/3', ['Host', 'c']],
    ],
    'every head has its own headers, none of the recycled list left over',
  );
  t.equal(lists[1], lists[0], 'the second message filled the list the first gave back');
  t.strictSame(lists[1], ['Host', 'b'], 'emptied before it was filled again');
  t.not(lists[2], lists[1], 'a list not given back is not reused: the third message has a new one');
  // A list that is not the parser's current one is refused (it may be another parser's, or old).
  const foreign: string[] = ['X', 'y'];
  p.recycle(foreign);
  feed(p, [b('GET /4 HTTP/1.1\r\nHost: d\r\n\r\n')]);
  t.not(lists[3], foreign, 'a foreign list is never taken');
  t.strictSame(foreign, ['X', 'y'], 'and never emptied');
  p.free();
});

/**
 * What a connection can leave its parser in when it ends: mid-head, mid-body, paused after a
 * message, errored (llhttp's error and the head limit), upgraded, a response's request method
 * set, a header list recycled and one handed out, other options.
 */
function leaveIn(type: ParserType, rand: () => number): { p: HttpParser<ParserType>; rec: Recorder<Head>; given: Set<string[]> } {
  const rec = new Recorder<Head>();
  const given = new Set<string[]>();
  let p: HttpParser<ParserType> | null = null;
  const sink: ParserSink<Head> = {
    onHead(head) {
      rec.onHead(head);
      if (rand() < 0.5) {
        p!.recycle(head.rawHeaders);
        given.add(head.rawHeaders);
      }
    },
    onBody: (c) => rec.onBody(c),
    onMessageComplete: (k, tr) => rec.onMessageComplete(k, tr),
  };
  const opts: ParserOptions = { maxHeaderBytes: 40 + Math.floor(rand() * 200), pauseAfterMessage: rand() < 0.5 };
  p = HttpParser.take<ParserType>(type, sink as ParserSink<never>, opts);
  if (type === 'response' && rand() < 0.5) p.setRequestMethod(rand() < 0.5 ? 'HEAD' : 'CONNECT');
  const msgs =
    type === 'request'
      ? [
          'GET /a HTTP/1.1\r\nHost: h\r\nX-Left: over\r\n\r\n',
          'POST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\nhalf',
          'GET /c HTTP/1.1\r\nHost: h\r\nX-Cut: in the mid',
          'GET /d HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nframes',
          `GET /e HTTP/1.1\r\nX-Big: ${'v'.repeat(300)}\r\n\r\n`,
          'GET /f HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab',
          'GET /g HTTP/1.1\r\nBad Header: x\r\n\r\n',
        ]
      : [
          'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
          'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\npart',
          'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 O',
          'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nframes',
          'HTTP/1.1 200 OK\r\n\r\nuntil the end',
          'HTTP/1.1 2x0 Bad\r\n\r\n',
        ];
  const msg = b(msgs[Math.floor(rand() * msgs.length)]!);
  const reads: Buffer[] = [];
  for (let i = 0; i < msg.length; ) {
    const n = 1 + Math.floor(rand() * 30);
    reads.push(msg.subarray(i, i + n));
    i += n;
  }
  feed(p, reads);
  return { p, rec, given };
}

t.test('release: a parser taken from the pool parses as a new one, whatever its last connection left', async (t) => {
  let reused = 0;
  for (const type of ['request', 'response'] as const) {
    for (let seed = 1; seed <= 150; seed++) {
      const rand = prng(seed * 7919);
      const msgs = repeatingMessages(type, rand, 6);
      const whole = b(msgs.join(''));
      const reads: Buffer[] = [];
      for (let i = 0; i < whole.length; ) {
        const n = 1 + Math.floor(rand() * 40);
        reads.push(whole.subarray(i, i + n));
        i += n;
      }
      const fresh = new Recorder<Head>();
      const f = new HttpParser<ParserType>(type, fresh as ParserSink<never>);
      const expected = feed(f, reads);
      f.free();

      const old = leaveIn(type, rand);
      const oldEvents = old.rec.events.length;
      // The lists the last connection kept (did not give back with recycle), as they were.
      const kept = old.rec.heads.map((h) => h.rawHeaders).filter((l) => !old.given.has(l));
      const keptCopies = kept.map((l) => [...l]);
      const freed = old.p.release();
      const rec = new Recorder<Head>();
      const p = HttpParser.take<ParserType>(type, rec as ParserSink<never>);
      if (p === old.p) reused++;
      const got = feed(p, reads);
      t.strictSame(
        { results: got, ...summary(rec, got[got.length - 1]!) },
        { results: expected, ...summary(fresh, expected[expected.length - 1]!) },
        `${type} seed ${seed}: the same results, heads, bodies and completions as a new parser`,
      );
      t.equal(old.rec.events.length, oldEvents, `${type} seed ${seed}: nothing reached the last connection's sink`);
      t.strictSame(kept, keptCopies, `${type} seed ${seed}: the header lists the last connection kept are untouched`);
      t.throws(() => freed.execute(b('GET / HTTP/1.1\r\n\r\n')), /freed/, 'what release() returned is freed');
      p.release();
    }
  }
  t.equal(reused, 300, 'every take() after a release() reused the released parser');
});

t.test('release: the parser returned is always freed; a pooled parser is never given to two owners', async (t) => {
  const rec = new Recorder<RequestHead>();
  const p = HttpParser.take('request', rec);
  t.same(p.execute(b('GET /x HTTP/1.1\r\nHost: h\r\n\r\n')).kind, 'paused');
  const kept = rec.heads[0]!.rawHeaders;
  const before = pooledParsers().request;
  const freed = p.release();
  t.not(freed, p, 'the caller holds another object from now on');
  t.equal(freed.state, 'freed');
  t.equal(pooledParsers().request, before + 1, 'the parser went to the pool');
  t.equal(freed.release(), freed, 'releasing the freed parser again gives itself');
  t.equal(p.release(), freed, 'releasing a pooled parser again does not pool it twice');
  p.free();
  t.equal(pooledParsers().request, before + 1, 'and free() on it is a no-op');
  t.throws(() => freed.execute(b('GET / HTTP/1.1\r\n\r\n')), /freed/);
  t.throws(() => freed.finish(), /freed/);
  t.doesNotThrow(() => {
    freed.resume();
    freed.recycle(kept);
    freed.free();
  }, 'resume, recycle and free do nothing');
  t.throws(() => p.execute(b('GET / HTTP/1.1\r\n\r\n')), /freed/, 'a kept reference to a pooled parser cannot parse');
  const a = HttpParser.take('request', new Recorder<RequestHead>());
  const c = HttpParser.take('request', new Recorder<RequestHead>());
  t.equal(a, p, 'the pool gives the last parser released first');
  t.not(c, a, 'and never the same one twice');
  t.strictSame(kept, ['Host', 'h'], 'the list the last owner kept was not touched');
  t.equal(HttpParser.take('response', new Recorder<ResponseHead>()).type, 'response', 'the two types have pools of their own');
  t.throws(() => HttpParser.take('other' as ParserType, new Recorder<Head>() as ParserSink<never>), TypeError);
  a.release();
  c.release();
  const pooled = pooledParsers().request;
  t.ok(pooled >= 2);
  t.throws(() => HttpParser.take('request', new Recorder<RequestHead>(), { maxHeaderBytes: 0 }), RangeError);
  t.equal(pooledParsers().request, pooled, 'an invalid option throws before a parser leaves the pool');
});

t.test('release from inside a callback happens when execute returns', async (t) => {
  const rec = new Recorder<RequestHead>();
  const before = pooledParsers().request;
  let freed: HttpParser<'request'> | null = null;
  const q: HttpParser<'request'> = HttpParser.take('request', {
    onHead: (h) => {
      rec.onHead(h);
      freed = q.release();
      t.equal(pooledParsers().request, before - (before > 0 ? 1 : 0), 'not in the pool while execute runs');
    },
    onBody: (c) => rec.onBody(c),
    onMessageComplete: (k, tr) => rec.onMessageComplete(k, tr),
  });
  const r = q.execute(b('POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx'));
  t.same(r, { kind: 'error', code: 'HPE_USER', reason: 'parser freed during a callback', status: 400 });
  t.same(rec.events, ['head'], 'nothing after the release');
  t.equal(freed!.state, 'freed');
  t.equal(pooledParsers().request, before, 'in the pool once execute returned');
  const again = new Recorder<RequestHead>();
  const p = HttpParser.take('request', again);
  t.equal(p, q, 'reused');
  t.same(p.execute(b('GET /next HTTP/1.1\r\n\r\n')).kind, 'paused');
  t.same(
    again.heads.map((h) => h.url),
    ['/next'],
    'and parses from the start of a message',
  );
  p.release();
});

t.test(`the pool keeps at most ${PARSER_POOL_MAX} parsers of a type; the rest are freed`, async (t) => {
  const drained: HttpParser<'response'>[] = [];
  while (pooledParsers().response > 0) drained.push(HttpParser.take('response', new Recorder<ResponseHead>()));
  const many = Array.from({ length: PARSER_POOL_MAX + 50 }, () => HttpParser.take('response', new Recorder<ResponseHead>()));
  for (const p of many) p.execute(b('HTTP/1.1 204 No Content\r\n\r\n'));
  const memory = llhttpMemoryBytes();
  for (const p of many) p.release();
  for (const p of drained) p.release();
  t.equal(pooledParsers().response, PARSER_POOL_MAX, 'the pool is full, not over');
  const again = Array.from({ length: PARSER_POOL_MAX + 50 }, () => HttpParser.take('response', new Recorder<ResponseHead>()));
  t.equal(pooledParsers().response, 0);
  t.equal(new Set(again).size, again.length, 'every parser taken is a different object');
  t.equal(again.filter((p) => many.includes(p) || drained.includes(p)).length, PARSER_POOL_MAX, `${PARSER_POOL_MAX} of them reused`);
  t.equal(llhttpMemoryBytes(), memory, 'wasm memory did not grow');
  for (const p of again) p.release();
});
