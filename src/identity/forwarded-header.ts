/**
 * RFC 7239 `Forwarded` header elements: `for=...;proto=...;host=...`.
 *
 * RFC 7239 section 6: a node is an IPv4 address as is, or an IPv6 address in brackets; a value that
 * is not a token (section 4: `value = token / quoted-string`) is quoted, so an IPv6 node is always
 * `for="[2001:db8::1]"` (the brackets and colons are not token characters), and so is a host with
 * a port (`host="example.com:8080"`).
 */

/** RFC 7230 tchar: ALPHA / DIGIT / "!#$%&'*+-.^_`|~". */
const TCHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~") TCHAR[c.charCodeAt(0)] = 1;
for (let c = 48; c <= 57; c++) TCHAR[c] = 1;
for (let c = 65; c <= 90; c++) TCHAR[c] = 1;
for (let c = 97; c <= 122; c++) TCHAR[c] = 1;

function isToken(value: string): boolean {
  if (value.length === 0) return false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 128 || TCHAR[c] === 0) return false;
  }
  return true;
}

/** A parameter value: the token itself, or a quoted-string with `"` and `\` escaped. */
export function forwardedValue(value: string): string {
  if (isToken(value)) return value;
  return `"${value.replace(/["\\]/g, '\\$&')}"`;
}

/** The `for=` / `by=` node of a canonical address: IPv4 bare, IPv6 quoted and bracketed. */
export function forwardedNode(address: string): string {
  return address.includes(':') ? `"[${address}]"` : address;
}

/** One element for this hop: `for=<node>;proto=<proto>[;host=<host>]`. */
export function forwardedElement(forAddress: string, proto: string, host: string | null): string {
  const base = `for=${forwardedNode(forAddress)};proto=${forwardedValue(proto)}`;
  return host === null || host.length === 0 ? base : `${base};host=${forwardedValue(host)}`;
}

const SPACE = 0x20;
const TAB = 0x09;

/**
 * A received `Forwarded` chain without its `host=` pairs, for a hop whose own element names the
 * host the request was decided on (a listener with routes): a framework that reads the first
 * element's host (Spring's ForwardedHeaderFilter) or the last (Rack) must find no other host
 * than the routed one (docs/routes-and-sni.md "The request's Host"). Elements left with no pair
 * are dropped. null when `value` is not RFC 7239 (section 4: `forwarded-element =
 * [forwarded-pair] *( ";" [forwarded-pair] )`, pairs `token "=" (token / quoted-string)`, elements
 * separated by "," with optional whitespace): the caller then forwards its own element alone.
 */
export function forwardedWithoutHost(value: string): string | null {
  if (!/host/i.test(value)) return value; // no pair can be named host: as received, no copy
  const n = value.length;
  const out: string[] = [];
  let element: string[] = [];
  let i = 0;
  for (;;) {
    while (i < n && (value.charCodeAt(i) === SPACE || value.charCodeAt(i) === TAB)) i++;
    if (i >= n || value.charCodeAt(i) === 0x2c /* , */) {
      if (element.length > 0) out.push(element.join(';'));
      element = [];
      if (i >= n) break;
      i++;
      continue;
    }
    if (value.charCodeAt(i) === 0x3b /* ; */) {
      i++;
      continue;
    }
    const start = i;
    while (i < n && isTchar(value.charCodeAt(i))) i++;
    const nameEnd = i;
    if (nameEnd === start || value.charCodeAt(i) !== 0x3d /* = */) return null;
    i++;
    if (value.charCodeAt(i) === 0x22 /* " */) {
      for (i++; i < n && value.charCodeAt(i) !== 0x22; i++) if (value.charCodeAt(i) === 0x5c /* \ */) i++;
      if (i >= n) return null; // unterminated quoted-string
      i++;
    } else {
      const valueStart = i;
      while (i < n && isTchar(value.charCodeAt(i))) i++;
      if (i === valueStart) return null;
    }
    if (!(nameEnd - start === 4 && value.slice(start, nameEnd).toLowerCase() === 'host')) element.push(value.slice(start, i));
    while (i < n && (value.charCodeAt(i) === SPACE || value.charCodeAt(i) === TAB)) i++;
    if (i < n && value.charCodeAt(i) !== 0x3b && value.charCodeAt(i) !== 0x2c) return null;
  }
  return out.join(', ');
}

function isTchar(c: number): boolean {
  return c < 128 && TCHAR[c] === 1;
}
