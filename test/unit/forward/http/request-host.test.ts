/**
 * The request's host (src/forward/http/request-host.ts): RFC 9112 3.2 `uri-host [":" port]` in
 * the forms no URL parser reads two ways, the form forwarded, and the reason for each refusal.
 * One row per case; the integration test (test/integration/http-host.test.ts) sends the issue's
 * rows through ipgate to real backends.
 */
import t from 'tap';
import { checkHost, requestHost, type HostRefusal } from '../../../../src/forward/http/request-host';

/** Accepted: [description, Host value, forwarded form]. */
const ACCEPTED: [description: string, value: string, forwarded: string][] = [
  ['a plain name', 'www.example.com', 'www.example.com'],
  ['a name and a port', 'www.example.com:8080', 'www.example.com:8080'],
  ['one label', 'localhost', 'localhost'],
  ['underscores (host-name.ts allows them)', '_acme.example', '_acme.example'],
  ['upper case is forwarded lower-cased (the form the route was chosen by)', 'WWW.Example.COM', 'www.example.com'],
  ['upper case with a port', 'WWW.EXAMPLE.COM:81', 'www.example.com:81'],
  ['one trailing dot names the same host: cut', 'www.example.com.', 'www.example.com'],
  ['a trailing dot before the port', 'www.example.com.:443', 'www.example.com:443'],
  ['an empty port (RFC 3986 port = *DIGIT): dropped', 'www.example.com:', 'www.example.com'],
  ['a port with leading zeros: the number', 'www.example.com:0080', 'www.example.com:80'],
  ['port 65535', 'a.example:65535', 'a.example:65535'],
  ['port 0 (a number URL parsers accept)', 'a.example:0', 'a.example:0'],
  ['an IPv4 literal', '127.0.0.1', '127.0.0.1'],
  ['an IPv4 literal and a port', '192.0.2.1:8080', '192.0.2.1:8080'],
  ['an IPv4 literal with a trailing dot (WHATWG reads the same address)', '192.0.2.1.', '192.0.2.1'],
  ['a bracketed IPv6 literal', '[::1]', '[::1]'],
  ['a bracketed IPv6 literal and a port', '[2001:db8::1]:443', '[2001:db8::1]:443'],
  ['IPv6 in RFC 5952 form: upper case and zeros rewritten', '[2001:DB8:0:0:0:0:0:1]:443', '[2001:db8::1]:443'],
  ['IPv4-mapped IPv6: the mixed notation (RFC 5952 section 5)', '[::FFFF:c000:201]', '[::ffff:192.0.2.1]'],
  ['a 253-character name', `${'a.'.repeat(126)}a`, `${'a.'.repeat(126)}a`],
  ['253 characters and a trailing dot', `${'a.'.repeat(127)}`, `${'a.'.repeat(126)}a`],
  ['a 63-character label', `${'a'.repeat(63)}.example`, `${'a'.repeat(63)}.example`],
  ['a numeric label before a name', '1.2.3.example', '1.2.3.example'],
];

/** Refused: [description, Host value, reason, what the sentence says]. */
const REFUSED: [description: string, value: string, reason: string, detail: RegExp][] = [
  ['empty', '', 'host_invalid', /is empty/],
  [
    'userinfo with a port-like prefix (cut at the first ":" before, routed as www)',
    'www.example.com:x@admin.example.com',
    'host_invalid',
    /port that is not a number/,
  ],
  ['userinfo', 'www.example.com@admin.example.com', 'host_invalid', /character "@"/],
  ['a percent-encoded letter (WHATWG decodes %61 to "a")', '%61dmin.example.com', 'host_invalid', /character "%"/],
  ['percent-encoded dots', 'admin%2eexample%2ecom', 'host_invalid', /character "%"/],
  ['a percent-encoded fullwidth "a" (IDNA maps it to "a")', '%EF%BD%81dmin.example.com', 'host_invalid', /character "%"/],
  ['a raw fullwidth "a" (UTF-8 bytes read as latin1)', '\u00ef\u00bd\u0081dmin.example.com', 'host_invalid', /non-ASCII/],
  ['KELVIN SIGN (case folding would make it "k")', '\u212Aadmin.example.com', 'host_invalid', /non-ASCII/],
  [
    'two hosts joined by a comma (two Host lines merged by some proxy)',
    'www.example.com, admin.example.com',
    'host_invalid',
    /character ","/,
  ],
  ['a space inside', 'www.example .com', 'host_invalid', /character " "/],
  ['a tab inside', 'www\t.example.com', 'host_invalid', /character "\\t"/],
  ['a NUL', 'www.example.com\0admin', 'host_invalid', /character "\\u0000"/],
  ['a backslash', 'admin.example.com\\.www.example.com', 'host_invalid', /character "\\\\"/],
  ['a slash', 'www.example.com/admin', 'host_invalid', /character "\/"/],
  ['a sub-delim RFC 3986 allows in a reg-name', 'www.example.com;admin', 'host_invalid', /character ";"/],
  ['a port over 65535', 'www.example.com:65536', 'host_invalid', /port that is not a number up to 65535/],
  ['a six-digit port', 'www.example.com:000080', 'host_invalid', /port/],
  ['a port with a sign', 'www.example.com:+80', 'host_invalid', /port/],
  ['two colons (an IPv6 literal without brackets)', '2001:db8::1', 'host_invalid', /second ":"/],
  ['only a port', ':80', 'host_invalid', /is empty/],
  ['two trailing dots', 'www.example.com..', 'host_invalid', /ends with a dot/],
  ['a leading dot', '.www.example.com', 'host_invalid', /empty label/],
  ['an empty label', 'www..example.com', 'host_invalid', /empty label/],
  ['a label starting with "-"', '-www.example.com', 'host_invalid', /starts or ends with "-"/],
  ['a 64-character label', `${'a'.repeat(64)}.example`, 'host_invalid', /label of 64 characters/],
  ['a short IPv4 form (WHATWG reads 127.0.0.1, RFC 3986 a name)', '127.1', 'host_invalid', /IPv4 address in a form/],
  ['an IPv4 octet with a leading zero (octal to WHATWG)', '010.0.0.1', 'host_invalid', /IPv4 address in a form/],
  ['a hex IPv4 label', '0x7f.0.0.1', 'host_invalid', /IPv4 address in a form/],
  ['a 32-bit number', '2130706433', 'host_invalid', /IPv4 address in a form/],
  ['an IPv4 octet over 255', '256.0.0.1', 'host_invalid', /IPv4 address in a form/],
  ['five dotted numbers', '1.2.3.4.5', 'host_invalid', /IPv4 address in a form/],
  ['an IPv6 zone id', '[fe80::1%25eth0]', 'host_invalid', /not an IPv6 address/],
  ['IPvFuture', '[v1.fe80::a+en1]', 'host_invalid', /not an IPv6 address/],
  ['an IPv4 address in brackets', '[127.0.0.1]', 'host_invalid', /not an IPv6 address/],
  ['brackets not closed', '[::1', 'host_invalid', /without "\]"/],
  ['text after the brackets', '[::1]x', 'host_invalid', /after "\]"/],
  ['userinfo before brackets', 'a@[::1]', 'host_invalid', /character "@"/],
  ['a wildcard', '*.example.com', 'host_invalid', /character "\*"/],
  ['254 characters', `${'a.'.repeat(126)}ab`, 'host_too_long', /254 characters \(at most 253\)/],
  ["a 16 KB name of one-letter labels (the wildcard walk's worst case)", `${'a.'.repeat(8192)}x`, 'host_too_long', /16385 characters/],
  ['a long name behind a port is still too long', `${'a'.repeat(300)}:80`, 'host_too_long', /300 characters/],
];

t.test('checkHost: accepted values and the form each is forwarded in', async (t) => {
  for (const [description, value, forwarded] of ACCEPTED) t.equal(checkHost(value), forwarded, description);
});

t.test('checkHost: a value already in its forwarded form is returned as is (no copy per request)', async (t) => {
  for (const value of ['www.example.com', 'www.example.com:8080', '[::1]:80', '127.0.0.1:1']) t.equal(checkHost(value), value, value);
});

t.test('checkHost: refused values, the reason and the sentence', async (t) => {
  for (const [description, value, reason, detail] of REFUSED) {
    const r = checkHost(value);
    if (typeof r === 'string') {
      t.fail(`${description}: accepted as ${JSON.stringify(r)}`);
      continue;
    }
    t.equal(r.reason, reason, `${description}: ${reason}`);
    t.match(r.detail, detail, `${description}: ${r.detail}`);
    t.ok(r.detail.length < 200, `${description}: the sentence quotes at most 64 characters of the value`);
  }
});

/** The Host lines of a request (rawHeaders), the absolute-form authority, and what comes out. */
const REQUESTS: [description: string, raw: string[], authority: string | null, expect: string][] = [
  ['one Host line', ['Host', 'www.example.com', 'Accept', '*/*'], null, 'www.example.com'],
  ['the header name in any case', ['hOsT', 'www.example.com'], null, 'www.example.com'],
  ['no Host line', ['Accept', '*/*'], null, 'host_missing'],
  ['no header at all', [], null, 'host_missing'],
  ['two Host lines, the same value', ['Host', 'www.example.com', 'Host', 'www.example.com'], null, 'host_repeated'],
  [
    'two Host lines, different values (the first was used and forwarded before)',
    ['Host', 'www.example.com', 'host', 'admin.example.com'],
    null,
    'host_repeated',
  ],
  ['an empty Host line', ['Host', ''], null, 'host_invalid'],
  ['"Hosts" is another header', ['Hosts', 'admin.example.com', 'Host', 'www.example.com'], null, 'www.example.com'],
  [
    'absolute form: the authority replaces Host (RFC 9112 3.2.2)',
    ['Host', 'ignored.example'],
    'Admin.Example.com:81',
    'admin.example.com:81',
  ],
  ['absolute form: Host is still required once', [], 'admin.example.com', 'host_missing'],
  ['absolute form: two Host lines are still refused', ['Host', 'a.example', 'Host', 'b.example'], 'admin.example.com', 'host_repeated'],
  ['absolute form: the Host line is still checked (as nginx does)', ['Host', 'a@b.example'], 'admin.example.com', 'host_invalid'],
  ['absolute form: an invalid authority', ['Host', 'www.example.com'], '%61dmin.example.com', 'host_invalid'],
  ['absolute form: a too long authority', ['Host', 'www.example.com'], 'a'.repeat(254), 'host_too_long'],
];

t.test('requestHost: the Host lines and the absolute-form authority', async (t) => {
  for (const [description, raw, authority, expect] of REQUESTS) {
    const r = requestHost(raw, authority);
    t.equal(typeof r === 'string' ? r : (r as HostRefusal).reason, expect, description);
  }
  const r = requestHost(['Host', 'x.example'], 'a@b') as HostRefusal;
  t.match(r.detail, /^the target's authority "a@b" has the character "@"/, 'the sentence names the authority');
});

t.test('checkHost keeps the last accepted value: a repeat answers the same, and no refusal is remembered', async (t) => {
  // Interleaved so each value follows another: the memo (the last value accepted) is hit, missed
  // and replaced in turn.
  const rows: [value: string, expect: string][] = [
    ['WWW.Example.COM:81', 'www.example.com:81'],
    ['WWW.Example.COM:81', 'www.example.com:81'],
    ['a@b.example', 'host_invalid'],
    ['a@b.example', 'host_invalid'],
    ['WWW.Example.COM:81', 'www.example.com:81'],
    ['', 'host_invalid'],
    ['127.0.0.1:8080', '127.0.0.1:8080'],
    ['127.0.0.1:8080', '127.0.0.1:8080'],
    ['127.1:8080', 'host_invalid'],
    ['[::FFFF:7f00:1]', '[::ffff:127.0.0.1]'],
    ['[::FFFF:7f00:1]', '[::ffff:127.0.0.1]'],
    ['a'.repeat(254), 'host_too_long'],
  ];
  for (const [value, expect] of rows) {
    const r = checkHost(value);
    t.equal(typeof r === 'string' ? r : r.reason, expect, JSON.stringify(value.slice(0, 40)));
  }
  const refusal = checkHost('a@b.example', "the target's authority") as HostRefusal;
  t.match(refusal.detail, /^the target's authority "a@b.example"/, 'a refusal after the same value was refused names what was checked');
});
