/**
 * The edge rules (docs/edge-rules.md): what an nginx `location` block holds besides `allow` /
 * `deny` and `proxy_pass`. Each is set per route (routes[].http) with a listener-level default
 * (listeners[].http); a route's own replaces the listener's, and `null` turns an inherited one off.
 * Nothing here is on by default: a listener or route without rules decides each request exactly
 * as before.
 *
 * Each rule is a step of the policy (http-policy.ts), in this order:
 *
 *   route -> identity -> allowlist -> redirect -> body size -> rate limit -> rewrite
 *     -> upstream (no target up: 503; else the route's timeouts) -> concurrency limit
 *
 * The allowlist goes before the redirect so that a refused client learns nothing but its 403
 * (nginx's `return` answers before `allow`/`deny` run, in its rewrite phase; a redirect with
 * `beforeAllowlist: true` keeps nginx's order, e.g. for an HTTP-to-HTTPS port every client may
 * see). The redirect goes before the body size: a redirected request's body is not the backend's.
 * The limits go after the allowlist, so a refused client gets its 403, not a 429 (nginx runs
 * limit_req before allow/deny; the allowlist is ipgate's first promise), and after the body size,
 * so a 413 spends no token. The concurrency slot is taken last, when the request surely goes
 * upstream (a 503 for no target up holds none).
 *
 * A route with no rule has no EdgeRules at all (`HttpRoute.rules` null): its requests pay one null
 * check.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { HttpsRedirectConfig, ListenerConfig, RedirectConfig, RewriteConfig, RouteConfig } from '../../schema/config';
import { ListenerStats } from '../../metrics/listener-stats';
import { type ConcurrencyZone, LimitZones, REFUSED, type RateZone } from '../../limit/limit-zones';
import type { LiveList } from '../../store/live-lists';
import { Canned, type CannedResponses } from './canned';
import type { Exchange } from './exchange';
import type { UpstreamGroup } from '../../upstream/upstream-group';
import { RequestDecision, type UpstreamTimeouts } from './request-decision';

/** What the steps read of one request (http-policy.ts fills one scratch object per policy). */
export interface EdgeRequest {
  readonly ex: Exchange;
  /** http or https: how the request reached the edge (the listener's TLS, or a trusted proxy's X-Forwarded-Proto). */
  readonly scheme: 'http' | 'https';
  /** The host it was decided on (request-host.ts normal form, with any port). */
  readonly host: string;
  /** The origin-form target as the client sent it (the absolute form's path and query). */
  readonly target: string;
  /** Content-Length, -1 without one. */
  readonly contentLength: number;
}

const REDIRECT_REASON: Readonly<Record<number, string>> = {
  301: 'Moved Permanently',
  302: 'Found',
  303: 'See Other',
  307: 'Temporary Redirect',
  308: 'Permanent Redirect',
};

const EMPTY = Buffer.alloc(0);

/** A limit as a route enforces it: its zone, who is exempt, the answer to a refusal. */
export class LimitGate<Z extends RateZone | ConcurrencyZone> {
  constructor(
    readonly zone: Z,
    /** Lists whose clients are not limited (`exempt`); empty: none. */
    readonly exempt: readonly LiveList[],
    /** The 429 or 503 of a refused request. */
    readonly refusal: Canned,
    /** Rate limits: the excess forwarded at once (nginx `delay=`; Infinity: nodelay). */
    readonly delay: number,
  ) {}

  exempts(client: string): boolean {
    const lists = this.exempt;
    for (let i = 0; i < lists.length; i++) if (lists[i]!.matcher.admits(client)) return true;
    return false;
  }
}

/** A concurrency slot a request holds until it is over (HttpRecorder.finished releases it). */
export class LimitSlot {
  private held = true;
  constructor(
    private readonly zone: ConcurrencyZone,
    private readonly client: string,
  ) {}

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.zone.release(this.client);
  }
}

export class EdgeRules {
  constructor(
    /** The route's `redirect`, or null. */
    readonly redirect: Readonly<RedirectConfig> | null,
    /** The route's `httpsRedirect`, else the listener's, or null. */
    readonly httpsRedirect: Readonly<HttpsRedirectConfig> | null,
    /** Whichever redirect applies goes before the allowlist (its `beforeAllowlist`). */
    readonly redirectEarly: boolean,
    /** -1: no limit. */
    readonly maxBodyBytes: number,
    readonly rewrite: Readonly<RewriteConfig> | null,
    /** The group has health rules: 503 when no target is up. */
    readonly checkUp: boolean,
    /** The route's upstream bounds when any differs from the listener's plain connect timeout, else null. */
    readonly timeouts: UpstreamTimeouts | null,
    readonly canned: CannedResponses,
    readonly stats: ListenerStats,
    /** The `route` label of the counters ('' on a listener without routes). */
    readonly route: string,
    /** nginx `limit_req` per client, or null. */
    readonly rate: LimitGate<RateZone> | null = null,
    /** nginx `limit_conn` per client (requests in progress), or null. */
    readonly concurrent: LimitGate<ConcurrencyZone> | null = null,
  ) {}

  /**
   * The rate step: a refusal (429 / 503, counted as `limited_requests`), or null with the delay
   * in ms the request waits before it goes upstream (nginx's delay within the burst) in `delayMs`.
   */
  rateLimit(ex: Exchange): RequestDecision | null {
    const gate = this.rate!;
    this.delayMs = 0;
    if (gate.exempt.length > 0 && gate.exempts(ex.client)) return null;
    const r = gate.zone.take(ex.client, gate.delay);
    if (r === REFUSED) return this.limited(ex, gate, 'limited_requests', 'requests');
    if (r > 0) {
      ListenerStats.bump(this.stats.limited, `${this.route}\0requests\0delayed`);
      this.delayMs = r;
    }
    return null;
  }

  /** The delay rateLimit gave (admit is synchronous: read right after it). */
  delayMs = 0;

  /** The concurrency step: a refusal, or null with the slot held (or none: exempt, table full) in `slot`. */
  concurrencyLimit(ex: Exchange): RequestDecision | null {
    const gate = this.concurrent!;
    this.slot = null;
    if (gate.exempt.length > 0 && gate.exempts(ex.client)) return null;
    const r = gate.zone.acquire(ex.client);
    if (r === 0) return this.limited(ex, gate, 'limited_concurrent', 'concurrent');
    if (r === 1) this.slot = new LimitSlot(gate.zone, ex.client);
    return null;
  }

  /** The slot concurrencyLimit took. */
  slot: LimitSlot | null = null;

  private limited(
    ex: Exchange,
    gate: LimitGate<RateZone | ConcurrencyZone>,
    reason: 'limited_requests' | 'limited_concurrent',
    kind: string,
  ): RequestDecision {
    ex.reason = reason;
    ListenerStats.bump(this.stats.limited, `${this.route}\0${kind}\0refused`);
    return new RequestDecision('answer', ex, gate.refusal, false, null, null, 0, null, null);
  }

  /** The redirect this request gets, or null (none, or an HTTPS redirect of a request that came over HTTPS). */
  redirectFor(r: EdgeRequest): RequestDecision | null {
    let location: string;
    let status: number;
    const rd = this.redirect;
    if (rd !== null) {
      location = redirectLocation(rd, r);
      status = rd.status;
    } else {
      const hr = this.httpsRedirect;
      if (hr === null || r.scheme === 'https') return null;
      location = `https://${splitHost(r.host).name}${hr.port === 443 ? '' : `:${hr.port}`}${r.target}`;
      status = hr.status;
    }
    r.ex.reason = 'redirected';
    ListenerStats.bump(this.stats.edge, `${this.route}\0${rd !== null ? 'redirect' : 'https_redirect'}`);
    const canned = new Canned(status, REDIRECT_REASON[status]!, 'text/plain; charset=utf-8', EMPTY, ['Location', location]);
    return new RequestDecision('answer', r.ex, canned, false, null, null, 0, null, null);
  }

  /** The upstream step of a group with health rules: 503 when no target is up (nothing is dialled), else null. */
  noneUp(ex: Exchange, group: UpstreamGroup): RequestDecision | null {
    if (!this.checkUp || group.anyUp()) return null;
    ex.reason = 'upstream_none_up';
    ListenerStats.bump(this.stats.edge, `${this.route}\0upstream_none_up`);
    return new RequestDecision('answer', ex, this.canned.serviceUnavailable, false, null, null, 0, null, null);
  }

  /** The body-size step: a 413 for a Content-Length over the limit, else null. */
  tooLarge(r: EdgeRequest): RequestDecision | null {
    if (this.maxBodyBytes < 0 || r.contentLength <= this.maxBodyBytes) return null;
    r.ex.reason = 'body_too_large';
    ListenerStats.bump(this.stats.httpClientErrors, 'body_too_large');
    // Closed after the answer: reading past a body refused for its size would cost what the limit is for.
    return new RequestDecision('answer', r.ex, this.canned.payloadTooLarge, true, null, null, 0, null, null);
  }
}

/**
 * The target sent upstream after a rewrite: `prefix` (the path entry that matched, '/' for a route
 * without paths) cut from `target` (the target routed, normal form, with its query) and
 * `replacePrefix` put in its place; X-Forwarded-Prefix into `headers`. Slices only (the route
 * table matched the prefix on a "/" boundary): linear in the target, no regular expression.
 */
export function rewriteTarget(rw: Readonly<RewriteConfig>, target: string, prefix: string, headers: OutgoingHttpHeaders): string {
  const cut = prefix === '/' ? 0 : prefix.length;
  const rest = target.slice(cut);
  const by = rw.replacePrefix;
  let out: string;
  if (rest === '' || rest.charCodeAt(0) === 0x3f)
    out = by + rest; // "/api/v1" or "/api/v1?q": the prefix itself
  else out = by.endsWith('/') ? by + rest.slice(1) : by + rest; // rest starts with "/"
  if (rw.forwardedPrefix && cut > 0) headers['x-forwarded-prefix'] = target.slice(0, cut);
  return out;
}

/** The Location of a `redirect` rule for request `r`. */
export function redirectLocation(rd: Readonly<RedirectConfig>, r: EdgeRequest): string {
  if (rd.url !== undefined) return rd.url;
  const scheme = rd.scheme ?? r.scheme;
  const { name, port } = splitHost(r.host);
  const host = rd.host ?? name;
  // Gateway API RequestRedirect: a scheme change without a port goes to that scheme's own port.
  let p: string | null = rd.port !== undefined ? String(rd.port) : rd.scheme !== undefined && rd.scheme !== r.scheme ? null : port;
  if ((scheme === 'https' && p === '443') || (scheme === 'http' && p === '80')) p = null;
  let target = r.target;
  if (rd.path !== undefined) {
    const q = target.indexOf('?');
    target = q < 0 ? rd.path : rd.path + target.slice(q);
  }
  return `${scheme}://${host}${p !== null ? `:${p}` : ''}${target}`;
}

/** `host[:port]` (request-host.ts normal form, `[v6]` bracketed) apart. */
export function splitHost(host: string): { name: string; port: string | null } {
  const colon = host.lastIndexOf(':');
  if (colon < 0 || (host.charCodeAt(0) === 0x5b && host.lastIndexOf(']') > colon)) return { name: host, port: null };
  return { name: host.slice(0, colon), port: host.slice(colon + 1) };
}

/** What compileEdgeRules reads of a listener. */
export interface EdgeCompileInput {
  readonly listener: Readonly<ListenerConfig>;
  /** null: the listener's own rules (a listener without routes). */
  readonly route: Readonly<RouteConfig> | null;
  readonly canned: CannedResponses;
  readonly stats: ListenerStats;
  /** The group the route (or listener) sends to. */
  readonly group: UpstreamGroup;
  /** The process's limit zones (absent: zones of their own, as a config check builds them). */
  readonly limits?: LimitZones;
  /** Where `exempt` names resolve. */
  readonly lists?: { get(name: string): LiveList };
}

/** The rules of a route (or of a listener without routes); null when it has none. */
export function compileEdgeRules(i: EdgeCompileInput): EdgeRules | null {
  const h = i.listener.http;
  const rh = i.route?.http;
  const redirect = rh?.redirect ?? null;
  const httpsRedirect = rh?.httpsRedirect !== undefined ? rh.httpsRedirect : h.httpsRedirect;
  const rewrite = rh?.rewrite ?? null;
  if (rewrite !== null && i.listener.http.pathParameters === 'servlet') {
    // The routed target keeps the `;` parameters of its segments, so the matched prefix is not a
    // plain prefix of it: refused rather than cut at the wrong place.
    throw new Error(`routes "${i.route!.name}": http.rewrite cannot be used on a listener with http.pathParameters "servlet"`);
  }
  const maxBody = rh?.maxBodyBytes !== undefined ? rh.maxBodyBytes : h.maxBodyBytes;
  const listenerConnect = i.listener.timeouts.connectMs;
  const connectMs = rh?.connectTimeoutMs ?? listenerConnect;
  const readMs = (rh?.readTimeoutMs !== undefined ? rh.readTimeoutMs : h.readTimeoutMs) ?? 0;
  const sendMs = (rh?.sendTimeoutMs !== undefined ? rh.sendTimeoutMs : h.sendTimeoutMs) ?? 0;
  const timeouts = connectMs === listenerConnect && readMs === 0 && sendMs === 0 ? null : Object.freeze({ connectMs, readMs, sendMs });
  const checkUp = i.group.health !== null;
  const { rate, concurrent } = limitGates(i);
  if (
    redirect === null &&
    httpsRedirect === null &&
    maxBody === null &&
    rewrite === null &&
    timeouts === null &&
    !checkUp &&
    rate === null &&
    concurrent === null
  )
    return null;
  const early = redirect !== null ? redirect.beforeAllowlist : (httpsRedirect?.beforeAllowlist ?? false);
  return new EdgeRules(
    redirect,
    httpsRedirect,
    early,
    maxBody ?? -1,
    rewrite,
    checkUp,
    timeouts,
    i.canned,
    i.stats,
    i.route?.name ?? '',
    rate,
    concurrent,
  );
}

/**
 * The route's limits (its own, else the listener's), each on a zone of its own place
 * (`listener/route/kind`): a route that inherits the listener's limit still counts its requests
 * apart, as an nginx location with its own `limit_req` does. docs/edge-rules.md "Rate and
 * connection limits".
 */
function limitGates(i: EdgeCompileInput): {
  rate: LimitGate<RateZone> | null;
  concurrent: LimitGate<ConcurrencyZone> | null;
} {
  const ll = i.listener.limits;
  const rl = i.route?.limits;
  const req = rl?.requests !== undefined ? rl.requests : (ll?.requests ?? null);
  const conc = rl?.concurrent !== undefined ? rl.concurrent : (ll?.concurrent ?? null);
  if (req === null && conc === null) return { rate: null, concurrent: null };
  const zones = i.limits ?? new LimitZones();
  const lists = (names: readonly string[]): LiveList[] => (i.lists === undefined ? [] : names.map((n) => i.lists!.get(n)));
  const place = (kind: string): string => `${i.listener.name}/${i.route?.name ?? ''}/${kind}`;
  const refusal = (status: 429 | 503): Canned => (status === 503 ? i.canned.serviceUnavailable : i.canned.tooManyRequests);
  return {
    rate:
      req === null
        ? null
        : new LimitGate(
            zones.rate(place('requests'), 'requests', req),
            lists(req.exempt),
            refusal(req.status),
            req.nodelay ? Number.POSITIVE_INFINITY : req.delay,
          ),
    concurrent:
      conc === null ? null : new LimitGate(zones.concurrency(place('concurrent'), conc), lists(conc.exempt), refusal(conc.status), 0),
  };
}
