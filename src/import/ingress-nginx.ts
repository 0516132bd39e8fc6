/**
 * ingress-nginx Ingress objects (and the controller ConfigMap) -> an ipgate config, with a report
 * of everything that could not be carried over. Pure: the objects come in, the config and the
 * report go out; reading files or the cluster is the CLI's (cli/import.ts).
 *
 * What maps to what, and why, is docs/migrating-from-ingress-nginx.md. The rules that decide
 * which Ingress wins follow ingress-nginx's controller (v1.15): Ingresses sorted by
 * creationTimestamp, oldest first, ties by "namespace/name" descending (store.go
 * sortIngressSlice); the first Ingress to claim a host + path keeps it; canary Ingresses claim
 * nothing; `ingressClassName` is looked at before the `kubernetes.io/ingress.class` annotation.
 */
import { hostNameProblem } from '../route/host-name';
import { configPathProblem } from '../route/path';
import { parseCidr, type Cidr } from '../allowlist/cidr';
import { AUTH_GATES, annotationsOf, annotationVerdict, bodySize } from './annotations';
import { backendUpstream } from './backend';
import { clientAuthPlan } from './client-certs';
import { configMapSettings, readTimeout } from './controller-configmap';
import { rewriteForPath } from './rewrite-target';

const ROUTE_READ_TIMEOUT_NOTE =
  "as http.readTimeoutMs (between two reads, as nginx's proxy_read_timeout) and http.upstreamTimeoutMs (the wait for the response headers, so that its own default does not cut a longer timeout)";
import { buildListeners, REFUSED_LIST, secretNameProblem, type RouteOut } from './listeners';
import { importLimits } from './limits';
import { uniqueName } from './names';
import { FALSE, isRecord, objectKey, str, TRUE, type KubeObject } from './objects';
import type { Finding, ImportReport } from './report';
import { mergeRanges, parseSourceRange, type RangeEntry } from './source-ranges';

export type { Finding, ImportReport };
export { uniqueName };

export interface ImportOptions {
  /** Ingresses of this class are converted (ingress-nginx's --ingress-class). Default `nginx`. */
  ingressClass: string;
  /** Also Ingresses that name no class (ingress-nginx's --watch-ingress-without-class). Default false. */
  withoutClass: boolean;
  /** ingress-nginx's --annotations-prefix. Default `nginx.ingress.kubernetes.io`. */
  annotationsPrefix: string;
  /** Service DNS suffix. Default `cluster.local`. */
  clusterDomain: string;
  /** The plaintext listener's address. Default `0.0.0.0:8080`. */
  httpListen: string;
  /** The HTTPS listener's address (with `tls`). Default `0.0.0.0:8443`. */
  httpsListen: string;
  /** Emit an HTTPS listener with the Ingresses' TLS certificates. Default false. */
  tls: boolean;
  /** Where the TLS Secrets' directories are (the Helm chart mounts them at `/etc/ipgate/tls`; relative: to the config file). Default `/etc/ipgate/tls`. */
  tlsDir: string;
  /** The load balancers' CIDRs, in place of the ConfigMap's proxy-real-ip-cidr (inside it). Default null: the ConfigMap's. */
  proxyRealIpCidr: readonly string[] | null;
  /** A trust-all range (every peer names the client) may be written. Default false: the import is refused. */
  trustAllProxies: boolean;
}

export const DEFAULT_OPTIONS: ImportOptions = {
  ingressClass: 'nginx',
  withoutClass: false,
  annotationsPrefix: 'nginx.ingress.kubernetes.io',
  clusterDomain: 'cluster.local',
  httpListen: '0.0.0.0:8080',
  httpsListen: '0.0.0.0:8443',
  tls: false,
  tlsDir: '/etc/ipgate/tls',
  proxyRealIpCidr: null,
  trustAllProxies: false,
};

interface ImportInput {
  ingresses: readonly KubeObject[];
  /** Services known to the importer, for named ports. */
  services: readonly KubeObject[];
  /** The ingress-nginx controller ConfigMap, or null (ingress-nginx's defaults). */
  configMap: KubeObject | null;
  /** Where the Services come from, for the message about a named port that cannot be resolved. */
  servicesFrom: 'file' | 'cluster';
}

export interface ImportResult {
  /** The config, or null when no route could be made (nothing to serve) or the import is refused (`report.refused`). */
  config: Record<string, unknown> | null;
  report: ImportReport;
  /** Per listener, per route: the Ingress and rule it came from (a comment in the YAML output). */
  routeSources: string[][];
}

type Json = Record<string, unknown>;

const CLASS_ANNOTATION = 'kubernetes.io/ingress.class';
/** Regular-expression syntax: a path holding one of these is a regex under use-regex. */
const REGEX_CHARS = /[\^$*+?()[\]{}|\\]/;
const DEFAULT_LIST = 'ingress-nginx-default';

interface PathClaim {
  owner: string;
  where: string;
}

interface RouteDraft {
  host: string;
  upstream: string;
  paths: Array<{ path: string; match: 'exact' | 'prefix' }> | null;
  from: string[];
  /** The route's http.rewrite (from rewrite-target), or null. */
  rewrite: Json | null;
  /** The path is in the ConfigMap's no-tls-redirect-locations: never redirected to HTTPS. */
  noTlsRedirect: boolean;
}

interface IngressPlan {
  ing: KubeObject;
  key: string;
  source: string;
  ann: Record<string, string>;
  /** Route allowlist name, or undefined: the listener's. */
  allowlist?: string;
  /** From proxy-read-timeout: the route's http.upstreamTimeoutMs. */
  upstreamTimeoutMs?: number;
  /** From backend-protocol GRPC / GRPCS: the route's http.upstreamProtocol. */
  upstreamProtocol?: 'h2c' | 'h2';
  /** The edge rules its annotations map to (docs/edge-rules.md): the route's `http` options. */
  edge?: Json;
  /** limit-* annotations (limits.ts): the route's `limits`. */
  limits?: Json;
  drafts: RouteDraft[];
}

export function convertIngressNginx(input: ImportInput, opts: ImportOptions = DEFAULT_OPTIONS): ImportResult {
  const report: ImportReport = {
    ingresses: { read: input.ingresses.length, converted: 0, skipped: 0 },
    routes: 0,
    allowlists: 0,
    refused: [],
    unconverted: [],
    notes: [],
    skipped: [],
    ignored: [],
  };
  const prefix = `${opts.annotationsPrefix}/`;
  const allowlists: Record<string, Json> = {};
  const listNames = new Set<string>([DEFAULT_LIST]);
  const routeNames = new Set<string>();

  // ---- the controller ConfigMap: listener settings and the default (global) source ranges
  let realIp: Cidr[] | null = null;
  if (opts.proxyRealIpCidr !== null) {
    realIp = [];
    for (const text of opts.proxyRealIpCidr) {
      const r = parseCidr(text);
      if (r.ok) realIp.push(r.cidr);
      else report.refused.push({ source: 'options', item: '--proxy-real-ip-cidr', value: text, reason: r.message });
    }
  }
  const cm = configMapSettings(input.configMap, report, { proxyRealIpCidr: realIp, trustAllProxies: opts.trustAllProxies });
  const defaultList = mergeRanges(cm.allow, cm.deny, {
    allow: 'ConfigMap whitelist-source-range',
    deny: 'ConfigMap denylist-source-range',
    everyone: 'ingress-nginx admitted every client where no whitelist-source-range applied',
  });
  if (defaultList.shadowed.length > 0) {
    report.notes.push({
      source: cm.source,
      item: 'whitelist-source-range',
      reason: `left out: ${defaultList.shadowed.join(', ')}: ingress-nginx checks deny lines first, so these never admitted anyone`,
    });
  }
  allowlists[DEFAULT_LIST] = { source: 'config', entries: defaultList.entries };

  // ---- which Ingresses are ours, in ingress-nginx's order
  const ours: IngressPlan[] = [];
  for (const ing of input.ingresses) {
    const key = objectKey(ing);
    const source = `Ingress ${key}`;
    const ann = annotationsOf(ing);
    const spec = isRecord(ing.spec) ? ing.spec : {};
    const className = str(spec.ingressClassName);
    const classAnn = ann[CLASS_ANNOTATION];
    let mine: boolean;
    let why = '';
    if (className !== undefined) {
      mine = className === opts.ingressClass;
      why = `spec.ingressClassName is ${JSON.stringify(className)}, not ${JSON.stringify(opts.ingressClass)} (--ingress-class): another controller serves it`;
      if (classAnn !== undefined && classAnn !== className) {
        report.notes.push({
          source,
          item: CLASS_ANNOTATION,
          value: classAnn,
          reason: `ignored: spec.ingressClassName (${JSON.stringify(className)}) is looked at first, as ingress-nginx does`,
        });
      }
    } else if (classAnn !== undefined) {
      mine = classAnn === opts.ingressClass;
      why = `annotation ${CLASS_ANNOTATION} is ${JSON.stringify(classAnn)}, not ${JSON.stringify(opts.ingressClass)} (--ingress-class): another controller serves it`;
    } else {
      mine = opts.withoutClass;
      why =
        'names no ingress class: ingress-nginx ignores it unless started with --watch-ingress-without-class (pass --ingress-without-class to convert it)';
    }
    if (!mine) {
      report.skipped.push({ source, item: 'ingress class', reason: why });
      continue;
    }
    if (isTrue(ann[`${prefix}canary`])) {
      report.skipped.push({
        source,
        item: `${prefix}canary`,
        reason: "a canary Ingress: ipgate has no traffic splitting, so its share of the traffic goes to the primary Ingress's backend",
      });
      for (const [name, value] of Object.entries(ann)) {
        if (name.startsWith(prefix))
          report.unconverted.push({
            source,
            item: name,
            value,
            reason: name === `${prefix}canary` ? 'canary Ingress: no traffic splitting in ipgate' : 'on a canary Ingress (not converted)',
          });
        else if (name !== CLASS_ANNOTATION) report.ignored.push({ source, item: name, reason: 'not an ingress-nginx annotation' });
      }
      continue;
    }
    ours.push({ ing, key, source, ann, drafts: [] });
  }
  report.ingresses.skipped = report.skipped.length;
  ours.sort(compareIngresses);
  const noTimestamp = ours.filter((p) => timestamp(p.ing) === null).map((p) => p.key);

  // ---- hosts whose paths ingress-nginx reads as regular expressions (use-regex or rewrite-target
  // on any location of the host turns every location of that server into `~* "^path"`).
  const regexHosts = new Map<string, string>();
  for (const p of ours) {
    const regex = isTrue(p.ann[`${prefix}use-regex`]) || (p.ann[`${prefix}rewrite-target`] ?? '') !== '';
    if (!regex) continue;
    for (const host of ruleHosts(p.ing)) if (!regexHosts.has(host)) regexHosts.set(host, p.key);
  }
  /** Per host under regexHosts: the paths left out as regular expressions, and those made prefixes. */
  const regexPaths = new Map<string, { left: string[]; prefixed: string[]; rewritten: string[] }>();
  const regexAt = (host: string): { left: string[]; prefixed: string[]; rewritten: string[] } => {
    let r = regexPaths.get(host);
    if (r === undefined) regexPaths.set(host, (r = { left: [], prefixed: [], rewritten: [] }));
    return r;
  };

  // ---- client certificates per host (auth-tls-*), and the hosts served with TLS (for ssl-redirect)
  const auth = clientAuthPlan(
    ours.map((p) => ({
      source: p.source,
      namespace: str(p.ing.metadata?.namespace) ?? 'default',
      ann: (short: string) => p.ann[`${prefix}${short}`],
      hosts: [...new Set(ruleHosts(p.ing))],
    })),
    prefix,
    cm.crossNamespace,
    report,
  );
  const tlsHosts = new Set<string>();
  for (const p of ours) {
    const spec = isRecord(p.ing.spec) ? p.ing.spec : {};
    for (const t of Array.isArray(spec.tls) ? spec.tls : []) {
      if (isRecord(t) && Array.isArray(t.hosts)) for (const h of t.hosts) if (typeof h === 'string') tlsHosts.add(h.toLowerCase());
    }
  }

  const services = new Map(input.services.map((s) => [objectKey(s), s]));
  const claims = new Map<string, PathClaim>();
  const hostOwner = new Map<string, string>();
  /** `namespace/secretName` -> the Ingresses whose TLS block names it, in order of first use. */
  const certificates = new Map<string, string[]>();

  // defaultBackend without rules: the catch-all server's root, set before any path is added, so
  // no Ingress's "/" path on the default host replaces it (the oldest such Ingress wins).
  for (const p of ours) {
    const spec = isRecord(p.ing.spec) ? p.ing.spec : {};
    if (spec.defaultBackend === undefined || (Array.isArray(spec.rules) && spec.rules.length > 0)) continue;
    const ns = str(p.ing.metadata?.namespace) ?? 'default';
    const upstream = backendUpstream(
      spec.defaultBackend,
      ns,
      services,
      input.servicesFrom,
      opts.clusterDomain,
      p.source,
      'spec.defaultBackend',
      report,
    );
    if (upstream === null) continue;
    const prior = claims.get('*\0prefix\0/');
    if (prior !== undefined) {
      report.unconverted.push({
        source: p.source,
        item: 'spec.defaultBackend',
        value: '*',
        reason: `the catch-all route is already taken by ${prior.owner} (${prior.where}); ingress-nginx keeps the oldest`,
      });
      continue;
    }
    claims.set('*\0prefix\0/', { owner: p.source, where: 'spec.defaultBackend' });
    addDraft(p, '*', upstream, null, 'spec.defaultBackend');
  }
  const defaultRoots: Array<{ p: IngressPlan; host: string; upstream: string }> = [];
  const withUnusedDefault = new Set<IngressPlan>();

  for (const p of ours) {
    const { ing, key, source, ann } = p;
    const spec = isRecord(ing.spec) ? ing.spec : {};
    const ns = str(ing.metadata?.namespace) ?? 'default';

    // annotations: what is converted, what is not
    for (const [name, value] of Object.entries(ann)) {
      if (name === CLASS_ANNOTATION) continue;
      if (!name.startsWith(prefix)) {
        report.ignored.push({ source, item: name, reason: 'not an ingress-nginx annotation' });
        continue;
      }
      const short = name.slice(prefix.length);
      const why = annotationVerdict(short, value);
      if (why !== null) report.unconverted.push({ source, item: name, value, reason: why });
    }

    // allowlist / denylist (each falls back to the ConfigMap's when absent, as in ingress-nginx)
    const allowName =
      (ann[`${prefix}allowlist-source-range`] ?? '') !== ''
        ? 'allowlist-source-range'
        : (ann[`${prefix}whitelist-source-range`] ?? '') !== ''
          ? 'whitelist-source-range'
          : null;
    if (allowName === 'allowlist-source-range' && (ann[`${prefix}whitelist-source-range`] ?? '') !== '') {
      report.notes.push({
        source,
        item: `${prefix}whitelist-source-range`,
        value: ann[`${prefix}whitelist-source-range`],
        reason: 'not used: allowlist-source-range is set, and ingress-nginx reads its old name only when it is empty',
      });
    }
    const denyText = ann[`${prefix}denylist-source-range`] ?? '';
    if (allowName !== null || denyText !== '') {
      let allow: Cidr[] | null = cm.allow;
      let deny: Cidr[] | null = cm.deny;
      let broken: string | null = null;
      const read = (short: string, text: string): Cidr[] | null => {
        const r = parseSourceRange(text);
        if (!r.ok) {
          broken = `${prefix}${short}`;
          report.unconverted.push({
            source,
            item: `${prefix}${short}`,
            value: text,
            reason: `invalid: ${r.message}. ingress-nginx refused every request on these paths (503); the route gets an empty allowlist, so ipgate refuses them all (403)`,
          });
          return null;
        }
        if (r.rewritten.length > 0)
          report.notes.push({
            source,
            item: `${prefix}${short}`,
            value: text,
            reason: `written as ipgate reads it: ${r.rewritten.join(', ')} (ingress-nginx masks host bits too)`,
          });
        return r.cidrs;
      };
      if (allowName !== null) allow = read(allowName, ann[`${prefix}${allowName}`]!);
      if (denyText !== '') deny = read('denylist-source-range', denyText);
      const name = uniqueName(`${ns}-${str(ing.metadata?.name) ?? 'ingress'}`, `list:${key}`, listNames);
      if (broken !== null) {
        allowlists[name] = { source: 'config', entries: [] };
      } else {
        const merged = mergeRanges(allow, deny, {
          allow: `${source} ${allowName ?? 'ConfigMap whitelist-source-range'}`,
          deny: `${source} ${denyText !== '' ? 'denylist-source-range' : 'ConfigMap denylist-source-range'}`,
          everyone: `${source}: a denylist alone admits everyone else`,
        });
        if (merged.shadowed.length > 0) {
          report.notes.push({
            source,
            item: `${prefix}${allowName ?? 'denylist-source-range'}`,
            reason: `allow entries left out: ${merged.shadowed.join(', ')}: ingress-nginx checks the denylist first, so they never admitted anyone (ipgate's most specific entry would have)`,
          });
        }
        allowlists[name] = { source: 'config', entries: merged.entries };
      }
      p.allowlist = name;
    }

    const backendProtocol = (ann[`${prefix}backend-protocol`] ?? '').toUpperCase();
    if (backendProtocol === 'GRPC' || backendProtocol === 'GRPCS') {
      p.upstreamProtocol = backendProtocol === 'GRPC' ? 'h2c' : 'h2';
      report.notes.push({
        source,
        item: `${prefix}backend-protocol`,
        value: ann[`${prefix}backend-protocol`],
        reason:
          backendProtocol === 'GRPC'
            ? 'gRPC: the routes get http.upstreamProtocol h2c; HTTP/2 clients reach them on a TLS listener (--tls), as with ingress-nginx; an HTTP/1.1 request gets 505'
            : "gRPC over TLS: the routes get http.upstreamProtocol h2, and ipgate verifies the backend's certificate (ingress-nginx's grpcs did not, by default): set the routes' http.upstreamCA to the CA that signed it",
      });
    }
    const timeout = readTimeout(ann[`${prefix}proxy-read-timeout`]);
    const edge: Json = {};
    if (timeout !== null) {
      p.upstreamTimeoutMs = timeout;
      edge.readTimeoutMs = timeout;
      report.notes.push({
        source,
        item: `${prefix}proxy-read-timeout`,
        value: ann[`${prefix}proxy-read-timeout`],
        reason: ROUTE_READ_TIMEOUT_NOTE,
      });
    }
    // The edge rules (docs/edge-rules.md): each annotation to the route option with its meaning.
    const connect = readTimeout(ann[`${prefix}proxy-connect-timeout`]);
    if (connect !== null) edge.connectTimeoutMs = connect;
    const send = readTimeout(ann[`${prefix}proxy-send-timeout`]);
    if (send !== null) edge.sendTimeoutMs = send;
    const body = ann[`${prefix}proxy-body-size`];
    if (body !== undefined && bodySize(body) !== undefined) edge.maxBodyBytes = bodySize(body)!;
    const permanent = ann[`${prefix}permanent-redirect`];
    const temporal = ann[`${prefix}temporal-redirect`];
    // ingress-nginx reads permanent-redirect first; each with its -code annotation (301 / 302 unless set).
    const redirectUrl =
      permanent !== undefined && annotationVerdict('permanent-redirect', permanent) === null
        ? { url: permanent, code: ann[`${prefix}permanent-redirect-code`], status: 301 }
        : temporal !== undefined && annotationVerdict('temporal-redirect', temporal) === null
          ? { url: temporal, code: ann[`${prefix}temporal-redirect-code`], status: 302 }
          : null;
    if (redirectUrl !== null) {
      const code = redirectUrl.code !== undefined ? Number(redirectUrl.code) : redirectUrl.status;
      if ([301, 302, 303, 307, 308].includes(code)) edge.redirect = { url: redirectUrl.url, status: code };
      else
        report.unconverted.push({
          source,
          item: `${prefix}${permanent !== undefined ? 'permanent' : 'temporal'}-redirect-code`,
          value: redirectUrl.code,
          reason: 'not a redirect status ipgate sends (301, 302, 303, 307, 308)',
        });
    }
    if (Object.keys(edge).length > 0) p.edge = edge;
    // Per-client limits (limits.ts); limit-whitelist becomes an allowlist the limits exempt.
    const lim = importLimits(ann, prefix);
    for (const u of lim.unconverted) report.unconverted.push({ source, ...u });
    for (const n of lim.notes) report.notes.push({ source, ...n });
    if (lim.limits !== null) {
      if (lim.exempt !== null) {
        const name = uniqueName(`${ns}-${str(ing.metadata?.name) ?? 'ingress'}-limit-exempt`, `limit-exempt:${key}`, listNames);
        allowlists[name] = {
          source: 'config',
          entries: lim.exempt.map((c) => ({ cidr: c.text, comment: `${source} limit-whitelist` })),
        };
        for (const l of Object.values(lim.limits) as Json[]) l.exempt = [name];
      }
      p.limits = lim.limits;
    }

    // rules and paths
    const rules = Array.isArray(spec.rules) ? spec.rules : [];
    const implementationSpecific: string[] = [];
    const regexPrefixes: string[] = [];
    const rewriteTarget = ann[`${prefix}rewrite-target`] ?? '';
    const forwardedPrefix = ann[`${prefix}x-forwarded-prefix`];
    /** Paths made prefix rewrites; those nginx also matched off a "/" boundary; prefixes x-forwarded-prefix did not name. */
    const rewritten: string[] = [];
    const wider: string[] = [];
    const otherPrefix: string[] = [];
    rules.forEach((rule: unknown, ri: number) => {
      const at = `spec.rules[${ri}]`;
      if (!isRecord(rule)) {
        report.unconverted.push({ source, item: at, reason: 'not a mapping' });
        return;
      }
      const host = hostOf(rule);
      const hostWhy = host === '*' ? null : host.startsWith('*.') ? hostNameProblem(host.slice(2)) : hostNameProblem(host);
      if (hostWhy !== null) {
        report.unconverted.push({ source, item: `${at}.host`, value: host, reason: `${hostWhy}: not a host name ipgate can route` });
        return;
      }
      if (!hostOwner.has(host)) hostOwner.set(host, key);
      const http = isRecord(rule.http) ? rule.http : null;
      const paths = http !== null && Array.isArray(http.paths) ? http.paths : [];
      paths.forEach((entry: unknown, pi: number) => {
        const pat = `${at}.http.paths[${pi}]`;
        if (!isRecord(entry)) {
          report.unconverted.push({ source, item: pat, reason: 'not a mapping' });
          return;
        }
        const raw = str(entry.path) ?? '';
        let rawPath = raw === '' ? '/' : raw;
        const pathType = str(entry.pathType) ?? 'ImplementationSpecific';
        let match: 'exact' | 'prefix';
        const regexFrom = regexHosts.get(host);
        // ingress-nginx's no-tls-redirect-locations: matched on the location's path as written.
        const noTlsRedirect = cm.noTlsRedirectLocations.some((l) => rawPath.startsWith(l));
        let rewrite: Json | null = null;
        const plan = rewriteTarget !== '' ? rewriteForPath(rawPath, rewriteTarget) : ({ kind: 'none' } as const);
        if (plan.kind === 'refused') {
          report.unconverted.push({ source, item: pat, value: rawPath, reason: plan.reason });
          if (REGEX_CHARS.test(rawPath)) regexAt(host).left.push(rawPath);
          return;
        }
        if (plan.kind === 'prefix') {
          rewrite = { replacePrefix: plan.replacePrefix, forwardedPrefix: forwardedPrefix === plan.prefix };
          rewritten.push(`${rawPath} as prefix ${plan.prefix} (${plan.prefix}/x sent as ${plan.replacePrefix}x)`);
          if (plan.widerInNginx) wider.push(`${plan.prefix}<other> (${rawPath})`);
          if (forwardedPrefix !== undefined && forwardedPrefix !== plan.prefix) otherPrefix.push(plan.prefix);
          regexAt(host).rewritten.push(rawPath);
          rawPath = plan.prefix;
          match = 'prefix';
        } else if (regexFrom !== undefined) {
          if (REGEX_CHARS.test(rawPath)) {
            report.unconverted.push({
              source,
              item: pat,
              value: rawPath,
              reason: `a regular expression (use-regex or rewrite-target on host ${host}, Ingress ${regexFrom}): ipgate routes exact paths and prefixes only, and evaluates no regular expression on a request (a backtracking one costs time a crafted path controls)`,
            });
            regexAt(host).left.push(rawPath);
            return;
          }
          match = 'prefix';
          regexPrefixes.push(rawPath);
          regexAt(host).prefixed.push(rawPath);
        } else if (pathType === 'Exact') match = 'exact';
        else if (pathType === 'Prefix') match = 'prefix';
        else if (pathType === 'ImplementationSpecific') {
          match = 'prefix';
          implementationSpecific.push(rawPath);
        } else {
          report.unconverted.push({
            source,
            item: `${pat}.pathType`,
            value: pathType,
            reason: 'unknown pathType (Exact, Prefix or ImplementationSpecific)',
          });
          return;
        }
        const pathWhy = configPathProblem(rawPath);
        if (pathWhy !== null) {
          report.unconverted.push({ source, item: `${pat}.path`, value: rawPath, reason: `${pathWhy}: not a path ipgate can route` });
          return;
        }
        const upstream = backendUpstream(
          entry.backend,
          ns,
          services,
          input.servicesFrom,
          opts.clusterDomain,
          source,
          `${pat}.backend`,
          report,
        );
        if (upstream === null) return;
        const claimKey = `${host}\0${match}\0${match === 'prefix' && rawPath.length > 1 ? rawPath.replace(/\/$/, '') : rawPath}`;
        const prior = claims.get(claimKey);
        if (prior !== undefined) {
          report.unconverted.push({
            source,
            item: pat,
            value: `${host}${rawPath}`,
            reason: `${match} path already routed by ${prior.owner} (${prior.where}); ingress-nginx keeps the oldest Ingress's path${prior.owner === source ? ' (the first one in the same Ingress)' : ''}`,
          });
          return;
        }
        claims.set(claimKey, { owner: source, where: pat });
        addDraft(p, host, upstream, { path: rawPath, match }, pat, rewrite, noTlsRedirect);
      });
      if (paths.length === 0 && !isRecord(spec.defaultBackend)) {
        report.notes.push({
          source,
          item: at,
          value: host,
          reason: 'a rule without paths: nothing to route for it (ingress-nginx served its default backend, a 404)',
        });
      }
    });
    if (implementationSpecific.length > 0) {
      report.notes.push({
        source,
        item: 'pathType ImplementationSpecific',
        value: implementationSpecific.join(', '),
        reason:
          'converted to prefix: ingress-nginx matched it as a plain string prefix (/foo also took /foobar), ipgate matches on "/" boundaries (/foo, /foo/...)',
      });
    }
    if (rewritten.length > 0) {
      report.notes.push({
        source,
        item: `${prefix}rewrite-target`,
        value: rewriteTarget,
        reason: `as http.rewrite (docs/edge-rules.md "Rewrites"): ${rewritten.join(', ')}; the query is kept, as nginx's rewrite kept it. ingress-nginx matched these paths case-insensitively (~*), ipgate case-sensitively${wider.length > 0 ? `; ingress-nginx also sent ${wider.join(', ')} here (its /? makes the slash optional), ipgate routes the prefix on "/" boundaries only` : ''}. X-Forwarded-Prefix: ${forwardedPrefix === undefined ? 'not sent (ingress-nginx sends it only with x-forwarded-prefix)' : 'as x-forwarded-prefix said'}`,
      });
    }
    if (otherPrefix.length > 0) {
      report.unconverted.push({
        source,
        item: `${prefix}x-forwarded-prefix`,
        value: forwardedPrefix,
        reason: `ingress-nginx sent this fixed value as X-Forwarded-Prefix; ipgate sends the prefix it removed (${otherPrefix.join(', ')}) or nothing: none is sent for these paths`,
      });
    } else if (forwardedPrefix !== undefined && rewritten.length === 0) {
      report.unconverted.push({
        source,
        item: `${prefix}x-forwarded-prefix`,
        value: forwardedPrefix,
        reason: 'ingress-nginx sent it only with a rewrite-target, and no path of this Ingress was converted to a rewrite',
      });
    }
    if (regexPrefixes.length > 0) {
      report.notes.push({
        source,
        item: 'regex paths',
        value: regexPrefixes.join(', '),
        reason:
          'converted to prefix: ingress-nginx matched them as case-insensitive regular expressions anchored at the start (use-regex/rewrite-target on the host); they hold no regex syntax, and ipgate matches them case-sensitively on "/" boundaries',
      });
    }

    // defaultBackend with rules: "/" on the hosts this Ingress was the first to name, claimed after
    // every explicit path (ingress-nginx's root location of a new server is replaced by any
    // Ingress's own "/" path, whatever its age).
    if (spec.defaultBackend !== undefined && rules.length > 0) {
      const hosts = [...new Set(rules.filter(isRecord).map(hostOf))].filter((h) => hostOwner.get(h) === key);
      const upstream =
        hosts.length > 0
          ? backendUpstream(
              spec.defaultBackend,
              ns,
              services,
              input.servicesFrom,
              opts.clusterDomain,
              source,
              'spec.defaultBackend',
              report,
            )
          : null;
      if (upstream !== null) for (const host of hosts) defaultRoots.push({ p, host, upstream });
      if (hosts.length === 0) withUnusedDefault.add(p);
    }

    // TLS
    const tls = Array.isArray(spec.tls) ? spec.tls : [];
    tls.forEach((t: unknown, ti: number) => {
      const at = `spec.tls[${ti}]`;
      const secret = isRecord(t) ? str(t.secretName) : undefined;
      const hosts = isRecord(t) && Array.isArray(t.hosts) ? t.hosts.filter((h): h is string => typeof h === 'string') : [];
      if (secret === undefined || secret === '') {
        report.unconverted.push({
          source,
          item: at,
          value: hosts.join(','),
          reason: 'no secretName: ingress-nginx served its default certificate; give ipgate a certificate for these hosts',
        });
        return;
      }
      if (!opts.tls) {
        report.unconverted.push({
          source,
          item: at,
          value: `${secret} (${hosts.join(', ')})`,
          reason: 'TLS is written only with --tls (an HTTPS listener with the certificate from the Secret, mounted by the chart)',
        });
        return;
      }
      const secretWhy = secretNameProblem(secret);
      if (secretWhy !== null) {
        report.unconverted.push({
          source,
          item: `${at}.secretName`,
          value: secret,
          reason: `${secretWhy}: no Secret can have it (ingress-nginx served its default certificate)`,
        });
        return;
      }
      const id = `${ns}/${secret}`;
      const from = certificates.get(id) ?? [];
      if (!from.includes(source)) from.push(source);
      certificates.set(id, from);
    });
  }

  const usedDefault = new Set<IngressPlan>();
  for (const { p, host, upstream } of defaultRoots) {
    const claimKey = `${host}\0prefix\0/`;
    withUnusedDefault.add(p);
    if (claims.has(claimKey)) continue; // an Ingress routes "/" on this host itself
    claims.set(claimKey, { owner: p.source, where: 'spec.defaultBackend' });
    addDraft(p, host, upstream, null, 'spec.defaultBackend');
    usedDefault.add(p);
  }
  for (const p of withUnusedDefault) {
    if (!usedDefault.has(p))
      report.notes.push({
        source: p.source,
        item: 'spec.defaultBackend',
        reason: 'not used, as in ingress-nginx: an older Ingress named each of its hosts first, or an Ingress routes "/" on them itself',
      });
  }

  // ---- use-regex by name: what it made of the paths of its hosts
  for (const p of ours) {
    const v = p.ann[`${prefix}use-regex`];
    if (!isTrue(v)) continue;
    const hosts = [...new Set(ruleHosts(p.ing))];
    const left = hosts.flatMap((h) => (regexPaths.get(h)?.left ?? []).map((x) => `${h}${x}`));
    const prefixed = hosts.flatMap((h) => (regexPaths.get(h)?.prefixed ?? []).map((x) => `${h}${x}`));
    const rewritten = hosts.flatMap((h) => (regexPaths.get(h)?.rewritten ?? []).map((x) => `${h}${x}`));
    const made =
      (prefixed.length > 0 ? `; ${prefixed.join(', ')} hold no regex syntax and became case-sensitive prefixes` : '') +
      (rewritten.length > 0 ? `; ${rewritten.join(', ')} became prefix rewrites (rewrite-target)` : '');
    if (left.length > 0) {
      report.unconverted.push({
        source: p.source,
        item: `${prefix}use-regex`,
        value: v!,
        reason: `ipgate matches no regular expressions: ${left.join(', ')} (every Ingress's paths on ${hosts.join(', ')}) are not routed${made}`,
      });
    } else {
      report.notes.push({
        source: p.source,
        item: `${prefix}use-regex`,
        value: v!,
        reason: `ipgate matches no regular expressions${made || `: no path on ${hosts.join(', ')} was converted`} (ingress-nginx matched them as case-insensitive regular expressions anchored at the start)`,
      });
    }
  }

  // ---- routes, named `<namespace>-<name>-<index>` (hashed when long or taken)
  const routes: RouteOut[] = [];
  const allHosts = new Set(ours.flatMap((p) => ruleHosts(p.ing)));
  const wwwTo = new Set<string>();
  for (const p of ours) {
    if (p.drafts.length > 0) report.ingresses.converted++;
    // ingress-nginx's rewrite annotation parser: each annotation falls back to the ConfigMap's key.
    const sslAnn = p.ann[`${prefix}ssl-redirect`];
    const forceAnn = p.ann[`${prefix}force-ssl-redirect`];
    const sslRedirect = sslAnn !== undefined && (TRUE.has(sslAnn) || FALSE.has(sslAnn)) ? TRUE.has(sslAnn) : cm.sslRedirect;
    const forced = forceAnn !== undefined && (TRUE.has(forceAnn) || FALSE.has(forceAnn)) ? TRUE.has(forceAnn) : cm.forceSslRedirect;
    // Fail closed: an Ingress that asked for authentication ipgate cannot do is refused to everyone
    // rather than served to every allowlisted client (annotations.ts AUTH_GATES).
    const authGated = AUTH_GATES.some((a) => p.ann[`${prefix}${a}`] !== undefined);
    const redirectedHosts = new Set<string>();
    const exempt = new Set<string>();
    p.drafts.forEach((d, i) => {
      const ns = str(p.ing.metadata?.namespace) ?? 'default';
      const name = uniqueName(`${ns}-${str(p.ing.metadata?.name) ?? 'ingress'}-${i}`, `route:${p.key}#${i}`, routeNames);
      const route: Json = { name, hosts: [d.host] };
      if (d.paths !== null) route.paths = d.paths;
      route.upstreams = [d.upstream];
      if (auth.refused.has(d.host) || authGated) route.allowlist = REFUSED_LIST;
      else if (p.allowlist !== undefined) route.allowlist = p.allowlist;
      if (p.limits !== undefined) route.limits = p.limits;
      if (p.upstreamTimeoutMs !== undefined || p.edge !== undefined || p.upstreamProtocol !== undefined) {
        route.http = {
          ...(p.upstreamTimeoutMs !== undefined ? { upstreamTimeoutMs: p.upstreamTimeoutMs } : {}),
          ...(p.upstreamProtocol !== undefined ? { upstreamProtocol: p.upstreamProtocol } : {}),
          ...p.edge,
        };
      }
      if (d.rewrite !== null) route.http = { ...(route.http as Json | undefined), rewrite: d.rewrite };
      const wanted = forced || (sslRedirect && tlsHosts.has(d.host));
      if (wanted && d.noTlsRedirect) exempt.add(d.paths?.map((x) => x.path).join(', ') ?? '/');
      const redirected = wanted && !d.noTlsRedirect;
      if (redirected) redirectedHosts.add(d.host);
      routes.push({ route, host: d.host, from: `${p.source} ${d.from.join(', ')}`, redirected });
    });
    if (redirectedHosts.size > 0) {
      const item = forced ? `${prefix}force-ssl-redirect` : sslAnn !== undefined ? `${prefix}ssl-redirect` : 'ssl-redirect (default true)';
      report.notes.push({
        source: p.source,
        item,
        value: [...redirectedHosts].join(', '),
        reason: `as http.httpsRedirect {status: ${cm.httpRedirectCode}} on the plaintext listener's routes (${forced ? 'force-ssl-redirect: every host of the Ingress' : 'the hosts with a TLS block'}; the status is the ConfigMap's http-redirect-code). ipgate redirects after the allowlist, so a client the allowlist refuses gets 403 where ingress-nginx redirected it first (add beforeAllowlist: true for its order)${isTrue(p.ann[`${prefix}preserve-trailing-slash`]) ? '' : '; the Location keeps a trailing "/" of the path, which ingress-nginx removed (without preserve-trailing-slash)'}${cm.trustedProxies !== null ? "; a trusted proxy's X-Forwarded-Proto https is served, as ingress-nginx's use-forwarded-headers did" : ''}${cm.proxyProtocol !== null ? '; behind use-proxy-protocol, ingress-nginx took a PROXY header to port 443 as HTTPS and ipgate does not: a balancer that terminates TLS and sends plain HTTP to the plaintext listener would loop' : ''}`,
      });
    }
    if (isTrue(p.ann[`${prefix}from-to-www-redirect`])) wwwRoutes(p, routes);
    if (exempt.size > 0)
      report.notes.push({
        source: p.source,
        item: 'no-tls-redirect-locations',
        value: [...exempt].join('; '),
        reason: `not redirected to HTTPS: the paths start with one of ${cm.noTlsRedirectLocations.join(', ')} (the ConfigMap's no-tls-redirect-locations, default the ACME challenge), as in ingress-nginx`,
      });
  }
  /**
   * from-to-www-redirect (template.go buildRedirects, nginx.tmpl): for each host of the Ingress, a server for
   * the other spelling (`www.` added or removed) that answers every request with http-redirect-code to the
   * same scheme and target on the host, unless an Ingress names that spelling itself (then it is served as it says).
   */
  function wwwRoutes(p: IngressPlan, out: RouteOut[]): void {
    const item = `${prefix}from-to-www-redirect`;
    const made: string[] = [];
    for (const to of [...new Set(p.drafts.map((d) => d.host))]) {
      if (to === '*' || to.startsWith('*.') || wwwTo.has(to)) continue;
      const from = to.startsWith('www.') ? to.slice(4) : `www.${to}`;
      if (allHosts.has(from)) {
        report.notes.push({
          source: p.source,
          item,
          value: `${from} -> ${to}`,
          reason: `not written: an Ingress routes ${from} itself, and ingress-nginx then skipped the redirect too`,
        });
        continue;
      }
      const why = hostNameProblem(from);
      if (why !== null) {
        report.unconverted.push({ source: p.source, item, value: `${from} -> ${to}`, reason: `${why}: not a host name ipgate can route` });
        continue;
      }
      wwwTo.add(to);
      const d = p.drafts.find((x) => x.host === to)!;
      const ns = str(p.ing.metadata?.namespace) ?? 'default';
      const name = uniqueName(`${ns}-${str(p.ing.metadata?.name) ?? 'ingress'}-www-${made.length}`, `www:${p.key}#${from}`, routeNames);
      const route: Json = { name, hosts: [from], upstreams: [d.upstream] };
      if (auth.refused.has(to) || AUTH_GATES.some((a) => p.ann[`${prefix}${a}`] !== undefined)) route.allowlist = REFUSED_LIST;
      else if (p.allowlist !== undefined) route.allowlist = p.allowlist;
      route.http = { redirect: { host: to, status: cm.httpRedirectCode } };
      out.push({ route, host: from, from: `${p.source} ${item} (${from} -> ${to})`, redirected: false, wwwRedirect: true });
      made.push(`${from} -> ${to}`);
    }
    if (made.length > 0)
      report.notes.push({
        source: p.source,
        item,
        value: made.join(', '),
        reason: `a route per host answering http.redirect {host, status: ${cm.httpRedirectCode}} (the ConfigMap's http-redirect-code): the request's scheme, path and query are kept, as ingress-nginx did. Unlike ingress-nginx, the route has the Ingress's allowlist (a refused client gets 403, not the redirect), a port in the request's Host is kept, and a trailing "/" of the path is not removed; over HTTPS it needs a certificate for the redirected name, as ingress-nginx did`,
      });
  }

  if (noTimestamp.length > 0 && noTimestamp.length < ours.length) {
    report.notes.push({
      source: 'input',
      item: 'metadata.creationTimestamp',
      value: noTimestamp.join(', '),
      reason: 'missing: these Ingresses are taken as the newest when two claim the same host and path',
    });
  }
  if (routes.some((r) => r.route.allowlist === REFUSED_LIST)) allowlists[REFUSED_LIST] = { source: 'config', entries: [] };
  const built =
    routes.length > 0 && report.refused.length === 0
      ? buildListeners(routes, DEFAULT_LIST, cm, opts, certificates, auth, prefix, report)
      : { listeners: [], routeSources: [] };
  const onListeners = built.listeners.flatMap((l) => l.routes as Json[]);
  const used = new Set(onListeners.map((r) => r.allowlist).filter((n): n is string => typeof n === 'string'));
  used.add(DEFAULT_LIST);
  for (const r of onListeners) {
    const lim = r.limits as Record<string, { exempt?: string[] }> | undefined;
    if (lim !== undefined) for (const l of Object.values(lim)) for (const n of l.exempt ?? []) used.add(n);
  }
  for (const name of Object.keys(allowlists)) if (!used.has(name)) delete allowlists[name];
  report.routes = routes.length;
  report.allowlists = built.listeners.length > 0 ? Object.keys(allowlists).length : 0;
  if (built.listeners.length === 0) return { config: null, report, routeSources: [] };
  return { config: { allowlists, listeners: built.listeners }, report, routeSources: built.routeSources };
}

function addDraft(
  p: IngressPlan,
  host: string,
  upstream: string,
  path: { path: string; match: 'exact' | 'prefix' } | null,
  from: string,
  rewrite: Json | null = null,
  noTlsRedirect = false,
): void {
  // Paths of one Ingress to the same host and backend share a route, if they share its rules too.
  const d =
    path === null
      ? undefined
      : p.drafts.find(
          (x) =>
            x.host === host &&
            x.upstream === upstream &&
            x.paths !== null &&
            JSON.stringify(x.rewrite) === JSON.stringify(rewrite) &&
            x.noTlsRedirect === noTlsRedirect,
        );
  if (d !== undefined) {
    d.paths!.push(path!);
    d.from.push(from);
    return;
  }
  p.drafts.push({ host, upstream, paths: path === null ? null : [path], from: [from], rewrite, noTlsRedirect });
}

function hostOf(rule: Record<string, unknown>): string {
  const h = str(rule.host);
  // Lower-cased as the route table keys hosts, so two spellings are one claim.
  return h === undefined || h === '' ? '*' : h.toLowerCase();
}

function ruleHosts(ing: KubeObject): string[] {
  const spec = isRecord(ing.spec) ? ing.spec : {};
  return Array.isArray(spec.rules) ? spec.rules.filter(isRecord).map(hostOf) : [];
}

function isTrue(v: string | undefined): boolean {
  return v !== undefined && TRUE.has(v);
}

function timestamp(ing: KubeObject): number | null {
  const t =
    str(ing.metadata?.creationTimestamp) ??
    (ing.metadata?.creationTimestamp instanceof Date ? (ing.metadata.creationTimestamp as Date).toISOString() : undefined);
  if (t === undefined) return null;
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? null : ms;
}

/** ingress-nginx's order: oldest first; equal times by "namespace/name" descending. No time: newest. */
function compareIngresses(a: IngressPlan, b: IngressPlan): number {
  const ta = timestamp(a.ing) ?? Infinity;
  const tb = timestamp(b.ing) ?? Infinity;
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.key === b.key ? 0 : a.key > b.key ? -1 : 1;
}

export type { RangeEntry };
