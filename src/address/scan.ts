/**
 * The one scanner of IPv4 / IPv6 text in ipgate: the PROXY v1 decoder and encoder
 * (proxy-protocol/), client identity (identity/: canonical addresses, the X-Forwarded-For walk),
 * the allowlist matcher's lookup and compile, and parseCidr / parseAddress (allowlist/cidr.ts,
 * which add the sentence saying why a text is refused) all read addresses through it, so an
 * address means the same thing at every stage. Its canonical text is in address/canonical.ts.
 *
 * The rules are the strictest any of those stages had: four decimal octets 0-255 without leading
 * zeros (the PROXY spec: "to avoid any possible confusion with octal numbers"); IPv6 groups of
 * 1-4 hex digits, at most one `::` standing for at least one group, an optional dotted IPv4 tail
 * in the last 32 bits; no zone id, no brackets, no whitespace, and not the deprecated
 * IPv4-compatible `::a.b.c.d` (read as ::102:304 by RFC parsers and as ::ffff:1.2.3.4 by
 * ipaddr.js: two meanings, so neither). Unit tests: test/unit/allowlist/address-scan.test.ts
 * (differential against parseAddress, random and mutated input) and
 * test/unit/address/canonical.test.ts (against ipaddr.js and node:net).
 *
 * Allocation-free for the lookup hot path (one call per connection/request): char codes in,
 * caller-owned storage out; no substrings, no regexes, no exceptions.
 * Benchmarks: bench/micro/matcher.ts, bench/micro/pp-decode.ts.
 */

/** Longest IPv6 text: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`. */
export const IPV6_TEXT_MAX = 45;
/** Longest IPv4 text: `255.255.255.255`. */
export const IPV4_TEXT_MAX = 15;

/** Unsigned 32-bit value of `text[from, to)` as a strict dotted quad, or -1. */
export function scanIPv4(text: string, from: number, to: number): number {
  let acc = 0;
  let octets = 0;
  let value = 0;
  let digits = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (digits === 1 && value === 0) return -1; // leading zero: octal or decimal?
      value = value * 10 + (c - 48);
      if (value > 255) return -1;
      digits++;
    } else if (c === 46 /* . */) {
      if (digits === 0 || octets === 3) return -1;
      acc = acc * 256 + value;
      octets++;
      value = 0;
      digits = 0;
    } else {
      return -1;
    }
  }
  if (digits === 0 || octets !== 3) return -1;
  return acc * 256 + value;
}

/**
 * The groups read so far, each with a marker bit above its digits (below), module-level so a
 * scan allocates nothing. Sized for invalid text: the scan counts groups only at the end, and 45
 * characters hold at most 22 colons.
 */
const groups = new Int32Array(32);

/**
 * Character class by char code, for any UTF-16 unit (65,536 entries, so no range check before
 * the load): a hex digit's value 0-15, COLON for ':', DOT for '.', OTHER for anything else.
 * Only the lines holding '.', ':', digits and letters are ever hot.
 */
const COLON = 16;
const DOT = 32;
const OTHER = 64;
const CLASS = new Uint8Array(65536).fill(OTHER);
for (let c = 48; c <= 57; c++) CLASS[c] = c - 48;
for (let c = 97; c <= 102; c++) CLASS[c] = c - 87;
for (let c = 65; c <= 70; c++) CLASS[c] = c - 55;
CLASS[58] = COLON;
CLASS[46] = DOT;

/**
 * Scan `text[0, to)` as a client address: 6 with the IPv6 address in `out[0..3]` (4 big-endian
 * u32 words), 4 with a dotted quad in `out[0]`, 0 (out then undefined) for anything
 * `parseAddress` rejects.
 *
 * Two loops, both without a branch that depends on how long a group is:
 * - Groups of four digits, five characters at a time (four digits and a colon, or the last
 *   group): four loads, one test on their or-ed classes. A random 16-bit group has four digits 15
 *   times in 16, so most interface identifiers are read this way to the end.
 * - From the first group that is not (shorter, `::`, a dotted tail, anything invalid), character
 *   by character: a digit shifts into the group, a colon closes it, by arithmetic on the class
 *   rather than by a branch (which mispredicts when group lengths vary). The only branches leave
 *   the loop ('.' or an invalid character) or mark the `::`.
 * Each group is kept with a 1 bit above its digits ("0ab" is 0x10ab, four digits 0x1xxxx), so an
 * empty group is 1, a fifth digit sets a bit from 2^20 up, and the digit count of the
 * last group (the first octet of a dotted tail) is in the value. Reading the characters through
 * `charCodeAt` is most of what is left (bench/README.md "Allowlist matcher").
 */
export function scanAddress(text: string, out: Uint32Array, to: number = text.length): 0 | 4 | 6 {
  const n = to;
  if (n < 2 || n > 45) return 0;
  let i = 0; // where the next group starts
  let gap = -1; // group index where :: stands, -1 if none
  if (text.charCodeAt(0) === 58 /* : */) {
    if (text.charCodeAt(1) !== 58) return 0; // a lone leading colon
    gap = 0;
    i = 2;
  }
  let g = 0; // groups closed by a colon
  let count = -1; // groups written out, once known
  while (i + 4 <= n) {
    const a = CLASS[text.charCodeAt(i)]!;
    const b = CLASS[text.charCodeAt(i + 1)]!;
    const c = CLASS[text.charCodeAt(i + 2)]!;
    const d = CLASS[text.charCodeAt(i + 3)]!;
    if ((a | b | c | d) > 15) break;
    const value = 0x10000 | (a << 12) | (b << 8) | (c << 4) | d;
    if (i + 4 === n) {
      groups[g] = value;
      count = g + 1;
      break;
    }
    if (CLASS[text.charCodeAt(i + 4)] !== COLON) break;
    groups[g++] = value;
    i += 5;
  }
  if (count < 0) {
    let value = 1; // the group being read, after its marker bit
    let seen = 0; // every value, or-ed: the fifth-digit check for all groups at once
    for (; i < n; i++) {
      const t = CLASS[text.charCodeAt(i)]!;
      if (t > COLON) break; // '.' (a dotted tail, or IPv4) or an invalid character
      const colon = t >>> 4; // 1 for ':', 0 for a hex digit
      if ((colon & ((value - 2) >>> 31)) !== 0) {
        // A colon with no digit before it: the second colon of a :: (a leading one was consumed
        // above, and a group starts right after a colon), or :::.
        if (gap >= 0) return 0;
        gap = g;
        continue;
      }
      value = (((value << 4) | t) & (colon - 1)) | colon; // a digit shifts in, a colon restarts
      seen |= value;
      g += colon;
      groups[g] = value;
    }
    if (seen >>> 20 !== 0) return 0; // a fifth digit (seen can be negative: more digits shift further)
    if (i < n) {
      if (CLASS[text.charCodeAt(i)] !== DOT) return 0;
      if (g === 0 && gap < 0) {
        // No colon before the first '.': IPv4, or nothing.
        const v4 = scanIPv4(text, 0, n);
        if (v4 < 0) return 0;
        out[0] = v4;
        return 4;
      }
      // Dotted IPv4 tail: the last 32 bits, so at most 6 groups before it, and not the
      // deprecated ::a.b.c.d (see cidr.ts for why it is ambiguous).
      const digits = (31 - Math.clz32(value)) >>> 2;
      if (digits === 0 || g > 6 || (g === 0 && gap === 0)) return 0;
      const v4 = scanIPv4(text, i - digits, n);
      if (v4 < 0) return 0;
      groups[g] = 0x10000 | (v4 >>> 16);
      groups[g + 1] = 0x10000 | (v4 & 0xffff);
      count = g + 2;
    } else if (value > 1) {
      count = g + 1;
    } else if (gap === g) {
      count = g; // ends with ::
    } else {
      return 0; // a lone trailing colon
    }
  }
  if (gap < 0) {
    if (count !== 8) return 0;
  } else {
    if (count > 7) return 0; // :: must stand for at least one group
    const zeros = 8 - count;
    for (let k = count - 1; k >= gap; k--) groups[k + zeros] = groups[k]!;
    for (let k = gap; k < gap + zeros; k++) groups[k] = 1;
  }
  out[0] = ((group(0) << 16) | group(1)) >>> 0;
  out[1] = ((group(2) << 16) | group(3)) >>> 0;
  out[2] = ((group(4) << 16) | group(5)) >>> 0;
  out[3] = ((group(6) << 16) | group(7)) >>> 0;
  return 6;
}

/** Group k without its marker bit. */
function group(k: number): number {
  const x = groups[k]!;
  return x ^ (1 << (31 - Math.clz32(x)));
}

/**
 * Scan IPv6 text `text[0, to)` into `out` (4 big-endian u32 words). Returns false (out then
 * undefined) when the text is not a strict IPv6 address (a dotted quad alone is not).
 */
export function scanIPv6(text: string, out: Uint32Array, to: number = text.length): boolean {
  return scanAddress(text, out, to) === 6;
}

/** True when the words are `::ffff:a.b.c.d` (RFC 4291 2.5.5.2): the IPv4 address w[3] for ipgate. */
export function isMappedWords(w: ArrayLike<number>): boolean {
  return w[0] === 0 && w[1] === 0 && w[2] === 0xffff;
}
