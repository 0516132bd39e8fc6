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
