import t from 'tap';
import { configPathProblem, normalizePath } from '../../../src/route/path';

const NORMALIZE: [description: string, input: string, expect: string | null][] = [
  ['the root', '/', '/'],
  ['a plain path is its own normal form', '/api/v1/users', '/api/v1/users'],
  ['the query is cut', '/api?x=/../y', '/api'],
  ['a trailing slash is kept (exact paths tell them apart)', '/api/', '/api/'],
  ['doubled slashes merge', '//api///v1', '/api/v1'],
  ['"." segments go', '/./api/./v1/.', '/api/v1/'],
  ['".." removes the segment before it', '/api/x/../v1', '/api/v1'],
  ['".." at the end leaves a trailing slash (RFC 3986 5.2.4)', '/api/v1/..', '/api/'],
  ['".." back to the root', '/api/..', '/'],
  ['".." above the root is refused', '/..', null],
  ['".." above the root later in the path', '/a/../../b', null],
  ['encoded unreserved characters decode', '/%41%7e%2d', '/A~-'],
  ['encoded dots form dot segments', '/a/%2e%2e/b', '/b'],
  ['other encodings keep upper-case hex', '/a%3fb%c3%a9', '/a%3Fb%C3%A9'],
  ['an encoded slash is refused', '/a%2fb', null],
  ['an encoded backslash is refused', '/a%5Cb', null],
  ['an encoded NUL is refused', '/a%00', null],
  ['a raw backslash is refused', '/a\\b', null],
  ['a space is refused', '/a b', null],
  ['a "#" is refused', '/a#b', null],
  ['a truncated escape is refused', '/a%4', null],
  ['a non-hex escape is refused', '/a%zz', null],
  ['no leading slash is refused', 'a/b', null],
  ['an empty target is refused', '', null],
  ['"/.well-known" is not a dot segment', '/.well-known/acme', '/.well-known/acme'],
  ['"..." is a name, not a dot segment', '/a/.../b', '/a/.../b'],
];

t.test('normalizePath', async (t) => {
  for (const [description, input, expect] of NORMALIZE) t.equal(normalizePath(input), expect, `${description}: ${JSON.stringify(input)}`);
});

t.test('normalizePath returns a plain path itself (no copy)', async (t) => {
  const p = '/api/v1/users/12345/profile';
  t.equal(normalizePath(p), p);
});

t.test('normalisation is idempotent', async (t) => {
  for (const [, input] of NORMALIZE) {
    const once = normalizePath(input);
    if (once !== null) t.equal(normalizePath(once), once, `${JSON.stringify(input)} -> ${JSON.stringify(once)} stays`);
  }
});

const CONFIG: [description: string, path: string, expect: RegExp | null][] = [
  ['a normal path', '/api/v1', null],
  ['the root', '/', null],
  ['a reserved byte percent-encoded', '/a%3Fb', null],
  ['empty', '', /is empty/],
  ['relative', 'api', /does not start with "\/"/],
  ['a query', '/a?b', /holds a "\?"/],
  ['a raw non-ASCII character', '/caf\u00e9', /holds a character a path cannot/],
  ['lower-case hex', '/a%3fb', /is not in normal form \(requests are matched as "\/a%3Fb"\)/],
  ['an encoded unreserved character', '/%61pi', /requests are matched as "\/api"/],
  ['too long', `/${'a'.repeat(1024)}`, /at most 1024/],
];

t.test('configPathProblem', async (t) => {
  for (const [description, path, expect] of CONFIG) {
    const why = configPathProblem(path);
    if (expect === null) t.equal(why, null, description);
    else t.match(why ?? '', expect, `${description}: ${why}`);
  }
});
