/**
 * Strict IP address text <-> bytes, shared by the v1 decoder (text in the header) and the encoder
 * (canonical strings from sockets). Hand-written rather than net.isIP / ipaddr.js because the
 * PROXY spec is stricter than both ("Heading zeroes are not permitted ... to avoid any possible
 * confusion with octal numbers"; no zone ids) and because the encoder needs the bytes anyway.
 * Cross-checked against ipaddr.js in test/unit/proxy-protocol/ip-text.test.ts and the fuzz test.
 */

/** Longest IPv6 text: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`. */
export const IPV6_TEXT_MAX = 45;
/** Longest IPv4 text: `255.255.255.255`. */
export const IPV4_TEXT_MAX = 15;

// Scratch for a dotted IPv4 tail; parsing is synchronous, so one is enough.
const tail = new Uint8Array(4);

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

/**
 * Parses `text[start, end)` as dotted-quad IPv4 into out[off..off+4). Exactly four decimal octets
 * 0..255, single dots, no leading zeros ("0" alone is fine). Returns false on anything else.
 */
export function parseIPv4(text: string, start: number, end: number, out: Uint8Array, off: number): boolean {
  if (end - start > IPV4_TEXT_MAX || end - start < 7) return false;
  let octet = 0;
  let i = start;
  while (i < end) {
    const first = i;
    let value = 0;
    while (i < end) {
      const c = text.charCodeAt(i);
      if (c < 0x30 || c > 0x39) break;
      value = value * 10 + (c - 0x30);
      i++;
    }
    const digits = i - first;
    if (digits === 0 || digits > 3 || value > 255) return false;
    if (digits > 1 && text.charCodeAt(first) === 0x30) return false;
    out[off + octet] = value;
    octet++;
    if (i === end) break;
    if (text.charCodeAt(i) !== 0x2e || octet === 4) return false;
    i++;
    if (i === end) return false; // trailing dot
  }
  return octet === 4;
}

/**
 * Parses `text[start, end)` as IPv6 (RFC 4291 section 2.2 text forms: 1-4 hex digits per group,
 * at most one "::", optional dotted IPv4 tail with the strict IPv4 rules) into out[off..off+16).
 * No zone id, no brackets. Returns false on anything else.
 */
export function parseIPv6(text: string, start: number, end: number, out: Uint8Array, off: number): boolean {
  const n = end - start;
  if (n < 2 || n > IPV6_TEXT_MAX) return false;
  const words: number[] = [];
  let gap = -1; // index in words where "::" stands
  let i = start;
  if (text.charCodeAt(i) === 0x3a) {
    if (text.charCodeAt(i + 1) !== 0x3a) return false;
    gap = 0;
    i += 2;
  }
  while (i < end) {
    if (words.length === 8) return false;
    const first = i;
    let value = 0;
    while (i < end && i - first < 5) {
      const h = hexValue(text.charCodeAt(i));
      if (h < 0) break;
      value = value * 16 + h;
      i++;
    }
    const digits = i - first;
    if (digits === 0 || digits > 4) return false;
    if (i < end && text.charCodeAt(i) === 0x2e) {
      // Dotted IPv4 tail (what inet_ntop writes for ::ffff:a.b.c.d): the last 32 bits.
      if (words.length > 6) return false;
      if (!parseIPv4(text, first, end, tail, 0)) return false;
      words.push((tail[0]! << 8) | tail[1]!, (tail[2]! << 8) | tail[3]!);
      i = end;
      break;
    }
    words.push(value);
    if (i === end) break;
    if (text.charCodeAt(i) !== 0x3a) return false;
    i++;
    if (i === end) return false; // single trailing colon
    if (text.charCodeAt(i) === 0x3a) {
      if (gap >= 0) return false; // a second "::"
      gap = words.length;
      i++;
    }
  }
  if (gap < 0 ? words.length !== 8 : words.length > 7) return false;
  const head = gap < 0 ? words.length : gap;
  const tailCount = words.length - head;
  out.fill(0, off, off + 16);
  for (let w = 0; w < head; w++) {
    out[off + 2 * w] = words[w]! >> 8;
    out[off + 2 * w + 1] = words[w]! & 0xff;
  }
  for (let w = 0; w < tailCount; w++) {
    const pos = 8 - tailCount + w;
    out[off + 2 * pos] = words[head + w]! >> 8;
    out[off + 2 * pos + 1] = words[head + w]! & 0xff;
  }
  return true;
}

/** True when bytes[off..off+16) is `::ffff:a.b.c.d` (RFC 4291 section 2.5.5.2). */
export function isV4Mapped(bytes: Uint8Array, off: number): boolean {
  for (let k = 0; k < 10; k++) if (bytes[off + k] !== 0) return false;
  return bytes[off + 10] === 0xff && bytes[off + 11] === 0xff;
}

export function formatIPv4(bytes: Uint8Array, off: number): string {
  return `${bytes[off]}.${bytes[off + 1]}.${bytes[off + 2]}.${bytes[off + 3]}`;
}

/**
 * Canonical text of bytes[off..off+16): v4-mapped becomes the IPv4 address (docs/architecture.md, "Client
 * identity"); otherwise RFC 5952: lower case, no leading zeros, the longest run (>= 2) of zero
 * groups -- the first one on a tie -- replaced by "::".
 */
export function formatIPv6(bytes: Uint8Array, off: number): string {
  if (isV4Mapped(bytes, off)) return formatIPv4(bytes, off + 12);
  let bestStart = -1;
  let bestLen = 1;
  let runStart = -1;
  for (let w = 0; w <= 8; w++) {
    const zero = w < 8 && bytes[off + 2 * w] === 0 && bytes[off + 2 * w + 1] === 0;
    if (zero) {
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
    s += ((bytes[off + 2 * w]! << 8) | bytes[off + 2 * w + 1]!).toString(16);
    if (w < 7) s += ':';
  }
  return s;
}

/**
 * Parses an address string (canonical or not) into out[off..off+16) as IPv6, or out[off..off+4)
 * for IPv4. Returns 4, 6, or 0 when invalid. v4-mapped IPv6 text returns 4 with the IPv4 bytes at
 * out[off..off+4), so a mapped peer is written as the IPv4 client it is.
 */
export function parseIp(text: string, out: Uint8Array, off: number): 0 | 4 | 6 {
  if (text.indexOf(':') < 0) return parseIPv4(text, 0, text.length, out, off) ? 4 : 0;
  if (!parseIPv6(text, 0, text.length, out, off)) return 0;
  if (isV4Mapped(out, off)) {
    out.copyWithin(off, off + 12, off + 16);
    return 4;
  }
  return 6;
}
