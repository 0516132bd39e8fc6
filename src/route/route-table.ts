/**
 * The compiled route table: which route serves a host and path (HTTP listeners), or a TLS SNI
 * name (TCP listeners routing on the ClientHello, tls/client-hello.ts). docs/routes-and-sni.md
 * says what it decides and why.
 *
 * Lookup, in this order, each step a hash lookup:
 *   1. host: exact map; then wildcards, longest suffix first, looked up only at the suffix
 *      lengths some wildcard has ("a.b.example.com" with "*.example.com" tries "example.com"
 *      alone), so the cost is bounded by the distinct wildcard suffix lengths, never by the
 *      route count or the name's label count; then the default "*".
 *      The host found decides: its routes answer, or the request is a route_no_path miss. A
 *      more specific host whose paths do not match does not fall back to a wildcard or the
 *      default (nginx `server_name` and ingress-nginx behave the same; Gateway API would fall
 *      back, see the doc for why we do not).
 *   2. path, in normal form (route/path.ts): exact paths first; then the longest prefix, on
 *      "/" boundaries only (Gateway API PathPrefix: "/api" matches "/api", "/api/" and
 *      "/api/v1", never "/apix"; nginx's `location /api` would also take "/apix"). A route
 *      without `paths` is the prefix "/". The cost is bounded by the host's own path count (a
 *      short scan) or, past 8 of a kind, by the number of distinct prefix lengths (hash lookups).
 *      A path entry with `ignoreCase` is compared with the path ASCII-lower-cased (a case-
 *      insensitive backend, Express's default, serves `/ADMIN` as `/admin`); only a host that
 *      has such an entry lower-cases the path, so tables without one cost nothing more.
 * Host matching is case-insensitive (ASCII only: no Unicode case folding), ignores a ":port"
 * and one trailing dot; a Host with a character no host name has, a port that is no number or
 * over 253 characters only reaches the default (the HTTP engine answers such a Host 400 before
 * any lookup: forward/http/request-host.ts). Every answer is a frozen object built at compile time: a lookup
 * allocates nothing on a plain path (bench/micro/route-table.ts).
 *
 * A RouteTable is built completely, validated with every problem reported at once, then never
 * changes: a reload compiles a new one and swaps the reference (docs/architecture.md, "Allowlist":
 * the same build-then-swap).
 */
import { problem } from '../schema/problem';
import type { RouteMissReason } from './codes';
import { asciiLower, hostNameProblem, MAX_HOST_NAME_LENGTH } from './host-name';
import { configPathProblem, matchForm, normalizePath, plainPathEnd, type PathParameters } from './path';

export type { RouteMissReason } from './codes';

export interface PathSpec {
  path: string;
  /** "exact": the path only. "prefix": the path and everything below it on a "/" boundary. */
  match: 'exact' | 'prefix';
  /** Compare ASCII letters case-insensitively (`/ADMIN` matches `/admin`); absent: case-sensitive. */
  ignoreCase?: boolean;
}

export interface RouteSpec {
  /** Bounded label for logs and metrics: 1-63 of A-Z a-z 0-9 . _ -, unique in the table. */
  name: string;
  /** "api.example.com" (exact), "*.example.com" (any name ending in ".example.com"), or "*" (default). */
  hosts: string[];
  /** Absent: every path. HTTP tables only. */
  paths?: PathSpec[];
}

interface CompileOptions {
  /** "http" (default): hosts and paths. "sni": hosts only, for TCP listeners routing on SNI. */
  kind?: 'http' | 'sni';
  /** Config path the routes live at, for error messages (default "routes"). */
  at?: string;
  /** How ";" in a request path is read (route/path.ts; default "refuse"). HTTP tables only. */
  pathParameters?: PathParameters;
}

export interface RouteMatch {
  readonly kind: 'match';
  /** The route's name (a bounded label) and its index in the compiled list. */
  readonly route: string;
  readonly routeIndex: number;
  /** The host entry that matched, as written in the config (lower-cased): "a.example", "*.example", "*". */
  readonly host: string;
  readonly hostMatch: 'exact' | 'wildcard' | 'default';
  /** The path entry that matched (prefix without its trailing "/"); null for a route without paths. */
  readonly path: Readonly<PathSpec> | null;
}

export type RouteMiss = { readonly kind: 'miss'; readonly reason: RouteMissReason };
export type RouteResult = RouteMatch | RouteMiss;

export class RouteTableError extends Error {
  readonly code = 'IPGATE_ROUTES';
  constructor(readonly problems: readonly string[]) {
    super(`invalid routes:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'RouteTableError';
  }
}

const NO_HOST: RouteMiss = Object.freeze({ kind: 'miss', reason: 'route_no_host' });
const NO_PATH: RouteMiss = Object.freeze({ kind: 'miss', reason: 'route_no_path' });
const BAD_PATH: RouteMiss = Object.freeze({ kind: 'miss', reason: 'route_bad_path' });
const PATH_PARAMS: RouteMiss = Object.freeze({ kind: 'miss', reason: 'route_path_params' });

/**
 * Everything one host (exact, wildcard or default) routes. A host with a few paths (the usual
 * case) keeps them in short arrays compared in place with startsWith: no hashing of a fresh
 * string, no slice, and the arrays sit in one or two cache lines. Past SMALL entries of a kind,
 * a Map (exact) or a Map per prefix length (prefix) bounds the cost by the path's depth instead.
 */
interface HostEntry {
  exactPaths: string[];
  exactMatches: RouteMatch[];
  exactMap: Map<string, RouteMatch> | null;
  /** Prefixes other than "/", longest first. */
  prefixPaths: string[];
  prefixMatches: RouteMatch[];
  prefixMap: Map<string, RouteMatch> | null;
  /** Distinct prefix lengths, longest first (used with prefixMap). */
  prefixLengths: number[];
  /** The prefix "/" (or a route without paths): matches every path. */
  root: RouteMatch | null;
  /** The `ignoreCase` paths (lower-cased, same layout), null when the host has none. */
  folded: HostEntry | null;
}

/** bench/micro/route-table.ts: below this many paths a scan beats hashing a fresh string. */
const SMALL = 8;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const DOT = 0x2e;

export class RouteTable {
  readonly kind: 'http' | 'sni';
  readonly routeNames: readonly string[];
  /** How ";" in a request path is read (route/path.ts). */
  readonly pathParameters: PathParameters;
  private readonly exact: Map<string, HostEntry>;
  /** Keyed by the suffix after "*." ("example.com" for "*.example.com"). */
  private readonly wildcard: Map<string, HostEntry>;
  /**
   * The distinct lengths of the wildcard suffixes, longest first: a name is looked up only at the
   * suffixes of these lengths that start after a dot, so a lookup costs one comparison per length
   * and a hash only where a wildcard could match, not a slice and a hash per label of the name
   * (a Host of 8,000 one-letter labels cost ~100 ms that way: test/unit/route/route-table.test.ts
   * "the wildcard walk").
   */
  private readonly wildcardLengths: readonly number[];
  private readonly fallback: HostEntry | null;

  private constructor(
    kind: 'http' | 'sni',
    names: string[],
    pathParameters: PathParameters,
    exact: Map<string, HostEntry>,
    wildcard: Map<string, HostEntry>,
    fallback: HostEntry | null,
  ) {
    this.kind = kind;
    this.pathParameters = pathParameters;
    this.routeNames = Object.freeze(names);
    this.exact = exact;
    this.wildcard = wildcard;
    this.wildcardLengths = Object.freeze([...new Set([...wildcard.keys()].map((k) => k.length))].sort((a, b) => b - a));
    this.fallback = fallback;
    Object.freeze(this);
  }

  /** Validates every route (all problems at once, RouteTableError) and compiles the table. */
  static compile(routes: readonly RouteSpec[], options: CompileOptions = {}): RouteTable {
    const kind = options.kind ?? 'http';
    const at = options.at ?? 'routes';
    const problems: string[] = [];
    const names: string[] = [];
    const builders = new Map<string, Builder>(); // key: the host, "*.suffix" or "*"
    const namesSeen = new Map<string, number>();

    if (!Array.isArray(routes)) throw new RouteTableError([problem(at, routes, 'must be a list of routes')]);
    if (routes.length === 0) problems.push(problem(at, routes, 'is empty: give at least one route, or leave routes out'));
    routes.forEach((route, i) => {
      const here = `${at}[${i}]`;
      if (route === null || typeof route !== 'object') {
        problems.push(problem(here, route, 'must be an object {name, hosts, paths?}'));
        names.push('');
        return;
      }
      const name = route.name;
      if (typeof name !== 'string' || !NAME.test(name)) {
        problems.push(problem(`${here}.name`, name, 'must be 1-63 characters of A-Z a-z 0-9 . _ - (it is a metric label)'));
      } else if (namesSeen.has(name)) {
        problems.push(problem(`${here}.name`, name, `is already the name of ${at}[${namesSeen.get(name)}]`));
      } else {
        namesSeen.set(name, i);
      }
      const label = `${here} (${JSON.stringify(name)})`;
      names.push(typeof name === 'string' ? name : '');

      const paths = checkPaths(route.paths, `${label}.paths`, kind, problems);
      const hosts = route.hosts;
      if (!Array.isArray(hosts) || hosts.length === 0) {
        problems.push(problem(`${label}.hosts`, hosts, 'must be a non-empty list ("*" for every host)'));
        return;
      }
      const hostsSeen = new Set<string>();
      hosts.forEach((host, h) => {
        const key = hostKey(host, `${label}.hosts[${h}]`, problems);
        if (key === null) return;
        if (hostsSeen.has(key)) {
          problems.push(problem(`${label}.hosts[${h}]`, host, 'is listed twice in this route'));
          return;
        }
        hostsSeen.add(key);
        let b = builders.get(key);
        if (b === undefined) builders.set(key, (b = new Builder(key)));
        for (const p of paths ?? [null]) b.add(p, i, typeof name === 'string' ? name : '', `${label}.hosts[${h}]`, host, problems, at);
      });
    });
    if (problems.length > 0) throw new RouteTableError(problems);

    const exact = new Map<string, HostEntry>();
    const wildcard = new Map<string, HostEntry>();
    let fallback: HostEntry | null = null;
    for (const [key, b] of builders) {
      const entry = b.build();
      if (key === '*') fallback = entry;
      else if (key.startsWith('*.')) wildcard.set(key.slice(2), entry);
      else exact.set(key, entry);
    }
    return new RouteTable(kind, names, options.pathParameters ?? 'refuse', exact, wildcard, fallback);
  }

  /** HTTP: the route for a Host header value (any case, ":port", trailing dot) and a request target. */
  lookup(host: string, target: string): RouteResult {
    const entry = this.findHost(host);
    if (entry === null) return NO_HOST;
    // A plain path is compared in place up to `end` (the "?"); any other is normalised first.
    let path = target;
    let end = plainPathEnd(target);
    if (end < 0) {
      const normal = normalizePath(target, this.pathParameters);
      if (typeof normal !== 'string') return normal.reason === 'route_path_params' ? PATH_PARAMS : BAD_PATH;
      path = matchForm(normal);
      end = path.length;
    }
    if (entry.folded !== null) return lookupFolded(entry, entry.folded, path, end);
    return lookupPath(entry, path, end) ?? entry.root ?? NO_PATH;
  }

  /** SNI (TCP listeners): the route for a server name; null SNI (none sent) takes the default. */
  lookupHost(name: string | null): RouteResult {
    const entry = name === null ? this.fallback : this.findHost(name);
    if (entry === null) return NO_HOST;
    return entry.root ?? NO_PATH;
  }

  private findHost(host: string): HostEntry | null {
    const name = canonicalHost(host);
    if (name !== null) {
      const e = this.exact.get(name);
      if (e !== undefined) return e;
      // The longest suffix first is the most specific wildcard. A suffix of length l matches only
      // when the name is longer and has a dot just before it ("*.b" never takes "b" or "ab").
      const lengths = this.wildcardLengths;
      const n = name.length;
      for (let k = 0; k < lengths.length; k++) {
        const l = lengths[k]!;
        if (l >= n - 1 || name.charCodeAt(n - l - 1) !== DOT) continue;
        const w = this.wildcard.get(name.slice(n - l));
        if (w !== undefined) return w;
      }
    }
    return this.fallback;
  }
}

/** Precedence within one case rule: an exact path, then the longest prefix (not "/"); null: neither. */
function lookupPath(entry: HostEntry, path: string, end: number): RouteMatch | null {
  const exactMap = entry.exactMap;
  if (exactMap === null) {
    const exactPaths = entry.exactPaths;
    for (let k = 0; k < exactPaths.length; k++) {
      const e = exactPaths[k]!;
      if (e.length === end && path.startsWith(e)) return entry.exactMatches[k]!;
    }
  } else {
    const m = exactMap.get(end === path.length ? path : path.slice(0, end));
    if (m !== undefined) return m;
  }
  const prefixMap = entry.prefixMap;
  if (prefixMap === null) {
    const prefixPaths = entry.prefixPaths;
    for (let k = 0; k < prefixPaths.length; k++) {
      const pre = prefixPaths[k]!;
      const l = pre.length;
      if (l <= end && (l === end || path.charCodeAt(l) === 0x2f) && path.startsWith(pre)) return entry.prefixMatches[k]!;
    }
  } else {
    const m = longestPrefix(prefixMap, entry.prefixLengths, path, end);
    if (m !== null) return m;
  }
  return null;
}

/**
 * A host with `ignoreCase` paths: exact paths of either rule first (the case-sensitive one, then
 * the folded one compared with the lower-cased path), then the longer of the two longest
 * prefixes. Compile refuses two entries that are equal ignoring case when either ignores it, so
 * the two rules never both claim one path at one length.
 */
function lookupFolded(entry: HostEntry, folded: HostEntry, path: string, end: number): RouteResult {
  const lower = asciiLower(end === path.length ? path : path.slice(0, end));
  const sensitive = lookupPath(entry, path, end);
  if (sensitive !== null && sensitive.path!.match === 'exact') return sensitive;
  const insensitive = lookupPath(folded, lower, lower.length);
  if (insensitive === null) return sensitive ?? entry.root ?? NO_PATH;
  if (insensitive.path!.match === 'exact' || sensitive === null) return insensitive;
  return insensitive.path!.path.length > sensitive.path!.path.length ? insensitive : sensitive;
}

/** A host with many prefixes: one hash lookup per distinct prefix length that ends on a "/" boundary. */
function longestPrefix(map: Map<string, RouteMatch>, lengths: number[], path: string, end: number): RouteMatch | null {
  for (let k = 0; k < lengths.length; k++) {
    const l = lengths[k]!;
    if (l > end || (l < end && path.charCodeAt(l) !== 0x2f)) continue;
    const m = map.get(path.slice(0, l));
    if (m !== undefined) return m;
  }
  return null;
}

/**
 * A Host header value as the table's keys are spelled: the ":port" and one trailing dot cut,
 * ASCII lower-cased. null when what is left holds a character no host name has (anything but
 * letters, digits, "-", "_" and "."), when it is longer than a host name can be (253), or when
 * what follows the ":" is not a port: such a value -- a bracketed IPv6 literal, `user@host`,
 * `a.example:x@b.example`, a space, a non-ASCII character that case folding could make equal to
 * an ASCII name -- can only take the default route, never an exact or wildcard one through its
 * prefix or suffix. (HTTP requests reach the table with a Host already validated by
 * forward/http/request-host.ts, which refuses all of these with 400; the table stays safe for any
 * caller.)
 */
export function canonicalHost(host: string): string | null {
  let end = host.indexOf(':');
  if (end === -1) {
    end = host.length;
  } else {
    if (host.length - end > 6) return null;
    for (let k = end + 1; k < host.length; k++) {
      const c = host.charCodeAt(k);
      if (c < 0x30 || c > 0x39) return null;
    }
  }
  if (end > 0 && host.charCodeAt(end - 1) === DOT) end--;
  if (end > MAX_HOST_NAME_LENGTH) return null;
  let upper = false;
  for (let k = 0; k < end; k++) {
    const c = host.charCodeAt(k);
    if (c >= 0x61 && c <= 0x7a) continue;
    if (c >= 0x41 && c <= 0x5a) upper = true;
    else if (!((c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2d || c === 0x5f)) return null;
  }
  const name = end === host.length ? host : host.slice(0, end);
  return upper ? name.toLowerCase() : name;
}

/** "*", "*.suffix" or the exact name, lower-cased; null after reporting a problem. */
function hostKey(host: unknown, here: string, problems: string[]): string | null {
  if (typeof host !== 'string' || host.length === 0) {
    problems.push(problem(here, host, 'must be a host name, "*.example.com" or "*"'));
    return null;
  }
  if (host === '*') return '*';
  const wild = host.startsWith('*.');
  const name = wild ? host.slice(2) : host;
  if (name.includes('*')) {
    problems.push(problem(here, host, 'a wildcard is only allowed alone ("*") or as the whole first label ("*.example.com")'));
    return null;
  }
  if (name.includes(':')) {
    problems.push(problem(here, host, 'a route host has no port (and IP addresses are not host names: use "*")'));
    return null;
  }
  if (name.endsWith('.') && hostNameProblem(name.slice(0, -1)) === null) {
    problems.push(
      problem(here, host, `write it without the trailing dot (${JSON.stringify(host.slice(0, -1))}); requests with one match it`),
    );
    return null;
  }
  const why = hostNameProblem(name);
  if (why !== null) {
    problems.push(problem(here, host, `${why}${why.startsWith('is an IP') ? ' (requests by address take the default route "*")' : ''}`));
    return null;
  }
  const lower = asciiLower(name);
  return wild ? `*.${lower}` : lower;
}

/** Validated, normalised paths (prefixes without a trailing "/"); null when the route has none. */
function checkPaths(paths: unknown, here: string, kind: 'http' | 'sni', problems: string[]): PathSpec[] | null {
  if (paths === undefined) return null;
  if (kind === 'sni') {
    problems.push(problem(here, paths, 'an SNI route (tcp listener) cannot match paths: it never sees HTTP'));
    return null;
  }
  if (!Array.isArray(paths) || paths.length === 0) {
    problems.push(problem(here, paths, 'must be a non-empty list of {path, match}; leave it out to match every path'));
    return null;
  }
  const out: PathSpec[] = [];
  paths.forEach((p: unknown, k) => {
    const at = `${here}[${k}]`;
    if (p === null || typeof p !== 'object') {
      problems.push(problem(at, p, 'must be {path, match: "exact" | "prefix"}'));
      return;
    }
    const { path, match, ignoreCase } = p as { path: unknown; match: unknown; ignoreCase: unknown };
    if (match !== 'exact' && match !== 'prefix') {
      problems.push(problem(`${at}.match`, match, 'must be "exact" or "prefix"'));
      return;
    }
    if (ignoreCase !== undefined && typeof ignoreCase !== 'boolean') {
      problems.push(problem(`${at}.ignoreCase`, ignoreCase, 'must be true or false'));
      return;
    }
    if (typeof path !== 'string') {
      problems.push(problem(`${at}.path`, path, 'must be a string starting with "/"'));
      return;
    }
    const why = configPathProblem(path);
    if (why !== null) {
      problems.push(problem(`${at}.path`, path, why));
      return;
    }
    // Gateway API: "a trailing / is ignored" for PathPrefix, so "/api/" and "/api" are one prefix.
    const normal = match === 'prefix' && path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    out.push(Object.freeze(ignoreCase === true ? { path: normal, match, ignoreCase } : { path: normal, match }));
  });
  return out;
}

type Claim = { m: RouteMatch; where: string };

/** Collects one host's paths while compiling; reports a host+path that two entries claim. */
class Builder {
  private readonly exact = new Map<string, Claim>();
  private readonly prefix = new Map<string, Claim>();
  /** `ignoreCase` paths by their lower-cased form. */
  private readonly foldExact = new Map<string, Claim>();
  private readonly foldPrefix = new Map<string, Claim>();
  /** Case-sensitive paths by their lower-cased form (the first of each), to find a folded path's rival. */
  private readonly lowerExact = new Map<string, Claim>();
  private readonly lowerPrefix = new Map<string, Claim>();
  private readonly hostMatch: RouteMatch['hostMatch'];

  constructor(private readonly key: string) {
    this.hostMatch = key === '*' ? 'default' : key.startsWith('*.') ? 'wildcard' : 'exact';
  }

  add(p: PathSpec | null, routeIndex: number, route: string, where: string, host: unknown, problems: string[], at: string): void {
    const m: RouteMatch = Object.freeze({ kind: 'match', route, routeIndex, host: this.key, hostMatch: this.hostMatch, path: p });
    const isExact = p !== null && p.match === 'exact';
    const path = p === null ? '/' : p.path;
    const lower = asciiLower(path);
    // A path without ASCII letters reads the same in any case: kept with the case-sensitive ones.
    const fold = p !== null && p.ignoreCase === true && /[A-Za-z]/.test(path);
    const map = fold ? (isExact ? this.foldExact : this.foldPrefix) : isExact ? this.exact : this.prefix;
    const key = fold ? lower : path;
    // Equal as written, or equal ignoring case where either entry ignores it: the same requests.
    const prior =
      map.get(key) ??
      (fold ? (isExact ? this.lowerExact : this.lowerPrefix).get(lower) : (isExact ? this.foldExact : this.foldPrefix).get(lower));
    if (prior !== undefined) {
      const what =
        p === null ? 'every path (no paths)' : `${p.match} path ${JSON.stringify(p.path)}${p.ignoreCase === true ? ' (ignoreCase)' : ''}`;
      const priorWhat =
        prior.m.path === null
          ? 'every path'
          : `${prior.m.path.match} ${JSON.stringify(prior.m.path.path)}${prior.m.path.ignoreCase === true ? ', ignoreCase' : ''}`;
      problems.push(
        problem(where, host, `${what} on this host is already routed by ${prior.where} (${priorWhat}); ${at}: each host + path once`),
      );
      return;
    }
    const claim = { m, where: `${at}[${routeIndex}] (${JSON.stringify(route)})` };
    map.set(key, claim);
    if (!fold) {
      const lowers = isExact ? this.lowerExact : this.lowerPrefix;
      if (!lowers.has(lower)) lowers.set(lower, claim);
    }
  }

  build(): HostEntry {
    const folded = this.foldExact.size + this.foldPrefix.size > 0 ? entryOf(this.foldExact, this.foldPrefix, null) : null;
    return entryOf(this.exact, this.prefix, folded);
  }
}

function entryOf(exactClaims: Map<string, Claim>, prefixClaims: Map<string, Claim>, folded: HostEntry | null): HostEntry {
  const exact = [...exactClaims].map(([k, v]) => [k, v.m] as const);
  const root = prefixClaims.get('/')?.m ?? null;
  const rest = [...prefixClaims]
    .filter(([k]) => k !== '/')
    .map(([k, v]) => [k, v.m] as const)
    .sort((a, b) => b[0].length - a[0].length);
  const smallExact = exact.length <= SMALL;
  const smallPrefix = rest.length <= SMALL;
  return {
    exactPaths: smallExact ? exact.map(([k]) => k) : [],
    exactMatches: smallExact ? exact.map(([, m]) => m) : [],
    exactMap: smallExact ? null : new Map(exact),
    prefixPaths: smallPrefix ? rest.map(([k]) => k) : [],
    prefixMatches: smallPrefix ? rest.map(([, m]) => m) : [],
    prefixMap: smallPrefix ? null : new Map(rest),
    prefixLengths: smallPrefix ? [] : [...new Set(rest.map(([k]) => k.length))], // rest is longest first
    root,
    folded,
  };
}
