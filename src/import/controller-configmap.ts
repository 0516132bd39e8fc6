/**
 * The ingress-nginx controller ConfigMap keys ipgate has an equivalent for: the default (global)
 * source ranges, PROXY protocol, the trusted proxies and their header, X-Forwarded-For appending,
 * the read timeout (docs/migrating-from-ingress-nginx.md). Every other key is reported.
 */
import type { Cidr } from '../allowlist/cidr';
import { isRecord, objectKey, type KubeObject } from './objects';
import type { ImportReport } from './report';
import { parseSourceRange } from './source-ranges';

/** strconv.ParseBool, which ingress-nginx uses for boolean annotations and ConfigMap keys. */
export const TRUE: ReadonlySet<string> = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
export const FALSE: ReadonlySet<string> = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

export interface ConfigMapSettings {
  source: string;
  allow: Cidr[] | null;
  deny: Cidr[] | null;
  proxyProtocol: string[] | null;
  trustedProxies: string[] | null;
  xForwardedFor: 'append' | 'replace';
  upstreamTimeoutMs: number | null;
}

/** The controller ConfigMap's keys that ipgate has an equivalent for; every other key is listed. */
export function configMapSettings(cm: KubeObject | null, report: ImportReport): ConfigMapSettings {
  const source = cm === null ? 'ConfigMap (none)' : `ConfigMap ${objectKey(cm)}`;
  const out: ConfigMapSettings = { source, allow: null, deny: null, proxyProtocol: null, trustedProxies: null, xForwardedFor: 'replace', upstreamTimeoutMs: null };
  if (cm === null) return out;
  const data: Record<string, string> = {};
  if (isRecord(cm.data)) for (const [k, v] of Object.entries(cm.data)) data[k] = typeof v === 'string' ? v : String(v);
  const ranges = (key: string): Cidr[] | null => {
    const text = data[key];
    if (text === undefined || text.trim() === '') return null;
    const r = parseSourceRange(text);
    if (!r.ok) {
      report.unconverted.push({ source, item: key, value: text, reason: `invalid: ${r.message}; the default allowlist is left empty (every route without its own list refuses everyone)` });
      return [];
    }
    if (r.rewritten.length > 0) report.notes.push({ source, item: key, value: text, reason: `written as ipgate reads it: ${r.rewritten.join(', ')}` });
    return r.cidrs;
  };
  const used = new Set(['whitelist-source-range', 'denylist-source-range', 'use-proxy-protocol', 'proxy-real-ip-cidr', 'use-forwarded-headers',
    'enable-real-ip', 'forwarded-for-header', 'compute-full-forwarded-for', 'proxy-read-timeout']);
  out.allow = ranges('whitelist-source-range');
  out.deny = ranges('denylist-source-range');
  const pp = TRUE.has(data['use-proxy-protocol'] ?? '');
  const xff = TRUE.has(data['use-forwarded-headers'] ?? '') || TRUE.has(data['enable-real-ip'] ?? '');
  let realIp: string[] | null = null;
  if (pp || xff) {
    const text = data['proxy-real-ip-cidr'];
    if (text === undefined || text.trim() === '') {
      realIp = ['0.0.0.0/0'];
      report.notes.push({ source, item: 'proxy-real-ip-cidr', reason: 'not set: ingress-nginx\'s default 0.0.0.0/0 is written, which trusts every IPv4 peer\'s PROXY header / X-Forwarded-For; list your load balancers\' CIDRs instead' });
    } else {
      const r = parseSourceRange(text);
      if (!r.ok) report.unconverted.push({ source, item: 'proxy-real-ip-cidr', value: text, reason: `invalid: ${r.message}; no peer is trusted` });
      else realIp = r.cidrs.map((c) => c.text);
    }
  }
  if (pp && realIp !== null) out.proxyProtocol = realIp;
  if (xff && realIp !== null) {
    const header = data['forwarded-for-header'] ?? 'X-Forwarded-For';
    if (header.toLowerCase() === 'x-forwarded-for') out.trustedProxies = realIp;
    else report.unconverted.push({ source, item: 'forwarded-for-header', value: header, reason: 'ipgate reads the client address from X-Forwarded-For only; no proxy is trusted' });
  } else if (data['forwarded-for-header'] !== undefined && !pp) {
    report.notes.push({ source, item: 'forwarded-for-header', value: data['forwarded-for-header'], reason: 'has no effect without use-forwarded-headers or enable-real-ip (nothing to carry over)' });
  }
  if (TRUE.has(data['compute-full-forwarded-for'] ?? '')) out.xForwardedFor = 'append';
  if (data['proxy-read-timeout'] !== undefined) {
    out.upstreamTimeoutMs = readTimeout(data['proxy-read-timeout']);
    if (out.upstreamTimeoutMs === null) report.unconverted.push({ source, item: 'proxy-read-timeout', value: data['proxy-read-timeout'], reason: 'not a whole number of seconds from 1 to 86400' });
    else report.notes.push({ source, item: 'proxy-read-timeout', value: data['proxy-read-timeout'], reason: READ_TIMEOUT_NOTE });
  }
  for (const [k, v] of Object.entries(data)) {
    if (!used.has(k)) report.unconverted.push({ source, item: k, value: v, reason: 'no ipgate equivalent' });
  }
  return out;
}

export const READ_TIMEOUT_NOTE = 'as http.upstreamTimeoutMs: ipgate waits this long for the response headers; nginx\'s proxy_read_timeout also bounded each later read of the body (ipgate: the listener\'s timeouts.idleMs)';

/** proxy-read-timeout (whole seconds, as ingress-nginx's parser reads it) in ms, or null. */
export function readTimeout(v: string | undefined): number | null {
  if (v === undefined || !/^[0-9]{1,5}$/.test(v.trim())) return null;
  const s = Number(v.trim());
  return s >= 1 && s <= 86_400 ? s * 1000 : null;
}
