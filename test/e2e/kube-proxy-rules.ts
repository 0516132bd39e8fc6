/**
 * iptables-restore input shaped like kube-proxy's iptables mode (v1.28+) for one NodePort Service,
 * so the lab's nodes NAT exactly the way a cluster's do:
 *
 *   PREROUTING -> KUBE-SERVICES -> (dst LOCAL) KUBE-NODEPORTS -> KUBE-EXT-<svc>
 *     Cluster: KUBE-EXT -> KUBE-MARK-MASQ, KUBE-SVC -> KUBE-SEP (DNAT to the pod);
 *              POSTROUTING -> KUBE-POSTROUTING: marked -> MASQUERADE (the pod sees a node address)
 *     Local:   KUBE-EXT -> KUBE-SVL -> KUBE-SEP (DNAT only: the pod sees the client), when the node
 *              has a local endpoint; otherwise filter KUBE-EXTERNAL-SERVICES drops the NodePort
 *              ("has no local endpoints").
 *
 * Compare with `iptables-save -t nat` on a kube-proxy node: chain names hash the service port
 * there; here they carry its name.
 */

export type TrafficPolicy = 'Cluster' | 'Local';

export interface ServicePort {
  /** Port name, e.g. `tcp` (chain names: KUBE-EXT-IPGATE-TCP). */
  name: string;
  nodePort: number;
  /** The endpoint: the ipgate pod's address and target port. */
  podIP: string;
  targetPort: number;
  /** Only this source may reach the NodePort (a firewall in front of kube-proxy's rules), or null. */
  allowOnlyFrom?: string | null;
}

export interface NodeRules {
  policy: TrafficPolicy;
  /** The endpoint pod runs on this node. */
  hasLocalEndpoint: boolean;
  /** The cluster's pod CIDR (kube-proxy's --cluster-cidr). */
  clusterCidr: string;
  ports: ServicePort[];
}

const SVC = 'ipgate/ipgate';

export function kubeProxyRules(n: NodeRules): string {
  const nat: string[] = [
    '*nat',
    ':PREROUTING ACCEPT [0:0]',
    ':INPUT ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':POSTROUTING ACCEPT [0:0]',
    ':KUBE-SERVICES - [0:0]',
    ':KUBE-NODEPORTS - [0:0]',
    ':KUBE-POSTROUTING - [0:0]',
    ':KUBE-MARK-MASQ - [0:0]',
  ];
  const body: string[] = [
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    '-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000',
    '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
    '-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0',
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
  ];
  const filter: string[] = [
    '*filter',
    ':INPUT ACCEPT [0:0]',
    ':FORWARD ACCEPT [0:0]',
    ':OUTPUT ACCEPT [0:0]',
    ':KUBE-EXTERNAL-SERVICES - [0:0]',
    '-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
    '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  ];
  const mangle: string[] = ['*mangle', ':PREROUTING ACCEPT [0:0]'];
  for (const p of n.ports) {
    const id = `IPGATE-${p.name.toUpperCase()}`;
    const sp = `${SVC}:${p.name}`;
    const ext = `KUBE-EXT-${id}`;
    const svc = `KUBE-SVC-${id}`;
    const svl = `KUBE-SVL-${id}`;
    const sep = `KUBE-SEP-${id}`;
    if (p.allowOnlyFrom) {
      // Not kube-proxy: the operator's firewall that keeps clients off a NodePort meant for the
      // load balancer only (before any NAT).
      mangle.push(`-A PREROUTING -p tcp -m tcp --dport ${p.nodePort} ! -s ${p.allowOnlyFrom} -j DROP`);
    }
    nat.push(`:${ext} - [0:0]`, `:${svc} - [0:0]`, `:${svl} - [0:0]`, `:${sep} - [0:0]`);
    body.push(`-A KUBE-NODEPORTS -p tcp -m comment --comment "${sp}" -m tcp --dport ${p.nodePort} -j ${ext}`);
    body.push(`-A ${svc} -m comment --comment "${sp} -> ${p.podIP}:${p.targetPort}" -j ${sep}`);
    body.push(`-A ${sep} -s ${p.podIP}/32 -m comment --comment "${sp}" -j KUBE-MARK-MASQ`);
    body.push(`-A ${sep} -p tcp -m comment --comment "${sp}" -m tcp -j DNAT --to-destination ${p.podIP}:${p.targetPort}`);
    if (n.policy === 'Cluster') {
      body.push(`-A ${ext} -m comment --comment "masquerade traffic for ${sp} external destinations" -j KUBE-MARK-MASQ`);
      body.push(`-A ${ext} -j ${svc}`);
    } else {
      body.push(`-A ${ext} -s ${n.clusterCidr} -m comment --comment "pod traffic for ${sp} external destinations" -j ${svc}`);
      body.push(
        `-A ${ext} -m comment --comment "masquerade LOCAL traffic for ${sp} external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
      );
      body.push(
        `-A ${ext} -m comment --comment "route LOCAL traffic for ${sp} external destinations" -m addrtype --src-type LOCAL -j ${svc}`,
      );
      body.push(`-A ${ext} -j ${svl}`);
      if (n.hasLocalEndpoint) {
        body.push(`-A ${svl} -m comment --comment "${sp} -> ${p.podIP}:${p.targetPort}" -j ${sep}`);
      } else {
        filter.push(
          `-A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "${sp} has no local endpoints" -m addrtype --dst-type LOCAL -m tcp --dport ${p.nodePort} -j DROP`,
        );
      }
    }
  }
  body.push(
    '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
  );
  return [...mangle, 'COMMIT', ...nat, ...body, 'COMMIT', ...filter, 'COMMIT', ''].join('\n');
}
