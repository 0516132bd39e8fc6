/**
 * Client certificates: ingress-nginx's `auth-tls-secret` / `auth-tls-verify-client` as ipgate's
 * listener `tls.clientCA` / `tls.clientCertificate` (docs/tls.md "Client certificates";
 * docs/migrating-from-ingress-nginx.md "Client certificates").
 *
 * ingress-nginx (controller.go getBackendServers, authtls/main.go, nginx.tmpl v1.15) asks per
 * server, that is per host: the first Ingress, oldest first, whose auth-tls-secret it can read
 * sets the host's `ssl_client_certificate` (the Secret's ca.crt) and `ssl_verify_client`
 * (auth-tls-verify-client: on, the default and what any other value falls back to; optional;
 * optional_no_ca; off) for every path of the host, whichever Ingress routes it. A secret it cannot
 * use (not `namespace/name`, or in another namespace without allow-cross-namespace-resources)
 * makes the whole host answer 403. With a CA set, it sends ssl-client-verify,
 * ssl-client-subject-dn and ssl-client-issuer-dn (and ssl-client-cert with
 * auth-tls-pass-certificate-to-upstream) upstream, overwriting what the client sent.
 *
 * ipgate asks per listener. So the requirement is carried over when every host of the HTTPS
 * listener asks the same (the listener then asks it of everyone); otherwise the hosts that asked
 * for a certificate are left off the listener and listed, never served without it. The
 * ssl-client-* headers are removed from every client request (http.stripHeaders) wherever a host
 * set a CA: ipgate does not send them, and a backend that reads them must not get the client's.
 */
import type { ImportReport } from './report';

/** A host's client-certificate check as ingress-nginx ran it. */
export interface HostClientAuth {
  /** ssl_verify_client. */
  verify: 'on' | 'optional' | 'optional_no_ca' | 'off';
  /** `namespace/name` of the Secret whose `ca.crt` holds the CAs. */
  secret: string;
  /** The annotation as written. */
  raw: string;
  /** The Ingress that set it (`Ingress ns/name`). */
  source: string;
}

export interface ClientAuthPlan {
  hosts: Map<string, HostClientAuth>;
  /** Hosts ingress-nginx answered 403 for (an auth-tls-secret it could not use), and why. */
  refused: Map<string, string>;
}

interface ClientAuthInput {
  source: string;
  namespace: string;
  /** The Ingress's annotations, the prefix removed from ingress-nginx's. */
  ann: (short: string) => string | undefined;
  /** The hosts of its rules (`*`: none). */
  hosts: readonly string[];
}

/** ssl-client-* headers ingress-nginx set upstream for a host with a CA (nginx.tmpl). */
export const CLIENT_CERT_HEADERS: readonly string[] = [
  'ssl-client-cert',
  'ssl-client-verify',
  'ssl-client-subject-dn',
  'ssl-client-issuer-dn',
];

const VERIFY = new Set(['on', 'optional', 'optional_no_ca', 'off']);

/** The plan, from the converted Ingresses in ingress-nginx's order. */
export function clientAuthPlan(
  ingresses: readonly ClientAuthInput[],
  prefix: string,
  crossNamespace: boolean,
  report: ImportReport,
): ClientAuthPlan {
  const plan: ClientAuthPlan = { hosts: new Map(), refused: new Map() };
  for (const ing of ingresses) {
    const raw = ing.ann('auth-tls-secret') ?? '';
    if (raw === '') {
      for (const short of [
        'auth-tls-verify-client',
        'auth-tls-verify-depth',
        'auth-tls-error-page',
        'auth-tls-pass-certificate-to-upstream',
        'auth-tls-match-cn',
      ]) {
        const v = ing.ann(short);
        if (v !== undefined)
          report.notes.push({
            source: ing.source,
            item: `${prefix}${short}`,
            value: v,
            reason: 'has no effect without auth-tls-secret (nothing to carry over)',
          });
      }
      continue;
    }
    // k8s.ParseNameNS: exactly `namespace/name`; an empty namespace is the Ingress's.
    const parts = raw.split('/');
    let why: string | null = null;
    let secret = '';
    if (parts.length !== 2 || parts[1] === '') why = `is not namespace/name`;
    else {
      const ns = parts[0] === '' ? ing.namespace : parts[0]!;
      secret = `${ns}/${parts[1]!}`;
      if (ns !== ing.namespace && !crossNamespace)
        why = `is in namespace ${ns}, not the Ingress's, and the ConfigMap does not set allow-cross-namespace-resources`;
    }
    if (why !== null) {
      const reason = `${why}: ingress-nginx answered 403 to every request for ${ing.hosts.join(', ')}, and so does ipgate (the routes get the empty list ingress-nginx-refused)`;
      report.unconverted.push({ source: ing.source, item: `${prefix}auth-tls-secret`, value: raw, reason });
      for (const h of ing.hosts)
        if (!plan.refused.has(h)) plan.refused.set(h, `${ing.source} ${prefix}auth-tls-secret ${JSON.stringify(raw)} ${why}`);
      continue;
    }
    const given = ing.ann('auth-tls-verify-client');
    // authtls/main.go: a missing or unknown value is "on".
    const verify = (given !== undefined && VERIFY.has(given) ? given : 'on') as HostClientAuth['verify'];
    if (given !== undefined && !VERIFY.has(given)) {
      report.notes.push({
        source: ing.source,
        item: `${prefix}auth-tls-verify-client`,
        value: given,
        reason: 'not on, off, optional or optional_no_ca: ingress-nginx took "on", and so does the import',
      });
    }
    const taken: string[] = [];
    for (const h of ing.hosts) {
      const prior = plan.hosts.get(h);
      if (prior === undefined) plan.hosts.set(h, { verify, secret, raw, source: ing.source });
      else if (prior.source !== ing.source) taken.push(`${h} (${prior.source})`);
    }
    if (taken.length > 0) {
      report.notes.push({
        source: ing.source,
        item: `${prefix}auth-tls-secret`,
        value: raw,
        reason: `not used for ${taken.join(', ')}: an older Ingress set the host's client certificates first, as ingress-nginx keeps the first`,
      });
    }
    const more: Array<[string, (v: string) => string | null]> = [
      [
        'auth-tls-verify-depth',
        () =>
          'ipgate verifies the chain up to a CA in tls.clientCA without a depth limit: a certificate issued below an intermediate CA, which this depth refused, is accepted',
      ],
      ['auth-tls-match-cn', () => "ipgate does not check the certificate's subject: any certificate the CA issued is accepted"],
      [
        'auth-tls-error-page',
        () => 'ipgate fails the TLS handshake (tls_client_cert_missing, tls_client_cert_invalid): there is no page to send',
      ],
      [
        'auth-tls-pass-certificate-to-upstream',
        (v) => (v === 'true' ? 'ipgate sends no ssl-client-cert header upstream (it removes one a client sends)' : null),
      ],
    ];
    for (const [short, reason] of more) {
      const v = ing.ann(short);
      const r = v === undefined ? null : reason(v);
      if (r !== null) report.unconverted.push({ source: ing.source, item: `${prefix}${short}`, value: v, reason: r });
    }
  }
  return plan;
}
