import t from 'tap';
import ipaddr from 'ipaddr.js';
import { parseAddress, parseCidr } from '../../../src/allowlist/cidr';
import { scanIPv4, scanIPv6 } from '../../../src/address/scan';
import { scanCidr } from '../../../src/allowlist/address-scan';
import { prng } from '../../helpers/prng';

/** What the hot-path scanners make of `s`, as canonical text (mapped -> IPv4), or null. */
function scanned(s: string): string | null {
  if (!s.includes(':')) {
    const v = scanIPv4(s, 0, s.length);
    return v < 0 ? null : ipaddr.fromByteArray([v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255]).toString();
  }
  const w = new Uint32Array(4);
  if (!scanIPv6(s, w)) return null;
  if (w[0] === 0 && w[1] === 0 && w[2] === 0xffff)
    return scanned(`${w[3]! >>> 24}.${(w[3]! >>> 16) & 255}.${(w[3]! >>> 8) & 255}.${w[3]! & 255}`);
  const parts: number[] = [];
  for (const x of w) parts.push(x >>> 16, x & 0xffff);
  return new ipaddr.IPv6(parts).toString();
}

function reference(s: string): string | null {
  const r = parseAddress(s);
  return r.ok ? r.address : null;
}

const STRICT_V4 = /^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$/;

/**
 * An oracle independent of the scanner (parseAddress now reads addresses through it too): the
 * rules as regular expressions plus ipaddr.js for the IPv6 structure, as parseAddress was built
 * before the scanners became one (strict dotted quads, no zone id, no deprecated ::a.b.c.d).
 */
function oracle(s: string): string | null {
  if (s.length === 0 || /[^0-9a-fA-F:.]/.test(s)) return null;
  const quad = (q: string): boolean => {
    const m = STRICT_V4.exec(q);
    return m?.slice(1).every((o) => Number(o) <= 255) === true;
  };
  if (!s.includes(':')) return quad(s) ? s : null;
  const tail = s.slice(s.lastIndexOf(':') + 1);
  if (tail.includes('.') && (!quad(tail) || (s.lastIndexOf(':') === 1 && s.startsWith('::')))) return null;
  if (!ipaddr.IPv6.isValid(s)) return null;
  const ip = ipaddr.IPv6.parse(s);
  return ip.isIPv4MappedAddress() ? ip.toIPv4Address().toString() : ip.toString();
}

/** `s` as a CIDR with host bits cleared (via parseCidr's suggestion), or `s` when not an address. */
function maskedText(s: string, maxPrefix: number, rnd: () => number): string {
  const prefix = Math.floor(rnd() * (maxPrefix + 1));
  const r = parseCidr(`${s}/${prefix}`);
  if (r.ok) return r.cidr.text;
  const m = /did you mean (\S+)\?$/.exec(r.message);
  return m === null ? `${s}/${prefix}` : m[1]!;
}

t.test('scanners agree with parseAddress and an independent oracle on fixed cases', async (t) => {
  const rows: Array<[desc: string, input: string, expected: string | null]> = [
    ['IPv4', '192.0.2.1', '192.0.2.1'],
    ['IPv4 zero', '0.0.0.0', '0.0.0.0'],
    ['IPv4 max', '255.255.255.255', '255.255.255.255'],
    ['IPv4 leading zero', '01.2.3.4', null],
    ['IPv4 octet 256', '1.2.3.256', null],
    ['IPv4 three parts', '1.2.3', null],
    ['IPv4 trailing dot', '1.2.3.4.', null],
    ['IPv4 empty octet', '1..2.3', null],
    ['IPv6 all zeros', '::', '::'],
    ['IPv6 loopback', '::1', '::1'],
    ['IPv6 trailing ::', '2001:db8::', '2001:db8::'],
    ['IPv6 full', '2001:db8:1:2:3:4:5:6', '2001:db8:1:2:3:4:5:6'],
    ['IPv6 upper case', '2001:DB8::A', '2001:db8::a'],
    ['IPv6 :: for one group', '1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['IPv6 :: for no group', '1:2:3:4::5:6:7:8', null],
    ['IPv6 two ::', '1::2::3', null],
    ['IPv6 lone leading colon', ':1::2', null],
    ['IPv6 lone trailing colon', '1::2:', null],
    ['IPv6 five hex digits', '12345::', null],
    ['IPv6 nine groups', '1:2:3:4:5:6:7:8:9', null],
    ['IPv6 seven groups without ::', '1:2:3:4:5:6:7', null],
    ['mapped dotted', '::ffff:1.2.3.4', '1.2.3.4'],
    ['mapped hex', '::ffff:102:304', '1.2.3.4'],
    ['NAT64 dotted tail', '64:ff9b::1.2.3.4', '64:ff9b::102:304'],
    ['dotted tail after six groups', '1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304'],
    ['dotted tail after seven groups', '1:2:3:4:5:6:7:1.2.3.4', null],
    ['dotted tail not last', '::1.2.3.4:5', null],
    ['dotted tail leading zero', '::ffff:01.2.3.4', null],
    ['deprecated ::a.b.c.d', '::1.2.3.4', null],
    // Groups of four digits take their own loop until the first group that is not one.
    ['four-digit groups', 'abcd:ef01:2345:6789:ABCD:EF01:2345:6789', 'abcd:ef01:2345:6789:abcd:ef01:2345:6789'],
    ['four-digit groups, leading zeros', '2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['four-digit groups, then shorter', 'abcd:ef01:2345:6789:1:2:3:4', 'abcd:ef01:2345:6789:1:2:3:4'],
    ['shorter, then four-digit groups', '1:2:3:4:abcd:ef01:2345:6789', '1:2:3:4:abcd:ef01:2345:6789'],
    ['four-digit groups around ::', 'abcd:ef01::2345:6789', 'abcd:ef01::2345:6789'],
    ['four-digit groups, trailing ::', 'abcd:ef01:2345:6789:abcd:ef01:2345::', 'abcd:ef01:2345:6789:abcd:ef01:2345:0'],
    ['four-digit groups, leading ::', '::abcd:ef01:2345', '::abcd:ef01:2345'],
    ['four-digit groups, :: for no group', 'abcd:ef01:2345:6789::abcd:ef01:2345:6789', null],
    ['four-digit groups, trailing colon', 'abcd:ef01:2345:6789:abcd:ef01:2345:6789:', null],
    ['four-digit groups, nine of them', 'abcd:ef01:2345:6789:abcd:ef01:2345:6789:abcd', null],
    ['four-digit groups, seven of them', 'abcd:ef01:2345:6789:abcd:ef01:2345', null],
    ['four-digit groups, a fifth digit', 'abcd:ef012:2345:6789:abcd:ef01:2345:6789', null],
    ['four-digit groups, a fifth digit at the end', 'abcd:ef01:2345:6789:abcd:ef01:2345:67890', null],
    ['four-digit groups, invalid last digit', 'abcd:ef01:2345:6789:abcd:ef01:2345:678g', null],
    ['four-digit groups, then a dotted tail', 'abcd:ef01:2345:6789:abcd:ef01:1.2.3.4', 'abcd:ef01:2345:6789:abcd:ef01:102:304'],
    ['four digits as a dotted octet', '::ffff:1234.1.2.3', null],
    ['nine digits after ::', '74fe:b112::e62c9719f:0:0', null],
    ['eight digits after ::', '1::12345678', null],
    ['zone id', 'fe80::1%eth0', null],
    ['whitespace', ' ::1', null],
    ['empty', '', null],
  ];
  for (const [desc, input, expected] of rows) {
    t.equal(scanned(input), expected, `${desc}: scanner`);
    t.equal(reference(input), expected, `${desc}: parseAddress`);
    t.equal(oracle(input), expected, `${desc}: the independent oracle`);
  }
});

t.test('scanners agree with parseAddress and an independent oracle on random and mutated input (time-boxed)', async (t) => {
  const seed = Date.now() >>> 0;
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const hex = (n: number): string => n.toString(16);
  const alphabet = '0123456789abcdefABCDEF:.:.:%/ x';

  const spellings = (): string => {
    const words = [0, 1, 2, 3].map(() => (rnd() < 0.3 ? 0 : Math.floor(rnd() * 2 ** 32)));
    const groups: number[] = [];
    for (const w of words) groups.push(w >>> 16, w & 0xffff);
    const v4 = `${Math.floor(rnd() * 256)}.${Math.floor(rnd() * 256)}.${Math.floor(rnd() * 256)}.${Math.floor(rnd() * 256)}`;
    switch (Math.floor(rnd() * 6)) {
      case 0:
        return v4;
      case 1:
        return `::ffff:${v4}`;
      case 2:
        return groups.map((g) => (rnd() < 0.5 ? hex(g).padStart(4, '0') : hex(g).toUpperCase())).join(':');
      case 3:
        return new ipaddr.IPv6(groups).toString();
      case 4:
        return `${groups.slice(0, 6).map(hex).join(':')}:${v4}`;
      default: {
        const a = Math.floor(rnd() * 8);
        const b = a + 1 + Math.floor(rnd() * (8 - a));
        return `${groups.slice(0, a).map(hex).join(':')}::${groups.slice(b).map(hex).join(':')}`;
      }
    }
  };
  const mutate = (s: string): string => {
    const i = Math.floor(rnd() * (s.length + 1));
    const c = pick([...alphabet]);
    switch (Math.floor(rnd() * 3)) {
      case 0:
        return s.slice(0, i) + c + s.slice(i);
      case 1:
        return s.slice(0, i) + s.slice(i + 1);
      default:
        return s.slice(0, i) + c + s.slice(i + 1);
    }
  };

  // Time-boxed, but never fewer than MIN inputs, so a loaded CI machine still tests enough.
  const MIN = 20_000;
  const deadline = Date.now() + 1500;
  let checked = 0;
  let valid = 0;
  let cidrValid = 0;
  const words5 = new Uint32Array(5);
  let mismatch: string | null = null;
  while ((checked < MIN || Date.now() < deadline) && mismatch === null) {
    for (let k = 0; k < 500; k++) {
      let s = spellings();
      const mutations = Math.floor(rnd() * 3);
      for (let m = 0; m < mutations; m++) s = mutate(s);
      if (rnd() < 0.1) s = Array.from({ length: Math.floor(rnd() * 12) }, () => pick([...alphabet])).join('');
      const a = scanned(s);
      const b = reference(s);
      const o = oracle(s);
      checked++;
      if (o !== null) valid++;
      if (a !== o || b !== o) {
        mismatch = `${JSON.stringify(s)}: scanner ${a}, parseAddress ${b}, oracle ${o} (seed ${seed})`;
        break;
      }
      // The same text as a CIDR: compile's fast path may refuse what parseCidr accepts (it then
      // falls back), but what it accepts must be accepted by parseCidr with the same value, and
      // the canonical text of every valid CIDR must take the fast path.
      const maxPrefix = s.includes(':') ? 128 : 32;
      const cidr = rnd() < 0.1 ? s : `${s}/${pick(['0', '1', '8', '24', '32', '64', '96', '128', '33', '08', '', '+1'])}`;
      const c = rnd() < 0.3 ? cidr : `${maskedText(s, maxPrefix, rnd)}`;
      const fast = scanCidr(c, words5);
      const slow = parseCidr(c);
      if (
        fast !== 0 &&
        !(slow.ok && slow.cidr.family === fast && slow.cidr.prefix === words5[4] && slow.cidr.start.every((w, i) => w === words5[i]))
      ) {
        mismatch = `${JSON.stringify(c)}: scanCidr ${fast}/${words5[4]}, parseCidr ${JSON.stringify(slow)} (seed ${seed})`;
        break;
      }
      if (slow.ok) {
        cidrValid++;
        if (scanCidr(slow.cidr.text, words5) !== slow.cidr.family) {
          mismatch = `canonical ${slow.cidr.text} does not take the fast path (seed ${seed})`;
          break;
        }
      }
    }
  }
  t.equal(mismatch, null, 'no disagreement');
  t.ok(valid > checked / 5 && valid < checked, `a mix of valid and invalid inputs (${valid} valid)`);
  t.ok(cidrValid > checked / 20, `enough valid CIDRs among them (${cidrValid})`);
});
