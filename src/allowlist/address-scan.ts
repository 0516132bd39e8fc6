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

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/**
 * Scan IPv6 text `text[0, to)` into `out` (4 big-endian u32 words). Returns false (out then
 * undefined) when the text is not a strict IPv6 address.
 */
export function scanIPv6(text: string, out: Uint32Array, to: number = text.length): boolean {
  const n = to;
  if (n < 2 || n > 45) return false;
  let i = 0;
  let g = 0;
  let gap = -1;
  if (text.charCodeAt(0) === 58 /* : */) {
    if (text.charCodeAt(1) !== 58) return false; // a lone leading colon
    gap = 0;
    i = 2;
  }
  while (i < n) {
    if (g === 8) return false;
    const groupStart = i;
    let value = 0;
    let c = 0;
    while (i < n) {
      c = text.charCodeAt(i);
      const h = hexValue(c);
      if (h < 0) break;
      value = value * 16 + h;
      i++;
    }
    const digits = i - groupStart;
    if (digits === 0) return false;
    if (i < n && c === 46 /* . */) {
      // Dotted IPv4 tail: the last 32 bits, so at most 6 groups before it, and not the
      // deprecated ::a.b.c.d (see cidr.ts for why it is ambiguous).
      if (g > 6 || (g === 0 && gap === 0)) return false;
      const v4 = scanIPv4(text, groupStart, n);
      if (v4 < 0) return false;
      groups[g++] = v4 >>> 16;
      groups[g++] = v4 & 0xffff;
      i = n;
      break;
    }
    if (digits > 4) return false;
    groups[g++] = value;
    if (i === n) break;
    if (c !== 58) return false;
    i++;
    if (i === n) return false; // a lone trailing colon
    if (text.charCodeAt(i) === 58) {
      if (gap >= 0) return false; // a second ::
      gap = g;
      i++;
    }
  }
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
