/**
 * Read the cluster into a Snapshot. The Service read is required (anything but 200/404 is
 * "could not read the API", exit 2); every other read is optional and recorded as
 * ok / absent / unreadable, so a narrow RBAC role still gets a report.
 */
import YAML from 'yaml';
import { DoctorError, KubeStatusError } from './errors';
import type { KubeClient } from '../kube/kube-client';
import type {
  CiliumView,
  EndpointView,
  FelixView,
  IPPoolView,
  KubeProxyView,
  NodeView,
  PodView,
  Read,
  ServiceView,
  Snapshot,
  AdminView,
} from './snapshot';

/** API JSON, read defensively: every field access tolerates absence. */
// biome-ignore lint/suspicious/noExplicitAny: Kubernetes API JSON read defensively, every access checked where it is used
type Obj = Record<string, any>;

interface CollectOptions {
  namespace: string;
  serviceName: string;
  /** Fetched in parallel with the cluster reads; null when not requested. */
  admin: Promise<AdminView> | null;
}

const enc = encodeURIComponent;

/**
 * The labels the Helm chart puts on its data Service and its pods (helm/ipgate/templates/
 * _helpers.tpl `ipgate.labels`, component `controller`); the admin Service is component `admin`.
 * `part-of` is fixed, whatever the release name or nameOverride.
 */
const CHART_CONTROLLER_SELECTOR = 'app.kubernetes.io/part-of=ipgate,app.kubernetes.io/component=controller';
/** The Service name doctor falls back to when no Service carries the chart's labels. */
const DEFAULT_SERVICE = 'ipgate';

/**
 * The data Service to check when --service is not given: the chart names it `<release>-ipgate`
 * (or `<release>` when the release name contains "ipgate"), so a fixed default would miss most
 * installs. The namespace's one Service with the chart's labels; several (two releases in one
 * namespace) is a usage error naming them; none, or no right to list Services: DEFAULT_SERVICE.
 */
export async function findChartService(client: KubeClient, namespace: string): Promise<string> {
  let items: Obj[] | null;
  try {
    items = await client.list<Obj>(`/api/v1/namespaces/${enc(namespace)}/services?labelSelector=${enc(CHART_CONTROLLER_SELECTOR)}`);
  } catch (err) {
    if (err instanceof KubeStatusError && err.status !== 401) return DEFAULT_SERVICE;
    throw err;
  }
  const names = (items ?? [])
    .map((s) => s.metadata?.name)
    .filter((n): n is string => typeof n === 'string')
    .sort();
  if (names.length > 1) {
    throw new DoctorError(
      'IPGATE_DOCTOR_USAGE',
      `namespace ${namespace} has ${names.length} ipgate data Services (${names.join(', ')}): pass --service NAME to choose one`,
    );
  }
  return names[0] ?? DEFAULT_SERVICE;
}

export async function collectSnapshot(client: KubeClient, opts: CollectOptions): Promise<Snapshot> {
  const { namespace, serviceName } = opts;
  const rawService = await client.getObject<Obj>(`/api/v1/namespaces/${enc(namespace)}/services/${enc(serviceName)}`);
  const service = rawService ? serviceView(rawService) : null;

  // Without a Service (the chart's service.enabled: false with hostNetwork), the chart's pods by
  // its labels: whether they take traffic on their nodes' addresses decides the finding.
  const selector = service === null ? CHART_CONTROLLER_SELECTOR : service.selector === null ? null : labelSelector(service.selector);
  const podsRead: Promise<Read<readonly PodView[]>> =
    selector === null
      ? Promise.resolve({ state: 'ok', value: [] })
      : optional(client.list<Obj>(`/api/v1/namespaces/${enc(namespace)}/pods?labelSelector=${enc(selector)}`), (items) =>
          items.map(podView),
        );
  const endpointsRead: Promise<Read<readonly EndpointView[]>> = service
    ? optional(
        client.list<Obj>(
          `/apis/discovery.k8s.io/v1/namespaces/${enc(namespace)}/endpointslices?labelSelector=${enc(`kubernetes.io/service-name=${serviceName}`)}`,
        ),
        (slices) => slices.flatMap(endpointViews),
      )
    : Promise.resolve({ state: 'absent' });

  const [pods, endpoints, nodes, kubeProxy, cilium, calicoPools, felix, admin] = await Promise.all([
    podsRead,
    endpointsRead,
    optional(client.list<Obj>('/api/v1/nodes'), (items) => items.map(nodeView)),
    optional(client.getObject<Obj>('/api/v1/namespaces/kube-system/configmaps/kube-proxy'), kubeProxyView),
    optional(client.getObject<Obj>('/api/v1/namespaces/kube-system/configmaps/cilium-config'), ciliumView),
    optional(client.list<Obj>('/apis/crd.projectcalico.org/v1/ippools'), (items) => items.map(ipPoolView)),
    optional(client.getObject<Obj>('/apis/crd.projectcalico.org/v1/felixconfigurations/default'), felixView),
    opts.admin ?? Promise.resolve(null),
  ]);
  return { namespace, serviceName, service, pods, endpoints, nodes, kubeProxy, cilium, calicoPools, felix, admin };
}

/** null from the client (404) is "absent"; 401 and network failures still abort the run. */
async function optional<T, V>(read: Promise<T | null>, view: (value: T) => V): Promise<Read<V>> {
  try {
    const value = await read;
    return value === null ? { state: 'absent' } : { state: 'ok', value: view(value) };
  } catch (err) {
    if (err instanceof KubeStatusError && err.status !== 401) {
      return { state: 'unreadable', reason: `HTTP ${err.status}: ${err.reason}` };
    }
    throw err;
  }
}

function labelSelector(selector: Readonly<Record<string, string>>): string {
  return Object.entries(selector)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

function serviceView(s: Obj): ServiceView {
  const spec: Obj = s.spec ?? {};
  const selector = spec.selector && Object.keys(spec.selector).length > 0 ? (spec.selector as Record<string, string>) : null;
  return {
    type: typeof spec.type === 'string' ? spec.type : 'ClusterIP',
    externalTrafficPolicy: spec.externalTrafficPolicy,
    internalTrafficPolicy: spec.internalTrafficPolicy,
    selector,
    ports: (Array.isArray(spec.ports) ? spec.ports : []).map((p: Obj) => ({
      name: p.name,
      protocol: p.protocol ?? 'TCP',
      port: p.port,
      targetPort: p.targetPort,
      nodePort: p.nodePort,
    })),
    healthCheckNodePort: spec.healthCheckNodePort,
    allocateLoadBalancerNodePorts: spec.allocateLoadBalancerNodePorts,
    loadBalancerIngress: Array.isArray(s.status?.loadBalancer?.ingress) ? s.status.loadBalancer.ingress : [],
    externalIPs: Array.isArray(spec.externalIPs) ? spec.externalIPs : [],
  };
}

function podView(p: Obj): PodView {
  const conditions: Obj[] = Array.isArray(p.status?.conditions) ? p.status.conditions : [];
  const terminating = Boolean(p.metadata?.deletionTimestamp);
  const readyCondition = conditions.some((c) => c.type === 'Ready' && c.status === 'True');
  const owner = (Array.isArray(p.metadata?.ownerReferences) ? p.metadata.ownerReferences : []).find((o: Obj) => o.controller === true);
  return {
    name: p.metadata?.name ?? '(unnamed)',
    nodeName: p.spec?.nodeName,
    phase: p.status?.phase,
    ready: readyCondition && !terminating && p.status?.phase === 'Running',
    terminating,
    hostNetwork: p.spec?.hostNetwork === true,
    dnsPolicy: p.spec?.dnsPolicy,
    ownerKind: owner?.kind,
  };
}

function endpointViews(slice: Obj): EndpointView[] {
  return (Array.isArray(slice.endpoints) ? slice.endpoints : []).map((e: Obj) => ({
    nodeName: e.nodeName,
    // EndpointSlice: a nil `ready` means ready.
    ready: e.conditions?.ready !== false,
    podName: e.targetRef?.kind === 'Pod' ? e.targetRef.name : undefined,
    addresses: Array.isArray(e.addresses) ? e.addresses : [],
  }));
}

function nodeView(n: Obj): NodeView {
  const conditions: Obj[] = Array.isArray(n.status?.conditions) ? n.status.conditions : [];
  const labels: Obj = n.metadata?.labels ?? {};
  return {
    name: n.metadata?.name ?? '(unnamed)',
    ready: conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
    unschedulable: n.spec?.unschedulable === true,
    taints: (Array.isArray(n.spec?.taints) ? n.spec.taints : []).map((t: Obj) => ({
      key: String(t.key),
      effect: String(t.effect),
      ...(t.value !== undefined ? { value: String(t.value) } : {}),
    })),
    excludedFromLoadBalancers: 'node.kubernetes.io/exclude-from-external-load-balancers' in labels,
    internalIPs: (Array.isArray(n.status?.addresses) ? n.status.addresses : [])
      .filter((a: Obj) => a.type === 'InternalIP')
      .map((a: Obj) => String(a.address)),
  };
}

/** kube-proxy's ConfigMap (kubeadm layout): data["config.conf"] is a KubeProxyConfiguration. */
function kubeProxyView(cm: Obj): KubeProxyView {
  const text = cm.data?.['config.conf'];
  if (typeof text !== 'string') return { mode: '', parseError: 'no "config.conf" key' };
  let conf: Obj;
  try {
    conf = (YAML.parse(text) ?? {}) as Obj;
  } catch (err) {
    return { mode: '', parseError: `config.conf is not YAML: ${(err as Error).message.split('\n')[0]}` };
  }
  return {
    mode: typeof conf.mode === 'string' ? conf.mode : '',
    masqueradeAll: conf.iptables?.masqueradeAll === true || conf.nftables?.masqueradeAll === true,
    clusterCIDR: typeof conf.clusterCIDR === 'string' && conf.clusterCIDR !== '' ? conf.clusterCIDR : undefined,
    nodePortAddresses: Array.isArray(conf.nodePortAddresses) && conf.nodePortAddresses.length > 0 ? conf.nodePortAddresses : undefined,
  };
}

function ciliumView(cm: Obj): CiliumView {
  const data: Obj = cm.data ?? {};
  return {
    kubeProxyReplacement: data['kube-proxy-replacement'],
    bpfLbMode: data['bpf-lb-mode'],
  };
}

function ipPoolView(p: Obj): IPPoolView {
  return {
    name: p.metadata?.name ?? '(unnamed)',
    cidr: p.spec?.cidr,
    natOutgoing: p.spec?.natOutgoing === true,
    disabled: p.spec?.disabled === true,
  };
}

function felixView(f: Obj): FelixView {
  return {
    bpfEnabled: f.spec?.bpfEnabled === true,
    bpfExternalServiceMode: f.spec?.bpfExternalServiceMode,
  };
}
