/**
 * `ipgate import ingress-nginx`: Ingress objects (files, or the cluster) -> an ipgate config on
 * stdout or `-o FILE`, and the report of what was not carried over on stderr (text, or
 * `--report json`). The conversion itself is src/import/ingress-nginx.ts; what maps to what is
 * docs/migrating-from-ingress-nginx.md.
 *
 * The config is checked by the same loader as `ipgate check-config` before it is written, so
 * what this command writes is a config ipgate starts with (the `tls` key excepted while this
 * build's schema lacks it: see TLS_KEY_KNOWN).
 *
 * Exit codes: 0 config written (notes and unconverted items are normal), 1 nothing to write (no
 * Ingress of the class made a route) or the generated config failed the loader (a bug: the
 * problems are printed), 2 usage error or unreadable input (a file that is not YAML/JSON or not
 * Kubernetes objects, a cluster that cannot be read).
 */
import fs from 'node:fs';
import YAML, { isMap, isSeq, type Document } from 'yaml';
import { ConfigError } from '../config/errors';
import { buildConfig } from '../config/load';
import { configSchema } from '../config/schema';
import { KubeError } from '../kube/errors';
import { KubeClient } from '../kube/kube-client';
import { resolveKubeAccess } from '../kube/kubeconfig';
import { convertIngressNginx, DEFAULT_OPTIONS, type Finding, type ImportOptions, type ImportReport, type ImportResult } from '../import/ingress-nginx';
import { addDocuments, emptySet, InputError, isRecord, objectKey, str, type KubeObject, type ObjectSet } from '../import/objects';
import { parseCommandLine, UsageError } from './common';

export const IMPORT_USAGE = `Usage: ipgate import ingress-nginx [-f FILE]... [options]

Reads Ingress objects and writes an ipgate config: hosts, paths and Service backends as routes,
whitelist/allowlist/denylist-source-range as each route's allowlist, the controller ConfigMap's
use-proxy-protocol / proxy-real-ip-cidr / use-forwarded-headers as the listener's proxyProtocol
and http.trustedProxies. Everything that is not carried over is reported on stderr, by name,
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
                           certificates (/etc/ipgate/tls/<secretName>/tls.crt and tls.key)
  --https-listen ADDR      the HTTPS listener (default 0.0.0.0:8443)

Output:
  -o, --out FILE           write the config to FILE (default: standard output)
  --report FORMAT          the report on stderr: text (default) or json
  -h, --help               this text

Flags take their value as --flag=value or --flag value.

Exit codes: 0 config written (with the report of what was not carried over), 1 nothing to
convert (no route could be made), 2 usage error or unreadable input.
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
  out: { type: 'string', short: 'o' },
  report: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Names the controller ConfigMap has in the official manifests (Helm chart; older static manifests). */
const CONTROLLER_CONFIGMAPS = ['ingress-nginx-controller', 'nginx-configuration'];
const CLUSTER_CONFIGMAP = 'ingress-nginx/ingress-nginx-controller';

/**
 * Whether this build's config schema has the listener `tls` key (TLS termination lands from
 * another branch). Without it, a config written with --tls is checked without its `tls` keys.
 */
const TLS_KEY_KNOWN = 'tls' in (configSchema.properties.listeners.items.properties as Record<string, unknown>);

export async function importMain(argv: string[], io: ImportIo = {
  out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s), env: process.env, readStdin: () => fs.readFileSync(0, 'utf8'),
}): Promise<number> {
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
      throw new UsageError(`-o takes a FILE here (the config is always YAML), not a format: for the report's format use --report; to write a file named ${values.out}, give ./${values.out}`);
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
    };
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
  if (result.config === null) {
    writeReport();
    io.err(`ipgate import: nothing to convert: no Ingress of class ${JSON.stringify(opts.ingressClass)} made a route; no config written\n`);
    return 1;
  }
  // The loader that `check-config` and start-up use: a config this command writes must start.
  try {
    buildConfig(TLS_KEY_KNOWN ? result.config : withoutTls(result.config));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    writeReport();
    io.err(`ipgate import: the generated config does not pass the config loader (an importer bug; please report it with the input):\n${err.problems.map((p) => `  - ${p}\n`).join('')}`);
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

interface Loaded { input: Parameters<typeof convertIngressNginx>[0]; from: string; notes: Finding[] }

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
  const notes: Finding[] = set.others.map((o) => ({ source: o, item: 'object', reason: 'ignored: the importer reads Ingress, Service and ConfigMap objects' }));
  const configMap = pickConfigMap(set, configmap, notes);
  return { input: { ingresses: set.ingresses, services: set.services, configMap, servicesFrom: 'file' }, from: files.join(', '), notes };
}

function pickConfigMap(set: ObjectSet, flag: string | undefined, notes: Finding[]): KubeObject | null {
  let chosen: KubeObject | null = null;
  if (flag !== 'none') {
    const candidates = set.configMaps.filter((c) => (flag !== undefined ? objectKey(c) === flag : isControllerConfigMap(c)));
    chosen = candidates[0] ?? null;
    if (flag !== undefined && chosen === null) notes.push({ source: `ConfigMap ${flag}`, item: '--configmap', reason: 'not in the input: ingress-nginx\'s defaults are assumed' });
  }
  for (const c of set.configMaps) {
    if (c !== chosen) notes.push({ source: `ConfigMap ${objectKey(c)}`, item: 'object', reason: 'ignored: not the ingress-nginx controller ConfigMap (--configmap chooses it)' });
  }
  return chosen;
}

function isControllerConfigMap(c: KubeObject): boolean {
  const labels = isRecord(c.metadata?.labels) ? c.metadata.labels : {};
  return CONTROLLER_CONFIGMAPS.includes(str(c.metadata?.name) ?? '') ||
    (labels['app.kubernetes.io/name'] === 'ingress-nginx' && labels['app.kubernetes.io/component'] === 'controller');
}

async function readCluster(values: ReturnType<typeof parse>['values'], io: ImportIo): Promise<Loaded> {
  const access = resolveKubeAccess({ kubeconfig: values.kubeconfig, context: values.context, env: io.env });
  const client = new KubeClient(access, { timeoutMs: io.timeoutMs ?? 10_000, userAgent: 'ipgate-import' });
  try {
    const ns = values.namespace;
    const ingressPath = ns === undefined ? '/apis/networking.k8s.io/v1/ingresses' : `/apis/networking.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/ingresses`;
    const ingresses = await client.list<KubeObject>(ingressPath);
    if (ingresses === null) throw new InputError(`GET ${ingressPath}: 404: this cluster serves no networking.k8s.io/v1 Ingresses`);
    const notes: Finding[] = [];
    let configMap: KubeObject | null = null;
    const cmKey = values.configmap ?? CLUSTER_CONFIGMAP;
    if (cmKey !== 'none') {
      const [cmNs, cmName] = cmKey.split('/') as [string, string];
      configMap = await client.getObject<KubeObject>(`/api/v1/namespaces/${encodeURIComponent(cmNs)}/configmaps/${encodeURIComponent(cmName)}`);
      if (configMap === null) notes.push({ source: `ConfigMap ${cmKey}`, item: '--configmap', reason: 'not found: ingress-nginx\'s defaults are assumed (use --configmap NS/NAME if the controller\'s ConfigMap lives elsewhere)' });
    }
    // Named service ports: each Service is read once, only when an Ingress needs it.
    const services: KubeObject[] = [];
    for (const key of namedPortServices(ingresses)) {
      const [sNs, sName] = key.split('/') as [string, string];
      const svc = await client.getObject<KubeObject>(`/api/v1/namespaces/${encodeURIComponent(sNs)}/services/${encodeURIComponent(sName)}`);
      if (svc !== null) services.push({ ...svc, metadata: { ...svc.metadata, namespace: sNs, name: sName } });
    }
    return { input: { ingresses, services, configMap, servicesFrom: 'cluster' }, from: `the cluster at ${access.server.origin} (${access.source})`, notes };
  } finally {
    client.close();
  }
}

/** `ns/name` of every Service an Ingress names with a port name rather than a number. */
export function namedPortServices(ingresses: readonly KubeObject[]): string[] {
  const out = new Set<string>();
  for (const ing of ingresses) {
    const ns = str(ing.metadata?.namespace) ?? 'default';
    const spec = isRecord(ing.spec) ? ing.spec : {};
    const backends: unknown[] = [spec.defaultBackend];
    for (const r of Array.isArray(spec.rules) ? spec.rules : []) {
      if (isRecord(r) && isRecord(r.http) && Array.isArray(r.http.paths)) for (const p of r.http.paths) if (isRecord(p)) backends.push(p.backend);
    }
    for (const b of backends) {
      if (isRecord(b) && isRecord(b.service) && isRecord(b.service.port) && typeof b.service.port.name === 'string' && typeof b.service.name === 'string') {
        out.add(`${ns}/${b.service.name}`);
      }
    }
  }
  return [...out];
}

function withoutTls(config: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(config);
  for (const l of copy.listeners as Array<Record<string, unknown>>) delete l.tls;
  return copy;
}

/** The config as YAML, each route preceded by a comment naming the Ingress and rule it came from. */
function render(result: ImportResult, from: string, opts: ImportOptions): string {
  const doc: Document = new YAML.Document(result.config);
  const r = result.report;
  doc.commentBefore = [
    ` Generated by \`ipgate import ingress-nginx\` from ${from}.`,
    ` ${r.ingresses.converted} of ${n(r.ingresses.read, 'Ingress', 'Ingresses')} converted into ${n(r.routes, 'route')}; ${n(r.unconverted.length, 'item')} not carried over, ${n(r.notes.length, 'note')} (the report on stderr).`,
    ' Allowlists are `source: config`: the Ingress annotations were declarative, so this file stays the',
    ' truth (edits apply live; admin API writes are refused). See docs/migrating-from-ingress-nginx.md.',
    ...(opts.tls && !TLS_KEY_KNOWN ? [' Note: this ipgate build does not know the listener `tls` key yet; `check-config` refuses it.'] : []),
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

export function reportText(r: ImportReport): string {
  let s = `ipgate import: ${n(r.ingresses.read, 'Ingress', 'Ingresses')} read, ${r.ingresses.converted} converted into ${n(r.routes, 'route')} and ${n(r.allowlists, 'allowlist')}; ` +
    `${r.unconverted.length} not carried over, ${n(r.notes.length, 'note')}, ${r.ingresses.skipped} skipped\n`;
  const section = (title: string, items: Finding[]): void => {
    if (items.length > 0) s += `${title}:\n${items.map(line).join('')}`;
  };
  section('not carried over (ingress-nginx behaviour the config does not reproduce)', r.unconverted);
  section('notes (converted, with a difference)', r.notes);
  section('skipped Ingresses', r.skipped);
  section('ignored (not ingress-nginx settings)', r.ignored);
  return s;
}
