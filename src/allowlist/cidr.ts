/**
 * Strict CIDR and address parsing for allowlist entries, trusted-source lists and the admin API.
 *
 * The address is read by the shared scanner (address/scan.ts) and spelt by the shared canonical
 * form (address/canonical.ts), the same as the PROXY decoder, identity and the matcher's lookup.
 * What this file adds is the CIDR (prefix length, host bits, mapped CIDRs) and, when the scanner
 * refuses a text, the sentence saying why: forms an operator may not mean (`10` = 0.0.0.10 and
 * `10.1` = 10.0.0.1 elsewhere, `010.0.0.1` = 8.0.0.1 octal, `0x0a.0.0.1`, zone ids, `::1.2.3.4`
 * read as IPv4-mapped by some parsers). The admin API returns it as the 4xx reason.
 *
 * Parse results are returned values, never exceptions: config loading and the admin API decide
 * what a bad entry means for them.
 */
import { formatV4, formatV6Words } from '../address/canonical';
import { isMappedWords, scanAddress } from '../address/scan';

export interface Cidr {
  readonly family: 4 | 6;
  /** Canonical text: network address (lower-case, RFC 5952 compressed for IPv6) + `/prefix`. */
  readonly text: string;
  readonly prefix: number;
  /** First address of the range as big-endian unsigned 32-bit words: 1 word (IPv4) or 4 (IPv6). */
  readonly start: readonly number[];
  /** Last address of the range, same layout as `start`. */
  readonly end: readonly number[];
}

/**
 * A refusal: `message` quotes the offending text first (`"10.0.0.1/33": prefix length 33 out of
 * range for IPv4`), so every 4xx and log line that carries it names the value (issue 20 item 5).
 */
type ParseFailure = { ok: false; message: string };

type CidrParse = { ok: true; cidr: Cidr } | ParseFailure;

type AddressParse = { ok: true; family: 4 | 6 /** canonical text */; address: string } | ParseFailure;

/**
 * Longest valid input is 49 characters (`ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128`).
 * The cap keeps error messages (which quote the input) bounded for admin API callers.
 */
const MAX_CIDR_TEXT = 64;

const MAX_PREFIX = { 4: 32, 6: 128 } as const;

/**
 * Parse `a.b.c.d/len` or `x:x::x/len`.
 *
 * A bare address without `/len` is accepted as a host route (/32 or /128): operators write
 * `allow 1.2.3.4;` in nginx and expect the same here. The canonical text always carries the
 * prefix (`1.2.3.4/32`). A trailing `/` with nothing after it is still an error: that is a
 * truncated entry, not a host route.
 */
export function parseCidr(text: string): CidrParse {
  const pre = precheck(text, 'CIDR');
  if (pre !== null) return pre;
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  const addr = parseAddressPart(addrText, slash < 0);
  if (typeof addr === 'string') return fail(text, addr);
  const max = MAX_PREFIX[addr.family];
  let prefix: number = max;
  if (slash >= 0) {
    const prefixText = text.slice(slash + 1);
    if (prefixText.length === 0) return fail(text, 'missing prefix length after "/"');
    if (prefixText.includes('/')) return fail(text, 'more than one "/"');
    if (!/^[0-9]+$/.test(prefixText)) {
      return fail(text, `prefix length ${q(prefixText)} is not a decimal number`);
    }
    if (prefixText.length > 1 && prefixText.charCodeAt(0) === 48 /* 0 */) {
      return fail(text, `prefix length ${q(prefixText)} has a leading zero; write ${Number(prefixText)}`);
    }
    prefix = Number(prefixText);
    if (prefix > max) return fail(text, `prefix length ${prefixText} out of range for IPv${addr.family}`);
  }

  if (addr.family === 6 && isMappedWords(addr.words) && prefix >= 96) {
    // The matcher sees an IPv4 client as IPv4 (identity canonicalises ::ffff:a.b.c.d), so a
    // mapped CIDR would never match anything: refuse it and say what to write instead.
    const v4 = maskWords([addr.words[3]!], prefix - 96);
    return fail(
      text,
      'an IPv4-mapped IPv6 CIDR is not allowed (ipgate sees IPv4 clients as IPv4): ' +
        `write it as IPv4 ${formatV4(v4[0]!)}/${prefix - 96}`,
    );
  }

  const start = maskWords(addr.words, prefix);
  if (!sameWords(start, addr.words)) {
    const suggestion = `${formatWords(addr.family, start)}/${prefix}`;
    return fail(text, `host bits set: did you mean ${suggestion}?`);
  }
  const end = lastWords(start, prefix);
  return {
    ok: true,
    cidr: Object.freeze({
      family: addr.family,
      text: `${addr.canonical}/${prefix}`,
      prefix,
      start: Object.freeze(start),
      end: Object.freeze(end),
    }),
  };
}

/**
 * Parse one address with the same rules as `parseCidr`. An IPv4-mapped IPv6 address
 * (`::ffff:1.2.3.4`, also written `::ffff:102:304`) is the IPv4 address, as everywhere in ipgate.
 */
export function parseAddress(text: string): AddressParse {
  const pre = precheck(text, 'address');
  if (pre !== null) return pre;
  if (text.includes('/')) return fail(text, 'a CIDR, not an address');
  const addr = parseAddressPart(text, true);
  if (typeof addr === 'string') return fail(text, addr);
  if (addr.family === 6 && isMappedWords(addr.words)) {
    return { ok: true, family: 4, address: formatV4(addr.words[3]!) };
  }
  return { ok: true, family: addr.family, address: addr.canonical };
}

// ---------------------------------------------------------------------------------------------

/** An address part, or the reason (a string) it is not one. */
type AddressPart = { family: 4 | 6; words: number[]; canonical: string } | string;

/** The refusal of `text`: the text quoted (bounded, see MAX_CIDR_TEXT), then the reason. */
function fail(text: string, reason: string): ParseFailure {
  const shown = text.length > MAX_CIDR_TEXT ? `${q(text.slice(0, MAX_CIDR_TEXT))}...` : q(text);
  return { ok: false, message: `${shown}: ${reason}` };
}

/** Quote operator input for a message; JSON escaping keeps control characters out of logs. */
function q(text: string): string {
  return JSON.stringify(text);
}

/** Checks shared by CIDRs and addresses; null when the text may go on to the real parse. */
function precheck(text: unknown, what: string): ParseFailure | null {
  if (typeof text !== 'string') return { ok: false, message: `${what} must be a string, got ${text === null ? 'null' : typeof text}` };
  if (text.length === 0) return fail(text, `empty ${what}`);
  if (text.length > MAX_CIDR_TEXT) {
    return fail(text, `${what} too long (${text.length} characters, at most ${MAX_CIDR_TEXT})`);
  }
  if (/\s/.test(text)) return fail(text, `${what} contains whitespace`);
  const pct = text.indexOf('%');
  if (pct >= 0) {
    const zone = text.slice(pct).split('/')[0]!;
    return fail(text, `zone id ${q(zone)} is not allowed: an allowlist entry cannot name an interface`);
  }
  return null;
}

// Scanner output; parsing is synchronous, so one is enough.
const scanned = new Uint32Array(4);

/**
 * The address before any "/", read by the shared scanner; when the scanner refuses it, the
 * reason. Reasons name the part only when it is not the whole text.
 */
function parseAddressPart(text: string, whole: boolean): AddressPart {
  if (text.length === 0) return 'missing address before "/"';
  const family = scanAddress(text, scanned);
  if (family === 4) return { family, words: [scanned[0]!], canonical: formatV4(scanned[0]!) };
  if (family === 6) {
    const words = Array.from(scanned);
    // Mapped words are spelt in IPv6 here: the callers refuse or convert them with a message.
    return { family, words, canonical: isMappedWords(words) ? `::ffff:${formatV4(words[3]!)}` : formatV6Words(words) };
  }
  const named = whole ? '' : ` ${q(text)}`;
  return text.includes(':') ? whyNotV6(text, named) : whyNotV4(text, named);
}

/**
 * Why the scanner refused `text` as IPv4. `named`: the part quoted with a leading space, or ''
 * when the part is the whole text (already quoted).
 */
function whyNotV4(text: string, named: string): string {
  const bad = /[^0-9.]/.exec(text);
  if (bad !== null) {
    return `invalid IPv4 address${named}: unexpected character ${q(bad[0])}`;
  }
  const word = dottedQuad(text);
  return `invalid IPv4 address${named}${typeof word === 'string' ? `: ${word}` : ''}`;
}

/**
 * Exactly four decimal octets 0-255 without leading zeros. Returns the unsigned 32-bit value,
 * or the reason (a string) it is not one. Only the explanation of a refusal uses it: the
 * scanner decides (and the unit tests check that the two agree).
 */
function dottedQuad(text: string): number | string {
  const parts = text.split('.');
  if (parts.length !== 4) {
    return (
      `expected four decimal octets a.b.c.d, got ${parts.length}` + ' (short forms like 10/8 or 10.1/16 are ambiguous; write 10.0.0.0/8)'
    );
  }
  let value = 0;
  for (const part of parts) {
    if (part.length === 0) return 'empty octet';
    if (part.length > 1 && part.charCodeAt(0) === 48 /* 0 */) {
      return `octet ${q(part)} has a leading zero (ambiguous: octal or decimal?); write ${Number(part)}`;
    }
    const octet = Number(part);
    if (part.length > 3 || octet > 255) return `octet ${q(part)} is greater than 255`;
    value = value * 256 + octet;
  }
  return value;
}

/** Why the scanner refused `text` as IPv6 (see whyNotV4). */
function whyNotV6(text: string, named: string): string {
  const bad = /[^0-9a-fA-F:.]/.exec(text);
  if (bad !== null) {
    return `invalid IPv6 address${named}: unexpected character ${q(bad[0])}`;
  }
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = dottedQuad(tail);
    if (typeof v4 === 'string') return `invalid IPv6 address${named}: embedded IPv4 ${q(tail)}: ${v4}`;
    if (lastColon === 1 && text.startsWith('::')) {
      // RFC 4291 2.5.5.1 deprecated "IPv4-compatible" form. RFC parsers read ::1.2.3.4 as
      // ::102:304, ipaddr.js reads it as ::ffff:1.2.3.4: two meanings, so accept neither.
      const hex = formatWords(6, [0, 0, 0, v4]);
      return (
        `the deprecated IPv4-compatible form${named} (RFC 4291 2.5.5.1), read ` +
        `differently by different parsers: write IPv4 ${tail}, or ${hex} if the IPv6 address is meant`
      );
    }
  }
  return `invalid IPv6 address${named}`;
}

/** Words with every bit after `prefix` cleared. */
function maskWords(words: readonly number[], prefix: number): number[] {
  return words.map((w, i) => (w & wordMask(prefix - 32 * i)) >>> 0);
}

/** Words with every bit after `prefix` set: the last address of the range. */
function lastWords(start: readonly number[], prefix: number): number[] {
  return start.map((w, i) => (w | ~wordMask(prefix - 32 * i)) >>> 0);
}

/** Mask for a 32-bit word of which the first `bits` (clamped to 0..32) belong to the network. */
function wordMask(bits: number): number {
  if (bits <= 0) return 0;
  if (bits >= 32) return 0xffffffff;
  return (0xffffffff << (32 - bits)) >>> 0;
}

function sameWords(a: readonly number[], b: readonly number[]): boolean {
  return a.every((w, i) => w === b[i]);
}

function formatWords(family: 4 | 6, words: readonly number[]): string {
  return family === 4 ? formatV4(words[0]!) : formatV6Words(words);
}
