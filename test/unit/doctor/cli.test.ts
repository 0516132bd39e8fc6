/**
 * `ipgate doctor` end to end against a loopback API server serving recorded-shape objects:
 * one row per cluster situation, each asserting specific findings and the exit code.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { doctorMain } from '../../../src/doctor/cli';
import type { Finding, Severity } from '../../../src/doctor/finding';
import { fixture, sink, startFakeApi, writeKubeconfig, type Route } from './fake-api';

const TOKEN = 'doctor-token-7f3a9c';
const NS = 'ipgate';

const P = {
  service: `/api/v1/namespaces/${NS}/services/ipgate`,
  pods: `/api/v1/namespaces/${NS}/pods`,
  slices: `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`,
  nodes: '/api/v1/nodes',
  kubeProxy: '/api/v1/namespaces/kube-system/configmaps/kube-proxy',
  cilium: '/api/v1/namespaces/kube-system/configmaps/cilium-config',
  ippools: '/apis/crd.projectcalico.org/v1/ippools',
  felix: '/apis/crd.projectcalico.org/v1/felixconfigurations/default',
};

/** A healthy cluster: NodePort + Local, DaemonSet ready on all three nodes, kube-proxy iptables, no Calico. */
const BASE: Record<string, Route> = {
  [P.service]: 'service-nodeport-local.json',
  [P.pods]: 'podlist-daemonset-all-ready.json',
  [P.slices]: 'endpointslicelist-all-ready.json',
  [P.nodes]: 'nodelist-3.json',
  [P.kubeProxy]: 'configmap-kube-proxy-iptables.json',
  [P.cilium]: { status: 404, fixture: 'status-404-configmap-cilium-config.json' },
  // ippools and felix are unrouted: 404 "the server could not find the requested resource".
};

interface Expect {
  id: string;
  severity: Severity;
  subject?: string;
  /** Must appear in the statement. */
  says?: RegExp;
  /** Must appear in the fix. */
  fix?: RegExp;
}

interface Row {
  name: string;
  routes?: Record<string, Route>;
  args?: string[];
  exit: 0 | 1;
  has: Expect[];
  lacks?: string[];
}

const rows: Row[] = [
  {
    name: 'healthy: NodePort, Local, iptables, DaemonSet ready on every node',
    exit: 0,
    has: [
      { id: 'service.type', severity: 'ok', says: /NodePort, nodePorts 30443\/TCP, 30432\/TCP/ },
      { id: 'service.external-traffic-policy.local', severity: 'ok' },
      { id: 'service.internal-traffic-policy.cluster', severity: 'ok' },
      { id: 'pods.summary', severity: 'info', says: /3 of 3 ipgate pods ready \(DaemonSet\)/ },
      { id: 'nodes.all-covered', severity: 'ok', says: /every node receiving NodePort traffic \(3\)/ },
      { id: 'kube-proxy.mode.iptables', severity: 'ok', says: /mode "" is the Linux default/ },
      { id: 'calico.absent', severity: 'info' },
      { id: 'ipgate.not-checked', severity: 'info' },
    ],
    lacks: ['nodes.no-ready-pod', 'service.external-traffic-policy.cluster'],
  },
  {
    name: 'externalTrafficPolicy Cluster is an error with the fix',
    routes: { [P.service]: 'service-nodeport-cluster.json' },
    exit: 1,
    has: [
      {
        id: 'service.external-traffic-policy.cluster',
        severity: 'error',
        says: /SNATs NodePort traffic to a node address/,
        fix: /set spec\.externalTrafficPolicy: Local: with Cluster kube-proxy SNATs NodePort traffic to a node IP, so ipgate sees the node, not the client/,
      },
    ],
    lacks: ['nodes.all-covered', 'nodes.no-ready-pod'],
  },
  {
    name: 'Local with a node whose pod is not ready: a warning naming the node',
    routes: {
      [P.pods]: 'podlist-daemonset-worker-b-not-ready.json',
      [P.slices]: 'endpointslicelist-worker-b-not-ready.json',
    },
    exit: 0,
    has: [
      { id: 'pods.summary', severity: 'info', says: /2 of 3 ipgate pods ready/ },
      {
        id: 'nodes.no-ready-pod',
        severity: 'warn',
        subject: 'node/worker-b',
        says: /node worker-b receives NodePort traffic but has no ready ipgate pod \(pod ipgate-r2v8n not ready\): under externalTrafficPolicy: Local it drops that traffic/,
        fix: /run ipgate as a DaemonSet or restrict the load balancer's targets/,
      },
    ],
    lacks: ['nodes.all-covered'],
  },
  {
    name: 'Local with no pods at all: every node drops traffic',
    routes: { [P.pods]: 'podlist-empty.json' },
    exit: 1,
    has: [{ id: 'pods.none', severity: 'error', says: /matches no pods/ }],
  },
  {
    name: 'kube-proxy in ipvs mode',
    routes: { [P.kubeProxy]: 'configmap-kube-proxy-ipvs.json' },
    exit: 0,
    has: [{ id: 'kube-proxy.mode.ipvs', severity: 'ok', says: /KUBE-NODE-PORT-LOCAL/ }],
    lacks: ['kube-proxy.mode.iptables'],
  },
  {
    name: 'kube-proxy in nftables mode',
    routes: { [P.kubeProxy]: 'configmap-kube-proxy-nftables.json' },
    exit: 0,
    has: [{ id: 'kube-proxy.mode.nftables', severity: 'ok', says: /primary addresses/ }],
  },
  {
    name: 'kube-proxy ConfigMap missing: mode unknown, maybe replaced',
    routes: { [P.kubeProxy]: { status: 404, fixture: 'status-404-configmap-kube-proxy.json' } },
    exit: 0,
    has: [{ id: 'kube-proxy.configmap-missing', severity: 'info', says: /mode unknown; kube-proxy may be replaced by an eBPF dataplane/ }],
  },
  {
    name: 'Calico: natOutgoing on the pod pool, eBPF with DSR',
    routes: {
      [P.kubeProxy]: { status: 404, fixture: 'status-404-configmap-kube-proxy.json' },
      [P.ippools]: 'calico-ippoollist-nat-outgoing.json',
      [P.felix]: 'calico-felixconfiguration-ebpf-dsr.json',
    },
    exit: 0,
    has: [
      {
        id: 'calico.ippool.nat-outgoing',
        severity: 'info',
        subject: 'ippool/default-ipv4-ippool',
        says: /10\.244\.0\.0\/16\) natOutgoing: true/,
      },
      { id: 'calico.ebpf.dsr', severity: 'info', says: /bpfExternalServiceMode DSR/, fix: /lets those replies through/ },
      { id: 'kube-proxy.configmap-missing', severity: 'info', says: /Calico eBPF is enabled and handles Services/ },
    ],
    lacks: ['calico.absent'],
  },
  {
    name: 'Calico eBPF keeps the client address even under Cluster: info, not error',
    routes: {
      [P.service]: 'service-nodeport-cluster.json',
      [P.ippools]: 'calico-ippoollist-nat-outgoing.json',
      [P.felix]: 'calico-felixconfiguration-ebpf-dsr.json',
    },
    exit: 0,
    has: [
      {
        id: 'service.external-traffic-policy.cluster',
        severity: 'info',
        says: /Calico eBPF dataplane forwards external traffic without source NAT/,
      },
    ],
  },
  {
    name: 'Service missing is an error',
    routes: { [P.service]: { status: 404, fixture: 'status-404-service-ipgate.json' } },
    exit: 1,
    has: [{ id: 'service.missing', severity: 'error', says: /Service ipgate\/ipgate not found/, fix: /--namespace \/ --service/ }],
    lacks: ['pods.summary'],
  },
  {
    name: 'type LoadBalancer: nodes without a pod are kept out by the health check',
    routes: {
      [P.service]: 'service-loadbalancer-local.json',
      [P.pods]: 'podlist-daemonset-worker-b-not-ready.json',
    },
    exit: 0,
    has: [
      {
        id: 'service.type',
        severity: 'info',
        says: /type LoadBalancer \(ingress 198\.51\.100\.20/,
        fix: /trustedSources = the load balancer's addresses only/,
      },
      // cp-1 carries exclude-from-external-load-balancers: 2 nodes receive traffic, not 3.
      {
        id: 'nodes.no-ready-pod.lb-health-checked',
        severity: 'info',
        says: /1 of 2 nodes have no ready ipgate pod \(worker-b\).*healthCheckNodePort 32117/,
      },
    ],
    lacks: ['nodes.no-ready-pod'],
  },
  {
    name: 'RBAC without nodes: a warning, not a failed run',
    routes: {
      [P.nodes]: {
        status: 403,
        body: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message:
            'nodes is forbidden: User "system:serviceaccount:ipgate:doctor" cannot list resource "nodes" in API group "" at the cluster scope',
          reason: 'Forbidden',
          details: { kind: 'nodes' },
          code: 403,
        },
      },
    },
    exit: 0,
    has: [{ id: 'nodes.unreadable', severity: 'warn', says: /HTTP 403: nodes is forbidden/ }],
  },
  {
    name: 'node list across two pages (continue token)',
    routes: {
      [P.nodes]: (url) => {
        const all = fixture('nodelist-3.json') as { items: unknown[]; metadata: Record<string, unknown> };
        if (url.searchParams.get('continue') === 'page-2') return { body: { ...all, items: all.items.slice(2) } };
        return { body: { ...all, metadata: { ...all.metadata, continue: 'page-2' }, items: all.items.slice(0, 2) } };
      },
    },
    exit: 0,
    has: [{ id: 'nodes.all-covered', severity: 'ok', says: /\(3\)/ }],
  },
];

async function run(routes: Record<string, Route>, args: string[], dir: string) {
  const api = await startFakeApi(routes);
  const kubeconfig = writeKubeconfig(dir, api.url, TOKEN);
  const stdout = sink();
  const stderr = sink();
  try {
    const code = await doctorMain(['--kubeconfig', kubeconfig, ...args], { stdout, stderr, env: {}, timeoutMs: 2000 });
    return { code, stdout: stdout.text(), stderr: stderr.text(), requests: api.requests };
  } finally {
    await api.close();
  }
}

for (const row of rows) {
  t.test(row.name, async (t) => {
    const r = await run({ ...BASE, ...row.routes }, ['--json', ...(row.args ?? [])], t.testdir());
    t.equal(r.stderr, '', 'nothing on stderr');
    const report = JSON.parse(r.stdout) as { findings: Finding[]; exitCode: number; service: string };
    t.equal(r.code, row.exit, 'exit code');
    t.equal(report.exitCode, row.exit, 'exit code in the JSON');
    t.equal(report.service, 'ipgate/ipgate', 'namespace from the kubeconfig context');
    for (const e of row.has) {
      const f = report.findings.find((x) => x.id === e.id && (!e.subject || x.subject === e.subject));
      if (!t.ok(f, `finding ${e.id}${e.subject ? ` on ${e.subject}` : ''}`, { found: report.findings.map((x) => x.id) })) continue;
      t.equal(f!.severity, e.severity, `${e.id} severity`);
      if (e.says) t.match(f!.statement, e.says, `${e.id} statement`);
      if (e.fix) t.match(f!.fix ?? '', e.fix, `${e.id} fix`);
    }
    for (const id of row.lacks ?? [])
      t.notOk(
        report.findings.some((f) => f.id === id),
        `no ${id}`,
      );
    t.ok(r.requests.length > 0, 'the API was asked');
    t.ok(
      r.requests.every((q) => q.authorization === `Bearer ${TOKEN}`),
      'every request carried Authorization: Bearer <token>',
    );
  });
}

t.test('the pods request selects by the Service selector; slices by service name', async (t) => {
  const r = await run(BASE, ['--json'], t.testdir());
  const pods = r.requests.find((q) => q.path === P.pods);
  t.ok(pods);
  t.equal(new URLSearchParams(pods!.query).get('labelSelector'), 'app.kubernetes.io/name=ipgate,app.kubernetes.io/instance=ipgate');
  const slices = r.requests.find((q) => q.path === P.slices);
  t.equal(new URLSearchParams(slices!.query).get('labelSelector'), 'kubernetes.io/service-name=ipgate');
});

t.test("a missing Service: its slices are not listed; the chart's pods are, by the chart's labels", async (t) => {
  const r = await run(
    { ...BASE, [P.service]: { status: 404, fixture: 'status-404-service-ipgate.json' }, [P.pods]: 'podlist-empty.json' },
    ['--json'],
    t.testdir(),
  );
  t.equal(r.code, 1);
  t.notOk(r.requests.some((q) => q.path === P.slices));
  const pods = r.requests.find((q) => q.path === P.pods);
  t.equal(
    new URLSearchParams(pods?.query ?? '').get('labelSelector'),
    'app.kubernetes.io/part-of=ipgate,app.kubernetes.io/component=controller',
  );
  t.match(
    (JSON.parse(r.stdout) as { findings: Finding[] }).findings.find((f) => f.id === 'service.missing'),
    { severity: 'error', fix: /its Service is edge-ipgate\) or pass the right --namespace \/ --service/ },
  );
});

t.test('human text: one line per finding, fixes indented, a summary', async (t) => {
  const r = await run({ ...BASE, [P.service]: 'service-nodeport-cluster.json' }, [], t.testdir());
  t.equal(r.code, 1);
  t.match(r.stdout, /^ipgate doctor: service ipgate\/ipgate via http:\/\/127\.0\.0\.1:\d+ \(kubeconfig .*, context lab\)/);
  t.match(r.stdout, /\n\[error\] service\/ipgate\/ipgate: externalTrafficPolicy: Cluster: kube-proxy SNATs/);
  t.match(r.stdout, /\n {8}fix: set spec\.externalTrafficPolicy: Local/);
  t.match(r.stdout, /\n1 error\(s\), 0 warning\(s\), \d+ info, \d+ ok\n$/);
});

t.test('--namespace and --service override the context', async (t) => {
  const r = await run(
    { ...BASE, '/api/v1/namespaces/edge/services/gate': 'service-nodeport-local.json' },
    ['--json', '--namespace', 'edge', '--service', 'gate'],
    t.testdir(),
  );
  t.equal(JSON.parse(r.stdout).service, 'edge/gate');
  t.ok(r.requests.some((q) => q.path === '/api/v1/namespaces/edge/pods'));
});

t.test('API unreachable: exit 2 with a clear message', async (t) => {
  // A port that was just free: bind, read the port, close.
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const dir = t.testdir();
  const kubeconfig = writeKubeconfig(dir, `http://127.0.0.1:${port}`, TOKEN);

  const stdout = sink();
  const stderr = sink();
  const code = await doctorMain(['--kubeconfig', kubeconfig], { stdout, stderr, env: {}, timeoutMs: 2000 });
  t.equal(code, 2);
  t.equal(stdout.text(), '');
  t.match(
    stderr.text(),
    new RegExp(`^ipgate doctor: cannot reach the Kubernetes API at http://127\\.0\\.0\\.1:${port} \\(kubeconfig .*\\): ECONNREFUSED`),
  );

  const jsonOut = sink();
  const code2 = await doctorMain(['--kubeconfig', kubeconfig, '--json'], { stdout: jsonOut, stderr: sink(), env: {}, timeoutMs: 2000 });
  t.equal(code2, 2);
  const parsed = JSON.parse(jsonOut.text());
  t.equal(parsed.error.code, 'IPGATE_DOCTOR_API_UNREACHABLE');
  t.equal(parsed.exitCode, 2);
});

t.test('API refuses the token: exit 2', async (t) => {
  const r = await run({ [P.service]: { status: 401, fixture: 'status-401-unauthorized.json' } }, [], t.testdir());
  t.equal(r.code, 2);
  t.match(r.stderr, /GET \/api\/v1\/namespaces\/ipgate\/services\/ipgate: HTTP 401: Unauthorized/);
});

t.test('bad flags and no kubeconfig: exit 2', async (t) => {
  const err = sink();
  t.equal(await doctorMain(['--bogus'], { stdout: sink(), stderr: err, env: {} }), 2);
  t.match(err.text(), /unknown option --bogus/);
  const err2 = sink();
  const home = t.testdir();
  t.equal(await doctorMain([], { stdout: sink(), stderr: err2, env: { HOME: home }, serviceAccountDir: home }), 2);
  t.match(err2.text(), /no kubeconfig found/);
  const out = sink();
  t.equal(await doctorMain(['--help'], { stdout: out, stderr: sink(), env: {} }), 0);
  t.match(out.text(), /--admin-token-env NAME/);
});

t.test('ipgate admin /readyz: detail and checks are reported, token from the named variable', async (t) => {
  const adminRequests: Array<string | undefined> = [];
  let answer: { status: number; body: unknown } = {
    status: 200,
    body: {
      status: 'ready',
      checks: [
        { name: 'source-nat', status: 'warn', message: 'source NAT suspected on listener https: 92% of peers in 10.244.0.0/16' },
        { name: 'store', ok: true, detail: { version: 12 } },
      ],
    },
  };
  const admin = http.createServer((req, res) => {
    adminRequests.push(req.headers.authorization);
    t.equal(req.url, '/readyz');
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => admin.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => admin.close(() => resolve())));
  const adminUrl = `http://127.0.0.1:${(admin.address() as AddressInfo).port}`;

  const api = await startFakeApi(BASE);
  t.teardown(() => api.close());
  const kubeconfig = writeKubeconfig(t.testdir(), api.url, TOKEN);
  const go = async () => {
    const out = sink();
    const code = await doctorMain(
      ['--kubeconfig', kubeconfig, '--json', '--admin-url', adminUrl, '--admin-token-env', 'IPGATE_ADMIN_TOKEN'],
      { stdout: out, stderr: sink(), env: { IPGATE_ADMIN_TOKEN: 'admin-secret' }, timeoutMs: 2000 },
    );
    return { code, findings: (JSON.parse(out.text()) as { findings: Finding[] }).findings };
  };

  let r = await go();
  t.equal(r.code, 0);
  t.same(adminRequests, ['Bearer admin-secret'], 'the admin token, not the Kubernetes one');
  t.match(
    r.findings.find((f) => f.id === 'ipgate.ready'),
    { severity: 'ok', statement: /HTTP 200 \(status "ready"\)/ },
  );
  t.match(
    r.findings.find((f) => f.id === 'ipgate.check.source-nat'),
    { severity: 'warn', statement: /source NAT suspected on listener https/ },
  );
  t.match(
    r.findings.find((f) => f.id === 'ipgate.check.store'),
    { severity: 'ok', statement: /store: \{"version":12\}/ },
  );

  // The flag names of `ipgate allowlist`: --token-file, --output yaml, --flag=value.
  const tokenFile = path.join(path.dirname(kubeconfig), 'token');
  fs.writeFileSync(tokenFile, 'file-secret\n');
  const yamlOut = sink();
  const yamlCode = await doctorMain([`--kubeconfig=${kubeconfig}`, '--output=yaml', `--admin-url=${adminUrl}`, '--token-file', tokenFile], {
    stdout: yamlOut,
    stderr: sink(),
    env: {},
    timeoutMs: 2000,
  });
  t.equal(yamlCode, 0);
  t.equal(adminRequests.at(-1), 'Bearer file-secret', 'the token from --token-file');
  t.match(
    (YAML.parse(yamlOut.text()) as { findings: Finding[] }).findings.find((f) => f.id === 'ipgate.ready'),
    { severity: 'ok' },
    '--output yaml: the JSON report as YAML',
  );

  answer = { status: 503, body: { status: 'not ready' } }; // no checks array: tolerated
  r = await go();
  t.equal(r.code, 1);
  t.match(
    r.findings.find((f) => f.id === 'ipgate.not-ready'),
    { severity: 'error' },
  );
  t.notOk(r.findings.some((f) => f.id.startsWith('ipgate.check')));
});

t.test('ipgate admin unreachable is a warning, not a failed run', async (t) => {
  const api = await startFakeApi(BASE);
  t.teardown(() => api.close());
  const kubeconfig = writeKubeconfig(t.testdir(), api.url, TOKEN);
  const out = sink();
  const code = await doctorMain(['--kubeconfig', kubeconfig, '--json', '--admin-url', 'http://127.0.0.1:1'], {
    stdout: out,
    stderr: sink(),
    env: {},
    timeoutMs: 2000,
  });
  t.equal(code, 0);
  const f = (JSON.parse(out.text()) as { findings: Finding[] }).findings.find((x) => x.id === 'ipgate.admin-unreachable');
  t.match(f, {
    severity: 'warn',
    statement: /cannot reach ipgate's admin API at http:\/\/127\.0\.0\.1:1\/readyz: ECONNREFUSED/,
    fix: /port-forward/,
  });
});

/** A ServiceList of the chart's data Services, named as the chart names them. */
function chartServices(names: string[]): Route {
  const svc = fixture('service-nodeport-local.json') as { metadata: Record<string, unknown> };
  return (url: URL) => {
    if (url.searchParams.get('labelSelector') !== 'app.kubernetes.io/part-of=ipgate,app.kubernetes.io/component=controller')
      return { status: 400, body: 'unexpected selector' };
    return {
      body: {
        kind: 'ServiceList',
        apiVersion: 'v1',
        metadata: {},
        items: names.map((name) => ({ ...svc, metadata: { ...svc.metadata, name } })),
      },
    };
  };
}

t.test("without --service: the chart's data Service (<release>-ipgate) is found by its labels", async (t) => {
  const r = await run(
    {
      ...BASE,
      [`/api/v1/namespaces/${NS}/services`]: chartServices(['edge-ipgate']),
      [`/api/v1/namespaces/${NS}/services/edge-ipgate`]: 'service-nodeport-local.json',
    },
    ['--json'],
    t.testdir(),
  );
  t.equal(r.code, 0, r.stderr);
  t.equal(JSON.parse(r.stdout).service, `${NS}/edge-ipgate`, 'the release\'s Service, not "ipgate"');
  t.ok(
    r.requests.some((q) => q.path === `/api/v1/namespaces/${NS}/services/edge-ipgate`),
    'read by name',
  );
  t.notOk(
    r.requests.some((q) => q.path === P.service),
    '"ipgate" not asked',
  );
});

t.test('two releases in one namespace: exit 2 naming both Services', async (t) => {
  const r = await run(
    { ...BASE, [`/api/v1/namespaces/${NS}/services`]: chartServices(['edge-ipgate', 'internal-ipgate']) },
    [],
    t.testdir(),
  );
  t.equal(r.code, 2);
  t.match(r.stderr, /namespace ipgate has 2 ipgate data Services \(edge-ipgate, internal-ipgate\): pass --service NAME to choose one/);
});

t.test("hostNetwork without a Service (service.enabled: false): the pods are found by the chart's labels, no error", async (t) => {
  const list = fixture('podlist-daemonset-all-ready.json') as { items: { spec: Record<string, unknown> }[] };
  const hostNet = {
    ...list,
    items: list.items.map((p) => ({ ...p, spec: { ...p.spec, hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' } })),
  };
  const r = await run(
    { ...BASE, [P.service]: { status: 404, fixture: 'status-404-service-ipgate.json' }, [P.pods]: { body: hostNet } },
    ['--json'],
    t.testdir(),
  );
  t.equal(r.code, 0, r.stderr);
  const findings = (JSON.parse(r.stdout) as { findings: Finding[] }).findings;
  t.match(
    findings.find((f) => f.id === 'service.none-host-network'),
    {
      severity: 'info',
      statement:
        /no Service ipgate\/ipgate: 3 of 3 ipgate pods \(hostNetwork\) ready, taking client connections on their nodes' own addresses/,
    },
  );
  t.notOk(findings.some((f) => f.id === 'service.missing'));
});
