import t from 'tap';
import { ROUTE_MISS_REASONS } from '../../../src/route/codes';
import { canonicalHost, RouteTable, RouteTableError } from '../../../src/route/route-table';
import type { RouteResult, RouteSpec } from '../../../src/route/route-table';

const ROUTES: RouteSpec[] = [
  {
    name: 'api',
    hosts: ['api.example.com'],
    paths: [
      { path: '/v1', match: 'prefix' },
      { path: '/health', match: 'exact' },
    ],
  },
  { name: 'api-admin', hosts: ['API.example.com'], paths: [{ path: '/v1/admin/', match: 'prefix' }] },
  { name: 'web', hosts: ['www.example.com', 'example.com'] },
  { name: 'kb', hosts: ['kb.example.org'] },
  { name: 'tenants', hosts: ['*.example.com'] },
  { name: 'eu', hosts: ['*.eu.example.com'], paths: [{ path: '/', match: 'prefix' }] },
  {
    name: 'fallback',
    hosts: ['*'],
    paths: [
      { path: '/', match: 'prefix' },
      { path: '/robots.txt', match: 'exact' },
    ],
  },
];

/** "route host path" for a match, the reason for a miss. */
function show(r: RouteResult): string {
  if (r.kind === 'miss') return r.reason;
  return `${r.route} ${r.host} ${r.path === null ? '(any)' : `${r.path.match}:${r.path.path}`}`;
}

const table = RouteTable.compile(ROUTES);

const LOOKUPS: [description: string, host: string, path: string, expect: string][] = [
  ['exact host, path under a prefix', 'api.example.com', '/v1/users', 'api api.example.com prefix:/v1'],
  ['the prefix itself', 'api.example.com', '/v1', 'api api.example.com prefix:/v1'],
  ['the prefix with a trailing slash', 'api.example.com', '/v1/', 'api api.example.com prefix:/v1'],
  ['a prefix matches on "/" boundaries only (Gateway API), not "/v1x"', 'api.example.com', '/v1x', 'route_no_path'],
  ['the longest prefix wins', 'api.example.com', '/v1/admin/users', 'api-admin api.example.com prefix:/v1/admin'],
  [
    'a config prefix written with a trailing slash matches without it',
    'api.example.com',
    '/v1/admin',
    'api-admin api.example.com prefix:/v1/admin',
  ],
  ['"/v1/administrator" is not under "/v1/admin"', 'api.example.com', '/v1/administrator', 'api api.example.com prefix:/v1'],
  ['an exact path', 'api.example.com', '/health', 'api api.example.com exact:/health'],
  ['an exact path does not match with a trailing slash', 'api.example.com', '/health/', 'route_no_path'],
  ['an exact path is not a prefix', 'api.example.com', '/healthz', 'route_no_path'],
  ['the query is not part of the path', 'api.example.com', '/health?verbose=1', 'api api.example.com exact:/health'],
  ['host case does not matter', 'API.Example.COM', '/v1', 'api api.example.com prefix:/v1'],
  ['a :port is ignored', 'api.example.com:8443', '/v1', 'api api.example.com prefix:/v1'],
  ['a trailing dot is ignored', 'api.example.com.', '/v1', 'api api.example.com prefix:/v1'],
  ['a trailing dot and a port', 'api.example.com.:443', '/v1', 'api api.example.com prefix:/v1'],
  ['a host matched exactly does not fall back to a wildcard or the default', 'api.example.com', '/other', 'route_no_path'],
  ['a route without paths takes every path', 'www.example.com', '/anything/at/all', 'web www.example.com (any)'],
  ['a second host of the same route', 'example.com', '/', 'web example.com (any)'],
  ['wildcard, one label', 't1.example.com', '/x', 'tenants *.example.com (any)'],
  ['wildcard, several labels', 'a.b.example.com', '/x', 'tenants *.example.com (any)'],
  ['the longer wildcard wins', 'x.eu.example.com', '/x', 'eu *.eu.example.com prefix:/'],
  ['"*.eu.example.com" does not match "eu.example.com" itself', 'eu.example.com', '/x', 'tenants *.example.com (any)'],
  ['"*.example.com" does not match "example.com" (an exact host does)', 'EXAMPLE.com', '/', 'web example.com (any)'],
  ['an unknown host takes the default', 'other.test', '/x', 'fallback * prefix:/'],
  ["the default route's own exact path", 'other.test', '/robots.txt', 'fallback * exact:/robots.txt'],
  ['no Host at all takes the default', '', '/', 'fallback * prefix:/'],
  ['an IPv4 Host takes the default', '10.0.0.1:80', '/', 'fallback * prefix:/'],
  ['an IPv6 Host takes the default', '[::1]:8080', '/', 'fallback * prefix:/'],
  ['a Host with "@" does not reach a wildcard through its suffix', 'evil@t1.example.com', '/x', 'fallback * prefix:/'],
  ['a Host with a space does not reach a wildcard', 'a b.example.com', '/x', 'fallback * prefix:/'],
  ['KELVIN SIGN is not folded to "k" (it would be by toLowerCase)', '\u212Ab.example.org', '/', 'fallback * prefix:/'],
  ['"kb.example.org" itself', 'KB.example.org', '/', 'kb kb.example.org (any)'],
  ['a dot segment is resolved before matching', 'api.example.com', '/v2/../v1/admin/x', 'api-admin api.example.com prefix:/v1/admin'],
  ['a dot segment leaving a prefix', 'api.example.com', '/v1/admin/../x', 'api api.example.com prefix:/v1'],
  ['an encoded unreserved character is decoded', 'api.example.com', '/v1/%61dmin', 'api-admin api.example.com prefix:/v1/admin'],
  ['an encoded dot segment is resolved', 'api.example.com', '/v1/admin/%2e%2E/x', 'api api.example.com prefix:/v1'],
  ['doubled slashes are merged', 'api.example.com', '//v1//admin', 'api-admin api.example.com prefix:/v1/admin'],
  ['".." above the root is refused', 'api.example.com', '/../v1', 'route_bad_path'],
  ['an encoded slash is refused', 'api.example.com', '/v1%2Fadmin', 'route_bad_path'],
  ['a backslash is refused', 'api.example.com', '/v1\\admin', 'route_bad_path'],
  ['a target that is not origin-form is refused', 'api.example.com', '*', 'route_bad_path'],
  ['a bad path is refused on a host with only a root route too', 'www.example.com', '/a/../../etc', 'route_bad_path'],
  // Issue 27: what a servlet container serves as /v1/admin/ must not be decided by another route.
  ['";" parameters are refused (Tomcat: /v1/admin/)', 'api.example.com', '/v1/admin;x=1/', 'route_path_params'],
  ['"..;" is refused (Tomcat: /v1/admin/)', 'api.example.com', '/v1/x/..;/admin/', 'route_path_params'],
  ['an encoded ";" is refused (nginx decodes it)', 'api.example.com', '/v1/admin%3bx=1/', 'route_path_params'],
  ['case matters by default (nginx location, Gateway API)', 'api.example.com', '/V1/ADMIN/x', 'route_no_path'],
];

t.test('lookup: host, then path', async (t) => {
  for (const [description, host, path, expect] of LOOKUPS) t.equal(show(table.lookup(host, path)), expect, description);
});

t.test('without a default route', async (t) => {
  const noDefault = RouteTable.compile([{ name: 'a', hosts: ['a.example'] }]);
  t.equal(show(noDefault.lookup('b.example', '/')), 'route_no_host', 'an unknown host is a route_no_host miss');
  t.equal(show(noDefault.lookup('a.example', '/x')), 'a a.example (any)', 'the known host matches');
  t.equal(show(noDefault.lookupHost(null)), 'route_no_host', 'no SNI and no default: no route');
});

t.test('servlet path parameters: each segment cut at its ";" before matching', async (t) => {
  const servlet = RouteTable.compile(
    [
      { name: 'admin', hosts: ['www.example.com'], paths: [{ path: '/admin', match: 'prefix' }] },
      { name: 'open', hosts: ['www.example.com'], paths: [{ path: '/', match: 'prefix' }] },
    ],
    { pathParameters: 'servlet' },
  );
  t.equal(servlet.pathParameters, 'servlet');
  const rows: [string, string][] = [
    ['/admin;x=1/', 'admin www.example.com prefix:/admin'],
    ['/;/admin/', 'admin www.example.com prefix:/admin'],
    ['/public/..;/admin/', 'admin www.example.com prefix:/admin'],
    ['/admin/..;/public', 'open www.example.com prefix:/'],
    ['/adm;x=1in/', 'open www.example.com prefix:/'],
    ['/admin;jsessionid=1?q;x', 'admin www.example.com prefix:/admin'],
    ['/admin%3bx=1/', 'route_path_params'],
    ['/..;/admin/', 'route_bad_path'],
  ];
  for (const [path, expect] of rows) t.equal(show(servlet.lookup('www.example.com', path)), expect, path);
});

t.test('ignoreCase paths: ASCII letters without case, only where asked', async (t) => {
  const folded = RouteTable.compile([
    { name: 'admin', hosts: ['www.example.com'], paths: [{ path: '/admin', match: 'prefix', ignoreCase: true }] },
    {
      name: 'Api',
      hosts: ['www.example.com'],
      paths: [
        { path: '/API/v1', match: 'prefix' },
        { path: '/Exact', match: 'exact', ignoreCase: true },
      ],
    },
    { name: 'deep', hosts: ['www.example.com'], paths: [{ path: '/admin/keys', match: 'prefix' }] },
    { name: 'open', hosts: ['www.example.com'], paths: [{ path: '/', match: 'prefix' }] },
    { name: 'other', hosts: ['*'], paths: [{ path: '/admin', match: 'prefix' }] },
  ]);
  const rows: [string, string, string][] = [
    ['www.example.com', '/admin/', 'admin www.example.com prefix:/admin'],
    ['www.example.com', '/ADMIN/', 'admin www.example.com prefix:/admin'],
    ['www.example.com', '/aDmIn', 'admin www.example.com prefix:/admin'],
    ['www.example.com', '/%41DMIN/x', 'admin www.example.com prefix:/admin'],
    ['www.example.com', '/ADMINX', 'open www.example.com prefix:/'],
    ['www.example.com', '/adm\u0130n', 'open www.example.com prefix:/'],
    ['www.example.com', '/admin/keys/1', 'deep www.example.com prefix:/admin/keys'],
    ['www.example.com', '/ADMIN/KEYS/1', 'admin www.example.com prefix:/admin'],
    ['www.example.com', '/API/v1/x', 'Api www.example.com prefix:/API/v1'],
    ['www.example.com', '/api/v1/x', 'open www.example.com prefix:/'],
    ['www.example.com', '/exact', 'Api www.example.com exact:/Exact'],
    ['www.example.com', '/EXACT?x', 'Api www.example.com exact:/Exact'],
    ['other.example', '/ADMIN', 'route_no_path'],
    ['other.example', '/admin', 'other * prefix:/admin'],
  ];
  for (const [host, path, expect] of rows) t.equal(show(folded.lookup(host, path)), expect, `${host} ${path}`);
  const m = folded.lookup('www.example.com', '/ADMIN');
  t.equal(m, folded.lookup('www.example.com', '/admin/x'), 'the same frozen answer either way');
  t.ok(m.kind === 'match' && m.path?.ignoreCase === true, 'the match says the entry ignores case');
});

t.test('SNI tables: hosts only', async (t) => {
  const sni = RouteTable.compile(
    [
      { name: 'db', hosts: ['db.example.com'] },
      { name: 'tenants', hosts: ['*.tenants.example.com'] },
      { name: 'other', hosts: ['*'] },
    ],
    { kind: 'sni' },
  );
  const rows: [string, string | null, string][] = [
    ['exact name', 'db.example.com', 'db db.example.com (any)'],
    ['wildcard', 'a.tenants.example.com', 'tenants *.tenants.example.com (any)'],
    ['unknown name to the default', 'x.example.net', 'other * (any)'],
    ['no SNI to the default', null, 'other * (any)'],
  ];
  for (const [description, name, expect] of rows) t.equal(show(sni.lookupHost(name)), expect, description);
  t.equal(sni.kind, 'sni');
});

t.test('tables and answers are immutable and built once', async (t) => {
  t.ok(Object.isFrozen(table), 'the table is frozen');
  const a = table.lookup('api.example.com', '/v1/x');
  const b = table.lookup('API.EXAMPLE.COM:1', '/v1/y?q');
  t.ok(Object.isFrozen(a), 'an answer is frozen');
  t.equal(a, b, 'the same match object every time (nothing allocated per lookup)');
  t.equal(table.lookup('nope', '/../x'), table.lookup('nope2', '/%2f'), 'misses are shared constants too');
  t.same(
    table.routeNames,
    ROUTES.map((r) => r.name),
    'route names in config order',
  );
  for (const reason of ['route_no_host', 'route_no_path', 'route_bad_path', 'route_path_params'] as const)
    t.ok(ROUTE_MISS_REASONS[reason].endsWith('.'), `${reason} has a sentence`);
});

t.test('canonicalHost', async (t) => {
  const rows: [string, string, string | null][] = [
    ['lower-cases ASCII', 'A.Example', 'a.example'],
    ['cuts the port', 'a.example:80', 'a.example'],
    ['cuts one trailing dot', 'a.example.', 'a.example'],
    ['refuses a bracketed IPv6 literal (only the default can take it)', '[2001:DB8::1]:443', null],
    ['refuses userinfo', 'evil@a.example', null],
    ['refuses a space', 'a b.example', null],
    ['refuses non-ASCII (no case folding)', '\u212A.example', null],
    ['returns a plain lower-case host as is', 'a.example', 'a.example'],
    ['refuses what follows ":" when it is no port (not cut there and matched as "a.example")', 'a.example:x@b.example', null],
    ['refuses a port of more than 5 digits', 'a.example:123456', null],
    ['an empty port is no port', 'a.example:', 'a.example'],
    ['refuses a name longer than 253 characters', `${'a.'.repeat(127)}a`, null],
    ['253 characters and a trailing dot', `${'a.'.repeat(126)}a.`, `${'a.'.repeat(126)}a`],
  ];
  for (const [description, input, expect] of rows) t.equal(canonicalHost(input), expect, description);
});

t.test('the wildcard walk: hash lookups only at the wildcard suffix lengths, none past 253 characters', async (t) => {
  // A Host of 8,000 one-letter labels cost one slice and one hash of a long suffix per label
  // (quadratic: 90-170 ms of CPU per request, issue 27). Now a name is looked up at the suffix
  // lengths some wildcard has, and a name longer than any host name is not looked up at all.
  const wild = RouteTable.compile([
    { name: 'tenants', hosts: ['*.example.com'] },
    { name: 'eu', hosts: ['*.eu.example.com'] },
    { name: 'api', hosts: ['api.example.com'] },
    { name: 'fallback', hosts: ['*'] },
  ]);
  const get = Map.prototype.get;
  let gets = 0;
  const counted = (fn: () => RouteResult): RouteResult => {
    gets = 0;
    Map.prototype.get = function (this: Map<unknown, unknown>, k: unknown) {
      gets++;
      return get.call(this, k);
    };
    try {
      return fn();
    } finally {
      Map.prototype.get = get;
    }
  };
  const many = `${'a.'.repeat(120)}example.com`; // 251 characters, 122 labels
  t.equal(show(counted(() => wild.lookup(many, '/'))), 'tenants *.example.com (any)', 'a 122-label name under *.example.com');
  t.ok(gets <= 3, `1 exact + at most 2 wildcard lookups (one per suffix length), not one per label: ${gets}`);
  t.equal(show(counted(() => wild.lookup(`${'a.'.repeat(120)}x`, '/'))), 'fallback * (any)', 'a 121-label name under no wildcard');
  t.ok(gets <= 3, `1 exact + at most one lookup per wildcard suffix length: ${gets}`);
  t.equal(
    show(counted(() => wild.lookup(`${'ab'.repeat(60)}.${'ab'.repeat(60)}`, '/'))),
    'fallback * (any)',
    "a name whose only dot starts no suffix of a wildcard's length",
  );
  t.equal(gets, 1, 'the exact lookup alone');
  t.equal(
    show(counted(() => wild.lookup(`${'a.'.repeat(8000)}example.com`, '/'))),
    'fallback * (any)',
    'a 16 KB name only reaches the default',
  );
  t.equal(gets, 0, 'no lookup at all for a name longer than 253 characters');
  t.equal(show(counted(() => wild.lookup('x.eu.example.com', '/'))), 'eu *.eu.example.com (any)', 'the longer wildcard still wins');
  t.equal(show(wild.lookup('eu.example.com', '/')), 'tenants *.example.com (any)', 'a wildcard never matches its bare suffix');
  t.equal(show(wild.lookup('xexample.com', '/')), 'fallback * (any)', 'a suffix matches on a label boundary only');
  t.equal(show(wild.lookup('.example.com', '/')), 'fallback * (any)', 'an empty first label is no name under the wildcard');
});

/** Compiles and returns the problems (or [] if it compiled). */
function problems(routes: unknown, kind?: 'http' | 'sni'): string[] {
  try {
    RouteTable.compile(routes as RouteSpec[], { kind });
    return [];
  } catch (err) {
    if (!(err instanceof RouteTableError)) throw err;
    return [...err.problems];
  }
}

const route = (extra: Partial<RouteSpec>): RouteSpec => ({ name: 'r', hosts: ['a.example'], ...extra });

const INVALID: [description: string, routes: unknown, expect: RegExp, kind?: 'sni'][] = [
  ['an empty route list', [], /^routes: \[\]: is empty/],
  [
    'a wildcard in the middle',
    [route({ hosts: ['a.*.com'] })],
    /^routes\[0\] \("r"\)\.hosts\[0\]: "a\.\*\.com": a wildcard is only allowed alone/,
  ],
  ['a double wildcard', [route({ hosts: ['*.*.example.com'] })], /"\*\.\*\.example\.com": a wildcard is only allowed/],
  ['a wildcard glued to a label', [route({ hosts: ['*example.com'] })], /"\*example\.com": a wildcard is only allowed/],
  ['a trailing dot in config', [route({ hosts: ['a.example.'] })], /"a\.example\.": write it without the trailing dot \("a\.example"\)/],
  ['a host with a port', [route({ hosts: ['a.example:8080'] })], /"a\.example:8080": a route host has no port/],
  [
    'an IP address as host',
    [route({ hosts: ['10.0.0.1'] })],
    /"10\.0\.0\.1": is an IP address, not a host name \(requests by address take the default route "\*"\)/,
  ],
  ['a host with a bad character', [route({ hosts: ['a_b!.example'] })], /"a_b!\.example": has the character "!"/],
  ['an empty hosts list', [route({ hosts: [] })], /routes\[0\] \("r"\)\.hosts: \[\]: must be a non-empty list/],
  ['an empty host', [route({ hosts: [''] })], /hosts\[0\]: "": must be a host name/],
  ['a host twice in one route', [route({ hosts: ['a.example', 'A.example'] })], /hosts\[1\]: "A\.example": is listed twice in this route/],
  [
    'the same host and prefix in two routes (names both)',
    [
      route({ name: 'one', paths: [{ path: '/api', match: 'prefix' }] }),
      route({ name: 'two', paths: [{ path: '/api/', match: 'prefix' }] }),
    ],
    /^routes\[1\] \("two"\)\.hosts\[0\]: "a\.example": prefix path "\/api" on this host is already routed by routes\[0\] \("one"\) \(prefix "\/api"\)/,
  ],
  [
    'two routes for every path of one host',
    [route({ name: 'one' }), route({ name: 'two', hosts: ['A.EXAMPLE'] })],
    /routes\[1\] \("two"\)\.hosts\[0\]: "A\.EXAMPLE": every path \(no paths\) on this host is already routed by routes\[0\] \("one"\)/,
  ],
  [
    'a route without paths and a "/" prefix on the same host',
    [route({ name: 'one' }), route({ name: 'two', paths: [{ path: '/', match: 'prefix' }] })],
    /prefix path "\/" on this host is already routed by routes\[0\] \("one"\) \(every path\)/,
  ],
  [
    'the same exact path twice in one route',
    [
      route({
        paths: [
          { path: '/x', match: 'exact' },
          { path: '/x', match: 'exact' },
        ],
      }),
    ],
    /exact path "\/x" on this host is already routed by routes\[0\] \("r"\)/,
  ],
  [
    'a duplicate route name',
    [route({ name: 'same' }), route({ name: 'same', hosts: ['b.example'] })],
    /routes\[1\]\.name: "same": is already the name of routes\[0\]/,
  ],
  ['a name that is not a label', [route({ name: 'my route' })], /routes\[0\]\.name: "my route": must be 1-63 characters/],
  [
    'a path without a leading slash',
    [route({ paths: [{ path: 'api', match: 'prefix' }] })],
    /paths\[0\]\.path: "api": does not start with "\/"/,
  ],
  [
    'a path with a dot segment',
    [route({ paths: [{ path: '/a/../b', match: 'prefix' }] })],
    /paths\[0\]\.path: "\/a\/\.\.\/b": is not in normal form \(requests are matched as "\/b"\)/,
  ],
  [
    'a path with doubled slashes',
    [route({ paths: [{ path: '/a//b', match: 'exact' }] })],
    /is not in normal form \(requests are matched as "\/a\/b"\)/,
  ],
  ['a path with an encoded slash', [route({ paths: [{ path: '/a%2Fb', match: 'exact' }] })], /"\/a%2Fb": is refused for every request/],
  ['a path with a query', [route({ paths: [{ path: '/a?b=1', match: 'exact' }] })], /holds a "\?"/],
  [
    'an unknown match type',
    [route({ paths: [{ path: '/a', match: 'regex' as 'exact' }] })],
    /paths\[0\]\.match: "regex": must be "exact" or "prefix"/,
  ],
  ['an empty paths list', [route({ paths: [] })], /paths: \[\]: must be a non-empty list of \{path, match\}; leave it out/],
  ['a path with parameters', [route({ paths: [{ path: '/a;v=1', match: 'prefix' }] })], /paths\[0\]\.path: "\/a;v=1": holds a ";"/],
  [
    'a prefix equal ignoring case to an ignoreCase one',
    [
      route({ name: 'one', paths: [{ path: '/admin', match: 'prefix', ignoreCase: true }] }),
      route({ name: 'two', paths: [{ path: '/Admin', match: 'prefix' }] }),
    ],
    /routes\[1\] \("two"\)\.hosts\[0\]: "a\.example": prefix path "\/Admin" on this host is already routed by routes\[0\] \("one"\) \(prefix "\/admin", ignoreCase\)/,
  ],
  [
    'an ignoreCase exact path equal ignoring case to a case-sensitive one',
    [
      route({ name: 'one', paths: [{ path: '/X', match: 'exact' }] }),
      route({ name: 'two', paths: [{ path: '/x', match: 'exact', ignoreCase: true }] }),
    ],
    /exact path "\/x" \(ignoreCase\) on this host is already routed by routes\[0\] \("one"\) \(exact "\/X"\)/,
  ],
  [
    'two ignoreCase prefixes equal ignoring case',
    [
      route({
        paths: [
          { path: '/a', match: 'prefix', ignoreCase: true },
          { path: '/A', match: 'prefix', ignoreCase: true },
        ],
      }),
    ],
    /prefix path "\/A" \(ignoreCase\) on this host is already routed/,
  ],
  [
    'ignoreCase not a boolean',
    [route({ paths: [{ path: '/a', match: 'prefix', ignoreCase: 'yes' as unknown as boolean }] })],
    /paths\[0\]\.ignoreCase: "yes": must be true or false/,
  ],
  [
    'paths on an SNI route',
    [route({ paths: [{ path: '/', match: 'prefix' }] })],
    /an SNI route \(tcp listener\) cannot match paths/,
    'sni',
  ],
  ['not a list', { name: 'x' }, /^routes: \{"name":"x"\}: must be a list of routes/],
];

t.test('invalid routes: a clear error naming the route and quoting the value', async (t) => {
  for (const [description, routes, expect, kind] of INVALID) {
    const found = problems(routes, kind);
    t.equal(found.length, 1, `${description}: one problem`);
    t.match(found[0] ?? '', expect, `${description}: ${found[0]}`);
  }
});

t.test('every problem is reported at once', async (t) => {
  const found = problems([route({ hosts: ['a.*.com'] }), route({ name: 'bad name', paths: [{ path: 'x', match: 'prefix' }] })]);
  t.equal(found.length, 3, found.join('\n'));
  let thrown: unknown;
  try {
    RouteTable.compile([route({ hosts: ['a.*.com'] })]);
  } catch (err) {
    thrown = err;
  }
  t.ok(
    thrown instanceof RouteTableError && thrown.code === 'IPGATE_ROUTES' && /invalid routes:\n {2}- routes\[0\]/.test(thrown.message),
    'a typed error with a code and one line per problem',
  );
  t.equal(problems([route({ hosts: ['a.example'] })], undefined).length, 0, 'the valid form compiles');
});

t.test("the error path is the caller's", async (t) => {
  t.throws(() => RouteTable.compile([route({ hosts: ['a.*.com'] })], { at: 'listeners[2].routes' }), {
    message: /listeners\[2\]\.routes\[0\] \("r"\)\.hosts\[0\]/,
  });
});

t.test('hosts with many paths (hash lookups) decide as hosts with few (a scan)', async (t) => {
  const many = (n: number): RouteSpec[] => [
    {
      name: 'many',
      hosts: ['m.example'],
      paths: [
        ...Array.from({ length: n }, (_, k) => ({ path: `/p${k}`, match: 'prefix' as const })),
        ...Array.from({ length: n }, (_, k) => ({ path: `/p${k}/x`, match: 'exact' as const })),
        { path: '/deep/a/b/c', match: 'prefix' },
        { path: '/deep/a', match: 'prefix' },
      ],
    },
  ];
  const rows: [string, string][] = [
    ['/p3/x', 'exact:/p3/x'],
    ['/p3/x?q=1', 'exact:/p3/x'],
    ['/p3/y', 'prefix:/p3'],
    ['/p3', 'prefix:/p3'],
    ['/p3x', 'route_no_path'],
    ['/deep/a/b/c/d', 'prefix:/deep/a/b/c'],
    ['/deep/a/b/cd', 'prefix:/deep/a'],
    ['/deep/a/./b//c', 'prefix:/deep/a/b/c'],
    ['/elsewhere', 'route_no_path'],
  ];
  for (const n of [4, 20]) {
    const table = RouteTable.compile(many(n));
    for (const [path, expect] of rows) {
      const r = table.lookup('m.example', path);
      t.equal(r.kind === 'match' ? `${r.path!.match}:${r.path!.path}` : r.reason, expect, `${n} paths of each kind: ${path}`);
    }
  }
});
