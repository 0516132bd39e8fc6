/**
 * Request paths as the route table compares them (docs/routes-and-sni.md, "Paths").
 *
 * A route's allowlist is only as good as the path it was chosen by: if `/public/../admin` were
 * matched as written, the `/public` route (open to all) would decide a request the backend then
 * serves as `/admin`. So a path is matched in normal form, the way nginx normalises before its
 * `location` match and the way most backends resolve a path before they route it:
 *   - the query (from the first "?") is not part of the path;
 *   - percent-encoded unreserved characters are decoded (RFC 3986 6.2.2.2: `%61` is `a`), other
 *     percent-encodings get upper-case hex (6.2.2.1: `%2f` and `%2F` are the same);
 *   - runs of "/" are one "/" (nginx `merge_slashes on`, its default);
 *   - "." and ".." segments are removed (RFC 3986 5.2.4), ".." included when encoded.
 * Refused outright (the caller answers 400): a path not starting with "/", a ".." above the root
 * (nginx answers 400 too), an encoded "/" or "\" (`%2F`, `%5C`: a backend that decodes them sees
 * a different path than the router did), a raw "\" (Windows-style servers treat it as "/"), an
 * encoded or raw control character, a space, a "#", and a malformed "%" escape.
 *
 * A plain path (no "%", "\", "//", "/." or control byte) is its own normal form: one scan, no
 * allocation (bench/micro/route-table.ts).
 */

const SLASH = 0x2f;
const DOT = 0x2e;
const PERCENT = 0x25;
const QUESTION = 0x3f;

/** Paths above this length are refused in config (request paths are capped by the HTTP parser). */
export const MAX_CONFIG_PATH_LENGTH = 1024;

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  if (l >= 0x61 && l <= 0x66) return l - 0x61 + 10;
  return -1;
}

/** RFC 3986 2.3 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~" */
function isUnreserved(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a) || c === 0x2d || c === DOT || c === 0x5f || c === 0x7e;
}

/** A byte that needs the slow path or a refusal: control, space, '"', '#', '%', '\\', DEL. */
function isSpecial(c: number): boolean {
  return c <= 0x20 || c === 0x7f || c === PERCENT || c === 0x5c || c === 0x23 || c === 0x22;
}

/**
 * For a target whose path is already in normal form: the index where the path ends (the "?" or
 * the end). -1 when the path needs normalising or refusing (normalizePath decides). Lets the
 * route table compare a plain path in place, without slicing off the query.
 */
export function plainPathEnd(target: string): number {
  const length = target.length;
  if (length === 0 || target.charCodeAt(0) !== SLASH) return -1;
  for (let k = 0; k < length; k++) {
    const c = target.charCodeAt(k);
    if (c === QUESTION) return k;
    if (isSpecial(c)) return -1;
    if (c === SLASH && k + 1 < length) {
      const next = target.charCodeAt(k + 1);
      if (next === SLASH || next === DOT) return -1;
    }
  }
  return length;
}

/**
 * The normal form of a request target's path, or null when it must be refused. `target` is the
 * origin-form request target (path and optional query).
 */
export function normalizePath(target: string): string | null {
  const end = plainPathEnd(target);
  if (end === target.length) return target;
  if (end >= 0) return target.slice(0, end);
  if (target.length === 0 || target.charCodeAt(0) !== SLASH) return null;
  const query = target.indexOf('?');
  return slowNormalize(target, query === -1 ? target.length : query);
}

function slowNormalize(target: string, end: number): string | null {
  // Pass 1: escapes. Decoded unreserved characters may form new "." segments, so dot-segment
  // removal runs on the decoded text.
  let text = '';
  for (let k = 0; k < end; k++) {
    const c = target.charCodeAt(k);
    if (c === PERCENT) {
      if (k + 2 >= end) return null;
      const hi = hexValue(target.charCodeAt(k + 1));
      const lo = hexValue(target.charCodeAt(k + 2));
      if (hi < 0 || lo < 0) return null;
      const v = hi * 16 + lo;
      if (v === SLASH || v === 0x5c || v < 0x21 || v === 0x7f) return null;
      text += isUnreserved(v) ? String.fromCharCode(v) : `%${target[k + 1]!.toUpperCase()}${target[k + 2]!.toUpperCase()}`;
      k += 2;
      continue;
    }
    if (c <= 0x20 || c === 0x7f || c === 0x5c || c === 0x23 || c === 0x22) return null;
    text += target[k];
  }
  // Pass 2: merge slashes, remove dot segments (RFC 3986 5.2.4, but ".." above the root refused).
  const parts = text.split('/');
  const out: string[] = [];
  let trailing = false;
  for (let i = 1; i < parts.length; i++) {
    const segment = parts[i]!;
    const last = i === parts.length - 1;
    if (segment === '' || segment === '.') {
      if (last) trailing = true;
      continue;
    }
    if (segment === '..') {
      if (out.length === 0) return null;
      out.pop();
      if (last) trailing = true;
      continue;
    }
    out.push(segment);
  }
  if (out.length === 0) return '/';
  return `/${out.join('/')}${trailing ? '/' : ''}`;
}

/** RFC 3986 pchar minus "%" (checked apart): unreserved, sub-delims, ":", "@", plus "/". */
const CONFIG_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;

/**
 * Why `path` cannot be a route's path, or null. A route path must already be in normal form, so
 * what the operator wrote is what requests are compared with.
 */
export function configPathProblem(path: string): string | null {
  if (path.length === 0) return 'is empty (a path starts with "/")';
  if (path.charCodeAt(0) !== SLASH) return 'does not start with "/"';
  if (path.length > MAX_CONFIG_PATH_LENGTH) return `is ${path.length} characters long (at most ${MAX_CONFIG_PATH_LENGTH})`;
  if (path.includes('?')) return 'holds a "?": routes match the path, not the query';
  if (!CONFIG_CHARS.test(path)) return 'holds a character a path cannot (write non-ASCII and reserved bytes percent-encoded)';
  const normal = normalizePath(path);
  if (normal === null) return 'is refused for every request (an encoded "/" or "\\", a control character, a bad "%" escape, or ".." above the root)';
  if (normal !== path) return `is not in normal form (requests are matched as ${JSON.stringify(normal)}): write that`;
  return null;
}
