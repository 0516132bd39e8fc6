/**
 * The workload and its pod: DaemonSet or Deployment, restricted securityContext, probes on the admin
 * port, hostNetwork with ClusterFirstWithHostNet, NET_BIND_SERVICE only for hostNetwork ports < 1024.
 */
import t from 'tap';
import { VARIANTS, render } from '../helpers/helm';

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

t.test('DaemonSet by default, rolling one node at a time', async (t) => {
  const out = render({});
  t.equal(out.all('Deployment').length, 0);
  const ds = out.one('DaemonSet');
  t.same(ds.spec.updateStrategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } });
  t.same(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels, 'the selector matches the pod labels');
});

t.test('kind=Deployment renders a Deployment with replicaCount and no DaemonSet', async (t) => {
  const out = render(VARIANTS['kind=Deployment']!);
  t.equal(out.all('DaemonSet').length, 0);
  const d = out.one('Deployment');
  t.equal(d.spec.replicas, 3);
  t.same(d.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
});

for (const [name, values] of Object.entries(VARIANTS)) {
  t.test(`${name}: restricted securityContext`, async (t) => {
    const pod = render(values).podSpec();
    t.same(pod.securityContext, { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001, seccompProfile: { type: 'RuntimeDefault' } });
    t.equal(pod.containers.length, 1);
    const expected = name === 'hostNetwork with port 443'
      ? { ...RESTRICTED_CONTAINER, capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] } }
      : RESTRICTED_CONTAINER;
    t.same(pod.containers[0].securityContext, expected);
    t.notOk(pod.hostPID || pod.hostIPC, 'no host PID/IPC namespace');
  });
}

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
  const mounts = Object.fromEntries((pod.containers[0].volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]).map((m) => [m.mountPath, m]));
  t.same(mounts['/etc/ipgate'], { name: 'config', mountPath: '/etc/ipgate', readOnly: true });
  t.equal(mounts['/var/lib/ipgate']?.readOnly, undefined);
  t.equal(mounts['/tmp']?.readOnly, undefined);
  const vols = Object.fromEntries((pod.volumes as { name: string }[]).map((v) => [v.name, v]));
  t.same(vols.config, { name: 'config', configMap: { name: 'edge-ipgate-config', items: [{ key: 'config.yaml', path: 'config.yaml' }] } });
  t.ok((vols.data as { emptyDir?: unknown }).emptyDir);
  t.same(pod.containers[0].args, ['run', '--config', '/etc/ipgate/config.yaml']);
});

t.test('drain: grace period above preStop sleep + drain timeout; sleep hook only on Kubernetes >= 1.30', async (t) => {
  const pod = render({}).podSpec();
  t.equal(pod.terminationGracePeriodSeconds, 45);
  t.same(pod.containers[0].lifecycle, { preStop: { sleep: { seconds: 5 } } });
  const old = render({}, ['--kube-version', '1.29.0']).podSpec();
  t.equal(old.containers[0].lifecycle, undefined);
});

t.test('one container port per listener plus admin', async (t) => {
  const c = render(VARIANTS['two listeners, fixed nodePorts']!).podSpec().containers[0];
  t.same(c.ports, [
    { name: 'web', containerPort: 8080, protocol: 'TCP' },
    { name: 'tls', containerPort: 8443, protocol: 'TCP' },
    { name: 'admin', containerPort: 9901, protocol: 'TCP' },
  ]);
});

t.test('PodDisruptionBudget selects the controller pods, one down at a time', async (t) => {
  const out = render({});
  const pdb = out.one('PodDisruptionBudget');
  t.equal(pdb.spec.maxUnavailable, 1);
  t.same(pdb.spec.selector.matchLabels, out.one('DaemonSet').spec.selector.matchLabels);
  t.equal(render({ podDisruptionBudget: { enabled: false } }).all('PodDisruptionBudget').length, 0);
});
