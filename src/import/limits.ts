/**
 * ingress-nginx's rate-limiting annotations as a route's `limits` (docs/edge-rules.md "Rate and
 * connection limits"), behaving as the controller's nginx did (its template's buildRateLimit):
 *
 *   limit-rps: N              limit_req rate=Nr/s burst=N*multiplier nodelay   -> limits.requests
 *   limit-rpm: N              limit_req rate=Nr/m burst=N*multiplier nodelay   -> limits.requests
 *   limit-burst-multiplier    the multiplier (5 unless set)
 *   limit-connections: N      limit_conn N                                     -> limits.concurrent
 *   limit-whitelist: CIDRs    exempt from both (its geo map empties the key)  -> an allowlist named in `exempt`
 *
 * Refusals answer 503, the controller's `limit-req-status-code` / `limit-conn-status-code` unless
 * its ConfigMap said otherwise. ingress-nginx applies limit-rps and limit-rpm together; ipgate has
 * one request rate per route, so the stricter over time is converted and the other reported.
 */
import { parseSourceRange } from './source-ranges';

type Json = Record<string, unknown>;
type Cidr = Extract<ReturnType<typeof parseSourceRange>, { ok: true }>['cidrs'][number];

/** A whole number annotation (ingress-nginx parses them with strconv.Atoi): the number, or null. */
export function limitNumber(v: string | undefined): number | null {
  if (v === undefined || !/^\s*[0-9]{1,7}\s*$/.test(v)) return null;
  return Number(v);
}

export interface LimitImport {
  /** The route's `limits`, or null. */
  limits: Json | null;
  /** limit-whitelist's ranges: an allowlist to write and name in `exempt`. */
  exempt: Cidr[] | null;
  unconverted: Array<{ item: string; value: string; reason: string }>;
  notes: Array<{ item: string; value: string; reason: string }>;
}

/** The limits of one Ingress's annotations (`ann`, full names; `prefix` the annotation prefix). */
export function importLimits(ann: Record<string, string>, prefix: string): LimitImport {
  const out: LimitImport = { limits: null, exempt: null, unconverted: [], notes: [] };
  const rps = limitNumber(ann[`${prefix}limit-rps`]);
  const rpm = limitNumber(ann[`${prefix}limit-rpm`]);
  const conns = limitNumber(ann[`${prefix}limit-connections`]);
  const multText = ann[`${prefix}limit-burst-multiplier`];
  const mult = multText === undefined ? 5 : (limitNumber(multText) ?? 5);
  const limits: Json = {};
  // 0 turns a limit off in ingress-nginx (its template writes it only when > 0).
  const perSecond = rps !== null && rps > 0 ? rps : null;
  const perMinute = rpm !== null && rpm > 0 ? rpm : null;
  let rate: { rate: string; burst: number; from: string } | null = null;
  if (perSecond !== null) rate = { rate: `${perSecond}r/s`, burst: perSecond * mult, from: 'limit-rps' };
  if (perMinute !== null && (rate === null || perMinute / 60 < perSecond!)) {
    if (rate !== null)
      out.unconverted.push({
        item: `${prefix}limit-rps`,
        value: ann[`${prefix}limit-rps`]!,
        reason: 'ipgate applies one request rate per route: limit-rpm, the stricter over time, was converted (ingress-nginx applied both)',
      });
    rate = { rate: `${perMinute}r/m`, burst: perMinute * mult, from: 'limit-rpm' };
  } else if (perMinute !== null) {
    out.unconverted.push({
      item: `${prefix}limit-rpm`,
      value: ann[`${prefix}limit-rpm`]!,
      reason: 'ipgate applies one request rate per route: limit-rps, the stricter over time, was converted (ingress-nginx applied both)',
    });
  }
  if (rate !== null) limits.requests = { rate: rate.rate, burst: rate.burst, nodelay: true, status: 503 };
  if (conns !== null && conns > 0) limits.concurrent = { perClient: conns, status: 503 };
  const white = ann[`${prefix}limit-whitelist`];
  if (white !== undefined && white.trim() !== '' && (rate !== null || limits.concurrent !== undefined)) {
    const r = parseSourceRange(white);
    if (r.ok) out.exempt = r.cidrs;
    else
      out.unconverted.push({
        item: `${prefix}limit-whitelist`,
        value: white,
        reason: `invalid: ${r.message}; the limits apply to every client`,
      });
  }
  if (Object.keys(limits).length > 0) {
    out.limits = limits;
    out.notes.push({
      item: `${prefix}${rate?.from ?? 'limit-connections'}`,
      value: ann[`${prefix}${rate?.from ?? 'limit-connections'}`]!,
      reason:
        'the route gets limits (nodelay, burst = rate x limit-burst-multiplier, refused with 503 as ingress-nginx answered); per client ipgate derived (behind a trusted balancer, the real client), held across ipgate workers',
    });
  }
  return out;
}
