import t from 'tap';
import { configPathProblem, matchForm, normalizePath, type PathParameters } from '../../../src/route/path';

/** The normal form, or the refusal's reason. */
const norm = (target: string, params?: PathParameters): string => {
  const r = normalizePath(target, params);
  return typeof r === 'string' ? r : r.reason;
};
const BAD = 'route_bad_path';
const PARAMS = 'route_path_params';

const NORMALIZE: [description: string, input: string, expect: string][] = [
  ['the root', '/', '/'],
  ['a plain path is its own normal form', '/api/v1/users', '/api/v1/users'],
  ['the query is cut', '/api?x=/../y', '/api'],
  ['a trailing slash is kept (exact paths tell them apart)', '/api/', '/api/'],
  ['doubled slashes merge', '//api///v1', '/api/v1'],
  ['"." segments go', '/./api/./v1/.', '/api/v1/'],
  ['".." removes the segment before it', '/api/x/../v1', '/api/v1'],
  ['".." at the end leaves a trailing slash (RFC 3986 5.2.4)', '/api/v1/..', '/api/'],
  ['".." back to the root', '/api/..', '/'],
  ['".." above the root is refused', '/..', BAD],
  ['".." above the root later in the path', '/a/../../b', BAD],
  ['encoded unreserved characters decode', '/%41%7e%2d', '/A~-'],
  ['encoded dots form dot segments', '/a/%2e%2e/b', '/b'],
  ['other encodings keep upper-case hex', '/a%3fb%c3%a9', '/a%3Fb%C3%A9'],
  ['an encoded slash is refused', '/a%2fb', BAD],
  ['an encoded backslash is refused', '/a%5Cb', BAD],
  ['an encoded NUL is refused', '/a%00', BAD],
  ['a raw backslash is refused', '/a\\b', BAD],
  ['a space is refused', '/a b', BAD],
  ['a "#" is refused', '/a#b', BAD],
  ['a truncated escape is refused', '/a%4', BAD],
  ['a non-hex escape is refused', '/a%zz', BAD],
  ['no leading slash is refused', 'a/b', BAD],
  ['an empty target is refused', '', BAD],
  ['"/.well-known" is not a dot segment', '/.well-known/acme', '/.well-known/acme'],
  ['"..." is a name, not a dot segment', '/a/.../b', '/a/.../b'],
  ['an overlong UTF-8 dot stays encoded (not a dot segment)', '/a/%c0%ae%c0%ae/b', '/a/%C0%AE%C0%AE/b'],
  ['an encoded "%" stays encoded (decoded once only)', '/a/%252e%252e/b', '/a/%252e%252e/b'],
  ['an IIS-style %u escape is malformed', '/a/%u002e%u002e/b', BAD],
  ['an encoded DEL is refused', '/a%7f', BAD],
  ['a raw DEL is refused', '/a\x7f', BAD],
  ['a double quote is refused', '/a"b', BAD],
  // Path parameters: refused unless the listener reads them as a servlet container (issue 27).
  ['";" parameters are refused by default', '/admin;x=1/', PARAMS],
  ['an empty segment with parameters is refused', '/;/admin/', PARAMS],
  ['"..;" (a dot segment to a servlet container) is refused', '/public/..;/admin/', PARAMS],
  ['an encoded ";" is refused', '/admin%3bx=1/', PARAMS],
  ['an encoded ";" in upper-case hex is refused', '/admin%3Bx=1/', PARAMS],
  ['a ";" in the query is not in the path', '/admin?a;b', '/admin'],
];

t.test('normalizePath', async (t) => {
  for (const [description, input, expect] of NORMALIZE) t.equal(norm(input), expect, `${description}: ${JSON.stringify(input)}`);
});

/** input, normal form (the forwarded path), match form (what routes compare) or a refusal. */
const SERVLET: [description: string, input: string, normal: string, match?: string][] = [
  ['parameters stay on their segment, matched without them', '/admin;x=1/', '/admin;x=1/', '/admin/'],
  ['jsessionid on the last segment', '/app/cart;jsessionid=ABC', '/app/cart;jsessionid=ABC', '/app/cart'],
  ['several parameters in one segment', '/a;x=1;y=2/b', '/a;x=1;y=2/b', '/a/b'],
  ['an empty segment with parameters goes, as "//" does', '/;/admin/', '/admin/', '/admin/'],
  ['"..;" is ".." (Tomcat: /public/..;/admin/ serves /admin/)', '/public/..;/admin/', '/admin/', '/admin/'],
  ['".;x" is "."', '/a/.;x/b', '/a/b', '/a/b'],
  ['an encoded "..;" is ".." too', '/public/%2e%2e;x/admin', '/admin', '/admin'],
  ['the parameters of a removed segment go with it', '/a;x/../b;y', '/b;y', '/b'],
  ['"..;" above the root is refused', '/..;/admin', BAD],
  ['an encoded ";" is still refused', '/admin%3bx=1/', PARAMS],
  ['a name cut at ";" is not its prefix ("adm;x" is "adm")', '/adm;x=1in/', '/adm;x=1in/', '/adm/'],
  ['a trailing empty segment with parameters keeps the trailing slash', '/admin/;x', '/admin/', '/admin/'],
  ['a plain path is unchanged', '/a/b', '/a/b', '/a/b'],
];

t.test('normalizePath with servlet path parameters', async (t) => {
  for (const [description, input, normal, match] of SERVLET) {
    t.equal(norm(input, 'servlet'), normal, `${description}: ${JSON.stringify(input)}`);
    if (match !== undefined) {
      t.equal(matchForm(normal), match, `${description}: matched as ${JSON.stringify(match)}`);
      t.equal(norm(normal, 'servlet'), normal, `${description}: the normal form is its own normal form`);
    }
  }
});

t.test('normalizePath returns a plain path itself (no copy)', async (t) => {
  const p = '/api/v1/users/12345/profile';
  t.equal(normalizePath(p), p);
});

t.test('normalisation is idempotent', async (t) => {
  for (const [, input] of NORMALIZE) {
    const once = normalizePath(input);
    if (typeof once === 'string') t.equal(normalizePath(once), once, `${JSON.stringify(input)} -> ${JSON.stringify(once)} stays`);
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
  ['path parameters (never matched: refused, or cut off)', '/app;v=1', /holds a ";"/],
  ['an encoded ";"', '/app%3Bv=1', /holds a ";"/],
];

t.test('configPathProblem', async (t) => {
  for (const [description, path, expect] of CONFIG) {
    const why = configPathProblem(path);
    if (expect === null) t.equal(why, null, description);
    else t.match(why ?? '', expect, `${description}: ${why}`);
  }
});
