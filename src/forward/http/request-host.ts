/**
 * The host a request is decided on and forwarded with (docs/routes-and-sni.md "The request's
 * Host"). One function for the HTTP engine (relay/relay-conn.ts, every request on every HTTP
 * listener) and for `POST /v1/explain` (admin/routes/explain.ts), so the explanation parses the
 * Host exactly as the wire does.
 *
 * RFC 9112 3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1
 * request message that lacks a Host header field and to any request message that contains more
 * than one Host header field line or a Host header field with an invalid field value." The value
 * is `uri-host [ ":" port ]` (RFC 3986 3.2.2, 3.2.3). RFC 3986 lets a reg-name hold
 * percent-encodings and sub-delims, and every URL parser reads those its own way: WHATWG URL (the
 * `new URL(req.url, 'http://' + req.headers.host)` of many Node apps) decodes `%61dmin` to
 * `admin`, maps fullwidth letters to ASCII (IDNA), and takes `a:x@b` as userinfo `a:x` at host
 * `b`. A route's allowlist holds only if the backend serves the host the route was chosen for,
 * so ipgate accepts only the forms no parser reads two ways, and answers 400 to the rest:
 *   - a host name by route/host-name.ts (the rule route hosts and SNI follow: letters, digits,
 *     "-", "_", dots; labels of 1-63, 253 in all; one trailing dot allowed and cut);
 *   - an IPv4 address as four decimal octets without leading zeros (`127.1`, `0x7f.0.0.1`,
 *     `010.0.0.1` are addresses to WHATWG and names to RFC 3986: refused);
 *   - an IPv6 address in brackets (no zone id, no IPvFuture);
 *   - then an optional ":" and a port of at most 5 digits, up to 65535 (RFC 3986 allows an empty
 *     port: it is accepted and dropped).
 * nginx (ngx_http_validate_host) refuses fewer (it passes "@" and "%"), but nginx is where such
 * a Host ends, not a hop in front of another parser.
 *
 * What is forwarded is the form decided: the host lower-cased (ASCII), without its trailing dot,
 * an IPv6 literal in RFC 5952 form, the port as a plain number. A Host already in that form (nearly
 * every request) is returned as is: no copy. An absolute-form target's authority follows the same
 * rules and replaces Host (RFC 9112 3.2.2); the Host line must still be there, once, and valid, as
 * nginx checks it (ngx_http_process_host) before the request line's host wins.
 */
import { isMappedWords, scanIPv4, scanIPv6 } from '../../address/scan';
import { formatV4, formatV6Words } from '../../address/canonical';
import type { HostReason } from '../../reasons';
import { asciiLower, hostNameProblem, MAX_HOST_NAME_LENGTH } from '../../route/host-name';

/** Why a request's Host is refused (400): the reason code, and a sentence for logs and explain. */
export interface HostRefusal {
  readonly reason: HostReason;
  readonly detail: string;
}

const MISSING: HostRefusal = Object.freeze({ reason: 'host_missing', detail: 'the request has no Host header' });
const REPEATED: HostRefusal = Object.freeze({ reason: 'host_repeated', detail: 'the request has more than one Host header line' });

const COLON = 0x3a;
const DOT = 0x2e;
const words = new Uint32Array(4);

/**
 * The host a request is decided and forwarded with: `raw` is its header lines as
 * [name, value, ...] (the parser's rawHeaders), `authority` an absolute-form target's
 * (request-target.ts), or null. A string: the Host to route by and send upstream (as the client
 * sent it when already in normal form). Else why it gets 400.
 */
export function requestHost(raw: readonly string[], authority: string | null): string | HostRefusal {
  let value: string | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (!isHostField(raw[i]!)) continue;
    if (value !== null) return REPEATED;
    value = raw[i + 1]!;
  }
  if (value === null) return MISSING;
  const host = checkHost(value, 'Host');
  if (authority === null || typeof host !== 'string') return host;
  return checkHost(authority, "the target's authority");
}

/**
 * One `uri-host [":" port]` value in its forwarded form, or why it is refused. `what` names it in
 * the sentence ("Host", "the target's authority").
 */
export function checkHost(value: string, what = 'Host'): string | HostRefusal {
  // The result is a function of the value alone (`what` only words a refusal), and a keep-alive
  // connection, like most of a listener's clients, sends the same Host on every request: the last
  // accepted value and its form are kept, so a repeat costs one string comparison instead of the
  // walk below (about 2,000 instructions for an IPv4 Host; bench/README.md "Issue 28: the policy
  // split, measured").
  if (value === lastValue) return lastHost;
  const host = decideHost(value, what);
  if (typeof host === 'string') {
    lastValue = value;
    lastHost = host;
  }
  return host;
}

/** checkHost's memo: the last value accepted (null: none yet) and its form. */
let lastValue: string | null = null;
let lastHost = '';

function decideHost(value: string, what: string): string | HostRefusal {
  const length = value.length;
  if (length === 0) return refuse('host_invalid', what, value, 'is empty');
  if (value.charCodeAt(0) === 0x5b /* [ */) return checkIpLiteral(value, what);
  let nameEnd = value.indexOf(':');
  if (nameEnd === -1) nameEnd = length;
  let end = nameEnd;
  if (end > 0 && value.charCodeAt(end - 1) === DOT) end--; // one trailing dot names the same host
  // Bounded before any label is read: a 16 KB Host costs one indexOf, not a walk.
  if (end > MAX_HOST_NAME_LENGTH)
    return refuse('host_too_long', what, value, `has a host name of ${end} characters (at most ${MAX_HOST_NAME_LENGTH})`);
  const why = hostNameProblem(value, end);
  if (why !== null && !(why.startsWith('is an IP') && scanIPv4(value, 0, end) >= 0)) {
    if (!why.startsWith('is an IP')) return refuse('host_invalid', what, value, why);
    return refuse(
      'host_invalid',
      what,
      value,
      unbracketedIPv6(value, nameEnd)
        ? IPV6_UNBRACKETED
        : 'is an IPv4 address in a form URL parsers read differently (write four decimal octets)',
    );
  }
  const port = readPort(value, nameEnd);
  if (port === BAD_PORT)
    return refuse(
      'host_invalid',
      what,
      value,
      unbracketedIPv6(value, nameEnd) ? IPV6_UNBRACKETED : 'has a port that is not a number up to 65535',
    );
  if (end === nameEnd && portAsWritten(value, nameEnd) && !hasUpper(value, end)) return value;
  const name = asciiLower(value.slice(0, end));
  return port < 0 ? name : `${name}:${port}`;
}

/** RFC 3986 IP-literal: "[" IPv6address "]" [":" port]. */
function checkIpLiteral(value: string, what: string): string | HostRefusal {
  const close = value.indexOf(']');
  if (close === -1) return refuse('host_invalid', what, value, 'opens "[" without "]"');
  const nameEnd = close + 1;
  if (nameEnd < value.length && value.charCodeAt(nameEnd) !== COLON)
    return refuse('host_invalid', what, value, 'has text after "]" that is not ":port"');
  // IPvFuture and RFC 6874 zone ids are refused (no browser sends them; WHATWG URL refuses them).
  // Rare enough to spend a copy on.
  const inner = value.slice(1, close);
  if (!scanIPv6(inner, words)) return refuse('host_invalid', what, value, 'is not an IPv6 address in brackets');
  const port = readPort(value, nameEnd);
  if (port === BAD_PORT) return refuse('host_invalid', what, value, 'has a port that is not a number up to 65535');
  // RFC 5952 form; an IPv4-mapped address in the mixed notation of its section 5.
  const canonical = isMappedWords(words) ? `::ffff:${formatV4(words[3]!)}` : formatV6Words(words);
  if (canonical === inner && portAsWritten(value, nameEnd)) return value;
  return port < 0 ? `[${canonical}]` : `[${canonical}]:${port}`;
}

/** readPort's answers besides a port number. */
const NO_PORT = -1;
const BAD_PORT = -2;

/**
 * The port after value[colon] (colon === value.length: none): its number, NO_PORT without one or
 * for an empty one (RFC 3986 `port = *DIGIT`: forwarded without), BAD_PORT when it is no number
 * up to 65535 in at most 5 digits.
 */
function readPort(value: string, colon: number): number {
  const length = value.length;
  if (colon + 1 >= length) return NO_PORT;
  if (length - colon - 1 > 5) return BAD_PORT;
  let port = 0;
  for (let k = colon + 1; k < length; k++) {
    const c = value.charCodeAt(k);
    if (c < 0x30 || c > 0x39) return BAD_PORT;
    port = port * 10 + (c - 0x30);
  }
  return port > 65535 ? BAD_PORT : port;
}

/** The (valid) port after value[colon] is forwarded as written: none, or digits without a leading zero. */
function portAsWritten(value: string, colon: number): boolean {
  const digits = value.length - colon - 1;
  return digits === -1 || digits === 1 || (digits > 1 && value.charCodeAt(colon + 1) !== 0x30);
}

const IPV6_UNBRACKETED = 'has a second ":" (an IPv6 address goes in brackets)';

/** A second ":" after value[colon]: an IPv6 address written without its brackets (or worse). */
function unbracketedIPv6(value: string, colon: number): boolean {
  return colon < value.length && value.indexOf(':', colon + 1) !== -1;
}

/** "Host" in any case, compared in place (header names are ASCII tokens: `| 0x20` lower-cases a letter and nothing else can land on one). */
function isHostField(name: string): boolean {
  return (
    name.length === 4 &&
    (name.charCodeAt(0) | 0x20) === 0x68 &&
    (name.charCodeAt(1) | 0x20) === 0x6f &&
    (name.charCodeAt(2) | 0x20) === 0x73 &&
    (name.charCodeAt(3) | 0x20) === 0x74
  );
}

/** An ASCII capital letter in value[0, end). */
function hasUpper(value: string, end: number): boolean {
  for (let k = 0; k < end; k++) {
    const c = value.charCodeAt(k);
    if (c >= 0x41 && c <= 0x5a) return true;
  }
  return false;
}

function refuse(reason: HostReason, what: string, value: string, why: string): HostRefusal {
  const shown = value.length > 64 ? `${value.slice(0, 64)}...` : value;
  return { reason, detail: `${what} ${JSON.stringify(shown)} ${why}` };
}
