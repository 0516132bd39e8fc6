/**
 * Upstream request headers (one pass over rawHeaders) and the response headers relayed to the
 * client: what is dropped, what is kept, what is read from a trusted proxy.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import t from 'tap';
import { ReceivedHeaders, scanRequestHeaders } from '../../../../src/forward/http/request-headers';
import type { ResponseHead } from '../../../../src/forward/http/relay/llhttp-parser';
import { isName, isNameOf, NameForms } from '../../../../src/forward/http/relay/llhttp-parser';
import { KNOWN_HEAD_NAMES, responseHeadBytes, upstreamHead } from '../../../../src/forward/http/relay/relay-conn';

/** The header lines of the head the relay writes for a 200 with these headers (its status line and blank line checked and cut). */
function responseHeaderLines(raw: string[], http10: boolean): string {
  const head = { statusCode: 200, reason: 'OK', rawHeaders: raw } as ResponseHead;
  const text = responseHeadBytes(head, http10, '').toString('latin1');
  if (!text.startsWith('HTTP/1.1 200 OK\r\n') || !text.endsWith('\r\n\r\n'))
    throw new Error(`not a response head: ${JSON.stringify(text)}`);
  return text.slice('HTTP/1.1 200 OK\r\n'.length, -2);
}

function scan(raw: string[], trusted: boolean): { out: OutgoingHttpHeaders; got: ReceivedHeaders } {
  const out: OutgoingHttpHeaders = {};
  const got = new ReceivedHeaders();
  scanRequestHeaders(raw, trusted, out, got);
  return { out, got };
}

t.test('hop-by-hop headers are dropped for everyone, end-to-end ones kept', async (t) => {
  const { out } = scan(
    [
      'Host',
      'a',
      'Connection',
      'close, X-Hop',
      'X-Hop',
      '1',
      'Keep-Alive',
      'timeout=5',
      'TE',
      'trailers',
      'Trailer',
      'X-T',
      'Proxy-Connection',
      'keep-alive',
      'Upgrade',
      'h2c',
      'HTTP2-Settings',
      'AAA',
      'Expect',
      '100-continue',
      'Transfer-Encoding',
      'chunked',
      'Accept',
      'text/html',
      'X-App',
      'v',
    ],
    true,
  );
  t.same(out, { host: 'a', 'transfer-encoding': 'chunked', accept: 'text/html', 'x-app': 'v' });
});

t.test('Connection cannot remove the framing or Host', async (t) => {
  const { out } = scan(['Host', 'a', 'Content-Length', '5', 'Connection', 'content-length, host, transfer-encoding'], false);
  t.same(out, { host: 'a', 'content-length': '5' });
});

t.test('untrusted peer: forwarding and client-IP headers dropped unread', async (t) => {
  const { out, got } = scan(
    [
      'X-Forwarded-For',
      '1.1.1.1',
      'X-Real-IP',
      '1.1.1.1',
      'Forwarded',
      'for=1.1.1.1',
      'X-Forwarded-Proto',
      'https',
      'X-Forwarded-Host',
      'h',
      'X-Forwarded-Port',
      '1',
      'X-Forwarded-Prefix',
      '/p',
      'True-Client-IP',
      '1.1.1.1',
      'X-Client-IP',
      '1.1.1.1',
      'X-Cluster-Client-IP',
      '1.1.1.1',
      'CF-Connecting-IP',
      '1.1.1.1',
    ],
    false,
  );
  t.same(out, {});
  t.equal(got.xForwardedFor, null);
  t.equal(got.forwarded, null);
  t.equal(got.xForwardedProto, null);
});

t.test('trusted peer: forwarding headers read (lines joined in order), others passed', async (t) => {
  const { out, got } = scan(
    [
      'X-Forwarded-For',
      '1.1.1.1, 2.2.2.2',
      'x-forwarded-for',
      '3.3.3.3',
      'Forwarded',
      'for=1.1.1.1',
      'FORWARDED',
      'for=2.2.2.2',
      'X-Forwarded-Proto',
      'https',
      'X-Forwarded-Proto',
      'http',
      'X-Real-IP',
      '9.9.9.9',
      'X-Forwarded-Prefix',
      '/p',
      'True-Client-IP',
      '1.1.1.1',
    ],
    true,
  );
  t.equal(got.xForwardedFor, '1.1.1.1, 2.2.2.2, 3.3.3.3');
  t.equal(got.forwarded, 'for=1.1.1.1, for=2.2.2.2');
  t.equal(got.xForwardedProto, 'https', 'first line wins');
  t.same(out, { 'x-forwarded-prefix': '/p', 'true-client-ip': '1.1.1.1' }, 'X-Real-IP is always ours; the rest passes');
});

t.test('duplicates: joined, cookie with "; ", single-valued keep the first', async (t) => {
  const { out, got } = scan(
    ['Host', 'a', 'Host', 'b', 'Cookie', 'x=1', 'Cookie', 'y=2', 'X-Multi', '1', 'X-Multi', '2', 'User-Agent', 'u1', 'User-Agent', 'u2'],
    false,
  );
  t.same(out, { host: 'a', cookie: 'x=1; y=2', 'x-multi': '1, 2', 'user-agent': 'u1' });
  t.equal(got.host, 'a');
});

t.test('body detection decides whether a request may be retried on another target', async (t) => {
  t.equal(scan(['Host', 'a'], false).got.hasBody, false);
  t.equal(scan(['Content-Length', '0'], false).got.hasBody, false);
  t.equal(scan(['Content-Length', '3'], false).got.hasBody, true);
  t.equal(scan(['Transfer-Encoding', 'chunked'], false).got.hasBody, true);
});

t.test('response: hop-by-hop dropped, duplicates and case kept, Connection-named headers dropped', async (t) => {
  const raw = [
    'Content-Type',
    'text/plain',
    'Connection',
    'close, X-Internal',
    'X-Internal',
    's',
    'Keep-Alive',
    'timeout=5',
    'Transfer-Encoding',
    'chunked',
    'Set-Cookie',
    'a=1',
    'Set-Cookie',
    'b=2',
    'Upgrade',
    'h2c',
    'Proxy-Connection',
    'x',
    'Trailer',
    'X',
    'te',
    'x',
    'Content-Length',
    '4',
  ];
  t.equal(
    responseHeaderLines(raw, false),
    'Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 4\r\n',
  );
  t.equal(
    responseHeaderLines(raw, true),
    'Content-Type: text/plain\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 4\r\n',
    'HTTP/1.0 client: no Transfer-Encoding',
  );
  t.equal(
    responseHeaderLines(['Connection', 'content-length', 'Content-Length', '4'], false),
    'Content-Length: 4\r\n',
    'framing never dropped',
  );
});

t.test('response headers: names compared whatever their case, Connection values without a list skipped cheaply', async (t) => {
  t.equal(
    responseHeaderLines(
      [
        'CONNECTION',
        'Keep-Alive',
        'KEEP-ALIVE',
        'timeout=5',
        'Te',
        'x',
        'TRAILER',
        'X-T',
        'Upgrade',
        'h2c',
        'Proxy-Connection',
        'close',
        'Date',
        'd',
      ],
      false,
    ),
    'Date: d\r\n',
    'hop-by-hop names in any case are dropped',
  );
  t.equal(responseHeaderLines(['Connection', 'CLOSE', 'X-A', '1'], false), 'X-A: 1\r\n', 'Connection: CLOSE names no header');
  t.equal(
    responseHeaderLines(
      ['Connection', 'keep-alive, X-A', 'X-A', '1', 'x-b', '2', 'Content-Length', '2', 'Transfer-Encoding', 'chunked'],
      false,
    ),
    'x-b: 2\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n',
    'a list names its headers (the framing stays)',
  );
  t.equal(
    responseHeaderLines(['Connection', 'Content-Length, Transfer-Encoding', 'Content-Length', '2', 'TRANSFER-ENCODING', 'chunked'], true),
    'Content-Length: 2\r\n',
    'the framing named in Connection is kept; an HTTP/1.0 client gets no Transfer-Encoding',
  );
});

t.test('response: each header classified once, for heads longer and shorter than the one before', async (t) => {
  // 300 headers, every fifth one hop-by-hop: more than the note of the last head had room for.
  const raw: string[] = [];
  let expected = '';
  for (let i = 0; i < 300; i++) {
    const hop = i % 5 === 0;
    raw.push(hop ? 'Keep-Alive' : `X-H${i}`, `v${i}`);
    if (!hop) expected += `X-H${i}: v${i}\r\n`;
  }
  t.equal(responseHeaderLines(raw, false), expected, 'only the end-to-end headers, in order');
  // A short head after it: nothing of the long one's note is read for it.
  t.equal(responseHeaderLines(['Keep-Alive', 'x', 'X-A', '1'], false), 'X-A: 1\r\n', 'a shorter head after a long one');
  t.equal(responseHeaderLines(['X-A', '1', 'Keep-Alive', 'x'], false), 'X-A: 1\r\n', 'and the other way round');
  t.equal(responseHeaderLines(raw, true), expected, 'the long one again');
});

t.test('upstreamHead: the bytes the string form had, for a request, an upgrade and list values', async (t) => {
  const headers: OutgoingHttpHeaders = {
    host: 'a.test',
    'x-real-ip': '127.0.0.1',
    'x-list': ['1', '2'],
    'x-num': 5,
    'x-skip': undefined,
    'x-latin1': 'caf\xe9',
  };
  const want = (first: string): string =>
    `${first}host: a.test\r\nx-real-ip: 127.0.0.1\r\nx-list: 1, 2\r\nx-num: 5\r\nx-latin1: caf\xe9\r\n\r\n`;
  t.equal(upstreamHead('GET', '/p?q=1', null, headers).toString('latin1'), want('GET /p?q=1 HTTP/1.1\r\nconnection: keep-alive\r\n'));
  t.equal(
    upstreamHead('GET', '/ws', 'websocket', headers).toString('latin1'),
    want('GET /ws HTTP/1.1\r\nconnection: upgrade\r\nupgrade: websocket\r\n'),
  );
  t.equal(upstreamHead('OPTIONS', '*', null, {}).toString('latin1'), 'OPTIONS * HTTP/1.1\r\nconnection: keep-alive\r\n\r\n');
});

t.test('isNameOf: the name in any ASCII case, its two usual spellings first; nothing else', async (t) => {
  for (const lower of ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'te', 'close']) {
    const name = new NameForms(lower);
    const title = lower.replace(/(^|-)([a-z])/g, (_, d: string, c: string) => d + c.toUpperCase());
    t.equal(name.title, title, `${lower}: its usual spelling ${title}`);
    const spellings = [lower, title, lower.toUpperCase(), [...lower].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join('')];
    for (const s of spellings) t.ok(isNameOf(s, name), `${lower}: ${s}`);
    const misses = [
      `${lower}x`,
      lower.slice(1),
      `${lower.slice(0, -1)}${lower.endsWith('e') ? 'f' : 'e'}`,
      `${title.slice(0, -1)}_`,
      lower.replace('-', '_'),
      '',
    ].filter((s) => s.toLowerCase() !== lower);
    for (const s of misses) {
      t.equal(isNameOf(s, name), isName(s, lower), `${lower}: ${JSON.stringify(s)} as isName answers`);
      t.notOk(isNameOf(s, name), `${lower}: not ${JSON.stringify(s)}`);
    }
  }
});

t.test('upstreamHead: names copied from their bytes and names converted give the string form, in order', async (t) => {
  // Each known name (copied as prepared bytes) between names that are not known: near misses
  // (a prefix, a suffix, one char off) go through the char loop and must not take a known name's bytes.
  const headers: OutgoingHttpHeaders = {};
  let text = '';
  KNOWN_HEAD_NAMES.forEach((name, i) => {
    for (const [k, v] of [
      [name, `v${i}`],
      [`${name}x`, `after ${name}`],
      [`x${name}`, ''],
    ] as const) {
      headers[k] = v;
      text += `${k}: ${v}\r\n`;
    }
  });
  headers['x-real-i'] = 'short by one';
  text += 'x-real-i: short by one\r\n';
  t.ok(KNOWN_HEAD_NAMES.length >= 20, 'the table holds the names ipgate writes and the common ones');
  t.equal(upstreamHead('POST', '/x', null, headers).toString('latin1'), `POST /x HTTP/1.1\r\nconnection: keep-alive\r\n${text}\r\n`);
  t.equal(
    upstreamHead('GET', '/x', 'h2c', headers).toString('latin1'),
    `GET /x HTTP/1.1\r\nconnection: upgrade\r\nupgrade: h2c\r\n${text}\r\n`,
  );
});

t.test('heads: short and long pieces give the bytes Buffer.from(text, "latin1") gives, chars above 0xff too', async (t) => {
  // Pieces of up to 32 chars are copied by a loop, longer ones by Buffer#write: both take each
  // char's low byte, so either side of the boundary must give the same bytes.
  for (const len of [0, 1, 31, 32, 33, 200]) {
    const v = 'a\xe9\u0100\u20ac'.repeat(64).slice(0, len);
    const path = `/${'p'.repeat(len)}`;
    const expected = Buffer.from(`GET ${path} HTTP/1.1\r\nconnection: keep-alive\r\nx-v: ${v}\r\n\r\n`, 'latin1');
    t.same(upstreamHead('GET', path, null, { 'x-v': v }), expected, `request head, a value of ${len} chars`);
    const head = { statusCode: 200, reason: v, rawHeaders: ['X-V', v] } as ResponseHead;
    t.same(
      responseHeadBytes(head, false, ''),
      Buffer.from(`HTTP/1.1 200 ${v}\r\nX-V: ${v}\r\n\r\n`, 'latin1'),
      `response head, a reason and a value of ${len} chars`,
    );
  }
});
