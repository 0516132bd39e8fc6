import t from 'tap';
import ipaddr from 'ipaddr.js';
import net from 'node:net';
import { addressBytes, canonicalText, formatIPv6, formatV6Words, ipv6Bytes } from '../../../src/address/canonical';
import { scanAddress, scanIPv4 } from '../../../src/address/scan';

// The address scanner and canonical form shared by the PROXY decoder and encoder, identity and
// the allowlist (src/address/). These vectors were the PROXY decoder's own (ip-text.ts) before
// the three parsers became one; they hold for the one scanner unchanged.

function v6(text: string): string | null {
  const out = new Uint8Array(16);
  return ipv6Bytes(text, out, 0) ? Buffer.from(out).toString('hex') : null;
}

function v4(text: string): string | null {
  const v = scanIPv4(text, 0, text.length);
  return v < 0 ? null : [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
}

const parseIp = addressBytes;

/** mulberry32: small, seeded, good enough to pick test addresses. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test('IPv4 text is strict', async (t) => {
  const rows: [string, string | null][] = [
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['192.168.0.1', '192.168.0.1'],
    ['192.168.0.01', null], // heading zero: octal confusion, spec forbids
    ['00.0.0.0', null],
    ['256.0.0.0', null],
    ['1.2.3', null],
    ['1.2.3.4.5', null],
    ['1..2.3', null],
    ['.1.2.3', null],
    ['1.2.3.', null],
    ['1.2.3.4 ', null],
    ['0x1.2.3.4', null],
    ['1.2.3.1000', null],
    ['', null],
  ];
  for (const [text, want] of rows) t.equal(v4(text), want, JSON.stringify(text));
});

t.test('IPv6 text: RFC 4291 forms accepted, everything else rejected', async (t) => {
  const rows: [string, string | null][] = [
    ['::', '00000000000000000000000000000000'],
    ['::1', '00000000000000000000000000000001'],
    ['1::', '00010000000000000000000000000000'],
    ['2001:db8::1', '20010db8000000000000000000000001'],
    ['2001:DB8:0:0:0:0:0:1', '20010db8000000000000000000000001'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffffffffffffffffffffffffffffffff'],
    ['1:2:3:4:5:6:7::', '00010002000300040005000600070000'],
    ['::2:3:4:5:6:7:8', '00000002000300040005000600070008'],
    ['::ffff:192.0.2.1', '00000000000000000000ffffc0000201'],
    ['64:ff9b::192.0.2.33', '0064ff9b0000000000000000c0000221'],
    ['1:2:3:4:5:6:1.2.3.4', '00010002000300040005000601020304'],
    ['1:2:3:4:5:6:7:1.2.3.4', null],
    ['::ffff:192.0.2.01', null],
    ['::ffff:1.2.3', null],
    ['fe80::1%eth0', null],
    ['[::1]', null],
    [':', null],
    [':::', null],
    [':1', null],
    ['1:', null],
    ['1::2::3', null],
    ['1:2:3:4:5:6:7:8:9', null],
    ['1:2:3:4:5:6:7', null],
    ['1:2:3:4:5:6:7:8::', null],
    ['12345::', null],
    ['g::', null],
    ['::1.2.3.4:5', null],
    ['', null],
  ];
  for (const [text, want] of rows) t.equal(v6(text), want, JSON.stringify(text));
});

t.test('RFC 5952 formatting matches ipaddr.js; v4-mapped becomes IPv4', async (t) => {
  const fixed: [string, string][] = [
    ['20010db8000000000001000000000001', '2001:db8::1:0:0:1'], // tie: the first run is compressed
    ['20010db8000000010000000000000001', '2001:db8:0:1::1'], //   a single zero group is not
    ['00000000000000000000000000000000', '::'],
    ['00000000000000000000ffffc0000201', '192.0.2.1'],
    ['00000000000000000000000001020304', '::102:304'], //         IPv4-compatible is not mapped
  ];
  for (const [bytes, want] of fixed) t.equal(formatIPv6(Buffer.from(bytes, 'hex'), 0), want, want);

  const rand = prng(0x5eed);
  let mismatches = 0;
  for (let k = 0; k < 5000; k++) {
    const bytes = new Uint8Array(16);
    // Zero-heavy groups so that runs and ties of zero groups are common.
    for (let w = 0; w < 8; w++) {
      if (rand() < 0.5) continue;
      bytes[2 * w] = rand() < 0.5 ? 0 : Math.floor(rand() * 256);
      bytes[2 * w + 1] = Math.floor(rand() * 256);
    }
    const ours = formatIPv6(bytes, 0);
    const w = new Uint32Array(4);
    for (let i = 0; i < 4; i++)
      w[i] = ((bytes[4 * i]! << 24) | (bytes[4 * i + 1]! << 16) | (bytes[4 * i + 2]! << 8) | bytes[4 * i + 3]!) >>> 0;
    if (formatV6Words(w) !== ours) mismatches++;
    const parsed = ipaddr.fromByteArray(Array.from(bytes)) as ipaddr.IPv6;
    const theirs = parsed.isIPv4MappedAddress() ? parsed.toIPv4Address().toString() : parsed.toRFC5952String();
    if (ours !== theirs) mismatches++;
    // Every spelling ipaddr.js produces parses back to the same bytes.
    for (const spelling of [
      parsed.toRFC5952String(),
      parsed.toNormalizedString(),
      (parsed as unknown as { toFixedLengthString(): string }).toFixedLengthString(),
    ]) {
      if (v6(spelling) !== Buffer.from(bytes).toString('hex')) mismatches++;
    }
  }
  t.equal(mismatches, 0, 'format and parse agree with ipaddr.js on 5000 zero-heavy addresses');
});

t.test('parseIp never accepts what Node rejects', async (t) => {
  const rand = prng(0xadd7);
  const alphabet = '0123456789abcdefABCDEF:.%[]x ';
  let unsound = 0;
  let accepted = 0;
  const out = new Uint8Array(16);
  for (let k = 0; k < 50000; k++) {
    let s = '';
    const n = 1 + Math.floor(rand() * 20);
    for (let j = 0; j < n; j++) s += alphabet[Math.floor(rand() * alphabet.length)];
    if (parseIp(s, out, 0) !== 0) {
      accepted++;
      if (net.isIP(s) === 0) unsound++;
    }
  }
  t.equal(unsound, 0, 'every accepted string is an IP address for node:net');
  t.ok(accepted > 0, `some random strings are valid (${accepted}), so the check is not vacuous`);
});

t.test('the deprecated IPv4-compatible ::a.b.c.d is refused everywhere (the strictest rule of the three former parsers)', async (t) => {
  for (const text of ['::1.2.3.4', '::0.0.0.1']) {
    t.equal(v6(text), null, `${text}: not IPv6 for PROXY`);
    t.equal(canonicalText(text), null, `${text}: no canonical form`);
  }
  t.equal(canonicalText('::ffff:1.2.3.4'), '1.2.3.4', 'mapped is the IPv4 address');
  t.equal(canonicalText('0:0:0:0:0:FFFF:0102:0304'), '1.2.3.4', 'mapped in hex too');
  t.equal(canonicalText('2001:DB8:0:0:0:0:0:1'), '2001:db8::1');
  t.equal(canonicalText('64:ff9b::1.2.3.4'), '64:ff9b::102:304', 'a dotted tail that is not mapped is spelt in hex (RFC 5952)');
  const out = new Uint32Array(4);
  t.equal(scanAddress('1.2.3.4', out), 4);
  t.equal(v6('1.2.3.4'), null, 'a dotted quad is not IPv6 text');
});
