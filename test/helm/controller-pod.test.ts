/**
 * The workload and its pod: DaemonSet or Deployment, its update strategy (surge unless the ports are
 * the node's), restricted and overridable security contexts, probes on the admin port, hostNetwork
 * with ClusterFirstWithHostNet, NET_BIND_SERVICE only for hostNetwork ports < 1024, the preStop
 * delay, extra args/env/volumes/init containers, and the PDB (Deployment only).
 */
import t from 'tap';
import { VARIANTS, render, renderError } from '../helpers/helm';

const RESTRICTED_CONTAINER = {
  runAsNonRoot: true,
  runAsUser: 10001,
  runAsGroup: 10001,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  privileged: false,
  seccompProfile: { type: 'RuntimeDefault' },
  capabilities: { drop: ['ALL'] },
};

const SURGE = { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } };
const IN_PLACE = { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } };

t.test('DaemonSet by default, surging: a node keeps its ready pod until the new one is ready (externalTrafficPolicy Local)', async (t) => {
  const out = render({});
  t.equal(out.all('Deployment').length, 0);
  const ds = out.one('DaemonSet');
  t.same(ds.spec.updateStrategy, SURGE);
  t.same(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels, 'the selector matches the pod labels');
});

const STRATEGIES: { what: string; values: Record<string, unknown>; field: 'updateStrategy' | 'strategy'; expected: unknown }[] = [
  {
    what: "DaemonSet with hostNetwork: in place, one node at a time (two pods cannot bind the node's ports)",
    values: { hostNetwork: true },
    field: 'updateStrategy',
    expected: IN_PLACE,
  },
  { what: 'Deployment: surge', values: { kind: 'Deployment' }, field: 'strategy', expected: SURGE },
  {
    what: 'Deployment with hostNetwork: in place',
    values: { kind: 'Deployment', hostNetwork: true, replicaCount: 1 },
    field: 'strategy',
    expected: IN_PLACE,
  },
  {
    what: "DaemonSet, operator's RollingUpdate with 10% unavailable",
    values: { updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: '10%' } } },
    field: 'updateStrategy',
    expected: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: '10%' } },
  },
  {
    what: 'DaemonSet, OnDelete',
    values: { updateStrategy: { type: 'OnDelete' } },
    field: 'updateStrategy',
    expected: { type: 'OnDelete' },
  },
  {
    what: 'Deployment, Recreate',
    values: { kind: 'Deployment', updateStrategy: { type: 'Recreate' } },
    field: 'strategy',
    expected: { type: 'Recreate' },
  },
];
for (const c of STRATEGIES) {
  t.test(`update strategy: ${c.what}`, async (t) => {
    const out = render(c.values);
    const workload = out.all('DaemonSet')[0] ?? out.one('Deployment');
    t.same(workload.spec[c.field], c.expected);
  });
}

const BAD_STRATEGIES: { what: string; values: Record<string, unknown>; message: RegExp }[] = [
  {
    what: 'a surge with hostNetwork (the new pod could never bind)',
    values: { hostNetwork: true, updateStrategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } },
    message: /updateStrategy\.rollingUpdate\.maxSurge: 1 with hostNetwork/,
  },
  {
    what: "a Deployment with hostNetwork and Kubernetes' default 25% surge",
    values: { kind: 'Deployment', replicaCount: 1, hostNetwork: true, updateStrategy: { type: 'RollingUpdate' } },
    message: /updateStrategy\.rollingUpdate\.maxSurge: 25% with hostNetwork/,
  },
  {
    what: 'maxSurge 0 and maxUnavailable 0',
    values: { updateStrategy: { rollingUpdate: { maxSurge: 0, maxUnavailable: 0 } } },
    message: /updateStrategy\.rollingUpdate: maxSurge and maxUnavailable are both 0/,
  },
  {
    what: 'OnDelete for a Deployment',
    values: { kind: 'Deployment', updateStrategy: { type: 'OnDelete' } },
    message: /updateStrategy\.type: OnDelete is a DaemonSet strategy/,
  },
  {
    what: 'Recreate for a DaemonSet',
    values: { updateStrategy: { type: 'Recreate' } },
    message: /updateStrategy\.type: Recreate is a Deployment strategy/,
  },
  {
    what: 'rollingUpdate with OnDelete',
    values: { updateStrategy: { type: 'OnDelete', rollingUpdate: { maxUnavailable: 1 } } },
    message: /updateStrategy\.rollingUpdate: only with type RollingUpdate/,
  },
  {
    what: 'an unknown strategy key (schema)',
    values: { updateStrategy: { rollingupdate: { maxUnavailable: 1 } } },
    message: /at '\/updateStrategy': additional properties 'rollingupdate' not allowed/,
  },
  {
    what: 'maxUnavailable 150% (schema)',
    values: { updateStrategy: { rollingUpdate: { maxUnavailable: '150%' } } },
    message: /at '\/updateStrategy\/rollingUpdate\/maxUnavailable'/,
  },
];
for (const c of BAD_STRATEGIES) {
  t.test(`update strategy refused: ${c.what}`, async (t) => {
    t.match(renderError(c.values), c.message);
  });
}

t.test('kind=Deployment renders a Deployment with replicaCount and no DaemonSet', async (t) => {
  const out = render(VARIANTS['kind=Deployment']!);
  t.equal(out.all('DaemonSet').length, 0);
  const d = out.one('Deployment');
  t.equal(d.spec.replicas, 3);
  t.same(d.spec.strategy, SURGE);
});

const RESTRICTED_POD = {
  runAsNonRoot: true,
  runAsUser: 10001,
  runAsGroup: 10001,
  fsGroup: 10001,
  seccompProfile: { type: 'RuntimeDefault' },
};

for (const [name, values] of Object.entries(VARIANTS)) {
  t.test(`${name}: restricted securityContext`, async (t) => {
    const pod = render(values).podSpec();
    const openshift = name === 'OpenShift (no fixed ids)';
    const { runAsUser: _u, runAsGroup: _g, fsGroup: _f, ...podWithoutIds } = RESTRICTED_POD;
    const { runAsUser: _cu, runAsGroup: _cg, ...containerWithoutIds } = RESTRICTED_CONTAINER;
    t.same(pod.securityContext, openshift ? podWithoutIds : RESTRICTED_POD);
    t.equal(pod.containers.length, 1);
    const base = openshift ? containerWithoutIds : RESTRICTED_CONTAINER;
    const expected = name === 'hostNetwork with port 443' ? { ...base, capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } } : base;
    t.same(pod.containers[0].securityContext, expected);
    t.equal(pod.containers[0].securityContext.runAsNonRoot, true, 'never root, whoever picks the uid');
    t.notOk(pod.hostPID || pod.hostIPC, 'no host PID/IPC namespace');
  });
}

t.test("security contexts are values: an operator's uid and an added capability are kept, NET_BIND_SERVICE is added once", async (t) => {
  const pod = render({
    podSecurityContext: { runAsUser: 2000, supplementalGroups: [3000] },
    containerSecurityContext: { runAsUser: 2000, capabilities: { add: ['NET_BIND_SERVICE'] } },
    hostNetwork: true,
    listeners: [{ name: 'web', mode: 'http', port: 80, allowlist: 'default', upstreams: ['web:8080'] }],
  }).podSpec();
  t.equal(pod.securityContext.runAsUser, 2000);
  t.same(pod.securityContext.supplementalGroups, [3000]);
  t.equal(pod.securityContext.fsGroup, 10001, 'maps merge: the other defaults stay');
  const sc = pod.containers[0].securityContext;
  t.equal(sc.runAsUser, 2000);
  t.same(sc.capabilities, { drop: ['ALL'], add: ['NET_BIND_SERVICE'] }, 'not twice');
  t.equal(sc.readOnlyRootFilesystem, true);
});

t.test('a security context of the wrong type is refused by the schema', async (t) => {
  t.match(
    renderError({ containerSecurityContext: { runAsUser: 'root' } }),
    /at '\/containerSecurityContext\/runAsUser': got string, want integer/,
  );
  t.match(
    renderError({ podSecurityContext: { runAsNonRoot: 'enabled' } }),
    /at '\/podSecurityContext\/runAsNonRoot': got string, want boolean/,
  );
});

t.test("extraArgs, extraEnv, extraVolumes, extraVolumeMounts and initContainers land in the pod after the chart's own", async (t) => {
  const pod = render({
    extraArgs: ['--log-flag'],
    extraEnv: [{ name: 'UV_THREADPOOL_SIZE', value: '8' }],
    extraVolumes: [{ name: 'certs', secret: { secretName: 'edge-certs' } }],
    extraVolumeMounts: [{ name: 'certs', mountPath: '/etc/ipgate/certs', readOnly: true }],
    initContainers: [
      { name: 'wait-for-backend', image: 'busybox:1.36', command: ['sh', '-c', 'until nc -z backend 8080; do sleep 1; done'] },
    ],
  }).podSpec();
  const c = pod.containers[0];
  t.same(c.args, ['run', '--config', '/etc/ipgate/config.yaml', '--log-flag']);
  const env = c.env as { name: string }[];
  t.equal(env[env.length - 1]!.name, 'UV_THREADPOOL_SIZE', "extraEnv after the chart's variables");
  t.ok(
    env.some((e) => e.name === 'IPGATE_ADMIN_TOKEN'),
    "the chart's variables stay",
  );
  t.same(
    (pod.volumes as { name: string }[]).map((v) => v.name),
    ['config', 'data', 'tmp', 'certs'],
  );
  t.same(c.volumeMounts[c.volumeMounts.length - 1], { name: 'certs', mountPath: '/etc/ipgate/certs', readOnly: true });
  t.same(
    pod.initContainers.map((i: { name: string }) => i.name),
    ['wait-for-backend'],
  );
  const plain = render({}).podSpec();
  t.equal(plain.initContainers, undefined, 'no initContainers key by default');
  t.same(plain.containers[0].args, ['run', '--config', '/etc/ipgate/config.yaml']);
});

t.test('extra volumes and init containers need a name (schema)', async (t) => {
  t.match(renderError({ extraVolumes: [{ emptyDir: {} }] }), /at '\/extraVolumes\/0': missing property 'name'/);
  t.match(renderError({ extraVolumeMounts: [{ name: 'x' }] }), /at '\/extraVolumeMounts\/0': missing property 'mountPath'/);
  t.match(renderError({ initContainers: [{ image: 'busybox' }] }), /at '\/initContainers\/0': missing property 'name'/);
  t.match(renderError({ extraArgs: [1] }), /at '\/extraArgs\/0': got number, want string/);
});

t.test('probes: readiness on /readyz, liveness and startup on /healthz, all on the admin port', async (t) => {
  const c = render({}).podSpec().containers[0];
  t.same(c.readinessProbe.httpGet, { path: '/readyz', port: 'admin' });
  t.same(c.livenessProbe.httpGet, { path: '/healthz', port: 'admin' });
  t.same(c.startupProbe.httpGet, { path: '/healthz', port: 'admin' });
  t.equal(c.readinessProbe.periodSeconds, 5);
});

t.test('hostNetwork: ClusterFirstWithHostNet, and no NET_BIND_SERVICE for ports >= 1024', async (t) => {
  const pod = render(VARIANTS.hostNetwork!).podSpec();
  t.equal(pod.hostNetwork, true);
  t.equal(pod.dnsPolicy, 'ClusterFirstWithHostNet');
  t.equal(pod.containers[0].securityContext.capabilities.add, undefined);
  const plain = render({}).podSpec();
  t.equal(plain.hostNetwork, undefined);
  t.equal(plain.dnsPolicy, undefined);
});

t.test('hostNetwork with port 443: NET_BIND_SERVICE is added, nothing else', async (t) => {
  const out = render(VARIANTS['hostNetwork with port 443']!);
  const c = out.podSpec().containers[0];
  t.same(c.securityContext.capabilities, { drop: ['ALL'], add: ['NET_BIND_SERVICE'] });
  t.same(c.ports[0], { name: 'tls', containerPort: 443, protocol: 'TCP' });
  t.match(out.notes(), /NET_BIND_SERVICE=1/, 'NOTES say which image binds a low port');
});

t.test('the root filesystem is read-only: config mounted read-only, data and /tmp writable emptyDirs', async (t) => {
  const pod = render({}).podSpec();
  const mounts = Object.fromEntries(
    (pod.containers[0].volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]).map((m) => [m.mountPath, m]),
  );
  t.same(mounts['/etc/ipgate'], { name: 'config', mountPath: '/etc/ipgate', readOnly: true });
  t.equal(mounts['/var/lib/ipgate']?.readOnly, undefined);
  t.equal(mounts['/tmp']?.readOnly, undefined);
  const vols = Object.fromEntries((pod.volumes as { name: string }[]).map((v) => [v.name, v]));
  t.same(vols.config, { name: 'config', configMap: { name: 'edge-ipgate-config', items: [{ key: 'config.yaml', path: 'config.yaml' }] } });
  t.ok((vols.data as { emptyDir?: unknown }).emptyDir);
  t.same(pod.containers[0].args, ['run', '--config', '/etc/ipgate/config.yaml']);
});

t.test('drain: a preStop delay, then SIGTERM; the grace period covers both', async (t) => {
  const pod = render({}).podSpec();
  t.equal(pod.terminationGracePeriodSeconds, 45, 'more than 5 s preStop + 30 s drain');
  t.same(pod.containers[0].lifecycle, { preStop: { sleep: { seconds: 5 } } }, 'the kubelet sleeps: nothing runs in the container');
  const old = render({}, ['--kube-version', '1.29.0']).podSpec();
  t.same(old.containers[0].lifecycle, { preStop: { exec: { command: ['/bin/sleep', '5'] } } }, "before 1.30: the image's /bin/sleep");
  t.equal(render({ preStopSleepSeconds: 0 }).podSpec().containers[0].lifecycle, undefined, '0 turns the hook off');
  const long = render({ preStopSleepSeconds: 15, terminationGracePeriodSeconds: 60 }).podSpec();
  t.same(long.containers[0].lifecycle.preStop.sleep, { seconds: 15 });
  t.match(
    renderError({ preStopSleepSeconds: 15 }),
    /terminationGracePeriodSeconds: 45 s is not more than preStopSleepSeconds \(15 s\) \+ config\.shutdown\.drainTimeoutMs \(30000 ms\)/,
  );
  t.match(
    renderError({ terminationGracePeriodSeconds: 35 }),
    /terminationGracePeriodSeconds: 35 s is not more than/,
    'equal is not enough: the exit needs a moment',
  );
});

t.test('one container port per listener plus admin', async (t) => {
  const c = render(VARIANTS['two listeners, fixed nodePorts']!).podSpec().containers[0];
  t.same(c.ports, [
    { name: 'web', containerPort: 8080, protocol: 'TCP' },
    { name: 'tls', containerPort: 8443, protocol: 'TCP' },
    { name: 'admin', containerPort: 9901, protocol: 'TCP' },
  ]);
});

t.test('PodDisruptionBudget: for a Deployment, selecting its pods, one down at a time', async (t) => {
  const out = render(VARIANTS['kind=Deployment']!);
  const pdb = out.one('PodDisruptionBudget');
  t.equal(pdb.spec.maxUnavailable, 1);
  t.same(pdb.spec.selector.matchLabels, out.one('Deployment').spec.selector.matchLabels);
  t.equal(render({ ...VARIANTS['kind=Deployment'], podDisruptionBudget: { enabled: false } }).all('PodDisruptionBudget').length, 0);
});

t.test('no PodDisruptionBudget for a DaemonSet: kubectl drain --ignore-daemonsets does not evict its pods', async (t) => {
  t.equal(render({}).all('PodDisruptionBudget').length, 0);
  t.equal(render({ podDisruptionBudget: { enabled: true } }).all('PodDisruptionBudget').length, 0);
});
