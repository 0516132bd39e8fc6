/**
 * The client behind trusted proxies: the X-Forwarded-For walk (nginx `real_ip_recursive on`,
 * Traefik's depth-less "rightmost untrusted" strategy).
 *
 * Every proxy appends the address of the peer it received the request from, so only the entries
 * appended by proxies we trust can be believed, and those are at the right end. Walking right to
 * left from our own peer (which must be a trusted proxy, else X-Forwarded-For is never read), the
 * client is the first address that is not itself a trusted proxy. Everything to the left of it
 * was written by that client or by proxies nobody vouches for.
 *
 * Decisions (each a place where proxies differ; we pick the one that cannot widen access):
 * - Several header lines are one list, joined in order (RFC 7230 3.2.2): the caller passes them
 *   joined with `, `.
 * - Entries are bare addresses, strictly parsed (the allowlist's rules: four decimal octets without
 *   leading zeros, RFC 4291 IPv6 without zone id). `::ffff:a.b.c.d` is the IPv4 address.
 *   `1.2.3.4:80`, `[2001:db8::1]`, `unknown`, obfuscated identifiers are not addresses.
 * - An unparsable entry stops the walk, and the client is the last trusted hop we walked past:
 *   the trusted proxy that wrote the junk could not say who its peer was, so neither can we.
 *   Trusted proxies are normally not on the allowlist, so such a request is denied (fail closed).
 *   (nginx's realip also stops at an unparsable entry; taking an address further left, as some
 *   proxies do, would hand the decision to whoever wrote the junk.)
 * - Empty entries (`a,,b`, a trailing comma, an empty header line) carry no claim and are skipped.
 * - When every entry is a trusted proxy, the leftmost one is the client (nginx does the same).
 *
 * Cost: the walk reads only the entries it needs from the right end, without splitting the header;
 * entries are read by the shared scanner (address/scan.ts), IPv4 ones without allocating.
 */
import { canonicalText } from '../address/canonical';
import { scanIPv4 } from '../address/scan';

/** A set of trusted addresses (store/list-ref.ts AddressLookup; a Matcher is one). */
interface AddressSet {
  admits(address: string): boolean;
}

/**
 * The client address for a request whose peer `peer` (canonical) is a trusted proxy, given its
 * joined X-Forwarded-For value (or null when it sent none).
 */
export function clientFromForwardedFor(xff: string | null, peer: string, trusted: AddressSet): string {
  if (xff === null) return peer;
  let client = peer;
  let end = xff.length;
  while (end > 0) {
    const comma = xff.lastIndexOf(',', end - 1);
    let s = comma + 1;
    let e = end;
    end = Math.max(comma, 0);
    while (s < e && isSpace(xff.charCodeAt(s))) s++;
    while (e > s && isSpace(xff.charCodeAt(e - 1))) e--;
    if (s === e) continue; // empty entry: no claim
    const address = forwardedForEntry(xff, s, e);
    if (address === null) return client; // junk: stop at the last trusted hop
    client = address;
    if (!trusted.admits(address)) return client;
  }
  return client;
}

/**
 * Canonical address of `text[s, e)` if it is one strictly, else null. A valid dotted quad is
 * already canonical (no leading zeros), so it is returned as the substring without re-formatting.
 */
export function forwardedForEntry(text: string, s: number, e: number): string | null {
  if (e - s <= 15 && scanIPv4(text, s, e) >= 0) return text.slice(s, e);
  let colon = false;
  for (let i = s; i < e; i++) {
    if (text.charCodeAt(i) === 58 /* : */) {
      colon = true;
      break;
    }
  }
  if (!colon) return null;
  return canonicalText(text.slice(s, e));
}

function isSpace(c: number): boolean {
  return c === 32 || c === 9;
}
