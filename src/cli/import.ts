/**
 * `ipgate import ingress-nginx`: Ingress objects (files, or the cluster) -> an ipgate config on
 * stdout or `-o FILE`, and the report of what was not carried over on stderr (text, or
 * `--report json`). The conversion itself is src/import/ingress-nginx.ts; what maps to what is
 * docs/migrating-from-ingress-nginx.md.
 *
 * The config is checked by the same loader as `ipgate check-config` before it is written, so
 * what this command writes is a config ipgate starts with, except that TLS certificate, key and
 * CA files are named but not read: the import runs where the Secrets are not (they are mounted
 * into the pod), so their existence and content are checked when ipgate starts, not here.
 *
 * Exit codes: 0 config written (notes and unconverted items are normal), 1 nothing to write (no
 * Ingress of the class made a route) or the generated config failed the loader (a bug: the
 * problems are printed), 2 usage error or unreadable input (a file that is not YAML/JSON or not
 * Kubernetes objects, a cluster that cannot be read, two candidate controller ConfigMaps),
 * 3 refused: the config would trust more than the operator said (every peer to name the client,
 * or a flag wider than the ConfigMap); the message says which flag to pass.
 */
import fs from 'node:fs';
import YAML, { isMap, isSeq, type Document } from 'yaml';
import { ConfigError } from '../config/errors';
import { buildConfig, configWarnings } from '../config/load';
import { parseCidr } from '../allowlist/cidr';
import { KubeError } from '../kube/errors';
import { KubeClient } from '../kube/kube-client';
import { resolveKubeAccess } from '../kube/kubeconfig';
import {
  convertIngressNginx,
  DEFAULT_OPTIONS,
  type Finding,
  type ImportOptions,
  type ImportReport,
  type ImportResult,
} from '../import/ingress-nginx';
import { addDocuments, emptySet, InputError, isRecord, objectKey, originOf, str, type KubeObject, type ObjectSet } from '../import/objects';
import { parseCommandLine, UsageError } from './common';

const IMPORT_USAGE = `Usage: ipgate import ingress-nginx [-f FILE]... [options]

Reads Ingress objects and writes an ipgate config: hosts, paths and Service backends as routes,
whitelist/allowlist/denylist-source-range as each route's allowlist, the controller ConfigMap's
use-proxy-protocol / proxy-real-ip-cidr / use-forwarded-headers as the listener's proxyProtocol
or http.trustedProxies. Everything that is not carried over is reported on stderr, by name,
with the Ingress it came from (docs/migrating-from-ingress-nginx.md).

Input (one of):
  -f, --file FILE          YAML or JSON: Ingresses (single objects, "---" documents, a List or
                           IngressList), and optionally the Services they use (named ports) and
                           the controller ConfigMap. Repeatable; "-" reads standard input.
  (no --file)              the cluster, through the kubeconfig:
  --kubeconfig PATH        kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)
  --context NAME           kubeconfig context (default: current-context)
  -n, --namespace NS       only the Ingresses of this namespace (default: all namespaces)

Conversion:
  --configmap NS/NAME      the ingress-nginx controller ConfigMap (default: from the cluster
                           ingress-nginx/ingress-nginx-controller; from files, the ConfigMap named
                           ingress-nginx-controller or nginx-configuration); "none": ignore it
  --ingress-class NAME     convert Ingresses of this class (default nginx); others are skipped
  --ingress-without-class  also convert Ingresses that name no class
  --annotations-prefix P   ingress-nginx's annotation prefix (default nginx.ingress.kubernetes.io)
  --cluster-domain D       Service DNS suffix (default cluster.local)
  --http-listen ADDR       the plaintext listener (default 0.0.0.0:8080)
  --tls                    also write an HTTPS listener with the Ingresses' TLS Secrets as
                           certificates (/etc/ipgate/tls/<secretName>/tls.crt and tls.key), and
                           auth-tls-secret as its client CA where every host asked the same.
                           The files are not read here: they are checked when ipgate starts
  --https-listen ADDR      the HTTPS listener (default 0.0.0.0:8443)
  --tls-dir DIR            where the Secrets' directories are (default /etc/ipgate/tls, where
                           the chart mounts them; a relative DIR is relative to the config file)

Trust (whose PROXY header or X-Forwarded-For names the client):
  --proxy-real-ip-cidr CIDR[,CIDR]
                           your load balancers, in place of the ConfigMap's proxy-real-ip-cidr
                           (which they must lie inside). Repeatable. Needed when the ConfigMap
                           leaves it at ingress-nginx's default 0.0.0.0/0 (every peer)
  --trust-all-proxies      write a range that trusts every peer (0.0.0.0/0, ::/0) as the
                           ConfigMap has it; without this flag such an import is refused

Output:
  -o, --out FILE           write the config to FILE (default: standard output)
  --report FORMAT          the report on stderr: text (default) or json
  -h, --help               this text

Flags take their value as --flag=value or --flag value.

Exit codes: 0 config written (with the report of what was not carried over), 1 nothing to
convert (no route could be made), 2 usage error or unreadable input, 3 refused: the config
would trust every peer (or more than the ConfigMap did) to name the client; no config written.
`;

export interface ImportIo {
  out: (s: string) => void;
  err: (s: string) => void;
  env: NodeJS.ProcessEnv;
  readStdin: () => string;
  /** Per Kubernetes API request. Default 10000. */
  timeoutMs?: number;
}

const OPTIONS = {
  file: { type: 'string', short: 'f', multiple: true },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  configmap: { type: 'string' },
  'ingress-class': { type: 'string' },
  'ingress-without-class': { type: 'boolean' },
  'annotations-prefix': { type: 'string' },
  'cluster-domain': { type: 'string' },
  'http-listen': { type: 'string' },
  'https-listen': { type: 'string' },
  tls: { type: 'boolean' },
  'tls-dir': { type: 'string' },
  'proxy-real-ip-cidr': { type: 'string', multiple: true },
  'trust-all-proxies': { type: 'boolean' },
  out: { type: 'string', short: 'o' },
  report: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Names the controller ConfigMap has in the official manifests (Helm chart; older static manifests). */
const CONTROLLER_CONFIGMAPS = ['ingress-nginx-controller', 'nginx-configuration'];
const CLUSTER_CONFIGMAP = 'ingress-nginx/ingress-nginx-controller';

export async function importMain(
  argv: string[],
  io: ImportIo = {
    out: (s) => process.stdout.write(s),
    err: (s) => process.stderr.write(s),
    env: process.env,
    readStdin: () => fs.readFileSync(0, 'utf8'),
  },
): Promise<number> {
  let values: ReturnType<typeof parse>['values'];
  let opts: ImportOptions;
  let reportFormat: 'text' | 'json';
  try {
    const parsed = parse(argv);
    values = parsed.values;
    if (values.help === true) {
      io.out(IMPORT_USAGE);
      return 0;
    }
    const [source, ...rest] = parsed.positionals;
    if (source === undefined) throw new UsageError('say what to import from: ipgate import ingress-nginx');
    if (source !== 'ingress-nginx') throw new UsageError(`cannot import from ${JSON.stringify(source)} (known: ingress-nginx)`);
    if (rest.length > 0) throw new UsageError(`unexpected argument ${rest[0]}`);
    const r = values.report ?? 'text';
    if (r !== 'text' && r !== 'json') throw new UsageError(`--report ${JSON.stringify(r)}: expected text or json`);
    reportFormat = r;
    if (values.out !== undefined && ['json', 'yaml', 'table', 'text'].includes(values.out)) {
      throw new UsageError(
        `-o takes a FILE here (the config is always YAML), not a format: for the report's format use --report; to write a file named ${values.out}, give ./${values.out}`,
      );
    }
    const files = values.file ?? [];
    if (files.length > 0) {
      for (const flag of ['kubeconfig', 'context', 'namespace'] as const) {
        if (values[flag] !== undefined) throw new UsageError(`--${flag} is for reading the cluster; with --file the input is the file`);
      }
    }
    opts = {
      ...DEFAULT_OPTIONS,
      ingressClass: values['ingress-class'] ?? DEFAULT_OPTIONS.ingressClass,
      withoutClass: values['ingress-without-class'] === true,
      annotationsPrefix: (values['annotations-prefix'] ?? DEFAULT_OPTIONS.annotationsPrefix).replace(/\/$/, ''),
      clusterDomain: (values['cluster-domain'] ?? DEFAULT_OPTIONS.clusterDomain).replace(/^\.|\.$/g, ''),
      httpListen: values['http-listen'] ?? DEFAULT_OPTIONS.httpListen,
      httpsListen: values['https-listen'] ?? DEFAULT_OPTIONS.httpsListen,
      tls: values.tls === true,
      tlsDir: (values['tls-dir'] ?? DEFAULT_OPTIONS.tlsDir).replace(/(.)\/+$/, '$1'),
      proxyRealIpCidr: values['proxy-real-ip-cidr'] === undefined ? null : cidrFlag(values['proxy-real-ip-cidr']),
      trustAllProxies: values['trust-all-proxies'] === true,
    };
    if (opts.tlsDir === '') throw new UsageError('--tls-dir: give a directory');
    if (values.configmap !== undefined && values.configmap !== 'none' && !/^[^/]+\/[^/]+$/.test(values.configmap)) {
      throw new UsageError(`--configmap ${JSON.stringify(values.configmap)}: expected NAMESPACE/NAME or none`);
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`ipgate import: ${err.message}\n\n${IMPORT_USAGE}`);
    return 2;
  }

  let result: ImportResult;
  let from: string;
  try {
    const files = values.file ?? [];
    const loaded = files.length > 0 ? readFiles(files, values.configmap, io) : await readCluster(values, io);
    from = loaded.from;
    result = convertIngressNginx(loaded.input, opts);
    result.report.notes.unshift(...loaded.notes);
  } catch (err) {
    if (err instanceof InputError || err instanceof KubeError) {
      io.err(`ipgate import: ${err.message}\n`);
      return 2;
    }
    throw err;
  }

  const { report } = result;
  const writeReport = (): void => io.err(reportFormat === 'json' ? `${JSON.stringify(report, null, 2)}\n` : reportText(report));
  if (report.refused.length > 0) {
    writeReport();
    io.err(
      reportFormat === 'json'
        ? `ipgate import: refused, no config written:\n${report.refused.map(line).join('')}`
        : 'ipgate import: refused, no config written (the reasons are above)\n',
    );
    return 3;
  }
  if (result.config === null) {
    writeReport();
    io.err(`ipgate import: nothing to convert: no Ingress of class ${JSON.stringify(opts.ingressClass)} made a route; no config written\n`);
    return 1;
  }
  // The loader that `check-config` and start-up use: a config this command writes must start
  // (the TLS files excepted: see the file comment). Its warnings join the report.
  try {
    const checked = buildConfig(result.config, undefined, { tlsFiles: false });
    for (const w of configWarnings(checked)) {
      const at = w.indexOf(': ');
      report.notes.push({
        source: 'check-config',
        item: at < 0 ? 'warning' : w.slice(0, at),
        reason: `warning: ${at < 0 ? w : w.slice(at + 2)}`,
      });
    }
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    writeReport();
    io.err(
      `ipgate import: the generated config does not pass the config loader (an importer bug; please report it with the input):\n${err.problems.map((p) => `  - ${p}\n`).join('')}`,
    );
    return 1;
  }
  const text = render(result, from, opts);
  if (values.out !== undefined) {
    try {
      fs.writeFileSync(values.out, text);
    } catch (err) {
      io.err(`ipgate import: cannot write -o ${JSON.stringify(values.out)}: ${(err as Error).message}\n`);
      return 2;
    }
  } else {
    io.out(text);
  }
  writeReport();
  return 0;
}

function parse(argv: string[]) {
  return parseCommandLine(argv, OPTIONS, true);
}

interface Loaded {
  input: Parameters<typeof convertIngressNginx>[0];
  from: string;
  notes: Finding[];
}

function readFiles(files: string[], configmap: string | undefined, io: ImportIo): Loaded {
  const set = emptySet();
  for (const f of files) {
    let text: string;
    try {
      text = f === '-' ? io.readStdin() : fs.readFileSync(f, 'utf8');
    } catch (err) {
      throw new InputError(`cannot read -f ${JSON.stringify(f)}: ${(err as Error).message}`);
    }
    addDocuments(set, text, f === '-' ? 'stdin' : f);
  }
  const notes: Finding[] = set.others.map((o) => ({
    source: o,
    item: 'object',
    reason: 'ignored: the importer reads Ingress, Service and ConfigMap objects',
  }));
  const configMap = pickConfigMap(set, configmap, notes);
  return { input: { ingresses: set.ingresses, services: set.services, configMap, servicesFrom: 'file' }, from: files.join(', '), notes };
}

/**
 * The controller ConfigMap among the input's: the one `--configmap` names, else the one named or
 * labelled as the official manifests do. It carries the trust settings, so it is never guessed:
 * two different candidates, or one object given twice with different data (a cluster holds one),
 * is an InputError that names both; the same object given twice with the same data is read once.
 */
function pickConfigMap(set: ObjectSet, flag: string | undefined, notes: Finding[]): KubeObject | null {
  const where = (c: KubeObject): string => originOf(c) ?? 'input';
  const candidates =
    flag === 'none' ? [] : set.configMaps.filter((c) => (flag !== undefined ? objectKey(c) === flag : isControllerConfigMap(c)));
  const keys = [...new Set(candidates.map(objectKey))];
  if (keys.length > 1) {
    throw new InputError(
      `${keys.length} ConfigMaps look like the ingress-nginx controller's: ${candidates.map((c) => `${objectKey(c)} (${where(c)})`).join(', ')}; choose one with --configmap NAMESPACE/NAME (or none)`,
    );
  }
  const chosen = candidates[0] ?? null;
  for (const c of candidates.slice(1)) {
    if (stableJson(c.data) !== stableJson(chosen!.data)) {
      throw new InputError(
        `ConfigMap ${objectKey(c)} is given twice with different data (${where(chosen!)}, ${where(c)}): a cluster holds one; give only the one in force`,
      );
    }
    notes.push({
      source: `ConfigMap ${objectKey(c)}`,
      item: 'object',
      value: where(c),
      reason: `given again with the same data (first at ${where(chosen!)}): read once`,
    });
  }
  if (flag !== undefined && flag !== 'none' && chosen === null)
    notes.push({ source: `ConfigMap ${flag}`, item: '--configmap', reason: "not in the input: ingress-nginx's defaults are assumed" });
  for (const c of set.configMaps) {
    if (candidates.includes(c)) continue;
    const why =
      flag === 'none'
        ? '--configmap none'
        : flag !== undefined
          ? `--configmap chose ${flag}`
          : `not named ${CONTROLLER_CONFIGMAPS.join(' or ')} nor labelled as the controller's (--configmap chooses another)`;
    notes.push({ source: `ConfigMap ${objectKey(c)}`, item: 'object', reason: `ignored: ${why}` });
  }
  return chosen;
}

/** JSON with keys sorted, to compare two objects' data. */
function stableJson(v: unknown): string {
  return (
    JSON.stringify(v, (_k, x: unknown) =>
      isRecord(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
    ) ?? 'null'
  );
}

function isControllerConfigMap(c: KubeObject): boolean {
  const labels = isRecord(c.metadata?.labels) ? c.metadata.labels : {};
  return (
    CONTROLLER_CONFIGMAPS.includes(str(c.metadata?.name) ?? '') ||
    (labels['app.kubernetes.io/name'] === 'ingress-nginx' && labels['app.kubernetes.io/component'] === 'controller')
  );
}

async function readCluster(values: ReturnType<typeof parse>['values'], io: ImportIo): Promise<Loaded> {
  const access = resolveKubeAccess({ kubeconfig: values.kubeconfig, context: values.context, env: io.env });
  const client = new KubeClient(access, { timeoutMs: io.timeoutMs ?? 10_000, userAgent: 'ipgate-import' });
  try {
    const ns = values.namespace;
    const ingressPath =
      ns === undefined
        ? '/apis/networking.k8s.io/v1/ingresses'
        : `/apis/networking.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/ingresses`;
    const ingresses = await client.list<KubeObject>(ingressPath);
    if (ingresses === null) throw new InputError(`GET ${ingressPath}: 404: this cluster serves no networking.k8s.io/v1 Ingresses`);
    const notes: Finding[] = [];
    let configMap: KubeObject | null = null;
    const cmKey = values.configmap ?? CLUSTER_CONFIGMAP;
    if (cmKey !== 'none') {
      const [cmNs, cmName] = cmKey.split('/') as [string, string];
      configMap = await client.getObject<KubeObject>(
        `/api/v1/namespaces/${encodeURIComponent(cmNs)}/configmaps/${encodeURIComponent(cmName)}`,
      );
      if (configMap === null)
        notes.push({
          source: `ConfigMap ${cmKey}`,
          item: '--configmap',
          reason: "not found: ingress-nginx's defaults are assumed (use --configmap NS/NAME if the controller's ConfigMap lives elsewhere)",
        });
    }
    // Named service ports: each Service is read once, only when an Ingress needs it.
    const services: KubeObject[] = [];
    for (const key of namedPortServices(ingresses)) {
      const [sNs, sName] = key.split('/') as [string, string];
      const svc = await client.getObject<KubeObject>(`/api/v1/namespaces/${encodeURIComponent(sNs)}/services/${encodeURIComponent(sName)}`);
      if (svc !== null) services.push({ ...svc, metadata: { ...svc.metadata, namespace: sNs, name: sName } });
    }
    return {
      input: { ingresses, services, configMap, servicesFrom: 'cluster' },
      from: `the cluster at ${access.server.origin} (${access.source})`,
      notes,
    };
  } finally {
    client.close();
  }
}

/** `ns/name` of every Service an Ingress names with a port name rather than a number. */
function namedPortServices(ingresses: readonly KubeObject[]): string[] {
  const out = new Set<string>();
  for (const ing of ingresses) {
    const ns = str(ing.metadata?.namespace) ?? 'default';
    const spec = isRecord(ing.spec) ? ing.spec : {};
    const backends: unknown[] = [spec.defaultBackend];
    for (const r of Array.isArray(spec.rules) ? spec.rules : []) {
      if (isRecord(r) && isRecord(r.http) && Array.isArray(r.http.paths))
        for (const p of r.http.paths) if (isRecord(p)) backends.push(p.backend);
    }
    for (const b of backends) {
      if (
        isRecord(b) &&
        isRecord(b.service) &&
        isRecord(b.service.port) &&
        typeof b.service.port.name === 'string' &&
        typeof b.service.name === 'string'
      ) {
        out.add(`${ns}/${b.service.name}`);
      }
    }
  }
  return [...out];
}

/** `--proxy-real-ip-cidr` values, each comma-separated: strict CIDRs (ipgate's parser: no host bits). */
function cidrFlag(values: readonly string[]): string[] {
  const out: string[] = [];
  for (const v of values) {
    for (const item of v.split(',').map((x) => x.trim())) {
      const r = parseCidr(item);
      if (!r.ok) throw new UsageError(`--proxy-real-ip-cidr: ${r.message}`);
      if (!out.includes(r.cidr.text)) out.push(r.cidr.text);
    }
  }
  if (out.length === 0) throw new UsageError('--proxy-real-ip-cidr: give at least one CIDR');
  return out;
}

/** The config as YAML, each route preceded by a comment naming the Ingress and rule it came from. */
function render(result: ImportResult, from: string, opts: ImportOptions): string {
  const doc: Document = new YAML.Document(result.config);
  const r = result.report;
  doc.commentBefore = [
    ` Generated by \`ipgate import ingress-nginx\` from ${from}.`,
    ` ${summary(r)} (the report on stderr).`,
    ' Allowlists are `source: config`: the Ingress annotations were declarative, so this file stays the',
    ' truth (edits apply live; admin API writes are refused). See docs/migrating-from-ingress-nginx.md.',
    ...(opts.tls ? [` TLS files are read from ${opts.tlsDir}/ when ipgate starts (the import names them, it does not read them).`] : []),
  ].join('\n');
  const listeners = doc.get('listeners');
  if (isSeq(listeners)) {
    listeners.items.forEach((l, li) => {
      const routes = isMap(l) ? l.get('routes') : null;
      if (!isSeq(routes)) return;
      routes.items.forEach((node, ri) => {
        const s = result.routeSources[li]?.[ri];
        if (s !== undefined && isMap(node)) node.commentBefore = ` ${s}`;
      });
    });
  }
  return doc.toString({ lineWidth: 0 });
}

/** `1 route`, `2 routes` */
function n(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

function line(f: Finding): string {
  return `  ${f.source}: ${f.item}${f.value !== undefined ? ` ${JSON.stringify(f.value)}` : ''}: ${f.reason}\n`;
}

/**
 * `2 Ingresses read: 1 converted into 2 routes and 1 allowlist, 1 skipped; 3 items not carried
 * over, 2 notes`. Zero counts are left out, and "none" said when nothing was converted, so the
 * line never claims "0 converted into 0 routes and 1 allowlist".
 */
export function summary(r: ImportReport): string {
  const { read, converted, skipped } = r.ingresses;
  const noRoute = read - converted - skipped;
  const parts: string[] = [];
  if (read === 0) parts.push('no Ingress read');
  else {
    parts.push(
      converted === 0
        ? `${n(read, 'Ingress', 'Ingresses')} read: none converted`
        : `${n(read, 'Ingress', 'Ingresses')} read: ${converted} converted into ${n(r.routes, 'route')}${r.allowlists > 0 ? ` and ${n(r.allowlists, 'allowlist')}` : ''}`,
    );
    if (skipped > 0) parts.push(`${skipped} skipped`);
    if (noRoute > 0) parts.push(`${noRoute} made no route`);
  }
  const findings: string[] = [];
  if (r.refused.length > 0) findings.push(`refused (${n(r.refused.length, 'reason')})`);
  if (r.unconverted.length > 0) findings.push(`${n(r.unconverted.length, 'item')} not carried over`);
  if (r.notes.length > 0) findings.push(n(r.notes.length, 'note'));
  return findings.length > 0 ? `${parts.join(', ')}; ${findings.join(', ')}` : parts.join(', ');
}

export function reportText(r: ImportReport): string {
  let s = `ipgate import: ${summary(r)}\n`;
  const section = (title: string, items: Finding[]): void => {
    if (items.length > 0) s += `${title}:\n${items.map(line).join('')}`;
  };
  section('refused (no config is written until the command line says otherwise)', r.refused);
  section('not carried over (ingress-nginx behaviour the config does not reproduce)', r.unconverted);
  section('notes (converted, with a difference)', r.notes);
  section('skipped Ingresses', r.skipped);
  section('ignored (not ingress-nginx settings)', r.ignored);
  return s;
}
