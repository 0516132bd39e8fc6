/**
 * The one rule for a host name a route can match on: used by the route table for the hosts in
 * its config and by the ClientHello reader for the SNI it reports, so a name the reader hands to
 * the router is always one the config could have written (docs/routes-and-sni.md, "Host names").
 *
 * A host name here is a DNS name in "preferred name syntax" (RFC 1123 section 2.1) widened by the
 * underscore, which real internal names carry (`_acme`-style service names, some cluster DNS):
 *   - 1..253 characters, labels of 1..63 characters separated by single dots;
 *   - each label of A-Z a-z 0-9 '-' '_', not starting or ending with '-';
 *   - not an IP literal: RFC 6066 section 3 "Literal IPv4 and IPv6 addresses are not permitted in
 *     HostName". IPv6 is excluded by the character set; IPv4 in any spelling a resolver or URL
 *     parser would take as an address (1.2.3.4, 127.1, 2130706433, 0x7f.1) is caught by the
 *     WHATWG URL rule "a host whose last label is a number is an IPv4 address" (no top-level
 *     domain is numeric).
 * Case is not checked here; callers lower-case (DNS names compare case-insensitively). A trailing
 * dot is not part of the name: callers decide whether to strip it (lookups) or refuse it (config).
 */

/** RFC 1035 section 2.3.4 ("255 octets or less" on the wire = 253 characters of text). */
export const MAX_HOST_NAME_LENGTH = 253;
/** RFC 1035 section 2.3.4, "63 octets or less" per label. */
const MAX_LABEL_LENGTH = 63;

const HYPHEN = 0x2d;
const DOT = 0x2e;

/** Character classes by char code: 1 = letter, digit, '_'; 2 = '-'; 0 = anything else. */
const CLASS = new Uint8Array(128);
for (let c = 0x30; c <= 0x39; c++) CLASS[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) CLASS[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) CLASS[c] = 1;
CLASS[0x5f] = 1;
CLASS[HYPHEN] = 2;

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isHex(c: number): boolean {
  return isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

/** True when text[from, to) is a label an IPv4 parser reads as a number (decimal, 0x-hex). */
function numericLabel(text: string, from: number, to: number): boolean {
  if (to - from >= 2 && text.charCodeAt(from) === 0x30 && (text.charCodeAt(from + 1) | 0x20) === 0x78) {
    for (let k = from + 2; k < to; k++) if (!isHex(text.charCodeAt(k))) return false;
    return true;
  }
  for (let k = from; k < to; k++) if (!isDigit(text.charCodeAt(k))) return false;
  return true;
}

/**
 * Why `name` (its first `length` characters: a Host value's name part is read in place, without
 * a copy) is not a host name, or null when it is. The sentence is meant to follow a quoted value
 * in an error message.
 */
export function hostNameProblem(name: string, length = name.length): string | null {
  if (length === 0) return 'is empty';
  if (length > MAX_HOST_NAME_LENGTH) return `is ${length} characters long (at most ${MAX_HOST_NAME_LENGTH})`;
  let labelStart = 0;
  for (let k = 0; k <= length; k++) {
    const c = k === length ? DOT : name.charCodeAt(k);
    if (c === DOT) {
      const labelLength = k - labelStart;
      if (labelLength === 0) return k === length ? 'ends with a dot' : 'has an empty label (two dots, or a leading dot)';
      if (labelLength > MAX_LABEL_LENGTH) return `has a label of ${labelLength} characters (at most ${MAX_LABEL_LENGTH})`;
      if (name.charCodeAt(labelStart) === HYPHEN || name.charCodeAt(k - 1) === HYPHEN) return 'has a label that starts or ends with "-"';
      if (k === length && numericLabel(name, labelStart, k)) return 'is an IP address, not a host name';
      labelStart = k + 1;
      continue;
    }
    if (c >= 128 || CLASS[c] === 0) {
      return c >= 128
        ? 'has a non-ASCII character (write internationalised names in their xn-- form)'
        : `has the character ${JSON.stringify(String.fromCharCode(c))} (only letters, digits, "-", "_" and dots)`;
    }
  }
  return null;
}

/**
 * ASCII-only lower-casing. String#toLowerCase maps U+212A KELVIN SIGN to "k" (and U+0130 to
 * "i" + a combining dot), which would let a non-ASCII name equal an ASCII one; it is used only
 * when every character is ASCII, where it is the same mapping and faster.
 */
export function asciiLower(text: string): string {
  let upper = false;
  let wide = false;
  for (let k = 0; k < text.length; k++) {
    const c = text.charCodeAt(k);
    if (c >= 0x41 && c <= 0x5a) upper = true;
    else if (c >= 0x80) wide = true;
  }
  if (!upper) return text;
  if (!wide) return text.toLowerCase();
  let out = '';
  for (let k = 0; k < text.length; k++) {
    const c = text.charCodeAt(k);
    out += c >= 0x41 && c <= 0x5a ? String.fromCharCode(c | 0x20) : text[k];
  }
  return out;
}
