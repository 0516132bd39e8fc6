/**
 * PROXY protocol v1, the human-readable line (HAProxy doc/proxy-protocol.txt section 2.1):
 *
 *   PROXY TCP4|TCP6 <src addr> <dst addr> <src port> <dst port>\r\n
 *   PROXY UNKNOWN[ <anything>]\r\n
 *
 * Strict on purpose. docs/architecture.md: HAProxy "accepts some malformed v1 lines; ipgate must do neither".
 * "Any sequence which does not exactly match the protocol must be discarded and cause the
 * receiver to abort the connection. It is recommended to abort the connection as soon as possible"
 * -- so every call re-scans what has arrived (at most 107 bytes) and rejects a field as soon as no
 * continuation could make it valid, instead of waiting for the CRLF.
 *
 * Error messages are fixed strings: they name the field, never echo peer bytes (log injection).
 */
import { Buffer } from 'node:buffer';
import { V1_MAX_LENGTH, V1_SIGNATURE } from './constants';
import { fail, MORE, NONE } from './header';
import type { DecodeResult, ProxyHeader } from './header';
import { formatV6Words } from '../address/canonical';
import { IPV4_TEXT_MAX, IPV6_TEXT_MAX, scanAddress, scanIPv4 } from '../address/scan';

const SP = 0x20;
const CR = 0x0d;
const LF = 0x0a;
const DOT = 0x2e;
const COLON = 0x3a;
const ZERO = 0x30;
const NINE = 0x39;
const PERCENT = 0x25;

const FIELD_FAMILY = 0;
const FIELD_SRC_ADDR = 1;
const FIELD_DST_ADDR = 2;
const FIELD_SRC_PORT = 3;
const FIELD_DST_PORT = 4;

/** "only "TCP4" ... and "TCP6" ... are allowed. Other ... must be reported with "UNKNOWN"". */
const FAMILY_TCP4 = Buffer.from('TCP4', 'latin1');
const FAMILY_TCP6 = Buffer.from('TCP6', 'latin1');
const FAMILY_UNKNOWN = Buffer.from('UNKNOWN', 'latin1');
const FAMILY_WORDS = [FAMILY_TCP4, FAMILY_TCP6, FAMILY_UNKNOWN];

const MAX_PORT_DIGITS = 5;
const MAX_PORT = 65535;

// Scanner output (address/scan.ts); safe to share because decoding is synchronous.
const scratch = new Uint32Array(4);

function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

function isHex(c: number): boolean {
  return (c >= ZERO && c <= NINE) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

/** buf[start, end) equals `word`, or (when `prefix`) is a prefix of it. */
function matchesWord(buf: Buffer, start: number, end: number, word: Buffer, prefix: boolean): boolean {
  const n = end - start;
  if (prefix ? n > word.length : n !== word.length) return false;
  for (let k = 0; k < n; k++) if (buf[start + k] !== word[k]) return false;
  return true;
}

/**
 * A port: "a decimal integer in the range [0..65535] inclusive. Heading zeroes are not permitted".
 * Port 0 is accepted: the spec's range includes it and HAProxy accepts it. Returns -1 if invalid;
 * with `partial`, only rejects what no further digit could fix (returns 0 when still possible).
 */
function parsePort(buf: Buffer, start: number, end: number, partial: boolean): number {
  const n = end - start;
  if (n > MAX_PORT_DIGITS) return -1;
  if (n > 1 && buf[start] === ZERO) return -1;
  let value = 0;
  for (let k = start; k < end; k++) {
    const c = buf[k]!;
    if (!isDigit(c)) return -1;
    value = value * 10 + (c - ZERO);
  }
  if (value > MAX_PORT) return -1;
  if (!partial && n === 0) return -1;
  return value;
}

/** Could buf[start, end) still grow into a valid IPv4 text? (digits, <= 3 dots, octet rules) */
function ipv4PrefixPossible(buf: Buffer, start: number, end: number): boolean {
  if (end - start > IPV4_TEXT_MAX) return false;
  let dots = 0;
  let octetStart = start;
  let value = 0;
  for (let k = start; k < end; k++) {
    const c = buf[k]!;
    if (c === DOT) {
      if (k === octetStart || ++dots > 3) return false;
      octetStart = k + 1;
      value = 0;
      continue;
    }
    if (!isDigit(c)) return false;
    if (k > octetStart && buf[octetStart] === ZERO) return false; // heading zero
    value = value * 10 + (c - ZERO);
    if (value > 255) return false;
  }
  return true;
}

/** Could buf[start, end) still grow into a valid IPv6 text? (charset and length only) */
function ipv6PrefixPossible(buf: Buffer, start: number, end: number): boolean {
  if (end - start > IPV6_TEXT_MAX) return false;
  for (let k = start; k < end; k++) {
    const c = buf[k]!;
    if (!isHex(c) && c !== COLON && c !== DOT) return false;
  }
  return true;
}

function addressError(family: 4 | 6, buf: Buffer, start: number, end: number, field: number): DecodeResult {
  const which = field === FIELD_SRC_ADDR ? 'source' : 'destination';
  for (let k = start; k < end; k++) {
    if (buf[k] === PERCENT) return fail('pp_bad_address', `v1 ${which} address has a zone id`);
    if (family === 4 && buf[k] === COLON) return fail('pp_bad_address', `v1 TCP4 ${which} address is not IPv4`);
  }
  return family === 4
    ? fail('pp_bad_address', `v1 ${which} address is not a dotted-quad IPv4 (0..255, no heading zeros)`)
    : fail('pp_bad_address', `v1 ${which} address is not valid IPv6 text`);
}

/** The token at `field` is incomplete: reject it now if no continuation could make it valid. */
function checkPartial(field: number, family: 0 | 4 | 6, buf: Buffer, start: number, end: number): DecodeResult | null {
  switch (field) {
    case FIELD_FAMILY:
      for (const word of FAMILY_WORDS) if (matchesWord(buf, start, end, word, true)) return null;
      return fail('pp_bad_family', 'v1 protocol is not TCP4, TCP6 or UNKNOWN');
    case FIELD_SRC_ADDR:
    case FIELD_DST_ADDR: {
      const possible = family === 4 ? ipv4PrefixPossible(buf, start, end) : ipv6PrefixPossible(buf, start, end);
      return possible ? null : addressError(family === 4 ? 4 : 6, buf, start, end, field);
    }
    default:
      return parsePort(buf, start, end, true) < 0 ? fail('pp_bad_port', 'v1 port is not 0..65535 without heading zeros') : null;
  }
}

/**
 * buf[pos] is the CR that should end the line: null when the LF follows (the line is pos + 2
 * bytes), else the answer to return.
 */
function checkEndOfLine(buf: Buffer, pos: number): DecodeResult | null {
  // The LF would be byte pos + 1; the whole line including CRLF must fit in 107 bytes.
  if (pos + 1 >= V1_MAX_LENGTH) return fail('pp_too_long', 'v1 line has no CRLF within 107 bytes');
  if (pos + 1 >= buf.length) return MORE;
  // "The receiver must not tolerate a single CR or LF character to end the line".
  if (buf[pos + 1] !== LF) return fail('pp_bad_crlf', 'v1 line has a CR not followed by LF');
  return null;
}

function unknownDone(buf: Buffer, pos: number): DecodeResult {
  const notDone = checkEndOfLine(buf, pos);
  if (notDone !== null) return notDone;
  const header: ProxyHeader = { version: 1, command: 'proxy', family: 'unknown', source: null, destination: null, tlvs: [] };
  return { kind: 'done', header, length: pos + 2 };
}

/**
 * `PROXY UNKNOWN` then either CRLF, or a space and anything printable up to CRLF: "the rest of
 * the line before the CRLF may be omitted by the sender, and the receiver must ignore anything
 * presented before the CRLF is found". Ignored, but still a US-ASCII line: control bytes and a
 * lone LF are rejected. buf[pos] is the byte after "UNKNOWN".
 */
function decodeUnknownRest(buf: Buffer, pos: number, limit: number): DecodeResult {
  const c = buf[pos]!;
  if (c === CR) return unknownDone(buf, pos);
  if (c === LF) return fail('pp_bad_crlf', 'v1 line ends with a lone LF');
  if (c !== SP) return fail('pp_bad_syntax', 'v1 UNKNOWN is followed by a byte that is not a space or CRLF');
  for (let k = pos + 1; k < limit; k++) {
    const b = buf[k]!;
    if (b === CR) return unknownDone(buf, k);
    if (b === LF) return fail('pp_bad_crlf', 'v1 line ends with a lone LF');
    if (b < SP || b > 0x7e) return fail('pp_bad_syntax', 'v1 line holds a non-printable byte');
  }
  return limit === V1_MAX_LENGTH ? fail('pp_too_long', 'v1 line has no CRLF within 107 bytes') : MORE;
}

/**
 * Decodes a v1 line at the start of buf. Precondition: buf.length >= 1 and buf[0] is 'P'.
 * Never reads past buf.length nor past 107 bytes.
 */
export function decodeV1(buf: Buffer): DecodeResult {
  const sigLength = V1_SIGNATURE.length;
  const seen = Math.min(buf.length, sigLength);
  for (let k = 0; k < seen; k++) if (buf[k] !== V1_SIGNATURE[k]) return NONE;
  if (buf.length <= sigLength) return MORE;
  // "PROXY" identifies v1; from here on a mismatch is a malformed header, not plain traffic.
  if (buf[sigLength] !== SP) return fail('pp_bad_signature', 'v1 "PROXY" is not followed by exactly one space');

  const limit = Math.min(buf.length, V1_MAX_LENGTH);
  let family: 0 | 4 | 6 = 0;
  let source = '';
  let destination = '';
  let sourcePort = 0;
  let destinationPort = 0;
  let field = FIELD_FAMILY;
  let pos = sigLength + 1;

  for (;;) {
    const start = pos;
    while (pos < limit) {
      const c = buf[pos]!;
      if (c <= SP || c > 0x7e) break;
      pos++;
    }
    if (pos === limit) {
      const partial = checkPartial(field, family, buf, start, pos);
      if (partial !== null) return partial;
      return limit === V1_MAX_LENGTH ? fail('pp_too_long', 'v1 line has no CRLF within 107 bytes') : MORE;
    }
    const terminator = buf[pos]!;
    if (pos === start) {
      if (terminator === LF) return fail('pp_bad_crlf', 'v1 line ends with a lone LF');
      // "exactly one space" between fields: an empty field is a double, leading or trailing space.
      return fail('pp_bad_syntax', 'v1 line has an empty field (double, leading or trailing space)');
    }

    switch (field) {
      case FIELD_FAMILY:
        if (matchesWord(buf, start, pos, FAMILY_TCP4, false)) family = 4;
        else if (matchesWord(buf, start, pos, FAMILY_TCP6, false)) family = 6;
        else if (matchesWord(buf, start, pos, FAMILY_UNKNOWN, false)) return decodeUnknownRest(buf, pos, limit);
        else return fail('pp_bad_family', 'v1 protocol is not TCP4, TCP6 or UNKNOWN');
        break;
      case FIELD_SRC_ADDR:
      case FIELD_DST_ADDR: {
        // "The advertised protocol family dictates what format to use."
        const text = buf.toString('latin1', start, pos);
        let canonical: string;
        if (family === 4) {
          // Strictly valid dotted-quad text is already canonical.
          if (scanIPv4(text, 0, text.length) < 0) return addressError(4, buf, start, pos, field);
          canonical = text;
        } else {
          if (scanAddress(text, scratch) !== 6) return addressError(6, buf, start, pos, field);
          canonical = formatV6Words(scratch);
        }
        if (field === FIELD_SRC_ADDR) source = canonical;
        else destination = canonical;
        break;
      }
      default: {
        const port = parsePort(buf, start, pos, false);
        if (port < 0) return fail('pp_bad_port', 'v1 port is not 0..65535 without heading zeros');
        if (field === FIELD_SRC_PORT) sourcePort = port;
        else destinationPort = port;
      }
    }

    if (terminator === SP) {
      if (field === FIELD_DST_PORT) return fail('pp_bad_syntax', 'v1 line has a field after the destination port');
      field++;
      pos++;
      continue;
    }
    if (terminator === CR) {
      if (field !== FIELD_DST_PORT) return fail('pp_bad_syntax', 'v1 line ends before the destination port');
      const notDone = checkEndOfLine(buf, pos);
      if (notDone !== null) return notDone;
      const header: ProxyHeader = {
        version: 1,
        command: 'proxy',
        family: family === 4 ? 'tcp4' : 'tcp6',
        source: { address: source, port: sourcePort },
        destination: { address: destination, port: destinationPort },
        tlvs: [],
      };
      return { kind: 'done', header, length: pos + 2 };
    }
    if (terminator === LF) return fail('pp_bad_crlf', 'v1 line ends with a lone LF');
    return fail('pp_bad_syntax', 'v1 line holds a non-printable byte');
  }
}
