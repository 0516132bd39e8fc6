/**
 * Findings about what implements Services on the nodes (kube-proxy's mode, or an eBPF
 * replacement) and about the CNI's NAT settings (Calico IPPools and Felix).
 */
import type { Finding } from './finding';
import type { CiliumView, FelixView, KubeProxyView, Snapshot } from './snapshot';

const KUBE_PROXY_CM = 'kubectl -n kube-system get cm kube-proxy -o yaml';

/**
 * Name of the dataplane that forwards external Service traffic to a remote node without source
 * NAT (so even externalTrafficPolicy: Cluster keeps the client address), or null.
 *  - Calico eBPF: external client addresses are preserved to the pod, in Tunnel and DSR mode alike.
 *  - Cilium kube-proxy replacement with bpf-lb-mode dsr (or hybrid: DSR for TCP, which ipgate is).
 */
export function dataplanePreservesSource(s: Snapshot): string | null {
  if (s.felix.state === 'ok' && s.felix.value.bpfEnabled) return 'the Calico eBPF dataplane';
  if (s.cilium.state === 'ok' && ciliumReplacesKubeProxy(s.cilium.value)) {
    const mode = s.cilium.value.bpfLbMode ?? 'snat';
    if (mode === 'dsr' || mode === 'hybrid') return `Cilium (bpf-lb-mode ${mode})`;
  }
  return null;
}

function ciliumReplacesKubeProxy(c: CiliumView): boolean {
  return c.kubeProxyReplacement === 'true' || c.kubeProxyReplacement === 'strict';
}

export function analyseDataplane(s: Snapshot, findings: Finding[]): void {
  analyseKubeProxy(s, findings);
  if (s.cilium.state === 'ok') analyseCilium(s.cilium.value, findings);
  analyseCalico(s, findings);
}

function analyseKubeProxy(s: Snapshot, findings: Finding[]): void {
  const subject = 'kube-proxy';
  const kp = s.kubeProxy;
  if (kp.state === 'absent') {
    const replacedBy =
      s.felix.state === 'ok' && s.felix.value.bpfEnabled
        ? 'Calico eBPF is enabled and handles Services'
        : s.cilium.state === 'ok' && ciliumReplacesKubeProxy(s.cilium.value)
          ? "Cilium's kube-proxy replacement handles Services"
          : 'kube-proxy may be replaced by an eBPF dataplane (Cilium, Calico eBPF), configured by flags, or managed by the provider';
    findings.push({
      id: 'kube-proxy.configmap-missing',
      severity: 'info',
      subject,
      statement: `no kube-proxy ConfigMap in kube-system: kube-proxy mode unknown; ${replacedBy}`,
      check: 'kubectl -n kube-system get ds; kubectl -n kube-system logs ds/kube-proxy | grep Proxier',
    });
    return;
  }
  if (kp.state === 'unreadable') {
    findings.push({
      id: 'kube-proxy.unreadable',
      severity: 'info',
      subject,
      statement: `cannot read the kube-proxy ConfigMap (${kp.reason}): kube-proxy mode unknown`,
      fix: 'grant get on configmaps/kube-proxy in kube-system, or check the mode on a node: kube-proxy logs "Using ipvs Proxier"',
    });
    return;
  }
  const v: KubeProxyView = kp.value;
  if (v.parseError) {
    findings.push({
      id: 'kube-proxy.config-unparsable',
      severity: 'warn',
      subject,
      statement: `kube-proxy ConfigMap found but its mode cannot be read: ${v.parseError}`,
      check: KUBE_PROXY_CM,
    });
    return;
  }
  switch (v.mode) {
    case '':
    case 'iptables':
      findings.push({
        id: 'kube-proxy.mode.iptables',
        severity: 'ok',
        subject,
        statement: `mode iptables${v.mode === '' ? ' (mode "" is the Linux default)' : ''}: NodePort traffic is DNATed via KUBE-NODEPORTS / KUBE-EXT-* chains; externalTrafficPolicy: Cluster sends external clients through KUBE-MARK-MASQ (source NAT), Local only traffic from the node itself`,
        check: 'on a node: iptables-save -t nat | grep -E "KUBE-NODEPORTS|KUBE-EXT|KUBE-MARK-MASQ"',
      });
      break;
    case 'ipvs':
      findings.push({
        id: 'kube-proxy.mode.ipvs',
        severity: 'ok',
        subject,
        statement:
          'mode ipvs: NodePorts are IPVS virtual servers; traffic in the KUBE-NODE-PORT-LOCAL-* ipsets (externalTrafficPolicy: Local) is not masqueraded, the rest goes to KUBE-MARK-MASQ',
        check: 'on a node: ipvsadm -Ln; ipset list KUBE-NODE-PORT-LOCAL-TCP',
      });
      break;
    case 'nftables':
      findings.push({
        id: 'kube-proxy.mode.nftables',
        severity: 'ok',
        subject,
        statement:
          'mode nftables: externalTrafficPolicy: Cluster traffic jumps to mark-for-masquerade (source NAT), Local does not; ' +
          "NodePorts are accepted only on the node's primary addresses unless nodePortAddresses says otherwise",
        check: 'on a node: nft list table ip kube-proxy',
      });
      break;
    default:
      findings.push({
        id: 'kube-proxy.mode.unknown',
        severity: 'warn',
        subject,
        statement: `mode "${v.mode}": not a Linux mode doctor knows (iptables, ipvs, nftables); its NAT behaviour is not checked`,
        fix: 'use mode iptables, ipvs or nftables',
        check: KUBE_PROXY_CM,
      });
  }
  if (v.nodePortAddresses) {
    findings.push({
      id: 'kube-proxy.node-port-addresses',
      severity: 'info',
      subject,
      statement: `nodePortAddresses ${v.nodePortAddresses.join(', ')}: NodePorts answer only on node addresses in these ranges; point the load balancer at those`,
    });
  }
  if (v.masqueradeAll) {
    findings.push({
      id: 'kube-proxy.masquerade-all',
      severity: 'info',
      subject,
      statement:
        'masqueradeAll: true: kube-proxy SNATs all traffic to Service ClusterIPs, so in-cluster clients reaching ipgate by its ClusterIP appear as node addresses',
      fix: 'set masqueradeAll: false unless the CNI needs it; in-cluster clients that must be identified should not go through the ClusterIP',
    });
  }
}

function analyseCilium(c: CiliumView, findings: Finding[]): void {
  const subject = 'cilium';
  if (!ciliumReplacesKubeProxy(c)) {
    findings.push({
      id: 'cilium.present',
      severity: 'info',
      subject,
      statement: `Cilium installed without full kube-proxy replacement (kube-proxy-replacement: ${c.kubeProxyReplacement ?? 'unset'}): kube-proxy handles NodePort traffic`,
    });
    return;
  }
  const mode = c.bpfLbMode ?? 'snat';
  const effect =
    mode === 'dsr'
      ? 'the client address reaches the pod even when the backend is on another node (DSR)'
      : mode === 'hybrid'
        ? 'TCP is forwarded with DSR (client address kept), UDP with SNAT'
        : 'traffic forwarded to another node is SNATed as with kube-proxy, so only externalTrafficPolicy: Local keeps the client address';
  findings.push({
    id: `cilium.kube-proxy-replacement.${mode}`,
    severity: 'info',
    subject,
    statement: `Cilium replaces kube-proxy (bpf-lb-mode ${mode}): ${effect}`,
    check: 'kubectl -n kube-system exec ds/cilium -- cilium-dbg status --verbose | grep -A5 KubeProxyReplacement',
  });
}

function analyseCalico(s: Snapshot, findings: Finding[]): void {
  const subject = 'calico';
  const pools = s.calicoPools;
  if (pools.state === 'absent') {
    findings.push({
      id: 'calico.absent',
      severity: 'info',
      subject,
      statement: 'Calico CRDs (crd.projectcalico.org/v1) not served: Calico is not installed, Calico checks skipped',
    });
    return;
  }
  if (pools.state === 'unreadable') {
    findings.push({
      id: 'calico.unreadable',
      severity: 'info',
      subject,
      statement: `cannot read Calico IPPools (${pools.reason}): Calico checks skipped`,
      fix: 'grant list on ippools and get on felixconfigurations (crd.projectcalico.org)',
    });
    return;
  }
  for (const pool of pools.value) {
    if (pool.disabled || !pool.natOutgoing) continue;
    findings.push({
      id: 'calico.ippool.nat-outgoing',
      severity: 'info',
      subject: `ippool/${pool.name}`,
      statement:
        `IPPool ${pool.name}${pool.cidr ? ` (${pool.cidr})` : ''} natOutgoing: true: ipgate's connections to backends outside Calico's pools leave with the node address; ` +
        'inbound client traffic is not affected',
      fix: 'make backends outside the cluster take the client from X-Real-IP / X-Forwarded-For or the PROXY header, never from the socket',
      check: 'calicoctl get ippool -o wide',
    });
  }
  const felix = s.felix;
  if (felix.state === 'ok') analyseFelix(felix.value, findings);
  else if (felix.state === 'unreadable') {
    findings.push({
      id: 'calico.felix.unreadable',
      severity: 'info',
      subject,
      statement: `cannot read FelixConfiguration default (${felix.reason}): eBPF mode unknown`,
    });
  } else {
    findings.push({
      id: 'calico.felix.iptables',
      severity: 'info',
      subject,
      statement: 'no FelixConfiguration default: Calico runs its iptables dataplane and kube-proxy handles Services',
    });
  }
}

function analyseFelix(f: FelixView, findings: Finding[]): void {
  const subject = 'calico';
  const check = 'calicoctl get felixconfiguration default -o yaml';
  if (!f.bpfEnabled) {
    findings.push({
      id: 'calico.felix.iptables',
      severity: 'info',
      subject,
      statement: 'Calico eBPF dataplane off (bpfEnabled false): kube-proxy handles Services',
      check,
    });
    return;
  }
  const mode = f.bpfExternalServiceMode ?? 'Tunnel';
  if (mode === 'DSR') {
    findings.push({
      id: 'calico.ebpf.dsr',
      severity: 'info',
      subject,
      statement:
        'Calico eBPF with bpfExternalServiceMode DSR: the client address reaches the pod; replies from a pod on another node go straight to the client, ' +
        "with the ingress node's address as source",
      fix: 'make sure the network between nodes and clients lets those replies through (no reverse-path or source/destination checks on node interfaces), or use Tunnel',
      check,
    });
  } else {
    findings.push({
      id: 'calico.ebpf.tunnel',
      severity: 'info',
      subject,
      statement: `Calico eBPF with bpfExternalServiceMode ${mode}: external traffic to a pod on another node is tunnelled there and back, the client address reaches the pod`,
      check,
    });
  }
}
