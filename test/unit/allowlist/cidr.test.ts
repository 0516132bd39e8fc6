import t from 'tap';
import { parseAddress, parseCidr } from '../../../src/allowlist/cidr';

t.test('parseCidr accepts and canonicalises valid CIDRs', async (t) => {
  const rows: Array<[desc: string, input: string, text: string, family: 4 | 6, prefix: number]> = [
    ['a private IPv4 /8', '10.0.0.0/8', '10.0.0.0/8', 4, 8],
    ['IPv4 /0 covers everything', '0.0.0.0/0', '0.0.0.0/0', 4, 0],
    ['an IPv4 host route with an explicit /32', '192.0.2.7/32', '192.0.2.7/32', 4, 32],
    ['a bare IPv4 address is a host route (nginx "allow 1.2.3.4;")', '1.2.3.4', '1.2.3.4/32', 4, 32],
    ['the broadcast address', '255.255.255.255/32', '255.255.255.255/32', 4, 32],
    ['octet 0 alone is not a leading zero', '0.0.0.0/8', '0.0.0.0/8', 4, 8],
    ['IPv6 documentation prefix', '2001:db8::/32', '2001:db8::/32', 6, 32],
    ['upper-case IPv6 is lower-cased', '2001:DB8::/32', '2001:db8::/32', 6, 32],
    ['leading zeros in IPv6 groups are compressed away', '2001:0db8::/32', '2001:db8::/32', 6, 32],
    ['a fully written IPv6 address is compressed (RFC 5952)', '2001:0db8:0000:0000:0000:0000:0000:0001/128', '2001:db8::1/128', 6, 128],
    ['IPv6 /0', '::/0', '::/0', 6, 0],
    ['a bare IPv6 address is a host route', '::1', '::1/128', 6, 128],
    ['a NAT64 prefix written with a dotted tail', '64:ff9b::1.2.3.0/120', '64:ff9b::102:300/120', 6, 120],
    ['a mapped-looking /95 is plain IPv6 (not mapped: prefix below 96)', '::fffe:0:0/95', '::fffe:0:0/95', 6, 95],
  ];
  for (const [desc, input, text, family, prefix] of rows) {
    const r = parseCidr(input);
    t.ok(r.ok, desc);
    if (r.ok) t.match(r.cidr, { text, family, prefix }, desc);
  }
});

t.test('parseCidr reports start and end words of the range', async (t) => {
  const v4 = parseCidr('10.0.0.0/8');
  t.same(v4.ok && [v4.cidr.start, v4.cidr.end], [[0x0a000000], [0x0affffff]], 'IPv4 /8');
  const v6 = parseCidr('2001:db8:8000::/33');
  t.same(
    v6.ok && [v6.cidr.start, v6.cidr.end],
    [
      [0x20010db8, 0x80000000, 0, 0],
      [0x20010db8, 0xffffffff, 0xffffffff, 0xffffffff],
    ],
    'IPv6 /33 crosses a word boundary',
  );
  t.ok(v6.ok && Object.isFrozen(v6.cidr) && Object.isFrozen(v6.cidr.start), 'results are frozen');
});

t.test('parseCidr rejects with a message an operator can act on', async (t) => {
  const rows: Array<[desc: string, input: string, message: RegExp]> = [
    ['a leading zero is ambiguous (octal?)', '010.0.0.0/8', /octet "010" has a leading zero \(ambiguous: octal/],
    ['short form 10/8', '10/8', /expected four decimal octets.*got 1.*short forms/],
    ['short form 10.1/16', '10.1/16', /expected four decimal octets.*got 2/],
    ['five octets', '1.2.3.4.5/32', /got 5/],
    ['an empty octet', '1..3.4/32', /empty octet/],
    ['an octet above 255', '10.0.0.256/32', /octet "256" is greater than 255/],
    ['a hex IPv4 octet', '0x0a.0.0.0/8', /unexpected character "x"/],
    ['a zone id', 'fe80::1%eth0/64', /zone id "%eth0" is not allowed/],
    ['host bits set in IPv4 suggest the network', '10.0.0.1/8', /^"10\.0\.0\.1\/8": host bits set: did you mean 10\.0\.0\.0\/8\?$/],
    ['host bits set in IPv6 suggest the network', '2001:db8::1/32', /did you mean 2001:db8::\/32\?/],
    [
      'an IPv4-mapped CIDR is written as IPv4',
      '::ffff:10.0.0.0/104',
      /^"::ffff:10\.0\.0\.0\/104": an IPv4-mapped IPv6 CIDR is not allowed.*write it as IPv4 10\.0\.0\.0\/8$/,
    ],
    ['a mapped CIDR in hex is written as IPv4 too', '::ffff:a00:0/104', /write it as IPv4 10\.0\.0\.0\/8$/],
    ['a mapped host address is written as IPv4', '::ffff:1.2.3.4', /write it as IPv4 1\.2\.3\.4\/32$/],
    [
      'the deprecated IPv4-compatible form is ambiguous',
      '::1.2.3.4/128',
      /deprecated IPv4-compatible.*write IPv4 1\.2\.3\.4, or ::102:304/,
    ],
    ['IPv4 prefix 33', '10.0.0.0/33', /^"10\.0\.0\.0\/33": prefix length 33 out of range for IPv4$/],
    ['IPv6 prefix 129', '::/129', /^"::\/129": prefix length 129 out of range for IPv6$/],
    [
      'a huge prefix is quoted as written',
      '10.0.0.0/99999999999999999999',
      /^"10\.0\.0\.0\/99999999999999999999": prefix length 99999999999999999999 out of range for IPv4$/,
    ],
    ['an empty prefix after the slash', '10.0.0.0/', /missing prefix length after "\/"/],
    ['a negative prefix', '10.0.0.0/-8', /prefix length "-8" is not a decimal number/],
    ['a plus sign in the prefix', '10.0.0.0/+8', /prefix length "\+8" is not a decimal number/],
    ['a hex prefix', '10.0.0.0/0x8', /not a decimal number/],
    ['a leading zero in the prefix', '10.0.0.0/08', /prefix length "08" has a leading zero/],
    ['two slashes', '10.0.0.0/8/8', /more than one "\/"/],
    ['no address before the slash', '/8', /missing address/],
    ['leading whitespace', ' 10.0.0.0/8', /contains whitespace/],
    ['trailing newline', '10.0.0.0/8\n', /contains whitespace/],
    ['inner space', '10.0.0.0 /8', /contains whitespace/],
    ['empty text', '', /^"": empty CIDR$/],
    ['a name, not an address', 'localhost/32', /unexpected character "l"/],
    ['a triple colon', ':::/0', /invalid IPv6 address/],
    ['two double colons', '1::2::3/128', /invalid IPv6 address/],
    ['nine IPv6 groups', '1:2:3:4:5:6:7:8:9/128', /invalid IPv6 address/],
    ['a five-digit IPv6 group', '12345::/16', /invalid IPv6 address/],
    ['a leading zero in an embedded IPv4 tail', '64:ff9b::01.2.3.4/128', /embedded IPv4.*leading zero/],
    ['overlong input is refused before parsing', `${'1'.repeat(80)}/8`, /^"1{64}"\.\.\.: CIDR too long \(82 characters, at most 64\)$/],
  ];
  for (const [desc, input, message] of rows) {
    const r = parseCidr(input);
    t.notOk(r.ok, `${desc}: rejected`);
    if (!r.ok) t.match(r.message, message, desc);
  }
});

t.test('every refusal begins with the offending text, quoted (what a 4xx or config error shows)', async (t) => {
  const inputs = [
    '10.0.0.1/33',
    '10.0.0.1/8',
    '2001:db8::1/32',
    '::ffff:10.0.0.0/104',
    '10.0.0.x/8',
    'ten',
    '10/8',
    '010.0.0.0/8',
    '1::2::3/128',
    '::1.2.3.4/128',
    'fe80::1%eth0/64',
    ' 10.0.0.0/8',
    '10.0.0.0/',
    '10.0.0.0/8/8',
    '/8',
    '10.0.0.0/08',
    '10.0.0.0/x',
    'a"b\n',
  ];
  for (const input of inputs) {
    for (const [name, r] of [
      ['parseCidr', parseCidr(input)],
      ['parseAddress', parseAddress(input)],
    ] as const) {
      t.notOk(r.ok, `${name} ${JSON.stringify(input)}: rejected`);
      if (!r.ok) t.ok(r.message.startsWith(`${JSON.stringify(input)}: `), `${name}: ${r.message}`);
    }
  }
});

t.test('parseCidr survives non-string input from untyped callers', async (t) => {
  const r = parseCidr(42 as unknown as string);
  t.same(r, { ok: false, message: 'CIDR must be a string, got number' });
});

t.test('parseAddress: same rules, mapped IPv6 becomes IPv4', async (t) => {
  const ok: Array<[desc: string, input: string, family: 4 | 6, address: string]> = [
    ['plain IPv4', '192.0.2.1', 4, '192.0.2.1'],
    ['mapped dotted form is the IPv4 address', '::ffff:192.0.2.1', 4, '192.0.2.1'],
    ['mapped hex form is the IPv4 address', '::FFFF:c000:201', 4, '192.0.2.1'],
    ['IPv6 is canonicalised', '2001:0DB8:0:0:0:0:0:1', 6, '2001:db8::1'],
    ['loopback', '::1', 6, '::1'],
  ];
  for (const [desc, input, family, address] of ok) {
    t.same(parseAddress(input), { ok: true, family, address }, desc);
  }
  const bad: Array<[desc: string, input: string, message: RegExp]> = [
    ['a CIDR is not an address', '10.0.0.0/8', /^"10\.0\.0\.0\/8": a CIDR, not an address$/],
    ['leading zero', '010.0.0.1', /leading zero/],
    ['short form', '10.1', /four decimal octets/],
    ['zone id', 'fe80::1%eth0', /zone id "%eth0"/],
    ['whitespace', '1.2.3.4 ', /whitespace/],
    ['empty', '', /^"": empty address$/],
    ['deprecated IPv4-compatible', '::1.2.3.4', /deprecated IPv4-compatible/],
  ];
  for (const [desc, input, message] of bad) {
    const r = parseAddress(input);
    t.notOk(r.ok, `${desc}: rejected`);
    if (!r.ok) t.match(r.message, message, desc);
  }
});
