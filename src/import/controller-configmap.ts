/**
 * The ingress-nginx controller ConfigMap keys ipgate has an equivalent for: the default (global)
 * source ranges, the client-address trust (trust.ts: PROXY protocol, the trusted proxies and
 * their header, X-Forwarded-For appending), the read timeout (docs/migrating-from-ingress-nginx.md).
 * Every other key is reported.
 */
import type { Cidr } from '../allowlist/cidr';
import { bodySize } from './annotations';
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
  /** force-ssl-redirect: plain HTTP to any host is redirected unless an Ingress says otherwise (default false). */
  forceSslRedirect: boolean;
  /** http-redirect-code: the status of the HTTPS and www redirects (default 308; ingress-nginx takes 301, 302, 307, 308). */
  httpRedirectCode: 301 | 302 | 307 | 308;
  /** no-tls-redirect-locations: paths starting with one of these are never redirected to HTTPS (default the ACME challenge). */
  noTlsRedirectLocations: string[];
  /** proxy-body-size: the listener's http.maxBodyBytes (null: `0`, no limit); undefined: not set (ipgate's default, no limit). */
  maxBodyBytes: number | null | undefined;
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
    forceSslRedirect: TRUE.has(data['force-ssl-redirect'] ?? ''),
    httpRedirectCode: 308,
    noTlsRedirectLocations: ['/.well-known/acme-challenge'],
    maxBodyBytes: undefined,
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
    'ssl-redirect',
    'force-ssl-redirect',
    'http-redirect-code',
    'no-tls-redirect-locations',
    'proxy-body-size',
    'whitelist-source-range',
    'denylist-source-range',
    'proxy-read-timeout',
    'allow-cross-namespace-resources',
    ...TRUST_KEYS,
  ]);
  // ingress-nginx's configmap.go: a code outside 301, 302, 307, 308 (or not a number) is logged and the default (308) kept.
  const code = data['http-redirect-code'];
  if (code !== undefined) {
    const n = /^\s*[0-9]{3}\s*$/.test(code) ? Number(code) : Number.NaN;
    if (n === 301 || n === 302 || n === 307 || n === 308) out.httpRedirectCode = n;
    else
      report.notes.push({
        source,
        item: 'http-redirect-code',
        value: code,
        reason: 'not 301, 302, 307 or 308: ingress-nginx ignored it and redirected with 308, as the import does',
      });
  }
  const body = data['proxy-body-size'];
  if (body !== undefined) {
    out.maxBodyBytes = bodySize(body);
    if (out.maxBodyBytes === undefined)
      report.unconverted.push({ source, item: 'proxy-body-size', value: body, reason: 'not an nginx size (digits, then k, m or g)' });
    else
      report.notes.push({
        source,
        item: 'proxy-body-size',
        value: body,
        reason:
          'as the listeners\' http.maxBodyBytes, the default of every route without its own annotation (docs/edge-rules.md "Body size")',
      });
  }
  // nginx.tmpl's locationConfigForLua: a location whose path starts with one of these is not redirected to HTTPS.
  const noRedirect = data['no-tls-redirect-locations'];
  if (noRedirect !== undefined)
    out.noTlsRedirectLocations = noRedirect
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '');
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
