/**
 * analyse() on hand-built snapshots: the cases the cluster scenarios do not reach.
 */
import t from 'tap';
import { analyse } from '../../../src/doctor/analyse';
import { exitCodeFor, type Finding, type Severity } from '../../../src/doctor/finding';
import type { NodeView, PodView, ServiceView, Snapshot } from '../../../src/doctor/snapshot';

const node = (name: string, extra: Partial<NodeView> = {}): NodeView => ({
  name,
  ready: true,
  unschedulable: false,
  taints: [],
  excludedFromLoadBalancers: false,
  internalIPs: [],
  ...extra,
});
const pod = (name: string, nodeName: string, extra: Partial<PodView> = {}): PodView => ({
  name,
  nodeName,
  phase: 'Running',
  ready: true,
  terminating: false,
  hostNetwork: false,
  dnsPolicy: 'ClusterFirst',
  ownerKind: 'DaemonSet',
  ...extra,
});
const service = (extra: Partial<ServiceView> = {}): ServiceView => ({
  type: 'NodePort',
  externalTrafficPolicy: 'Local',
  internalTrafficPolicy: 'Cluster',
  selector: { app: 'ipgate' },
  ports: [{ name: 'https', protocol: 'TCP', port: 443, nodePort: 30443 }],
  loadBalancerIngress: [],
  externalIPs: [],
  ...extra,
});

function snapshot(extra: Partial<Snapshot> = {}): Snapshot {
  return {
    namespace: 'ipgate',
    serviceName: 'ipgate',
    service: service(),
    pods: { state: 'ok', value: [pod('ipgate-a', 'n1'), pod('ipgate-b', 'n2')] },
    endpoints: { state: 'absent' },
    nodes: { state: 'ok', value: [node('n1'), node('n2')] },
    kubeProxy: { state: 'ok', value: { mode: 'iptables' } },
    cilium: { state: 'absent' },
    calicoPools: { state: 'absent' },
    felix: { state: 'absent' },
    admin: null,
    ...extra,
  };
}

interface Row {
  name: string;
  snap: Snapshot;
  want: Array<{ id: string; severity: Severity; says?: RegExp; fix?: RegExp }>;
  not?: string[];
  exit: 0 | 1;
}

const rows: Row[] = [
  {
    name: 'load balancer ingress with ipMode Proxy: ipgate sees the load balancer',
    snap: snapshot({
      service: service({ type: 'LoadBalancer', healthCheckNodePort: 31000, loadBalancerIngress: [{ ip: '203.0.113.5', ipMode: 'Proxy' }] }),
    }),
    want: [
      {
        id: 'service.lb-ip-mode-proxy',
        severity: 'warn',
        says: /203\.0\.113\.5 has ipMode: Proxy/,
        fix: /PROXY protocol \(v2\).*trustedSources/,
      },
    ],
    exit: 0,
  },
  {
    name: 'hostNetwork with dnsPolicy ClusterFirst: DNS warning; hostNetwork itself is info',
    snap: snapshot({
      pods: {
        state: 'ok',
        value: [
          pod('ipgate-a', 'n1', { hostNetwork: true }),
          pod('ipgate-b', 'n2', { hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' }),
        ],
      },
    }),
    want: [
      { id: 'pods.host-network', severity: 'info', says: /client address intact \(no kube-proxy\)/ },
      { id: 'pods.host-network-dns', severity: 'warn', says: /\(ipgate-a\)/, fix: /ClusterFirstWithHostNet/ },
    ],
    exit: 0,
  },
  {
    name: 'Cilium kube-proxy replacement with DSR keeps the client under Cluster',
    snap: snapshot({
      service: service({ externalTrafficPolicy: 'Cluster' }),
      kubeProxy: { state: 'absent' },
      cilium: { state: 'ok', value: { kubeProxyReplacement: 'true', bpfLbMode: 'dsr' } },
    }),
    want: [
      { id: 'service.external-traffic-policy.cluster', severity: 'info', says: /Cilium \(bpf-lb-mode dsr\)/ },
      { id: 'cilium.kube-proxy-replacement.dsr', severity: 'info' },
      { id: 'kube-proxy.configmap-missing', severity: 'info', says: /Cilium's kube-proxy replacement handles Services/ },
    ],
    exit: 0,
  },
  {
    name: 'Cilium kube-proxy replacement in SNAT mode loses the client under Cluster',
    snap: snapshot({
      service: service({ externalTrafficPolicy: undefined }),
      cilium: { state: 'ok', value: { kubeProxyReplacement: 'true' } },
    }),
    want: [
      { id: 'service.external-traffic-policy.cluster', severity: 'error', says: /externalTrafficPolicy: Cluster/ },
      { id: 'cilium.kube-proxy-replacement.snat', severity: 'info' },
    ],
    exit: 1,
  },
  {
    name: 'no selector: coverage from EndpointSlices',
    snap: snapshot({
      service: service({ selector: null }),
      pods: { state: 'ok', value: [] },
      endpoints: {
        state: 'ok',
        value: [
          { nodeName: 'n1', ready: true, addresses: ['10.244.1.2'] },
          { nodeName: 'n2', ready: false, podName: 'ipgate-b', addresses: ['10.244.2.2'] },
        ],
      },
    }),
    want: [
      { id: 'service.no-selector', severity: 'warn' },
      { id: 'nodes.no-ready-pod', severity: 'warn', says: /node n2 .*\(pod ipgate-b not ready\)/ },
    ],
    not: ['pods.none'],
    exit: 0,
  },
  {
    name: 'a tainted, cordoned node without a pod: the fix names the tolerations',
    snap: snapshot({
      nodes: {
        state: 'ok',
        value: [
          node('n1'),
          node('n2'),
          node('gpu-1', {
            unschedulable: true,
            taints: [
              { key: 'nvidia.com/gpu', effect: 'NoSchedule' },
              { key: 'x', effect: 'PreferNoSchedule' },
            ],
          }),
        ],
      },
    }),
    want: [
      {
        id: 'nodes.no-ready-pod',
        severity: 'warn',
        says: /gpu-1 .*\(node cordoned\)/,
        fix: /with tolerations for nvidia\.com\/gpu:NoSchedule\)/,
      },
    ],
    exit: 0,
  },
  {
    name: 'internalTrafficPolicy Local drops in-cluster clients on nodes without a pod',
    snap: snapshot({ service: service({ internalTrafficPolicy: 'Local' }) }),
    want: [{ id: 'service.internal-traffic-policy.local', severity: 'warn', fix: /internalTrafficPolicy: Cluster/ }],
    exit: 0,
  },
  {
    name: 'ClusterIP without hostNetwork: not reachable from outside',
    snap: snapshot({ service: service({ type: 'ClusterIP', externalTrafficPolicy: undefined }) }),
    want: [{ id: 'service.type.cluster-ip', severity: 'warn', fix: /NodePort/ }],
    not: ['service.external-traffic-policy.cluster', 'nodes.all-covered'],
    exit: 0,
  },
  {
    name: 'unknown kube-proxy mode, masqueradeAll and nodePortAddresses',
    snap: snapshot({ kubeProxy: { state: 'ok', value: { mode: 'userspace', masqueradeAll: true, nodePortAddresses: ['10.0.0.0/24'] } } }),
    want: [
      { id: 'kube-proxy.mode.unknown', severity: 'warn', says: /mode "userspace"/ },
      { id: 'kube-proxy.masquerade-all', severity: 'info' },
      { id: 'kube-proxy.node-port-addresses', severity: 'info', says: /10\.0\.0\.0\/24/ },
    ],
    exit: 0,
  },
  {
    name: 'pods exist but none is ready: error',
    snap: snapshot({ pods: { state: 'ok', value: [pod('ipgate-a', 'n1', { ready: false }), pod('ipgate-b', 'n2', { ready: false })] } }),
    want: [
      { id: 'pods.summary', severity: 'error', says: /0 of 2/ },
      { id: 'nodes.none-ready', severity: 'error' },
    ],
    exit: 1,
  },
  {
    name: 'unreadable optional resources are reported, not fatal',
    snap: snapshot({
      kubeProxy: { state: 'unreadable', reason: 'HTTP 403: forbidden' },
      calicoPools: { state: 'unreadable', reason: 'HTTP 403: forbidden' },
    }),
    want: [
      { id: 'kube-proxy.unreadable', severity: 'info', says: /HTTP 403/ },
      { id: 'calico.unreadable', severity: 'info' },
    ],
    exit: 0,
  },
  {
    name: 'admin answers with a token problem and checks of every shape',
    snap: snapshot({
      admin: {
        url: 'http://127.0.0.1:9901/readyz',
        status: 200,
        tokenProblem: '--admin-token-env X: that variable is unset or empty',
        body: {
          checks: [
            { name: 'a', status: 'fail', message: 'm', fix: 'do x' },
            { id: 'b', ok: false },
            'loose',
            { name: 'c b', severity: 'info', summary: 's' },
          ],
        },
      },
    }),
    want: [
      { id: 'ipgate.admin-token', severity: 'warn' },
      { id: 'ipgate.check.a', severity: 'error', says: /^a: m$/, fix: /do x/ },
      { id: 'ipgate.check.b', severity: 'warn' },
      { id: 'ipgate.check', severity: 'info', says: /"loose"/ },
      { id: 'ipgate.check.c-b', severity: 'info', says: /^c b: s$/ },
    ],
    exit: 1,
  },
];

for (const row of rows) {
  t.test(row.name, async (t) => {
    const findings: Finding[] = analyse(row.snap);
    for (const w of row.want) {
      const f = findings.find((x) => x.id === w.id);
      if (!t.ok(f, `finding ${w.id}`, { found: findings.map((x) => `${x.severity} ${x.id}`) })) continue;
      t.equal(f!.severity, w.severity, `${w.id} severity`);
      if (w.says) t.match(f!.statement, w.says);
      if (w.fix) t.match(f!.fix ?? '', w.fix);
    }
    for (const id of row.not ?? [])
      t.notOk(
        findings.some((f) => f.id === id),
        `no ${id}`,
      );
    t.equal(exitCodeFor(findings), row.exit, 'exit code');
    for (const f of findings) {
      if (f.severity === 'warn' || f.severity === 'error') t.ok(f.fix, `${f.id} (${f.severity}) carries a fix`);
      t.notMatch(f.statement, /\n/, `${f.id} is one line`);
    }
  });
}
