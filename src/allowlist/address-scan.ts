/**
 * Allocation-free address scanners for the lookup hot path (one call per connection/request).
 *
 * They read char codes and write into caller-owned storage; no substrings, no regexes, no
 * exceptions. They accept exactly what `parseAddress` (cidr.ts) accepts, which the unit tests
 * check differentially on random and mutated input: four decimal octets without leading zeros;
 * IPv6 groups of 1-4 hex digits, at most one `::` standing for at least one group, an optional
 * dotted IPv4 tail in the last 32 bits; no zone id, no whitespace, no deprecated `::a.b.c.d`.
 * Benchmark: bench/micro/matcher.ts.
 */

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

/** Eight 16-bit groups being assembled; module-level so a scan allocates nothing. */
const groups = new Uint16Array(8);

/** Hex digit value by char code (0-127), -1 for anything else: one load instead of a compare chain. */
const HEX = new Int8Array(128).fill(-1);
for (let c = 48; c <= 57; c++) HEX[c] = c - 48;
for (let c = 97; c <= 102; c++) HEX[c] = c - 87;
for (let c = 65; c <= 70; c++) HEX[c] = c - 55;

/**
 * Scan IPv6 text `text[0, to)` into `out` (4 big-endian u32 words). Returns false (out then
 * undefined) when the text is not a strict IPv6 address.
 *
 * One pass, one branch per character in the common case (a hex digit): the char code indexes
 * HEX; a colon closes a group, a second colon right after it marks the `::` gap. Reading the
 * characters is most of the cost (bench/README.md "Allowlist matcher").
 */
export function scanIPv6(text: string, out: Uint32Array, to: number = text.length): boolean {
  const n = to;
  if (n < 2 || n > 45) return false;
  let i = 0;
  let g = 0; // groups stored
  let gap = -1; // group index where :: stands, -1 if none
  if (text.charCodeAt(0) === 58 /* : */) {
    if (text.charCodeAt(1) !== 58) return false; // a lone leading colon
    gap = 0;
    i = 2;
  }
  let value = 0;
  let digits = 0; // hex digits in the group being read
  for (; i < n; i++) {
    const c = text.charCodeAt(i);
    const h = c < 128 ? HEX[c]! : -1;
    if (h >= 0) {
      if (++digits > 4) return false; // also too long for a dotted-tail octet
      value = (value << 4) | h;
    } else if (c === 58 /* : */) {
      if (digits === 0 || g === 8) return false; // an empty group (:::, or : after ::)
      groups[g++] = value;
      value = 0;
      digits = 0;
      if (i + 1 === n) return false; // a lone trailing colon
      if (text.charCodeAt(i + 1) === 58) {
        if (gap >= 0) return false; // a second ::
        gap = g;
        i++;
      }
    } else if (c === 46 /* . */) {
      // Dotted IPv4 tail: the last 32 bits, so at most 6 groups before it, and not the
      // deprecated ::a.b.c.d (see cidr.ts for why it is ambiguous).
      if (digits === 0 || g > 6 || (g === 0 && gap === 0)) return false;
      const v4 = scanIPv4(text, i - digits, n);
      if (v4 < 0) return false;
      groups[g++] = v4 >>> 16;
      groups[g++] = v4 & 0xffff;
      digits = -1; // consumed to the end
      break;
    } else {
      return false;
    }
  }
  if (digits > 0) {
    if (g === 8) return false;
    groups[g++] = value;
  } // digits === 0 here only right after a closing ::, which is complete
  if (gap < 0) {
    if (g !== 8) return false;
  } else {
    if (g > 7) return false; // :: must stand for at least one group
    const moved = g - gap;
    for (let k = 0; k < moved; k++) groups[7 - k] = groups[g - 1 - k]!;
    for (let k = gap; k < 8 - moved; k++) groups[k] = 0;
  }
  out[0] = ((groups[0]! << 16) | groups[1]!) >>> 0;
  out[1] = ((groups[2]! << 16) | groups[3]!) >>> 0;
  out[2] = ((groups[4]! << 16) | groups[5]!) >>> 0;
  out[3] = ((groups[6]! << 16) | groups[7]!) >>> 0;
  return true;
}

/** Mask of the network bits in 32-bit word `i` of an address with this prefix length. */
export function wordMask(prefix: number, i: number): number {
  const bits = prefix - 32 * i;
  if (bits <= 0) return 0;
  if (bits >= 32) return 0xffffffff;
  return (0xffffffff << (32 - bits)) >>> 0;
}

/**
 * Compile's fast path for a CIDR: network words into out[0..3] (IPv4: out[0]), prefix into
 * out[4]. Returns the family, or 0 for anything it does not accept, including text that
 * `parseCidr` accepts only with rules kept there (the caller then asks parseCidr, which also
 * gives the message). Accepts a subset of parseCidr with identical values (unit-tested).
 */
export function scanCidr(text: string, out: Uint32Array): 0 | 4 | 6 {
  const n = text.length;
  const slash = text.indexOf('/');
  const addrEnd = slash < 0 ? n : slash;
  let family: 4 | 6;
  if (text.lastIndexOf(':', addrEnd - 1) >= 0) {
    if (!scanIPv6(text, out, addrEnd)) return 0;
    family = 6;
  } else {
    const v4 = scanIPv4(text, 0, addrEnd);
    if (v4 < 0) return 0;
    out[0] = v4;
    family = 4;
  }
  const max = family === 4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const digits = n - slash - 1;
    if (digits < 1 || digits > 3) return 0;
    prefix = 0;
    for (let i = slash + 1; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c < 48 || c > 57) return 0;
      prefix = prefix * 10 + (c - 48);
    }
    if ((digits > 1 && text.charCodeAt(slash + 1) === 48) || prefix > max) return 0;
  }
  const words = family === 4 ? 1 : 4;
  for (let i = 0; i < words; i++) if ((out[i]! & ~wordMask(prefix, i)) !== 0) return 0; // host bits
  if (family === 6 && out[0] === 0 && out[1] === 0 && out[2] === 0xffff && prefix >= 96) return 0;
  out[4] = prefix;
  return family;
}
