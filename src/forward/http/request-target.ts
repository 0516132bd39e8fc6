/**
 * The request target a backend receives. Shared by both HTTP paths (node:http and the relay), so
 * they refuse and rewrite the same targets.
 */

/**
 * The request target as sent upstream: origin-form (`/path?q`, or `*` for OPTIONS) as is; an
 * absolute-form `http(s)://authority/path` as its path and authority (RFC 9112 3.2.2); anything
 * else (another scheme, userinfo, an empty authority) null: answered 400.
 */
export function requestTarget(url: string): { path: string; authority: string | null } | null {
  const c = url.charCodeAt(0);
  if (c === 0x2f /* / */ || url === '*') return { path: url, authority: null };
  const m = /^https?:\/\/([^/?#@\s]+)((?:[/?][^#\s]*)?)$/i.exec(url);
  if (m === null) return null;
  const rest = m[2]!;
  return { path: rest === '' ? '/' : rest.charCodeAt(0) === 0x3f /* ? */ ? `/${rest}` : rest, authority: m[1]! };
}
