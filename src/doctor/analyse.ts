/**
 * From a Snapshot to Findings: pure, no I/O. Order of the result follows the data path
 * (Service -> nodes and pods -> kube-proxy / eBPF dataplane -> CNI -> ipgate itself).
 */
import { analyseAdmin } from './analyse-admin';
import { analyseDataplane, dataplanePreservesSource } from './analyse-dataplane';
import type { Finding } from './finding';
import type { EndpointView, NodeView, PodView, ServiceView, Snapshot } from './snapshot';

export function analyse(snapshot: Snapshot): Finding[] {
  const findings: Finding[] = [];
  const subject = `service/${snapshot.namespace}/${snapshot.serviceName}`;
  const svc = snapshot.service;
  const hostNetworkPods = snapshot.pods.state === 'ok' ? snapshot.pods.value.filter((p) => p.hostNetwork) : [];
  if (svc === null && hostNetworkPods.length > 0) {
    // The chart with hostNetwork and service.enabled: false: no kube-proxy hop to check.
    const ready = hostNetworkPods.filter((p) => p.ready).length;
    findings.push({
      id: 'service.none-host-network',
      severity: 'info',
      subject,
      statement: `no Service ${snapshot.namespace}/${snapshot.serviceName}: ${ready} of ${hostNetworkPods.length} ipgate pods (hostNetwork) ready, taking client connections on their nodes' own addresses; kube-proxy and externalTrafficPolicy are not on the way`,
      check: `kubectl -n ${snapshot.namespace} get pods -l ${'app.kubernetes.io/part-of=ipgate,app.kubernetes.io/component=controller'} -o wide`,
    });
  } else if (svc === null) {
    findings.push({
      id: 'service.missing',
      severity: 'error',
      subject,
      statement: `Service ${snapshot.namespace}/${snapshot.serviceName} not found: nothing routes client traffic to ipgate`,
      fix: `install the chart (helm install edge helm/ipgate -n ${snapshot.namespace}: its Service is edge-ipgate) or pass the right --namespace / --service`,
      check: `kubectl -n ${snapshot.namespace} get svc -l app.kubernetes.io/part-of=ipgate`,
    });
  } else {
    analyseService(snapshot, svc, subject, findings);
    analyseWorkload(snapshot, svc, subject, findings);
  }
  analyseDataplane(snapshot, findings);
  analyseAdmin(snapshot.admin, findings, `${snapshot.serviceName}-admin`);
  return findings;
}

const EXTERNAL_TYPES = new Set(['NodePort', 'LoadBalancer']);

function nodePortsText(svc: ServiceView): string {
  const ports = svc.ports.filter((p) => p.nodePort).map((p) => `${p.nodePort}/${p.protocol}`);
  return ports.length > 0 ? `nodePorts ${ports.join(', ')}` : 'no nodePorts';
}

function analyseService(snapshot: Snapshot, svc: ServiceView, subject: string, findings: Finding[]): void {
  const check = `kubectl -n ${snapshot.namespace} get svc ${snapshot.serviceName} -o yaml`;
  const hostNetwork = snapshot.pods.state === 'ok' && snapshot.pods.value.some((p) => p.hostNetwork);

  // --- type
  switch (svc.type) {
    case 'NodePort':
      findings.push({ id: 'service.type', severity: 'ok', subject, statement: `type NodePort, ${nodePortsText(svc)}`, check });
      break;
    case 'LoadBalancer': {
      const ingress = svc.loadBalancerIngress.map((i) => i.ip ?? i.hostname).filter(Boolean);
      findings.push({
        id: 'service.type',
        severity: 'info',
        subject,
        statement:
          `type LoadBalancer (${ingress.length > 0 ? `ingress ${ingress.join(', ')}` : 'no ingress address yet'}, ${nodePortsText(svc)}): ` +
          'the client IP survives only if the load balancer passes packets through unchanged or sends a PROXY header',
        fix: "if the load balancer proxies connections, enable its PROXY protocol and set proxyProtocol.mode on the listener with trustedSources = the load balancer's addresses only",
        check,
      });
      const proxied = svc.loadBalancerIngress.filter((i) => i.ipMode === 'Proxy');
      if (proxied.length > 0) {
        findings.push({
          id: 'service.lb-ip-mode-proxy',
          severity: 'warn',
          subject,
          statement: `load balancer ingress ${proxied.map((i) => i.ip ?? i.hostname).join(', ')} has ipMode: Proxy: the load balancer terminates connections, so ipgate sees the load balancer's address as the peer`,
          fix: "turn on the load balancer's PROXY protocol (v2) and set proxyProtocol.mode: required with trustedSources = the load balancer's source addresses",
          check,
        });
      }
      if (svc.allocateLoadBalancerNodePorts === false) {
        findings.push({
          id: 'service.no-node-ports',
          severity: 'info',
          subject,
          statement:
            "allocateLoadBalancerNodePorts: false: the load balancer must route straight to pod IPs; kube-proxy's NodePort path (and externalTrafficPolicy) is not on the way",
        });
      }
      break;
    }
    case 'ClusterIP':
      findings.push({
        id: 'service.type.cluster-ip',
        severity: hostNetwork ? 'info' : 'warn',
        subject,
        statement: hostNetwork
          ? 'type ClusterIP: clients outside the cluster reach ipgate through hostNetwork on the node address, not through this Service'
          : 'type ClusterIP: no NodePort, so clients outside the cluster cannot reach ipgate through this Service',
        ...(hostNetwork ? {} : { fix: 'set spec.type: NodePort (or LoadBalancer) with spec.externalTrafficPolicy: Local' }),
        check,
      });
      break;
    default:
      findings.push({
        id: 'service.type.unsupported',
        severity: 'error',
        subject,
        statement: `type ${svc.type}: not a type that carries client connections to ipgate`,
        fix: 'set spec.type: NodePort with spec.externalTrafficPolicy: Local',
        check,
      });
  }
  if (svc.externalIPs.length > 0) {
    findings.push({
      id: 'service.external-ips',
      severity: 'info',
      subject,
      statement: `externalIPs ${svc.externalIPs.join(', ')}: traffic to them follows externalTrafficPolicy like NodePort traffic`,
    });
  }

  // --- externalTrafficPolicy: only meaningful where the Service has external addresses
  if (EXTERNAL_TYPES.has(svc.type) || svc.externalIPs.length > 0) {
    const policy = svc.externalTrafficPolicy ?? 'Cluster';
    if (policy === 'Local') {
      findings.push({
        id: 'service.external-traffic-policy.local',
        severity: 'ok',
        subject,
        statement:
          'externalTrafficPolicy: Local: nodes deliver NodePort traffic to a local ipgate pod without source NAT, so ipgate sees the client address',
        check,
      });
    } else {
      const preserved = dataplanePreservesSource(snapshot);
      findings.push({
        id: 'service.external-traffic-policy.cluster',
        severity: preserved ? 'info' : 'error',
        subject,
        statement: preserved
          ? `externalTrafficPolicy: ${policy}, but ${preserved} forwards external traffic without source NAT, so the client address survives the node hop`
          : `externalTrafficPolicy: ${policy}: kube-proxy SNATs NodePort traffic to a node address before forwarding it, so ipgate sees a node, not the client`,
        fix:
          'set spec.externalTrafficPolicy: Local: with Cluster kube-proxy SNATs NodePort traffic to a node IP, so ipgate sees the node, not the client' +
          (preserved ? ' (keeps the behaviour if the dataplane changes)' : ''),
        check,
      });
    }
  }

  // --- internalTrafficPolicy
  if (svc.internalTrafficPolicy === 'Local') {
    findings.push({
      id: 'service.internal-traffic-policy.local',
      severity: 'warn',
      subject,
      statement:
        'internalTrafficPolicy: Local: in-cluster clients on a node without a ready ipgate pod have their connections to the ClusterIP dropped',
      fix: 'set spec.internalTrafficPolicy: Cluster (in-cluster clients are not source-NATed by kube-proxy either way)',
      check,
    });
  } else {
    findings.push({
      id: 'service.internal-traffic-policy.cluster',
      severity: 'ok',
      subject,
      statement: `internalTrafficPolicy: ${svc.internalTrafficPolicy ?? 'Cluster'}: in-cluster clients reach any ready ipgate pod`,
    });
  }
}

interface Coverage {
  source: 'pods' | 'EndpointSlices';
  readyNodes: Set<string>;
  /** Not-ready pods per node, for the statement. */
  notReadyByNode: Map<string, string[]>;
  readyCount: number;
}

function coverage(pods: readonly PodView[] | null, endpoints: readonly EndpointView[] | null): Coverage | null {
  const cov: Coverage = { source: 'pods', readyNodes: new Set(), notReadyByNode: new Map(), readyCount: 0 };
  const add = (nodeName: string | undefined, ready: boolean, name: string | undefined): void => {
    if (!nodeName) return;
    if (ready) {
      cov.readyNodes.add(nodeName);
      cov.readyCount++;
    } else {
      const list = cov.notReadyByNode.get(nodeName) ?? [];
      list.push(name ?? '(endpoint)');
      cov.notReadyByNode.set(nodeName, list);
    }
  };
  if (pods !== null) {
    for (const p of pods) add(p.nodeName, p.ready, p.name);
    return cov;
  }
  if (endpoints !== null) {
    cov.source = 'EndpointSlices';
    for (const e of endpoints) add(e.nodeName, e.ready, e.podName);
    return cov;
  }
  return null;
}

function analyseWorkload(snapshot: Snapshot, svc: ServiceView, subject: string, findings: Finding[]): void {
  const ns = snapshot.namespace;
  if (svc.selector === null) {
    findings.push({
      id: 'service.no-selector',
      severity: 'warn',
      subject,
      statement: 'the Service has no selector: its endpoints are managed by hand; pod checks use its EndpointSlices',
      fix: 'give the Service a selector matching the ipgate pods (the chart does)',
    });
  }
  const selectorText = svc.selector
    ? Object.entries(svc.selector)
        .map(([k, v]) => `${k}=${v}`)
        .join(',')
    : '';
  let pods: readonly PodView[] | null = null;
  if (svc.selector !== null) {
    if (snapshot.pods.state === 'ok') pods = snapshot.pods.value;
    else {
      findings.push({
        id: 'pods.unreadable',
        severity: 'warn',
        subject: `pods/${ns}`,
        statement: `cannot list pods (${snapshot.pods.state === 'unreadable' ? snapshot.pods.reason : 'not found'}): node coverage is taken from EndpointSlices if readable`,
        fix: "grant the doctor's identity get/list on pods in this namespace",
      });
    }
  }
  const endpoints = snapshot.endpoints.state === 'ok' ? snapshot.endpoints.value : null;
  const cov = coverage(pods, endpoints);
  if (cov === null) return;

  if (pods !== null) {
    if (pods.length === 0) {
      findings.push({
        id: 'pods.none',
        severity: 'error',
        subject,
        statement: `selector ${selectorText} matches no pods in ${ns}: the Service has no endpoints and every connection fails`,
        fix: 'check the DaemonSet/Deployment is running and its pod labels match the Service selector',
        check: `kubectl -n ${ns} get pods -l ${selectorText} -o wide`,
      });
      return;
    }
    const kinds = [...new Set(pods.map((p) => p.ownerKind ?? 'bare pod'))];
    const kindText = kinds.map((k) => (k === 'ReplicaSet' ? 'Deployment' : k)).join(', ');
    findings.push({
      id: 'pods.summary',
      severity: cov.readyCount > 0 ? 'info' : 'error',
      subject,
      statement: `${cov.readyCount} of ${pods.length} ipgate pods ready (${kindText})`,
      ...(cov.readyCount > 0 ? {} : { fix: 'see why the pods are not ready: kubectl describe pod; ipgate /readyz' }),
      check: `kubectl -n ${ns} get pods -l ${selectorText} -o wide`,
    });
    analyseHostNetwork(pods, subject, findings);
  }

  const policy = svc.externalTrafficPolicy ?? 'Cluster';
  const local = policy === 'Local' && (EXTERNAL_TYPES.has(svc.type) || svc.externalIPs.length > 0);
  if (!local) return;
  if (snapshot.nodes.state !== 'ok') {
    findings.push({
      id: 'nodes.unreadable',
      severity: 'warn',
      subject: 'nodes',
      statement: `cannot list nodes (${snapshot.nodes.state === 'unreadable' ? snapshot.nodes.reason : 'not found'}): which nodes drop NodePort traffic under Local is not checked`,
      fix: "grant the doctor's identity list on nodes (a ClusterRole)",
    });
    return;
  }
  analyseNodeCoverage(snapshot.nodes.value, svc, cov, findings);
}

function analyseHostNetwork(pods: readonly PodView[], subject: string, findings: Finding[]): void {
  const host = pods.filter((p) => p.hostNetwork);
  if (host.length === 0) return;
  findings.push({
    id: 'pods.host-network',
    severity: 'info',
    subject,
    statement:
      'ipgate pods use hostNetwork: connections to a node address on the listener port reach ipgate with the client address intact (no kube-proxy); connections to the NodePort still follow externalTrafficPolicy',
  });
  const badDns = host.filter((p) => p.dnsPolicy !== 'ClusterFirstWithHostNet');
  if (badDns.length > 0) {
    findings.push({
      id: 'pods.host-network-dns',
      severity: 'warn',
      subject,
      statement: `hostNetwork pods with dnsPolicy ${badDns[0]?.dnsPolicy ?? 'ClusterFirst'} (${badDns.map((p) => p.name).join(', ')}) resolve through the node's resolver, not cluster DNS: upstream Service names will not resolve`,
      fix: 'set dnsPolicy: ClusterFirstWithHostNet (the chart does when hostNetwork is on)',
    });
  }
}

function analyseNodeCoverage(nodes: readonly NodeView[], svc: ServiceView, cov: Coverage, findings: Finding[]): void {
  const isLB = svc.type === 'LoadBalancer';
  // Cloud load balancers leave out nodes labelled exclude-from-external-load-balancers.
  const receiving = nodes.filter((n) => !(isLB && n.excludedFromLoadBalancers));
  const missing = receiving.filter((n) => !cov.readyNodes.has(n.name));
  if (cov.readyCount === 0) {
    findings.push({
      id: 'nodes.none-ready',
      severity: 'error',
      subject: 'nodes',
      statement: `no node has a ready ipgate endpoint (per ${cov.source}): under externalTrafficPolicy: Local every node drops NodePort traffic`,
      fix: 'get ipgate pods ready (kubectl describe pod, ipgate /readyz) and run them as a DaemonSet',
    });
    return;
  }
  if (missing.length === 0) {
    findings.push({
      id: 'nodes.all-covered',
      severity: 'ok',
      subject: 'nodes',
      statement: `every node receiving NodePort traffic (${receiving.length}) has a ready ipgate pod (per ${cov.source})`,
    });
    return;
  }
  if (isLB && svc.healthCheckNodePort) {
    // By design of Local + LoadBalancer: the LB health-checks healthCheckNodePort and skips these nodes.
    findings.push({
      id: 'nodes.no-ready-pod.lb-health-checked',
      severity: 'info',
      subject: 'nodes',
      statement:
        `${missing.length} of ${receiving.length} nodes have no ready ipgate pod (${missing.map((n) => n.name).join(', ')}): ` +
        `the load balancer's health check on healthCheckNodePort ${svc.healthCheckNodePort} fails there and keeps traffic off them`,
      fix: 'if the load balancer does not health-check that port, run ipgate as a DaemonSet',
    });
    return;
  }
  for (const n of missing) {
    const notes: string[] = [];
    const notReady = cov.notReadyByNode.get(n.name);
    if (notReady) notes.push(`pod ${notReady.join(', ')} not ready`);
    if (!n.ready) notes.push('node NotReady');
    if (n.unschedulable) notes.push('node cordoned');
    const blocking = n.taints.filter((t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute');
    const tolerate = blocking.length > 0 ? ` (with tolerations for ${blocking.map((t) => `${t.key}:${t.effect}`).join(', ')})` : '';
    findings.push({
      id: 'nodes.no-ready-pod',
      severity: 'warn',
      subject: `node/${n.name}`,
      statement:
        `node ${n.name} receives NodePort traffic but has no ready ipgate pod${notes.length > 0 ? ` (${notes.join('; ')})` : ''}: ` +
        'under externalTrafficPolicy: Local it drops that traffic',
      fix: `run ipgate as a DaemonSet${tolerate} or restrict the load balancer's targets to nodes with a ready pod`,
      check: `kubectl get pods -A -o wide --field-selector spec.nodeName=${n.name}`,
    });
  }
}
