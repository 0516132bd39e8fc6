/**
 * The matcher's compile fast path for CIDR text: the shared address scanner (address/scan.ts)
 * plus the prefix, host-bit and mapped-CIDR rules of parseCidr (cidr.ts), allocation-free.
 * Benchmark: bench/micro/matcher.ts (compile rows).
 */
import { isMappedWords, scanIPv4, scanIPv6 } from '../address/scan';

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
  if (family === 6 && isMappedWords(out) && prefix >= 96) return 0;
  out[4] = prefix;
  return family;
}
