/**
 * The ingress-nginx controller ConfigMap keys ipgate has an equivalent for: the default (global)
 * source ranges, the client-address trust (trust.ts: PROXY protocol, the trusted proxies and
 * their header, X-Forwarded-For appending), the read timeout (docs/migrating-from-ingress-nginx.md).
 * Every other key is reported.
 */
import type { Cidr } from '../allowlist/cidr';
import { FALSE, isRecord, objectKey, TRUE, type KubeObject } from './objects';
import type { ImportReport } from './report';
import { parseSourceRange } from './source-ranges';
import { importTrust, TRUST_KEYS, type Trust, type TrustOptions } from './trust';

export interface ConfigMapSettings extends Trust {
  source: string;
  allow: Cidr[] | null;
  deny: Cidr[] | null;
  upstreamTimeoutMs: number | null;
  /** ssl-redirect: plain HTTP to a TLS host is redirected unless an Ingress says otherwise (default true). */
  sslRedirect: boolean;
  /** allow-cross-namespace-resources: an annotation may name a Secret of another namespace (default false). */
  crossNamespace: boolean;
}

/** The controller ConfigMap's keys that ipgate has an equivalent for; every other key is listed. */
export function configMapSettings(cm: KubeObject | null, report: ImportReport, trust: TrustOptions): ConfigMapSettings {
  const source = cm === null ? 'ConfigMap (none)' : `ConfigMap ${objectKey(cm)}`;
  const data: Record<string, string> = {};
  if (cm !== null && isRecord(cm.data)) for (const [k, v] of Object.entries(cm.data)) data[k] = typeof v === 'string' ? v : String(v);
  // No ConfigMap is ingress-nginx's defaults: nothing trusted, which importTrust says for empty data.
  const out: ConfigMapSettings = {
    source,
    allow: null,
    deny: null,
    upstreamTimeoutMs: null,
    sslRedirect: !FALSE.has(data['ssl-redirect'] ?? ''),
    crossNamespace: TRUE.has(data['allow-cross-namespace-resources'] ?? ''),
    ...importTrust(data, source, trust, report),
  };
  if (cm === null) return out;
  const ranges = (key: string): Cidr[] | null => {
    const text = data[key];
    if (text === undefined || text.trim() === '') return null;
    const r = parseSourceRange(text);
    if (!r.ok) {
      report.unconverted.push({
        source,
        item: key,
        value: text,
        reason: `invalid: ${r.message}; the default allowlist is left empty (every route without its own list refuses everyone)`,
      });
      return [];
    }
    if (r.rewritten.length > 0)
      report.notes.push({ source, item: key, value: text, reason: `written as ipgate reads it: ${r.rewritten.join(', ')}` });
    return r.cidrs;
  };
  const used = new Set([
    'whitelist-source-range',
    'denylist-source-range',
    'proxy-read-timeout',
    'allow-cross-namespace-resources',
    ...TRUST_KEYS,
  ]);
  // Read for the plaintext listener (which hosts ingress-nginx served only over HTTPS); ipgate does not redirect.
  if (!out.sslRedirect) used.add('ssl-redirect');
  out.allow = ranges('whitelist-source-range');
  out.deny = ranges('denylist-source-range');
  if (data['proxy-read-timeout'] !== undefined) {
    out.upstreamTimeoutMs = readTimeout(data['proxy-read-timeout']);
    if (out.upstreamTimeoutMs === null)
      report.unconverted.push({
        source,
        item: 'proxy-read-timeout',
        value: data['proxy-read-timeout'],
        reason: 'not a whole number of seconds from 1 to 86400',
      });
    else report.notes.push({ source, item: 'proxy-read-timeout', value: data['proxy-read-timeout'], reason: READ_TIMEOUT_NOTE });
  }
  for (const [k, v] of Object.entries(data)) {
    if (!used.has(k)) report.unconverted.push({ source, item: k, value: v, reason: 'no ipgate equivalent' });
  }
  return out;
}

export const READ_TIMEOUT_NOTE =
  "as http.upstreamTimeoutMs: ipgate waits this long for the response headers; nginx's proxy_read_timeout also bounded each later read of the body (ipgate: the listener's timeouts.idleMs)";

/** proxy-read-timeout (whole seconds, as ingress-nginx's parser reads it) in ms, or null. */
export function readTimeout(v: string | undefined): number | null {
  if (v === undefined || !/^[0-9]{1,5}$/.test(v.trim())) return null;
  const s = Number(v.trim());
  return s >= 1 && s <= 86_400 ? s * 1000 : null;
}
