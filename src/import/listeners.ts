/**
 * The imported listeners: the plaintext one, and with `--tls` the HTTPS one with the Ingresses'
 * TLS Secrets and, where ingress-nginx asked for them, client certificates (client-certs.ts).
 * Both carry the controller ConfigMap's trust (trust.ts).
 *
 * Secret files are named, never read: the import runs where the Secrets are not (a laptop, CI),
 * so each Secret gets a directory under `--tls-dir` (default /etc/ipgate/tls, where the chart's
 * `tls.secrets` mounts them) named after the Secret, which is a valid chart `tls.secrets[].name`
 * for any valid Secret name (a DNS-1123 subdomain, dots included: cert-manager's
 * `shop.example.com-tls`). The same name in two namespaces is two Secrets: `<namespace>.<name>`.
 */
import crypto from 'node:crypto';
import { CLIENT_CERT_HEADERS, type ClientAuthPlan, type HostClientAuth } from './client-certs';
import type { ConfigMapSettings } from './controller-configmap';
import type { ImportReport } from './report';

type Json = Record<string, unknown>;

/** A route as made from the Ingresses, before it is put on listeners. */
export interface RouteOut {
  route: Json;
  host: string;
  /** `Ingress ns/name spec.rules[...]`: the comment above the route. */
  from: string;
  /** ingress-nginx redirected plain HTTP for it to HTTPS (ssl-redirect on a TLS host, or force-ssl-redirect). */
  redirected: boolean;
  /** A from-to-www-redirect route: it only redirects, so it takes no part in the listener's client-certificate choice. */
  wwwRedirect?: boolean;
}

interface ListenerOptions {
  httpListen: string;
  httpsListen: string;
  tls: boolean;
  tlsDir: string;
}

/** The list routes get where ingress-nginx answered 403 to everyone (an unusable auth-tls-secret). */
export const REFUSED_LIST = 'ingress-nginx-refused';

/** A Kubernetes Secret name (DNS-1123 subdomain: lowercase labels of letters, digits and '-', dots between). */
const SECRET_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function secretNameProblem(name: string): string | null {
  return SECRET_NAME.test(name)
    ? null
    : "not a Kubernetes Secret name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', at most 253)";
}

export function buildListeners(
  routes: readonly RouteOut[],
  defaultList: string,
  cm: ConfigMapSettings,
  opts: ListenerOptions,
  certificates: ReadonlyMap<string, string[]>,
  auth: ClientAuthPlan,
  prefix: string,
  report: ImportReport,
): { listeners: Json[]; routeSources: string[][] } {
  const withCa = [...auth.hosts.values()];
  const strip = withCa.length > 0;
  if (strip) {
    report.notes.push({
      source: [...new Set(withCa.map((a) => a.source))].join(', '),
      item: 'http.stripHeaders',
      value: CLIENT_CERT_HEADERS.join(', '),
      reason: `ingress-nginx sent these headers upstream where ${prefix}auth-tls-secret set a CA (the certificate check's result); ipgate sends none of them, and removes them from every client request so that no client can write them: a backend that reads them gets none`,
    });
  }
  const listener = (name: string, listen: string, kept: readonly RouteOut[], plaintext = false): Json => {
    const l: Json = { name, mode: 'http', listen, allowlist: defaultList };
    // Copies, not shared references: the YAML writer would print shared ones as anchors and aliases.
    if (cm.proxyProtocol !== null) l.proxyProtocol = { mode: 'required', trustedSources: [...cm.proxyProtocol] };
    const http: Json = {};
    if (cm.trustedProxies !== null) http.trustedProxies = [...cm.trustedProxies];
    http.xForwardedFor = cm.xForwardedFor;
    if (strip) http.stripHeaders = [...CLIENT_CERT_HEADERS];
    if (cm.upstreamTimeoutMs !== null) http.upstreamTimeoutMs = cm.upstreamTimeoutMs;
    if (cm.maxBodyBytes !== undefined) http.maxBodyBytes = cm.maxBodyBytes;
    l.http = http;
    l.routes = kept.map((r) => {
      const route = structuredClone(r.route);
      if (plaintext && r.redirected) {
        // ingress-nginx's ssl-redirect / force-ssl-redirect (lua_ingress.lua redirect_to_https): https://host/target,
        // the ConfigMap's http-redirect-code. A host that had to show a client certificate gets a redirect that a
        // trusted proxy's X-Forwarded-Proto cannot turn off: its plain requests are never forwarded.
        const http = (route.http as Json | undefined) ?? {};
        // A permanent-redirect / temporal-redirect (nginx `return`) answered first in ingress-nginx, and does in ipgate.
        if (http.redirect === undefined) {
          if (offPlain.has(r.host)) http.redirect = { scheme: 'https', status: cm.httpRedirectCode };
          else http.httpsRedirect = { status: cm.httpRedirectCode };
        }
        route.http = http;
      }
      return route;
    });
    return l;
  };

  // Plaintext: a host that had to show a certificate after ingress-nginx's redirect is not served here.
  const required = (host: string): HostClientAuth | undefined => {
    const a = auth.hosts.get(host);
    return a?.verify === 'on' ? a : undefined;
  };
  const offPlain = new Map<string, HostClientAuth>();
  for (const r of routes) {
    const a = required(r.host);
    if (a !== undefined && r.redirected) offPlain.set(r.host, a);
  }
  for (const [host, a] of offPlain) {
    report.notes.push({
      source: a.source,
      item: `${prefix}auth-tls-secret`,
      value: a.raw,
      reason: `host ${host} is only redirected on the plaintext listener (http.redirect {scheme: https}, whatever a trusted proxy's X-Forwarded-Proto says): ingress-nginx redirected its plain HTTP to HTTPS, where it asked for a client certificate (auth-tls-verify-client ${a.verify}), and forwarding it in plaintext would skip the certificate`,
    });
  }
  // A route of such a host that ingress-nginx did not redirect (ssl-redirect "false" on another Ingress) is served as it was.
  const plain = routes;
  const listeners: Json[] = [];
  const sources: string[][] = [];
  if (plain.length > 0) {
    listeners.push(listener('http', opts.httpListen, plain, true));
    sources.push(plain.map((r) => r.from));
  }
  if (!opts.tls || certificates.size === 0) {
    const asked = new Map<string, { a: HostClientAuth; hosts: string[] }>();
    for (const h of new Set(routes.map((r) => r.host))) {
      const a = auth.hosts.get(h);
      if (a === undefined || a.verify === 'off') continue;
      const e = asked.get(a.source) ?? { a, hosts: [] };
      e.hosts.push(h);
      asked.set(a.source, e);
    }
    for (const [source, { a, hosts }] of asked) {
      report.unconverted.push({
        source,
        item: `${prefix}auth-tls-secret`,
        value: a.raw,
        reason: `ingress-nginx asked ${hosts.join(', ')} for a client certificate over HTTPS (auth-tls-verify-client ${a.verify}); an HTTPS listener is written only with --tls${opts.tls ? ' and a TLS Secret' : ''}`,
      });
    }
    return { listeners, routeSources: sources };
  }

  // HTTPS: the client-certificate check, then the Secrets' directories (certificates and CAs).
  // A www redirect never forwards: it neither asks for a certificate nor stops the listener from asking one of every host.
  const hosts = [...new Set(routes.filter((r) => r.wwwRedirect !== true).map((r) => r.host))];
  const check = httpsClientAuth(hosts, auth, prefix, report);
  const ids = [...certificates.keys()];
  if (check.ca !== null && !ids.includes(check.ca)) ids.push(check.ca);
  const dirs = secretDirs(ids);
  const kept = routes.filter((r) => !check.leftOff.has(r.host));
  if (kept.length === 0) return { listeners, routeSources: sources };
  const https = listener('https', opts.httpsListen, kept);
  const certs: Json[] = [];
  for (const [id, from] of certificates) {
    const dir = dirs.get(id)!;
    certs.push({ cert: `${opts.tlsDir}/${dir}/tls.crt`, key: `${opts.tlsDir}/${dir}/tls.key` });
    report.notes.push({
      source: from.join(', '),
      item: 'TLS Secret',
      value: id,
      reason: `read from ${opts.tlsDir}/${dir}/: ${mountAdvice(id, dir)}`,
    });
  }
  const tls: Json = { certificates: certs };
  if (check.ca !== null) {
    const dir = dirs.get(check.ca)!;
    tls.clientCA = `${opts.tlsDir}/${dir}/ca.crt`;
    tls.clientCertificate = check.mode;
    if (!certificates.has(check.ca))
      report.notes.push({
        source: check.from.join(', '),
        item: 'client CA Secret',
        value: check.ca,
        reason: `ca.crt read from ${opts.tlsDir}/${dir}/: ${mountAdvice(check.ca, dir)}`,
      });
  }
  https.tls = tls;
  listeners.push(https);
  sources.push(kept.map((r) => r.from));
  const secrets = [...dirs].map(([id, dir]) => `{name: ${dir}, secretName: ${dir}}${dir === id.split('/')[1] ? '' : ` (Secret ${id})`}`);
  report.notes.push({
    source: 'chart',
    item: 'tls.secrets',
    value: `[${secrets.join(', ')}]`,
    reason: `the Helm chart's value that mounts these Secrets where the config reads them (each copied into ipgate's namespace under that name); with --tls-dir other than /etc/ipgate/tls, mount them there yourself`,
  });
  return { listeners, routeSources: sources };
}

function mountAdvice(id: string, dir: string): string {
  const name = id.split('/')[1]!;
  return `copy Secret ${id} into ipgate's namespace${dir !== name ? ` as ${dir}` : ''} and list it in the chart's tls.secrets as {name: ${dir}, secretName: ${dir}}`;
}

/** One directory per Secret: its name, or `<namespace>.<name>` when the name is in two namespaces. */
function secretDirs(ids: readonly string[]): Map<string, string> {
  const namespaces = new Map<string, Set<string>>();
  for (const id of ids) {
    const [ns, name] = id.split('/') as [string, string];
    namespaces.set(name, (namespaces.get(name) ?? new Set()).add(ns));
  }
  const out = new Map<string, string>();
  for (const id of ids) {
    const [ns, name] = id.split('/') as [string, string];
    let dir = namespaces.get(name)!.size > 1 ? `${ns}.${name}` : name;
    if (dir.length > 253) {
      // Still a Secret name: cut at a label character, then 8 hex digits of the unique id.
      const hash = crypto.createHash('sha256').update(id).digest('hex').slice(0, 8);
      dir = `${dir.slice(0, 244).replace(/[^a-z0-9]+$/, '')}-${hash}`;
    }
    out.set(id, dir);
  }
  return out;
}

interface HttpsCheck {
  /** `ns/name` of the CA Secret, or null: no certificate asked for. */
  ca: string | null;
  mode: 'optional' | 'required';
  /** The Ingresses that set it. */
  from: string[];
  leftOff: Set<string>;
}

/**
 * The HTTPS listener's client-certificate check from its hosts' (see the file comment of
 * client-certs.ts): hosts that required a certificate are carried over only if every host of the
 * listener required one from the same CA, and are left off it otherwise; then hosts that asked
 * optionally, on the same terms among the hosts left.
 */
function httpsClientAuth(hosts: readonly string[], auth: ClientAuthPlan, prefix: string, report: ImportReport): HttpsCheck {
  const out: HttpsCheck = { ca: null, mode: 'required', from: [], leftOff: new Set() };
  const at = (h: string): HostClientAuth | undefined => auth.hosts.get(h);
  const item = `${prefix}auth-tls-secret`;
  const uniform = (group: readonly string[], among: readonly string[]): boolean =>
    group.length > 0 && group.length === among.length && new Set(group.map((h) => at(h)!.secret)).size === 1;
  const carry = (group: readonly string[], mode: 'optional' | 'required'): void => {
    out.ca = at(group[0]!)!.secret;
    out.mode = mode;
    out.from = [...new Set(group.map((h) => at(h)!.source))];
    for (const source of out.from) {
      const a = group.map(at).find((x) => x!.source === source)!;
      report.notes.push({
        source,
        item,
        value: a.raw,
        reason: `the HTTPS listener's tls.clientCertificate: ${mode} and tls.clientCA (its ca.crt) for every host of the listener, as auth-tls-verify-client ${a.verify} asked of ${group.filter((h) => at(h)!.source === source).join(', ')}. ipgate ${mode === 'required' ? 'fails the handshake of a client without a certificate (nginx answered 400)' : 'closes a client whose certificate does not verify (nginx answered 400)'}, verifies the chain without auth-tls-verify-depth's limit (default 1), and sends no ssl-client-* header upstream`,
      });
    }
  };
  const others = (group: readonly string[], h: string): string => {
    const rest = group.filter((x) => x !== h);
    return rest.length > 4 ? `${rest.slice(0, 4).join(', ')}, ...` : rest.join(', ');
  };
  const required = hosts.filter((h) => at(h)?.verify === 'on');
  if (uniform(required, hosts)) {
    carry(required, 'required');
    return out;
  }
  for (const h of required) {
    out.leftOff.add(h);
    const a = at(h)!;
    report.unconverted.push({
      source: a.source,
      item,
      value: a.raw,
      reason: `host ${h} is left off the HTTPS listener: ingress-nginx required a client certificate from ${a.secret}'s ca.crt for it (auth-tls-verify-client ${a.verify}); ipgate asks per listener (tls.clientCA, tls.clientCertificate: docs/tls.md), and the listener's other hosts (${others(hosts, h)}) required none or another CA: give ${h} an HTTPS listener of its own with those options`,
    });
  }
  const rest = hosts.filter((h) => !out.leftOff.has(h));
  const optional = rest.filter((h) => at(h)?.verify === 'optional');
  if (uniform(optional, rest)) {
    carry(optional, 'optional');
    return out;
  }
  for (const h of rest) {
    const a = at(h);
    if (a === undefined || a.verify === 'off' || a.verify === 'on') continue;
    report.unconverted.push({
      source: a.source,
      item,
      value: a.raw,
      reason:
        a.verify === 'optional_no_ca'
          ? `host ${h}: ipgate does not ask for a certificate it does not verify (auth-tls-verify-client optional_no_ca); the host is served without asking, and the backend gets no ssl-client-cert`
          : `host ${h}: not asked for a client certificate (auth-tls-verify-client optional): the listener's other hosts (${others(rest, h)}) asked for none or another CA, and ipgate asks per listener (docs/tls.md); a client without one was let through by ingress-nginx too, but the backend gets no ssl-client-verify`,
    });
  }
  return out;
}
