/**
 * An HTTP/2 request's header list as the HTTP/2 engine reads it (src/forward/http/h2/h2-request.ts):
 * RFC 9113 8.2 / 8.3 malformations refused (RST_STREAM PROTOCOL_ERROR), well-formed requests ipgate
 * does not serve answered 400, and the fields kept for the policy, whose Host check
 * (request-host.ts, the HTTP/1.1 engine's) reads `:authority`. Table-driven, one row per rule.
 */
import t from 'tap';
import { readH2Request, type H2Request } from '../../../../../src/forward/http/h2/h2-request';
import { requestHost } from '../../../../../src/forward/http/request-host';

const base = [':method', 'GET', ':scheme', 'https', ':path', '/a?b=c', ':authority', 'api.example:8443'];

t.test('a plain request: pseudo-headers read, regular fields kept in order', async (t) => {
  const r = readH2Request([
    ...base,
    'accept',
    '*/*',
    'cookie',
    'a=1',
    'cookie',
    'b=2',
    'te',
    'trailers',
    'content-length',
    '5',
  ]) as H2Request;
  t.equal(r.method, 'GET');
  t.equal(r.path, '/a?b=c');
  t.equal(r.authority, null, 'no Host line: :authority is the Host line');
  t.same(
    r.rawHeaders,
    ['host', 'api.example:8443', 'accept', '*/*', 'cookie', 'a=1', 'cookie', 'b=2', 'te', 'trailers', 'content-length', '5'],
    ':authority first as host; cookie crumbs kept apart (the header scan joins them with "; ")',
  );
  t.equal(r.contentLength, 5);
  t.equal(r.teTrailers, true);
});

t.test('malformed requests (RFC 9113 8.1.1: stream error PROTOCOL_ERROR)', async (t) => {
  const rows: [string, string[]][] = [
    [
      'a pseudo-header after a regular field',
      [':method', 'GET', ':scheme', 'https', 'accept', '*/*', ':path', '/', ':authority', 'a.example'],
    ],
    ['a repeated :path', [...base, ':path', '/b']],
    ['a repeated :method', [':method', 'GET', ...base]],
    ['an unknown pseudo-header', [...base, ':foo', 'x']],
    ['a response pseudo-header', [...base, ':status', '200']],
    [':protocol (extended CONNECT is not offered)', [...base, ':protocol', 'websocket']],
    ['no :method', [':scheme', 'https', ':path', '/', ':authority', 'a.example']],
    ['no :path', [':method', 'GET', ':scheme', 'https', ':authority', 'a.example']],
    ['no :scheme', [':method', 'GET', ':path', '/', ':authority', 'a.example']],
    ['an empty :path', [':method', 'GET', ':scheme', 'https', ':path', '', ':authority', 'a.example']],
    [':path not starting with /', [':method', 'GET', ':scheme', 'https', ':path', 'a/b', ':authority', 'a.example']],
    [
      ':path with a space (an h1 request line would split there)',
      [':method', 'GET', ':scheme', 'https', ':path', '/a HTTP/1.1', ':authority', 'a.example'],
    ],
    [':path with a fragment', [':method', 'GET', ':scheme', 'https', ':path', '/a#b', ':authority', 'a.example']],
    [':path with a byte >= 0x7f', [':method', 'GET', ':scheme', 'https', ':path', '/\u00e9', ':authority', 'a.example']],
    [':path "*" with GET', [':method', 'GET', ':scheme', 'https', ':path', '*', ':authority', 'a.example']],
    [':method not a token', [':method', 'GE T', ':scheme', 'https', ':path', '/', ':authority', 'a.example']],
    ['an upper-case field name', [...base, 'Accept', '*/*']],
    ['a field name with a space', [...base, 'x y', '1']],
    ['a value with CR', [...base, 'x-a', 'a\rb']],
    ['a value with LF', [...base, 'x-a', 'a\nb']],
    ['a value with NUL', [...base, 'x-a', 'a\u0000b']],
    ['a value with a leading space', [...base, 'x-a', ' a']],
    ['a value with a trailing tab', [...base, 'x-a', 'a\t']],
    ['a pseudo-header value with LF', [':method', 'GET', ':scheme', 'https', ':path', '/', ':authority', 'a.example\nx: y']],
    ['connection', [...base, 'connection', 'close']],
    ['keep-alive', [...base, 'keep-alive', 'timeout=5']],
    ['proxy-connection', [...base, 'proxy-connection', 'keep-alive']],
    ['transfer-encoding', [...base, 'transfer-encoding', 'chunked']],
    ['upgrade', [...base, 'upgrade', 'websocket']],
    ['te other than trailers', [...base, 'te', 'gzip']],
    ['content-length not a number', [...base, 'content-length', '1e3']],
    ['content-length negative', [...base, 'content-length', '-1']],
    ['two different content-lengths', [...base, 'content-length', '3', 'content-length', '4']],
    ['content-length past 2^53', [...base, 'content-length', '9007199254740993']],
  ];
  for (const [desc, raw] of rows) {
    const r = readH2Request(raw);
    t.equal('kind' in r ? r.kind : 'accepted', 'malformed', desc);
  }
});

t.test('well formed but not served: 400', async (t) => {
  const rows: [string, string[]][] = [
    ['CONNECT', [':method', 'CONNECT', ':authority', 'a.example:443']],
    [':scheme ftp', [':method', 'GET', ':scheme', 'ftp', ':path', '/', ':authority', 'a.example']],
    ['Host naming another authority', [...base, 'host', 'other.example']],
    ['two Host fields (no :authority)', [':method', 'GET', ':scheme', 'https', ':path', '/', 'host', 'a.example', 'host', 'b.example']],
  ];
  for (const [desc, raw] of rows) {
    const r = readH2Request(raw);
    t.equal('kind' in r ? r.kind : 'accepted', 'bad', desc);
  }
});

t.test('the host is checked by the policy as for HTTP/1.1 (request-host.ts): refused with its host_* reason', async (t) => {
  const req = (authority: string, ...more: string[]): string[] => [
    ':method',
    'GET',
    ':scheme',
    'https',
    ':path',
    '/',
    ':authority',
    authority,
    ...more,
  ];
  const rows: [string, string[], string][] = [
    ['no :authority and no Host', [':method', 'GET', ':scheme', 'https', ':path', '/'], 'host_missing'],
    ['an :authority with userinfo', req('u@a.example'), 'host_invalid'],
    ['an :authority with a bad port', req('a.example:99999'), 'host_invalid'],
    ['an :authority with a percent-encoding', req('%61dmin.example'), 'host_invalid'],
    ['an :authority 127.1 (an address to WHATWG, a name to RFC 3986)', req('127.1'), 'host_invalid'],
    ['an :authority with a zone id', req('[fe80::1%25eth0]'), 'host_invalid'],
    ['an empty :authority', req(''), 'host_invalid'],
    ['a long :authority (300 bytes)', req(Array.from({ length: 5 }, () => 'a'.repeat(59)).join('.')), 'host_too_long'],
    ['a valid :authority, an invalid Host', req('a.example', 'host', 'a@a.example'), 'host_invalid'],
    ['a valid Host, an invalid :authority', req('a@a.example', 'host', 'a.example'), 'host_invalid'],
  ];
  for (const [desc, raw, reason] of rows) {
    const r = readH2Request(raw);
    if ('kind' in r) {
      t.fail(`${desc}: the reader refused it (${r.detail}); the policy must`);
      continue;
    }
    const host = requestHost(r.rawHeaders, r.authority);
    t.equal(typeof host === 'string' ? host : host.reason, reason, desc);
  }
});

t.test('accepted: Host without :authority, the same value twice, OPTIONS *, http scheme; the host decided', async (t) => {
  const rows: [string, string[], string][] = [
    ['Host alone', [':method', 'GET', ':scheme', 'https', ':path', '/', 'host', 'A.Example.'], 'a.example'],
    ['Host equal to :authority (case apart)', [...base, 'host', 'API.example:8443'], 'api.example:8443'],
    ['an IPv6 authority', [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', '[::1]:80'], '[::1]:80'],
    ['an IPv4 authority', [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', '10.0.0.1'], '10.0.0.1'],
    [
      'an upper-case authority with a trailing dot',
      [':method', 'GET', ':scheme', 'http', ':path', '/', ':authority', 'A.EXAMPLE.:80'],
      'a.example:80',
    ],
    ['OPTIONS *', [':method', 'OPTIONS', ':scheme', 'https', ':path', '*', ':authority', 'a.example'], 'a.example'],
    ['the same content-length twice', [...base, 'content-length', '3', 'content-length', '3'], 'api.example:8443'],
  ];
  for (const [desc, raw, decided] of rows) {
    const r = readH2Request(raw);
    t.notOk('kind' in r, `${desc}: accepted`);
    if (!('kind' in r)) t.equal(requestHost(r.rawHeaders, r.authority), decided, `${desc}: host ${decided}`);
  }
});
