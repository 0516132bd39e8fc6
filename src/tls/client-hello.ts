/**
 * readClientHello: the SNI routing stage's reader of a TLS ClientHello, without terminating TLS
 * (docs/routes-and-sni.md). It looks at the first bytes of a connection (after any PROXY header)
 * and says which name and protocols the client asks for; it consumes nothing, the bytes go to the
 * chosen backend untouched.
 *
 * Stateless over the bytes received so far, as decodeProxyHeader is: the listener appends each
 * chunk and calls again with the concatenation. It returns a value for every input -- need_more /
 * done / error -- never throws, never reads past buf.length, and never modifies buf.
 *
 * Wire format (RFC 8446 section 5.1 records, 4.1.2 ClientHello; RFC 5246 7.4.1.2 is the same
 * layout for TLS 1.2):
 *
 *   record    type[1] = 22 (handshake) · legacy_record_version[2] = 03 xx · length[2] (1..2^14)
 *             fragment[length]             -- a handshake message may span several records
 *   handshake msg_type[1] = 1 (client_hello) · length[3]
 *   hello     legacy_version[2] · random[32] · session_id<0..32> · cipher_suites<2..2^16-2>
 *             · compression_methods<1..2^8-1> · extensions<8..2^16-1> (absent in old TLS 1.2)
 *   extension type[2] · length[2] · data
 *
 * Early answers: the record header and the handshake header are checked as their bytes arrive
 * (not TLS, SSLv2, not a ClientHello, a declared length above the caps), so a peer that will
 * never send a valid hello is closed without waiting for it; the body is parsed once complete.
 * While incomplete, a call costs one step per record header, not per byte.
 *
 * Strictness is deliberate: the router decides the backend and the allowlist from what this
 * reader says, and the backend then reads the same bytes. Any hello two parsers could read
 * differently (two names, duplicate extensions, bytes after the message) is refused rather than
 * interpreted, so ipgate and the backend cannot disagree on the name (docs/routes-and-sni.md).
 */
import { Buffer } from 'node:buffer';
import { asciiLower, hostNameProblem } from '../route/host-name';
import type { TlsReason } from './codes';

export type { TlsReason } from './codes';

/** RFC 8446 5.1: "The length MUST NOT exceed 2^14 bytes" (record_overflow otherwise). */
const MAX_RECORD_LENGTH = 16384;
/**
 * Default cap on the ClientHello's declared length (the handshake body). Threat: a peer that
 * declares a 16 MiB hello makes the router buffer it before any backend is chosen, one buffer per
 * connection. Real hellos are 0.5-2 KB (browsers pad to 512; an X25519MLKEM768 key share adds
 * 1.2 KB); 16 KiB leaves room for several post-quantum key shares and is what one full record
 * holds, the same budget as nginx's `preread_buffer_size` default (16k).
 */
export const DEFAULT_MAX_HELLO_LENGTH = 16384;
/**
 * Record headers allowed on top of the hello in the wire cap: maxHelloLength + 4 + 5 * 64 bytes
 * is all the reader ever asks the listener to hold. A hello cut into tiny records (some
 * censorship-evasion clients do, to hide the SNI from middleboxes) passes while its records
 * fit; a stream of 1-byte records cannot grow the buffer past the cap.
 */
const WIRE_SLACK_RECORDS = 64;

const RECORD_HEADER_LENGTH = 5;
const HANDSHAKE_HEADER_LENGTH = 4;
/** legacy_version + random + session_id length + 2-byte cipher list length + one suite + 1 + 1 method. */
const MIN_HELLO_LENGTH = 2 + 32 + 1 + 2 + 2 + 1 + 1;

const CONTENT_HANDSHAKE = 22;
const HANDSHAKE_CLIENT_HELLO = 1;
const EXT_SERVER_NAME = 0;
const EXT_ALPN = 16;
const EXT_EARLY_DATA = 42;
const EXT_SUPPORTED_VERSIONS = 43;
const EXT_ENCRYPTED_CLIENT_HELLO = 0xfe0d;
const NAME_TYPE_HOST_NAME = 0;

export interface ReadOptions {
  /** Cap on the ClientHello's declared length in bytes (default DEFAULT_MAX_HELLO_LENGTH = 16384). */
  maxHelloLength?: number;
}

export type ClientHelloResult =
  /** A valid prefix of a ClientHello: call again with more bytes appended. */
  | { kind: 'need_more' }
  | {
      kind: 'done';
      /**
       * server_name's host_name: lower-cased, one trailing dot removed, validated by
       * route/host-name.ts; null when the client sent no server_name extension.
       */
      sni: string | null;
      /** ALPN protocol ids in the client's order (bytes as latin1); [] without the extension. */
      alpn: string[];
      /** ClientHello.legacy_version (0x0303 from TLS 1.2 and 1.3 clients). */
      legacyVersion: number;
      /** The supported_versions extension in order, GREASE values left out; [] without it. */
      supportedVersions: number[];
      /** Highest version offered: max(supportedVersions) or, without it, legacyVersion. */
      maxVersion: number;
      /** The first record's legacy_record_version (0x0301 or 0x0303 in practice). */
      recordVersion: number;
      /** encrypted_client_hello present: `sni` is then the outer (public) name. */
      ech: boolean;
      /**
       * early_data present (RFC 8446 4.2.10): the client may send 0-RTT application_data records
       * right after this hello, before the server's answer.
       */
      earlyData: boolean;
      /** Bytes of the records that carry the ClientHello (headers included), <= buf.length. */
      length: number;
      /** Always 0: the reader only looks; every byte is forwarded to the backend untouched. */
      consumed: 0;
    }
  | { kind: 'error'; reason: TlsReason; message: string };

export type ClientHelloDone = Extract<ClientHelloResult, { kind: 'done' }>;

/** Shared and frozen: the answer that carries no data is allocated once. */
export const NEED_MORE: ClientHelloResult = Object.freeze({ kind: 'need_more' });

function fail(reason: TlsReason, message: string): ClientHelloResult {
  return { kind: 'error', reason, message };
}

function u16(b: Buffer, i: number): number {
  return (b[i]! << 8) | b[i + 1]!;
}

function hex(n: number, digits: number): string {
  return `0x${n.toString(16).padStart(digits, '0')}`;
}

/** "TLSv1.3" for 0x0304, as Node's TLSSocket#getProtocol() spells them; hex otherwise. */
export function tlsVersionName(version: number): string {
  switch (version) {
    case 0x0300:
      return 'SSLv3';
    case 0x0301:
      return 'TLSv1';
    case 0x0302:
      return 'TLSv1.1';
    case 0x0303:
      return 'TLSv1.2';
    case 0x0304:
      return 'TLSv1.3';
    default:
      return hex(version, 4);
  }
}

/** RFC 8701: GREASE values are 0x?A?A with both bytes equal. */
function isGrease(v: number): boolean {
  return (v & 0x0f0f) === 0x0a0a && v >> 8 === (v & 0xff);
}

export function readClientHello(buf: Buffer, options?: ReadOptions): ClientHelloResult {
  const n = buf.length;
  if (n === 0) return NEED_MORE;
  const first = buf[0]!;
  if (first !== CONTENT_HANDSHAKE) {
    // SSLv2 two-byte record header: high bit set, then msg_type CLIENT-HELLO (1) at offset 2.
    if ((first & 0x80) !== 0) {
      if (n < 3) return NEED_MORE;
      if (buf[2] === 1) return fail('tls_sslv2', 'SSL 2.0-compatible ClientHello (two-byte record header, msg_type 1)');
    }
    return fail('tls_not_handshake', `first byte ${hex(first, 2)} is not a handshake record (22)`);
  }
  const maxHello = options?.maxHelloLength ?? DEFAULT_MAX_HELLO_LENGTH;
  const maxWire = maxHello + HANDSHAKE_HEADER_LENGTH + RECORD_HEADER_LENGTH * WIRE_SLACK_RECORDS;

  let pos = 0; // start of the current record
  let records = 0;
  let got = 0; // handshake bytes in complete records so far
  let headerSeen = 0; // bytes of the 4-byte handshake header seen
  let declared = 0;
  let helloLength = -1;
  for (;;) {
    if (pos >= n) return NEED_MORE;
    if (buf[pos] !== CONTENT_HANDSHAKE) {
      // RFC 8446 5.1: handshake messages "MUST NOT be interleaved with other record types".
      return fail('tls_malformed', `record ${records} has content type ${buf[pos]} inside the ClientHello`);
    }
    if (pos + 1 >= n) return NEED_MORE;
    if (buf[pos + 1] !== 3) {
      return records === 0
        ? fail('tls_not_handshake', `record version major ${buf[pos + 1]} is not 3`)
        : fail('tls_malformed', `record ${records} has version major ${buf[pos + 1]}`);
    }
    if (pos + RECORD_HEADER_LENGTH > n) return NEED_MORE;
    const recordLength = u16(buf, pos + 3);
    // RFC 8446 5.1: "Implementations MUST NOT send zero-length fragments of Handshake types".
    if (recordLength === 0) return fail('tls_malformed', `record ${records} is an empty handshake fragment`);
    if (recordLength > MAX_RECORD_LENGTH)
      return fail('tls_record_overflow', `record ${records} declares ${recordLength} bytes (at most ${MAX_RECORD_LENGTH})`);
    const end = pos + RECORD_HEADER_LENGTH + recordLength;
    if (end > maxWire) return fail('tls_too_large', `the ClientHello's records reach byte ${end} (at most ${maxWire})`);

    // The handshake header may itself be split across records: take its bytes as they come.
    const avail = Math.min(end, n);
    for (let i = pos + RECORD_HEADER_LENGTH; headerSeen < HANDSHAKE_HEADER_LENGTH && i < avail; i++, headerSeen++) {
      const byte = buf[i]!;
      if (headerSeen === 0) {
        if (byte !== HANDSHAKE_CLIENT_HELLO) return fail('tls_not_client_hello', `handshake message type ${byte} is not client_hello (1)`);
      } else {
        declared = (declared << 8) | byte;
      }
    }
    if (helloLength < 0 && headerSeen === HANDSHAKE_HEADER_LENGTH) {
      if (declared > maxHello) return fail('tls_too_large', `the ClientHello declares ${declared} bytes (maxHelloLength ${maxHello})`);
      if (declared < MIN_HELLO_LENGTH)
        return fail('tls_malformed', `the ClientHello declares ${declared} bytes (a minimal one has ${MIN_HELLO_LENGTH})`);
      helloLength = declared;
    }
    if (end > n) return NEED_MORE;
    got += recordLength;
    records++;
    pos = end;
    if (helloLength >= 0 && got >= HANDSHAKE_HEADER_LENGTH + helloLength) {
      const extra = got - HANDSHAKE_HEADER_LENGTH - helloLength;
      // RFC 8446 5.1: a ClientHello must end on a record boundary (a key change may follow it).
      if (extra > 0) return fail('tls_malformed', `${extra} bytes follow the ClientHello in its last record`);
      break;
    }
  }

  const recordVersion = u16(buf, 1);
  if (records === 1) {
    const start = RECORD_HEADER_LENGTH + HANDSHAKE_HEADER_LENGTH;
    return parseHello(buf, start, start + helloLength, recordVersion, pos);
  }
  // Split across records: copy the fragments into one body (at most maxHello bytes, checked).
  const body = Buffer.allocUnsafe(helloLength);
  let skip = HANDSHAKE_HEADER_LENGTH;
  let written = 0;
  for (let p = 0; p < pos; ) {
    const fragmentEnd = p + RECORD_HEADER_LENGTH + u16(buf, p + 3);
    let from = p + RECORD_HEADER_LENGTH;
    if (skip > 0) {
      const k = Math.min(skip, fragmentEnd - from);
      from += k;
      skip -= k;
    }
    written += buf.copy(body, written, from, fragmentEnd);
    p = fragmentEnd;
  }
  return parseHello(body, 0, helloLength, recordVersion, pos);
}

/**
 * Extension types seen in the hello being parsed (RFC 8446 4.2: "There MUST NOT be more than one
 * extension of the same type"): a 65,536-bit set, reset after each parse from `seenList`. Parsing
 * is synchronous, so one per process is enough and no per-call allocation is needed.
 */
const seenBits = new Uint32Array(2048);
const seenList = new Uint16Array(16384);

let seenCount = 0;

function clearSeen(): void {
  for (let k = 0; k < seenCount; k++) seenBits[seenList[k]! >>> 5] = 0;
  seenCount = 0;
}

function parseHello(b: Buffer, start: number, end: number, recordVersion: number, length: number): ClientHelloResult {
  // parseBody cannot throw (every read is bounds-checked); clearing first as well keeps one
  // unforeseen throw from poisoning every later parse with a false "appears twice".
  clearSeen();
  const result = parseBody(b, start, end, recordVersion, length);
  clearSeen();
  return result;
}

function parseBody(b: Buffer, start: number, end: number, recordVersion: number, length: number): ClientHelloResult {
  // MIN_HELLO_LENGTH guarantees the fixed part up to the session_id length byte.
  let p = start;
  const legacyVersion = u16(b, p);
  if (b[p] !== 3) return fail('tls_malformed', `legacy_version ${hex(legacyVersion, 4)} is not 3.x`);
  p += 2 + 32;
  const sessionIdLength = b[p++]!;
  if (sessionIdLength > 32) return fail('tls_malformed', `session_id length ${sessionIdLength} (at most 32)`);
  p += sessionIdLength;
  if (p + 2 > end) return fail('tls_malformed', 'the ClientHello ends inside session_id');
  const suitesLength = u16(b, p);
  p += 2;
  if (suitesLength < 2 || (suitesLength & 1) !== 0)
    return fail('tls_malformed', `cipher_suites length ${suitesLength} is not a positive even number`);
  p += suitesLength;
  if (p + 1 > end) return fail('tls_malformed', 'the ClientHello ends inside cipher_suites');
  const methodsLength = b[p++]!;
  if (methodsLength < 1) return fail('tls_malformed', 'compression_methods is empty');
  p += methodsLength;
  if (p > end) return fail('tls_malformed', 'the ClientHello ends inside compression_methods');

  let sni: string | null = null;
  let alpn: string[] = [];
  let supportedVersions: number[] = [];
  let ech = false;
  let earlyData = false;
  if (p < end) {
    if (p + 2 > end) return fail('tls_malformed', 'one byte where the extensions length belongs');
    const extensionsLength = u16(b, p);
    p += 2;
    if (p + extensionsLength !== end)
      return fail('tls_malformed', `extensions length ${extensionsLength} does not fill the ${end - p} bytes left`);
    while (p < end) {
      if (p + 4 > end) return fail('tls_malformed', 'the extensions end inside an extension header');
      const type = u16(b, p);
      const dataLength = u16(b, p + 2);
      const data = p + 4;
      const dataEnd = data + dataLength;
      if (dataEnd > end) return fail('tls_malformed', `extension ${type} overruns the ClientHello`);
      const word = type >>> 5;
      const bit = 1 << (type & 31);
      if ((seenBits[word]! & bit) !== 0) return fail('tls_malformed', `extension ${type} appears twice`);
      seenBits[word]! |= bit;
      seenList[seenCount++] = type;
      switch (type) {
        case EXT_SERVER_NAME: {
          const r = readServerName(b, data, dataEnd);
          if (typeof r !== 'string') return r;
          sni = r;
          break;
        }
        case EXT_ALPN: {
          const r = readAlpn(b, data, dataEnd);
          if (!Array.isArray(r)) return r;
          alpn = r;
          break;
        }
        case EXT_SUPPORTED_VERSIONS: {
          const r = readSupportedVersions(b, data, dataEnd);
          if (!Array.isArray(r)) return r;
          supportedVersions = r;
          break;
        }
        case EXT_ENCRYPTED_CLIENT_HELLO:
          ech = true;
          break;
        case EXT_EARLY_DATA:
          earlyData = true;
          break;
        default:
          break;
      }
      p = dataEnd;
    }
  }
  let maxVersion = supportedVersions.length === 0 ? legacyVersion : 0;
  for (const v of supportedVersions) if (v > maxVersion) maxVersion = v;
  return { kind: 'done', sni, alpn, legacyVersion, supportedVersions, maxVersion, recordVersion, ech, earlyData, length, consumed: 0 };
}

/**
 * RFC 6066 section 3: server_name_list<1..2^16-1> of {name_type[1], HostName<1..2^16-1>}.
 * Exactly one host_name entry is accepted, as OpenSSL does (it treats other name types and a
 * second entry as a decode error): "The ServerNameList MUST NOT contain more than one name of
 * the same name_type", and no other name type was ever defined.
 */
function readServerName(b: Buffer, p: number, end: number): string | ClientHelloResult {
  if (end - p < 2) return fail('tls_malformed', 'server_name extension shorter than its list length');
  const listLength = u16(b, p);
  if (p + 2 + listLength !== end)
    return fail('tls_malformed', `server_name list length ${listLength} does not match the extension's ${end - p - 2}`);
  p += 2;
  if (end - p < 3) return fail('tls_malformed', 'server_name list too short for one entry');
  const nameType = b[p]!;
  if (nameType !== NAME_TYPE_HOST_NAME) return fail('tls_bad_sni', `server_name name_type ${nameType} is not host_name (0)`);
  const nameLength = u16(b, p + 1);
  const nameStart = p + 3;
  const nameEnd = nameStart + nameLength;
  if (nameEnd > end) return fail('tls_malformed', 'the host_name overruns the server_name list');
  if (nameEnd < end) return fail('tls_bad_sni', 'server_name holds more than one entry');
  if (nameLength === 0) return fail('tls_bad_sni', 'server_name host_name is empty');
  // latin1 keeps every byte as one character, so a non-ASCII byte is seen (and refused) as such.
  let name = b.toString('latin1', nameStart, nameEnd);
  // RFC 6066: "without a trailing dot"; some clients send one anyway and it names the same host.
  if (name.charCodeAt(name.length - 1) === 0x2e) name = name.slice(0, -1);
  const problem = hostNameProblem(name);
  if (problem !== null)
    return fail('tls_bad_sni', `server_name ${JSON.stringify(name.length > 80 ? `${name.slice(0, 77)}...` : name)} ${problem}`);
  return asciiLower(name);
}

/** RFC 7301 3.1: ProtocolNameList protocol_name_list<2..2^16-1>, ProtocolName opaque<1..2^8-1>. */
function readAlpn(b: Buffer, p: number, end: number): string[] | ClientHelloResult {
  if (end - p < 2) return fail('tls_malformed', 'ALPN extension shorter than its list length');
  const listLength = u16(b, p);
  if (listLength < 2 || p + 2 + listLength !== end)
    return fail('tls_malformed', `ALPN list length ${listLength} does not match the extension's ${end - p - 2}`);
  const out: string[] = [];
  for (p += 2; p < end; ) {
    const l = b[p]!;
    if (l === 0) return fail('tls_malformed', 'an empty ALPN protocol name');
    if (p + 1 + l > end) return fail('tls_malformed', 'an ALPN protocol name overruns the list');
    out.push(b.toString('latin1', p + 1, p + 1 + l));
    p += 1 + l;
  }
  return out;
}

/** RFC 8446 4.2.1, ClientHello form: ProtocolVersion versions<2..254>. */
function readSupportedVersions(b: Buffer, p: number, end: number): number[] | ClientHelloResult {
  if (end - p < 1) return fail('tls_malformed', 'empty supported_versions extension');
  const l = b[p]!;
  if (l < 2 || (l & 1) !== 0 || p + 1 + l !== end)
    return fail('tls_malformed', `supported_versions length ${l} is not an even number filling the extension`);
  const out: number[] = [];
  for (let q = p + 1; q < end; q += 2) {
    const v = u16(b, q);
    if (!isGrease(v)) out.push(v);
  }
  return out;
}
