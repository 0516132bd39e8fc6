/**
 * An HTTP/2 request's header list read as the policy and the HTTP/1.1 upstreams need it, or why it
 * is refused (docs/http-engines.md "The HTTP/2 engine"). nghttp2 already enforces most of RFC 9113
 * 8.2 and 8.3 before a stream reaches JavaScript; this is the same rule set written once more,
 * on ipgate's side of the boundary, because every request becomes an HTTP/1.1 head written by
 * hand (`${method} ${path} HTTP/1.1\r\n...`): whatever would change that head's framing must be
 * refused here, whichever nghttp2 version is linked into the running Node.
 *
 * Malformed (RFC 9113 8.1.1: a stream error PROTOCOL_ERROR; nothing goes upstream):
 *   - a pseudo-header after a regular field, repeated, unknown (`:protocol` too: extended CONNECT
 *     is not offered), or a response one (`:status`) (8.3);
 *   - a field name with an upper-case letter or a character outside tchar (8.2.1, RFC 9110 5.1);
 *   - a value with NUL, CR or LF anywhere, or starting or ending with SP or HTAB (8.2.1);
 *   - a connection-specific field: Connection, Proxy-Connection, Keep-Alive, Transfer-Encoding,
 *     Upgrade; TE other than `trailers` (8.2.2);
 *   - `:method` not a token; no `:method`, `:scheme` or `:path` (CONNECT aside: 8.3.1, 8.5);
 *     `:path` empty, not `/...` (or `*` for OPTIONS), or with a byte outside 0x21-0x7E or a `#`
 *     (an h1 request line must hold it as one token);
 *   - content-length that is not one decimal number below 2^53 (repeated identical values are one).
 * Refused with 400 (well formed, but not served): a Host repeated, a Host that names another
 * authority than `:authority` (8.3.1), a `:scheme` other than http or https, CONNECT (ipgate is no
 * forward proxy, as for HTTP/1.1).
 *
 * The host itself is checked by the policy, as for HTTP/1.1 (request-host.ts, in HttpPolicy.admit):
 * `:authority` is given to it as the request's Host line when the client sent no Host (RFC 9113
 * 8.3.1: clients use `:authority` in place of Host), and as the target's authority when it sent
 * both (the authority wins, both must be valid, as for an HTTP/1.1 absolute-form target). So
 * neither `:authority` nor Host: 400 host_missing; one that is not uri-host[:port]: 400
 * host_invalid (or host_too_long), counted and logged as the HTTP/1.1 engine's are.
 */
import { checkHost } from '../request-host';

/** A request as the engine goes on with it. */
export interface H2Request {
  readonly method: string;
  /** `:path` (origin form, or `*`). */
  readonly path: string;
  /**
   * `:authority` when the client sent a Host line too (the policy's `authority`: it wins over
   * Host), else null (a lone `:authority` is in rawHeaders as the Host line).
   */
  readonly authority: string | null;
  /**
   * The regular fields, [name, value, ...] (names lower-case, pseudo-headers left out), with
   * `host` first holding `:authority` when the client sent no Host.
   */
  readonly rawHeaders: string[];
  /** content-length, or -1 without one. */
  readonly contentLength: number;
  /** The client sent `te: trailers` (a gRPC client does; passed on to an HTTP/2 upstream). */
  readonly teTrailers: boolean;
}

/** Why a request is refused: `malformed` (RST_STREAM PROTOCOL_ERROR) or `bad` (400). */
export interface H2Refusal {
  readonly kind: 'malformed' | 'bad';
  readonly detail: string;
}

function malformed(detail: string): H2Refusal {
  return { kind: 'malformed', detail };
}

function bad(detail: string): H2Refusal {
  return { kind: 'bad', detail };
}

/** RFC 9110 5.6.2 tchar, by char code. */
const TCHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~") TCHAR[c.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TCHAR[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TCHAR[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) TCHAR[c] = 1;

function isToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || TCHAR[c] === 0) return false;
  }
  return true;
}

/** A lower-case token: tchar without A-Z (RFC 9113 8.2.1: upper case in a name is malformed). */
function isLowerToken(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || TCHAR[c] === 0 || (c >= 0x41 && c <= 0x5a)) return false;
  }
  return true;
}

/** RFC 9113 8.2.1: no NUL, CR, LF; no SP or HTAB first or last. */
function valueProblem(v: string): boolean {
  const n = v.length;
  if (n > 0) {
    const a = v.charCodeAt(0);
    const z = v.charCodeAt(n - 1);
    if (a === 0x20 || a === 0x09 || z === 0x20 || z === 0x09) return true;
  }
  for (let i = 0; i < n; i++) {
    const c = v.charCodeAt(i);
    if (c === 0 || c === 0x0a || c === 0x0d) return true;
  }
  return false;
}

/** The connection-specific fields of RFC 9113 8.2.2 (TE is checked apart). */
const CONNECTION_SPECIFIC = new Set(['connection', 'proxy-connection', 'keep-alive', 'transfer-encoding', 'upgrade']);

/** `:path`: one h1 request-line token, origin form. */
function pathProblem(path: string, method: string): string | null {
  if (path.length === 0) return ':path is empty';
  if (path === '*') return method === 'OPTIONS' ? null : ':path "*" is for OPTIONS only';
  if (path.charCodeAt(0) !== 0x2f) return ':path does not start with "/"';
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || c === 0x23) return ':path has a byte outside 0x21-0x7E, or a "#"';
  }
  return null;
}

/**
 * Read `raw` (the stream's header list as received: [name, value, ...], pseudo-headers first).
 * Never throws.
 */
export function readH2Request(raw: readonly string[]): H2Request | H2Refusal {
  let method: string | null = null;
  let scheme: string | null = null;
  let path: string | null = null;
  let authority: string | null = null;
  let host: string | null = null;
  let contentLength = -1;
  let teTrailers = false;
  let regular = false;
  const fields: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const value = raw[i + 1]!;
    if (name.charCodeAt(0) === 0x3a /* : */) {
      if (regular) return malformed(`pseudo-header ${name} after a regular field`);
      switch (name) {
        case ':method':
          if (method !== null) return malformed(':method repeated');
          method = value;
          break;
        case ':scheme':
          if (scheme !== null) return malformed(':scheme repeated');
          scheme = value;
          break;
        case ':path':
          if (path !== null) return malformed(':path repeated');
          path = value;
          break;
        case ':authority':
          if (authority !== null) return malformed(':authority repeated');
          authority = value;
          break;
        default:
          return malformed(`pseudo-header ${name} is not a request's`);
      }
      if (valueProblem(value)) return malformed(`${name} has NUL, CR, LF or surrounding blanks`);
      continue;
    }
    regular = true;
    if (!isLowerToken(name)) return malformed('a field name with an upper-case letter or a character outside tchar');
    if (valueProblem(value)) return malformed(`field ${name} has NUL, CR, LF or surrounding blanks`);
    if (CONNECTION_SPECIFIC.has(name)) return malformed(`connection-specific field ${name}`);
    if (name === 'te') {
      if (value !== 'trailers') return malformed('te other than "trailers"');
      teTrailers = true;
    } else if (name === 'content-length') {
      if (!/^\d{1,16}$/.test(value) || !Number.isSafeInteger(Number(value))) return malformed('content-length is not a number');
      const n = Number(value);
      if (contentLength !== -1 && contentLength !== n) return malformed('two content-length values');
      if (contentLength !== -1) continue; // the same value twice is one (RFC 9110 8.6)
      contentLength = n;
    } else if (name === 'host') {
      if (host !== null) return bad('Host repeated');
      host = value;
    }
    fields.push(name, value);
  }
  if (method === null) return malformed('no :method');
  if (!isToken(method)) return malformed(':method is not a token');
  if (method === 'CONNECT') return bad('CONNECT (ipgate is no forward proxy)');
  if (scheme === null || path === null) return malformed('no :scheme or :path');
  const why = pathProblem(path, method);
  if (why !== null) return malformed(why);
  if (scheme !== 'https' && scheme !== 'http') return bad(`:scheme ${scheme}`);
  if (authority === null) return { method, path, authority: null, rawHeaders: fields, contentLength, teTrailers };
  if (host === null) {
    fields.unshift('host', authority);
    return { method, path, authority: null, rawHeaders: fields, contentLength, teTrailers };
  }
  // Both: each is checked by the policy; two valid ones must name the same authority (8.3.1).
  const a = checkHost(authority);
  const h = checkHost(host);
  if (typeof a === 'string' && typeof h === 'string' && a !== h) return bad('Host names another authority than :authority');
  return { method, path, authority, rawHeaders: fields, contentLength, teTrailers };
}
