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
 * Refused outright (the caller answers 400, route_bad_path): a path not starting with "/", a ".."
 * above the root (nginx answers 400 too), an encoded "/" or "\" (`%2F`, `%5C`: a backend that
 * decodes them sees a different path than the router did), a raw "\" (Windows-style servers treat
 * it as "/"), an encoded or raw control character, a space, a "#", and a malformed "%" escape.
 *
 * Path parameters (";"): RFC 3986 3.3 lets a segment carry them, and backends read them three
 * ways. A servlet container (Tomcat, Jetty) cuts every segment at its ";" before it resolves dot
 * segments, so `/admin;x=1/`, `/;/admin/` and `/public/..;/admin/` are all `/admin/` to it; nginx
 * and WHATWG URL routers keep `admin;x=1` as one segment name, and nginx `location /admin` (a
 * string prefix) takes it. No one normal form is right for all three, so by default (`refuse`) a
 * path holding ";" is refused (route_path_params, 400); with `servlet` (a listener whose
 * backends read matrix parameters, `;jsessionid=`) each segment is cut at its ";" for matching,
 * dot segments are recognised by the name before the ";" (`..;x` is `..`), and the normal form
 * keeps the parameters of the segments that remain (`/a;x/../b;y` is `/b;y`, matched as `/b`). An
 * encoded ";" (`%3B`) is refused in both modes: a servlet container reads it as part of the name
 * (it cuts parameters before decoding), nginx decodes it before `location` matching.
 *
 * A plain path (no "%", "\", ";", "//", "/." or control byte) is its own normal form: one scan,
 * no allocation (bench/micro/route-table.ts).
 */

const SLASH = 0x2f;
const DOT = 0x2e;
const PERCENT = 0x25;
const QUESTION = 0x3f;
const SEMICOLON = 0x3b;

/** Paths above this length are refused in config (request paths are capped by the HTTP parser). */
const MAX_CONFIG_PATH_LENGTH = 1024;

/**
 * How a routed listener reads ";" in a request path (`http.pathParameters`): `refuse` answers 400
 * (route_path_params); `servlet` matches each segment cut at its ";" (servlet containers' reading).
 */
export type PathParameters = 'refuse' | 'servlet';

/** Why a request path cannot be matched (a route miss reason, answered 400). */
interface PathRefusal {
  readonly reason: 'route_bad_path' | 'route_path_params';
}

export const BAD_PATH: PathRefusal = Object.freeze({ reason: 'route_bad_path' });
export const PATH_PARAMS: PathRefusal = Object.freeze({ reason: 'route_path_params' });

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

/** A byte that needs the slow path or a refusal: control, space, '"', '#', '%', ';', '\\', DEL. */
function isSpecial(c: number): boolean {
  return c <= 0x20 || c === 0x7f || c === PERCENT || c === SEMICOLON || c === 0x5c || c === 0x23 || c === 0x22;
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
 * The normal form of a request target's path (the query cut off), or why it is refused. `target`
 * is the origin-form request target (path and optional query). With `servlet` the normal form
 * keeps the parameters of its segments: matchForm gives what routes are compared with.
 */
export function normalizePath(target: string, params: PathParameters = 'refuse'): string | PathRefusal {
  const end = plainPathEnd(target);
  if (end === target.length) return target;
  if (end >= 0) return target.slice(0, end);
  if (target.length === 0 || target.charCodeAt(0) !== SLASH) return BAD_PATH;
  const query = target.indexOf('?');
  return slowNormalize(target, query === -1 ? target.length : query, params === 'servlet');
}

/**
 * What routes are compared with, for a normal form: itself, or (servlet parameters) each
 * segment without its ";" parameters. The normal form has no empty or dot segment left, so no
 * new one appears (`/a;x/b` is `/a/b`).
 */
export function matchForm(normal: string): string {
  if (normal.indexOf(';') === -1) return normal;
  let out = '';
  let k = 0;
  while (k < normal.length) {
    const semi = normal.indexOf(';', k);
    if (semi === -1) return out + normal.slice(k);
    out += normal.slice(k, semi);
    const slash = normal.indexOf('/', semi);
    if (slash === -1) return out;
    k = slash;
  }
  return out;
}

function slowNormalize(target: string, end: number, servlet: boolean): string | PathRefusal {
  // Pass 1: escapes. Decoded unreserved characters may form new "." segments, so dot-segment
  // removal runs on the decoded text.
  let text = '';
  for (let k = 0; k < end; k++) {
    const c = target.charCodeAt(k);
    if (c === PERCENT) {
      if (k + 2 >= end) return BAD_PATH;
      const hi = hexValue(target.charCodeAt(k + 1));
      const lo = hexValue(target.charCodeAt(k + 2));
      if (hi < 0 || lo < 0) return BAD_PATH;
      const v = hi * 16 + lo;
      if (v === SLASH || v === 0x5c || v < 0x21 || v === 0x7f) return BAD_PATH;
      if (v === SEMICOLON) return PATH_PARAMS;
      text += isUnreserved(v) ? String.fromCharCode(v) : `%${target[k + 1]!.toUpperCase()}${target[k + 2]!.toUpperCase()}`;
      k += 2;
      continue;
    }
    if (c <= 0x20 || c === 0x7f || c === 0x5c || c === 0x23 || c === 0x22) return BAD_PATH;
    if (c === SEMICOLON && !servlet) return PATH_PARAMS;
    text += target[k];
  }
  // Pass 2: merge slashes, remove dot segments (RFC 3986 5.2.4, but ".." above the root refused).
  // With servlet parameters a segment's name ends at its ";": `..;x` is "..", `;x` is empty.
  const parts = text.split('/');
  const out: string[] = [];
  let trailing = false;
  for (let i = 1; i < parts.length; i++) {
    const segment = parts[i]!;
    const last = i === parts.length - 1;
    const semi = servlet ? segment.indexOf(';') : -1;
    const name = semi === -1 ? segment : segment.slice(0, semi);
    if (name === '' || name === '.') {
      if (last) trailing = true;
      continue;
    }
    if (name === '..') {
      if (out.length === 0) return BAD_PATH;
      out.pop();
      if (last) trailing = true;
      continue;
    }
    out.push(segment);
  }
  if (out.length === 0) return '/';
  return `/${out.join('/')}${trailing ? '/' : ''}`;
}

/** RFC 3986 pchar minus "%" (checked apart) and ";" (refused apart): unreserved, sub-delims, ":", "@", plus "/". */
const CONFIG_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,=:@/%]*$/;

/**
 * Why `path` cannot be a route's path, or null. A route path must already be in normal form, so
 * what the operator wrote is what requests are compared with.
 */
export function configPathProblem(path: string): string | null {
  if (path.length === 0) return 'is empty (a path starts with "/")';
  if (path.charCodeAt(0) !== SLASH) return 'does not start with "/"';
  if (path.length > MAX_CONFIG_PATH_LENGTH) return `is ${path.length} characters long (at most ${MAX_CONFIG_PATH_LENGTH})`;
  if (path.includes('?')) return 'holds a "?": routes match the path, not the query';
  if (path.includes(';') || /%3b/i.test(path)) {
    return 'holds a ";": requests with path parameters are refused, or matched with each segment cut at its ";" (http.pathParameters): write the path without them';
  }
  if (!CONFIG_CHARS.test(path)) return 'holds a character a path cannot (write non-ASCII and reserved bytes percent-encoded)';
  const normal = normalizePath(path);
  if (typeof normal !== 'string')
    return 'is refused for every request (an encoded "/" or "\\", a control character, a bad "%" escape, or ".." above the root)';
  if (normal !== path) return `is not in normal form (requests are matched as ${JSON.stringify(normal)}): write that`;
  return null;
}
