/**
 * ingress-nginx annotations: which ones ipgate carries over (or has nothing to carry for), and
 * for each other one, why not, in one sentence for the report.
 */
import { readTimeout } from './controller-configmap';
import { limitNumber } from './limits';
import { REFUSED_LIST } from './listeners';
import { isRecord, type KubeObject } from './objects';

/** The annotations whose routes are imported refused (ipgate cannot do the authentication they ask for). */
export const AUTH_GATES = ['auth-url', 'auth-type'] as const;

/** null when the annotation is carried over (or has nothing to carry), else why not. */
export function annotationVerdict(short: string, value: string): string | null {
  switch (short) {
    case 'allowlist-source-range':
    case 'whitelist-source-range':
    case 'denylist-source-range':
      return null; // converted (or reported as invalid) with the allowlist
    case 'use-regex':
      return null; // decides how the host's paths are read; reported with them (ingress-nginx.ts)
    case 'auth-tls-secret':
    case 'auth-tls-verify-client':
    case 'auth-tls-verify-depth':
    case 'auth-tls-error-page':
    case 'auth-tls-pass-certificate-to-upstream':
    case 'auth-tls-match-cn':
      return null; // client certificates: carried over or reported per host (client-certs.ts, listeners.ts)
    case 'service-upstream':
      return null; // ipgate always sends to the Service address, as service-upstream: "true" does
    case 'proxy-read-timeout':
    case 'proxy-connect-timeout':
    case 'proxy-send-timeout':
      return readTimeout(value) !== null ? null : 'not a whole number of seconds from 1 to 86400';
    case 'proxy-body-size':
      return bodySize(value) !== undefined ? null : 'not an nginx size (digits, then k, m or g)';
    case 'permanent-redirect':
    case 'temporal-redirect':
      return /^https?:\/\/[\x21-\x7e]+$/.test(value) && value.length <= 2048
        ? null
        : 'not an absolute http(s) URL ipgate can send as a Location';
    case 'permanent-redirect-code':
    case 'temporal-redirect-code':
      return null; // read with the redirect (ingress-nginx.ts)
    case 'ssl-redirect':
    case 'force-ssl-redirect':
    case 'from-to-www-redirect':
    case 'preserve-trailing-slash':
      return null; // the routes' http.httpsRedirect and the www routes' http.redirect (ingress-nginx.ts), each with its note
    case 'rewrite-target':
    case 'x-forwarded-prefix':
      return null; // per path: an http.rewrite or the path listed with its reason (rewrite-target.ts)
    case 'backend-protocol': {
      // GRPC / GRPCS: the route's http.upstreamProtocol (h2c / h2), ingress-nginx.ts.
      const p = value.toUpperCase();
      return p === 'HTTP' || p === 'GRPC' || p === 'GRPCS'
        ? null
        : `ipgate speaks HTTP/1.1 to upstreams, or HTTP/2 for gRPC (GRPC, GRPCS); ${JSON.stringify(value)} backends are not supported`;
    }
    case 'limit-rps':
    case 'limit-rpm':
    case 'limit-connections':
    case 'limit-burst-multiplier':
      return limitNumber(value) !== null ? null : 'not a whole number';
    case 'limit-whitelist':
      return null; // read with the limits (limits.ts): an invalid range is reported there
    case 'limit-rate':
    case 'limit-rate-after':
      return 'ipgate does not limit bandwidth (nginx limit_rate)';
    case 'configuration-snippet':
    case 'server-snippet':
    case 'stream-snippet':
    case 'auth-snippet':
    case 'modsecurity-snippet':
      return 'raw nginx directives: ipgate runs none; read the snippet and carry over by hand what it did (a header, a return, a rewrite), or drop it';
    case 'enable-modsecurity':
    case 'enable-owasp-core-rules':
    case 'modsecurity-transaction-id':
      return 'ipgate has no web application firewall (ModSecurity): requests reach the backend without its rules';
    default:
      if (short === 'auth-url')
        return `ipgate does no external authentication (nginx auth_request), and serving these routes without the auth service would let every allowlisted client in: they get the empty list ${REFUSED_LIST} (403 to every client) until you put the auth proxy in front of the backend and give them their allowlist by hand`;
      if (short === 'auth-type')
        return `ipgate has no basic or digest authentication, and serving these routes without credentials would let every allowlisted client in: they get the empty list ${REFUSED_LIST} (403 to every client) until the backend (or a proxy in front of it) asks for credentials and you give them their allowlist by hand`;
      if (short === 'auth-signin' || short.startsWith('auth-response') || short.startsWith('auth-request') || short.startsWith('auth-'))
        return 'a setting of the external or basic authentication ipgate does not do (see auth-url / auth-type: those routes are refused)';
      if (short.startsWith('canary')) return 'ipgate has no traffic splitting';
      if (short.startsWith('affinity') || short.startsWith('session-cookie'))
        return 'ipgate has no session affinity (the Service address balances)';
      if (short.includes('cors'))
        return 'ipgate adds no CORS headers and answers no preflight OPTIONS itself (ingress-nginx did, with 204): the backend must send Access-Control-Allow-* itself';
      return 'no ipgate equivalent';
  }
}

/**
 * An nginx size (ingress-nginx `proxy-body-size`: `8m`, `512k`, `1g`, bytes without a unit) in
 * bytes; null for `0` (nginx: no limit); undefined when it is not one.
 */
export function bodySize(v: string): number | null | undefined {
  const m = /^\s*([0-9]{1,12})([kKmMgG]?)\s*$/.exec(v);
  if (m === null) return undefined;
  const n = Number(m[1]) * ({ '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 } as Record<string, number>)[m[2]!.toLowerCase()]!;
  return n === 0 ? null : n;
}

/** The annotations as strings (a YAML `true` written unquoted is `"true"`, as the API server would refuse it anyway). */
export function annotationsOf(ing: KubeObject): Record<string, string> {
  const a = ing.metadata?.annotations;
  const out: Record<string, string> = {};
  if (isRecord(a)) for (const [k, v] of Object.entries(a)) out[k] = typeof v === 'string' ? v : String(v);
  return out;
}
