import t from 'tap';
import { asciiLower, hostNameProblem } from '../../../src/route/host-name';

const ROWS: [description: string, name: string, expect: RegExp | null][] = [
  ['a plain name', 'api.example.com', null],
  ['one label', 'localhost', null],
  ['upper case (callers lower-case)', 'API.Example.COM', null],
  ['underscores', '_acme._tcp.example', null],
  ['digits in labels and a numeric label before the last', '1.2.3.example', null],
  ['a 63-character label', `${'a'.repeat(63)}.example`, null],
  ['a 253-character name', `${'a.'.repeat(126)}a`, null],
  ['empty', '', /is empty/],
  ['a trailing dot', 'a.example.', /ends with a dot/],
  ['a leading dot', '.a.example', /has an empty label/],
  ['two dots', 'a..example', /has an empty label/],
  ['a 64-character label', `${'a'.repeat(64)}.example`, /a label of 64 characters/],
  ['254 characters', `${'a.'.repeat(126)}ab`, /254 characters long/],
  ['a label starting with "-"', '-a.example', /starts or ends with "-"/],
  ['a label ending with "-"', 'a-.example', /starts or ends with "-"/],
  ['an IPv4 address', '192.0.2.1', /is an IP address/],
  ['a short IPv4 form', '127.1', /is an IP address/],
  ['a 32-bit number', '2130706433', /is an IP address/],
  ['a hex last label', '0x7f.1.0x1', /is an IP address/],
  ['an IPv6 address', '2001:db8::1', /has the character ":"/],
  ['a space', 'a b', /has the character " "/],
  ['a NUL', 'a\0b', /has the character "\\u0000"/],
  ['non-ASCII', 'b\u00fccher.example', /non-ASCII/],
  ['a wildcard', '*.example', /has the character "\*"/],
];

t.test('hostNameProblem', async (t) => {
  for (const [description, name, expect] of ROWS) {
    const why = hostNameProblem(name);
    if (expect === null) t.equal(why, null, description);
    else t.match(why ?? '', expect, `${description}: ${why}`);
  }
});

t.test('asciiLower', async (t) => {
  t.equal(asciiLower('A.Example'), 'a.example', 'ASCII upper case lowered');
  t.equal(asciiLower('\u212A.EXAMPLE'), '\u212A.example', 'KELVIN SIGN kept (toLowerCase would make it "k")');
  t.equal(asciiLower('\u0130X'), '\u0130x', 'U+0130 kept');
  const s = 'already.lower';
  t.equal(asciiLower(s), s, 'a lower-case name is returned as is');
});
