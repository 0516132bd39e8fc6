/**
 * The X-Forwarded-For walk, table-driven: each row is a request arriving from a trusted proxy.
 * trustedProxies for every row: 10.0.0.0/8, 2001:db8:ffff::/48.
 */
import t from 'tap';
import { Matcher } from '../../../src/allowlist/matcher';
import { clientFromForwardedFor, forwardedForEntry } from '../../../src/identity/forwarded-for';

const trusted = Matcher.compile([{ cidr: '10.0.0.0/8' }, { cidr: '2001:db8:ffff::/48' }]);
const PEER = '10.0.0.1';

const rows: Array<[string, string | null, string]> = [
  ['no header: the trusted peer itself is the client', null, PEER],
  ['one untrusted entry is the client', '203.0.113.7', '203.0.113.7'],
  ['rightmost untrusted wins over forged entries to its left', '1.1.1.1, 203.0.113.7', '203.0.113.7'],
  ['trusted hops on the right are skipped', '203.0.113.7, 10.1.1.1, 10.2.2.2', '203.0.113.7'],
  ['forged entries left of the client never matter', '198.51.100.1, 10.9.9.9, 203.0.113.7, 10.1.1.1', '203.0.113.7'],
  ['several header lines joined in order', '198.51.100.1, 203.0.113.7, 10.3.3.3', '203.0.113.7'],
  ['every entry trusted: the leftmost is the client', '10.5.5.5, 10.6.6.6', '10.5.5.5'],
  ['no spaces around commas', '198.51.100.1,203.0.113.7,10.1.1.1', '203.0.113.7'],
  ['tabs and extra spaces are trimmed', ' 203.0.113.7 ,\t10.1.1.1\t', '203.0.113.7'],
  ['empty entries are skipped', '203.0.113.7,, 10.1.1.1,', '203.0.113.7'],
  ['only commas and spaces: the peer', ' , ,', PEER],
  ['IPv6 client', '2001:db8::7, 10.1.1.1', '2001:db8::7'],
  ['IPv6 client written in upper case is canonicalised', '2001:DB8:0:0::7', '2001:db8::7'],
  ['IPv6 trusted hop skipped', '203.0.113.7, 2001:db8:ffff::1', '203.0.113.7'],
  ['IPv4-mapped IPv6 entry is the IPv4 client', '::ffff:203.0.113.7', '203.0.113.7'],
  ['IPv4-mapped trusted hop is skipped', '203.0.113.7, ::ffff:10.1.1.1', '203.0.113.7'],
  // Junk: the walk stops; the last trusted hop walked past is the client (fail closed).
  ['junk as the only entry: the peer', 'unknown', PEER],
  ['junk right after a trusted hop: that hop', '203.0.113.7, garbage, 10.1.1.1', '10.1.1.1'],
  ['junk left of the client does not matter', 'garbage, 203.0.113.7', '203.0.113.7'],
  ['address with port is junk', '203.0.113.7:5555', PEER],
  ['bracketed IPv6 is junk', '[2001:db8::7]', PEER],
  ['leading zero octet is junk (octal or decimal?)', '203.0.113.07', PEER],
  ['short IPv4 form is junk', '203.7', PEER],
  ['octet over 255 is junk', '203.0.113.256', PEER],
  ['zone id is junk', 'fe80::1%eth0', PEER],
  ['hex IPv4 is junk', '0xcb.0.113.7', PEER],
  ['obfuscated identifier (RFC 7239 style) is junk', '_hidden', PEER],
  ['quoted address is junk', '"203.0.113.7"', PEER],
  ['deprecated IPv4-compatible IPv6 is junk', '::203.0.113.7', PEER],
  ['space inside an entry is junk', '203.0.113.7 10.1.1.1', PEER],
];

for (const [name, xff, want] of rows) {
  t.equal(clientFromForwardedFor(xff, PEER, trusted), want, name);
}

t.test('the peer is returned as given when the chain is empty', async (t) => {
  t.equal(clientFromForwardedFor('', '2001:db8:ffff::9', trusted), '2001:db8:ffff::9');
});

t.test('entry parser agrees with the strict address parser on edge cases', async (t) => {
  const cases: Array<[string, string | null]> = [
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['1.2.3', null],
    ['1.2.3.4.5', null],
    ['::1', '::1'],
    ['::', '::'],
    ['1::2::3', null],
    ['', null],
    ['1.2.3.4/32', null],
  ];
  for (const [text, want] of cases) t.equal(forwardedForEntry(text, 0, text.length), want, JSON.stringify(text));
  // A slice in the middle of a longer string.
  t.equal(forwardedForEntry('x,198.51.100.2,y', 2, 14), '198.51.100.2', 'substring');
});
