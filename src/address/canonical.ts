/**
 * The one canonical text of an address (docs/architecture.md, "Client identity"), from the words
 * the scanner (address/scan.ts) produces or from wire bytes (PROXY v2, the encoder's scratch):
 * - IPv4: dotted decimal without leading zeros;
 * - IPv4-mapped IPv6 (`::ffff:a.b.c.d`): the IPv4 address, in allowlist checks, logs, headers and
 *   outbound PROXY headers alike;
 * - other IPv6: RFC 5952 section 4: lower case, no leading zeros, the longest run (>= 2) of zero
 *   groups, the first one on a tie, written "::".
 * Cross-checked against ipaddr.js in test/unit/address/canonical.test.ts.
 */
import { isMappedWords, scanAddress, scanIPv4 } from './scan';

/** Dotted-quad text of an unsigned 32-bit IPv4 value. */
export function formatV4(word: number): string {
  return `${word >>> 24}.${(word >>> 16) & 255}.${(word >>> 8) & 255}.${word & 255}`;
}

// The eight 16-bit groups being formatted; formatting is synchronous, so one is enough.
const groups = new Uint16Array(8);

/** RFC 5952 text of `groups` (not mapped: the callers handle that first). */
function formatGroups(): string {
  let bestStart = -1;
  let bestLen = 1;
  let runStart = -1;
  for (let w = 0; w <= 8; w++) {
    if (w < 8 && groups[w] === 0) {
      if (runStart < 0) runStart = w;
    } else if (runStart >= 0) {
      if (w - runStart > bestLen) {
        bestStart = runStart;
        bestLen = w - runStart;
      }
      runStart = -1;
    }
  }
  let s = '';
  for (let w = 0; w < 8; w++) {
    if (w === bestStart) {
      s += w === 0 ? '::' : ':';
      w += bestLen - 1;
      continue;
    }
    s += groups[w]!.toString(16);
    if (w < 7) s += ':';
  }
  return s;
}

/** Canonical text of an IPv6 address given as 4 big-endian u32 words (mapped: the IPv4 text). */
export function formatV6Words(w: ArrayLike<number>): string {
  if (isMappedWords(w)) return formatV4(w[3]!);
  for (let i = 0; i < 4; i++) {
    groups[2 * i] = w[i]! >>> 16;
    groups[2 * i + 1] = w[i]! & 0xffff;
  }
  return formatGroups();
}

/** True when bytes[off..off+16) is `::ffff:a.b.c.d` (RFC 4291 section 2.5.5.2). */
function isV4Mapped(bytes: Uint8Array, off: number): boolean {
  for (let k = 0; k < 10; k++) if (bytes[off + k] !== 0) return false;
  return bytes[off + 10] === 0xff && bytes[off + 11] === 0xff;
}

/** Dotted-quad text of bytes[off..off+4). */
export function formatIPv4(bytes: Uint8Array, off: number): string {
  return `${bytes[off]}.${bytes[off + 1]}.${bytes[off + 2]}.${bytes[off + 3]}`;
}

/** Canonical text of the IPv6 address in bytes[off..off+16) (mapped: the IPv4 text). */
export function formatIPv6(bytes: Uint8Array, off: number): string {
  if (isV4Mapped(bytes, off)) return formatIPv4(bytes, off + 12);
  for (let w = 0; w < 8; w++) groups[w] = (bytes[off + 2 * w]! << 8) | bytes[off + 2 * w + 1]!;
  return formatGroups();
}

// Scanner output for the byte writers below (synchronous, so one is enough).
const words = new Uint32Array(4);

/** Words to 16 big-endian bytes at out[off..off+16). */
function writeWords(w: Uint32Array, out: Uint8Array, off: number): void {
  for (let i = 0; i < 4; i++) {
    const x = w[i]!;
    out[off + 4 * i] = x >>> 24;
    out[off + 4 * i + 1] = (x >>> 16) & 255;
    out[off + 4 * i + 2] = (x >>> 8) & 255;
    out[off + 4 * i + 3] = x & 255;
  }
}

/**
 * Address text (canonical or not) as wire bytes: IPv6 into out[off..off+16), IPv4 into
 * out[off..off+4). Returns 4, 6, or 0 when the scanner refuses the text. IPv4-mapped IPv6 text
 * returns 4 with the IPv4 bytes at out[off..off+4), so a mapped peer is written as the IPv4
 * client it is. Nothing is written for a refused text.
 */
export function addressBytes(text: string, out: Uint8Array, off: number): 0 | 4 | 6 {
  const n = text.length;
  let family: 0 | 4 | 6;
  if (n >= 7 && n <= 15 && (text.charCodeAt(1) === 46 || text.charCodeAt(2) === 46 || text.charCodeAt(3) === 46)) {
    // A dotted quad has its first '.' at index 1-3, where no IPv6 text the scanner accepts has
    // one (as in Matcher.lookup): straight to the IPv4 scan. The outbound PROXY encoder's common
    // case (bench/micro/pp-decode.ts "encode v2 IPv4").
    const v4 = scanIPv4(text, 0, n);
    if (v4 < 0) return 0;
    words[0] = v4;
    family = 4;
  } else {
    family = scanAddress(text, words);
  }
  if (family === 0) return 0;
  if (family === 4 || isMappedWords(words)) {
    const v4 = family === 4 ? words[0]! : words[3]!;
    out[off] = v4 >>> 24;
    out[off + 1] = (v4 >>> 16) & 255;
    out[off + 2] = (v4 >>> 8) & 255;
    out[off + 3] = v4 & 255;
    return 4;
  }
  writeWords(words, out, off);
  return 6;
}

/**
 * IPv6 text as 16 bytes at out[off..off+16), mapped or not (a PROXY TCP6 field or v2 INET6 slot
 * holds the 16 bytes as written). False, nothing written, for anything but IPv6 text.
 */
export function ipv6Bytes(text: string, out: Uint8Array, off: number): boolean {
  if (scanAddress(text, words) !== 6) return false;
  writeWords(words, out, off);
  return true;
}

/**
 * Canonical text of an address, or null when the scanner refuses it. The one function identity,
 * logs and the admin API use to spell an address.
 */
export function canonicalText(text: string): string | null {
  const family = scanAddress(text, words);
  if (family === 0) return null;
  // Strictly valid dotted-quad text is already canonical.
  return family === 4 ? text : formatV6Words(words);
}
