/**
 * What doctor read from the cluster, reduced to the fields the analysis needs. The snapshot is
 * plain data, so `analyse()` is a pure function tested without a server.
 */

/** An optional read: present, absent (404: not installed / not created), or unreadable (e.g. 403). */
export type Read<T> =
  | { readonly state: 'ok'; readonly value: T }
  | { readonly state: 'absent' }
  | { readonly state: 'unreadable'; readonly reason: string };

interface ServicePortView {
  readonly name?: string;
  readonly protocol: string;
  readonly port: number;
  readonly targetPort?: number | string;
  readonly nodePort?: number;
}

export interface ServiceView {
  readonly type: string;
  /** As stored; the API server defaults it to Cluster for NodePort/LoadBalancer. */
  readonly externalTrafficPolicy?: string;
  readonly internalTrafficPolicy?: string;
  /** null when the Service has no selector (endpoints managed by hand). */
  readonly selector: Readonly<Record<string, string>> | null;
  readonly ports: readonly ServicePortView[];
  readonly healthCheckNodePort?: number;
  readonly allocateLoadBalancerNodePorts?: boolean;
  readonly loadBalancerIngress: ReadonlyArray<{ ip?: string; hostname?: string; ipMode?: string }>;
  readonly externalIPs: readonly string[];
}

export interface PodView {
  readonly name: string;
  readonly nodeName?: string;
  readonly phase?: string;
  /** Ready condition True and not terminating: what kube-proxy counts as a ready local endpoint. */
  readonly ready: boolean;
  readonly terminating: boolean;
  readonly hostNetwork: boolean;
  readonly dnsPolicy?: string;
  /** Kind of the controlling owner: DaemonSet, ReplicaSet, StatefulSet... */
  readonly ownerKind?: string;
}

export interface EndpointView {
  readonly nodeName?: string;
  readonly ready: boolean;
  readonly podName?: string;
  readonly addresses: readonly string[];
}

export interface NodeView {
  readonly name: string;
  readonly ready: boolean;
  readonly unschedulable: boolean;
  readonly taints: ReadonlyArray<{ key: string; effect: string; value?: string }>;
  /** Label node.kubernetes.io/exclude-from-external-load-balancers: cloud LBs leave it out. */
  readonly excludedFromLoadBalancers: boolean;
  readonly internalIPs: readonly string[];
}

export interface KubeProxyView {
  /** `mode` from config.conf; "" means the platform default (iptables on Linux). */
  readonly mode: string;
  readonly masqueradeAll?: boolean;
  readonly clusterCIDR?: string;
  readonly nodePortAddresses?: readonly string[];
  /** Set when config.conf is missing or not YAML: the mode is then unknown. */
  readonly parseError?: string;
}

export interface CiliumView {
  /** `kube-proxy-replacement`: "true" / "false" (older: strict / partial / probe / disabled). */
  readonly kubeProxyReplacement?: string;
  /** `bpf-lb-mode`: snat (default) / dsr / hybrid. */
  readonly bpfLbMode?: string;
}

export interface IPPoolView {
  readonly name: string;
  readonly cidr?: string;
  readonly natOutgoing: boolean;
  readonly disabled: boolean;
}

export interface FelixView {
  readonly bpfEnabled: boolean;
  /** Tunnel (default) or DSR. */
  readonly bpfExternalServiceMode?: string;
}

export interface AdminView {
  readonly url: string;
  /** Set when a response came back. */
  readonly status?: number;
  readonly body?: unknown;
  /** Set when no response came back (refused, timeout, TLS). */
  readonly error?: string;
  /** Set when --admin-token-env names a variable that is unset or empty. */
  readonly tokenProblem?: string;
}

export interface Snapshot {
  readonly namespace: string;
  readonly serviceName: string;
  /** null: the Service does not exist. */
  readonly service: ServiceView | null;
  /** Pods matched by the Service's selector (empty when there is no selector or no Service). */
  readonly pods: Read<readonly PodView[]>;
  readonly endpoints: Read<readonly EndpointView[]>;
  readonly nodes: Read<readonly NodeView[]>;
  readonly kubeProxy: Read<KubeProxyView>;
  readonly cilium: Read<CiliumView>;
  /** absent: the crd.projectcalico.org API group is not served (Calico not installed). */
  readonly calicoPools: Read<readonly IPPoolView[]>;
  readonly felix: Read<FelixView>;
  /** null: not requested (no --admin-url). */
  readonly admin: AdminView | null;
}
