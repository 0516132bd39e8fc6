/**
 * The edge rules (docs/edge-rules.md): what an nginx `location` block holds besides `allow` /
 * `deny` and `proxy_pass`. Each is set per route (routes[].http) with a listener-level default
 * (listeners[].http); a route's own replaces the listener's, and `null` turns an inherited one off.
 * Nothing here is on by default: a listener or route without rules decides each request exactly
 * as before.
 *
 * Each rule is a step of the policy (http-policy.ts), after the allowlist, in this order:
 *
 *   route -> identity -> allowlist -> body size -> upstream (with the route's timeouts)
 *
 * A route with no rule has no EdgeRules at all (`HttpRoute.rules` null): its requests pay one null
 * check.
 */
import type { ListenerConfig, RouteConfig } from '../../config/schema';
import { ListenerStats } from '../../metrics/listener-stats';
import type { CannedResponses } from './canned';
import type { Exchange } from './exchange';
import { RequestDecision, type UpstreamTimeouts } from './request-decision';

/** What the steps read of one request (http-policy.ts fills one scratch object per policy). */
export interface EdgeRequest {
  readonly ex: Exchange;
  /** Content-Length, -1 without one. */
  readonly contentLength: number;
}

export class EdgeRules {
  constructor(
    /** -1: no limit. */
    readonly maxBodyBytes: number,
    /** The route's upstream bounds when any differs from the listener's plain connect timeout, else null. */
    readonly timeouts: UpstreamTimeouts | null,
    readonly canned: CannedResponses,
    readonly stats: ListenerStats,
    /** The `route` label of the counters ('' on a listener without routes). */
    readonly route: string,
  ) {}

  /** The body-size step: a 413 for a Content-Length over the limit, else null. */
  tooLarge(r: EdgeRequest): RequestDecision | null {
    if (this.maxBodyBytes < 0 || r.contentLength <= this.maxBodyBytes) return null;
    r.ex.reason = 'body_too_large';
    ListenerStats.bump(this.stats.httpClientErrors, 'body_too_large');
    // Closed after the answer: reading past a body refused for its size would cost what the limit is for.
    return new RequestDecision('answer', r.ex, this.canned.payloadTooLarge, true, null, null, 0, null, null);
  }
}

/** What compileEdgeRules reads of a listener. */
export interface EdgeCompileInput {
  readonly listener: Readonly<ListenerConfig>;
  /** null: the listener's own rules (a listener without routes). */
  readonly route: Readonly<RouteConfig> | null;
  readonly canned: CannedResponses;
  readonly stats: ListenerStats;
}

/** The rules of a route (or of a listener without routes); null when it has none. */
export function compileEdgeRules(i: EdgeCompileInput): EdgeRules | null {
  const h = i.listener.http;
  const rh = i.route?.http;
  const maxBody = rh?.maxBodyBytes !== undefined ? rh.maxBodyBytes : h.maxBodyBytes;
  const listenerConnect = i.listener.timeouts.connectMs;
  const connectMs = rh?.connectTimeoutMs ?? listenerConnect;
  const readMs = (rh?.readTimeoutMs !== undefined ? rh.readTimeoutMs : h.readTimeoutMs) ?? 0;
  const sendMs = (rh?.sendTimeoutMs !== undefined ? rh.sendTimeoutMs : h.sendTimeoutMs) ?? 0;
  const timeouts = connectMs === listenerConnect && readMs === 0 && sendMs === 0 ? null : Object.freeze({ connectMs, readMs, sendMs });
  if (maxBody === null && timeouts === null) return null;
  return new EdgeRules(maxBody ?? -1, timeouts, i.canned, i.stats, i.route?.name ?? '');
}
