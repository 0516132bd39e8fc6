/**
 * The admin API: a ClusterIP Service only, a token Secret (existing, or generated once and kept)
 * handed over as IPGATE_ADMIN_TOKEN, the address it binds (the pod IP with hostNetwork), and an
 * optional ServiceMonitor on /metrics that needs no token.
 */
import t from 'tap';
import YAML from 'yaml';
import { parseConfig } from '../../src/config/load';
import { VARIANTS, lint, render, renderError, renderFresh, templateText } from '../helpers/helm';

type EnvVar = { name: string; value?: string; valueFrom?: unknown };
const env = (values: Record<string, unknown>): EnvVar[] => render(values).podSpec().containers[0].env as EnvVar[];
const envValue = (values: Record<string, unknown>, name: string): string | undefined => env(values).find((e) => e.name === name)?.value;

t.test('the admin Service is ClusterIP and carries only the admin port', async (t) => {
  const svc = render({}).one('Service', '-admin');
  t.equal(svc.spec.type, 'ClusterIP');
  t.same(svc.spec.ports, [{ name: 'admin', protocol: 'TCP', port: 9901, targetPort: 'admin' }]);
  t.equal(svc.spec.selector['app.kubernetes.io/component'], 'controller');
  t.equal(svc.spec.externalTrafficPolicy, undefined);
});

t.test('the container exposes the admin port under the name both Services and probes use', async (t) => {
  const c = render({ admin: { port: 9911 } }).podSpec().containers[0];
  t.same(
    c.ports.find((p: { name: string }) => p.name === 'admin'),
    { name: 'admin', containerPort: 9911, protocol: 'TCP' },
  );
});

t.test('the bare chart renders nothing without admin.existingSecret: the refusal says how to make the Secret', async (t) => {
  const message = renderError({}, { bare: true });
  t.match(message, /admin\.existingSecret: name the Secret that holds the admin API token/);
  t.match(message, /so that helm template, Argo CD and Flux render the same objects on every sync/, 'and why');
  t.match(
    message,
    /kubectl -n ipgate-system create secret generic edge-ipgate-admin-token --from-literal=token="\$\(openssl rand -hex 24\)"/,
    "the command, with the release's namespace and name",
  );
  t.match(message, /set admin\.generateToken: true/, 'and the opt-in for helm install');
  // helm lint renders in its lint mode, where `fail` is reported but not fatal (so a chart that
  // needs a value can be linted alone): it passes and shows the same message.
  const lintRun = lint({}, { bare: true });
  t.equal(lintRun.status, 0, 'helm lint --strict of the bare chart passes (lint mode)');
  t.match(lintRun.output, /admin\.existingSecret: name the Secret that holds the admin API token/, 'and shows the message');
});

t.test('admin.generateToken: 48 random characters, fed to IPGATE_ADMIN_TOKEN, kept on uninstall', async (t) => {
  const values = { admin: { existingSecret: '', generateToken: true } };
  const out = render(values);
  const secret = out.one('Secret');
  t.equal(secret.metadata.name, 'edge-ipgate-admin-token');
  t.equal(secret.metadata.annotations!['helm.sh/resource-policy'], 'keep', 'helm uninstall leaves it; a reinstall looks it up');
  const token = Buffer.from(secret.data.token as string, 'base64').toString();
  t.match(token, /^[A-Za-z0-9]{48}$/);
  t.not(
    Buffer.from(renderFresh(values).one('Secret').data.token as string, 'base64').toString(),
    token,
    'random per render (lookup keeps it on upgrades)',
  );
  const env = out.podSpec().containers[0].env as { name: string; valueFrom?: unknown }[];
  t.same(env.find((e) => e.name === 'IPGATE_ADMIN_TOKEN')?.valueFrom, { secretKeyRef: { name: 'edge-ipgate-admin-token', key: 'token' } });
  t.same(env.find((e) => e.name === 'POD_NAMESPACE')?.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } });
  t.match(
    out.notes(),
    /every render makes a new\s+token: create a Secret once and set admin\.existingSecret instead/,
    'NOTES say it is not for GitOps',
  );
  t.equal(render({ admin: { existingSecret: 'ops', generateToken: true } }).all('Secret').length, 0, 'existingSecret wins: no Secret');
});

t.test('existingSecret: a render without cluster access is the same twice, with no Secret in it (GitOps)', async (t) => {
  const values = VARIANTS.existingSecret!;
  const first = templateText(values);
  const second = templateText(values);
  t.equal(second, first, 'helm template twice: byte for byte the same');
  const kinds = YAML.parseAllDocuments(first)
    .map((d) => (d.toJS() as { kind?: string } | null)?.kind)
    .filter(Boolean);
  t.ok(kinds.includes('DaemonSet'), 'the output is a full render');
  t.notOk(kinds.includes('Secret'), 'no Secret object at all');
  t.notMatch(first, /kind: Secret/);
  t.notMatch(render(values).notes(), /every render makes a new/);
});

t.test('existingSecret must be a Secret name (schema)', async (t) => {
  t.match(renderError({ admin: { existingSecret: 'Ops_Token' } }), /at '\/admin\/existingSecret'/);
  t.match(renderError({ admin: { existingSecret: 'ops', existingSecretKey: '' } }), /at '\/admin\/existingSecretKey'/);
});

t.test('existingSecret: no Secret is rendered and the pod reads the given key', async (t) => {
  const out = render(VARIANTS.existingSecret!);
  t.equal(out.all('Secret').length, 0);
  const env = out.podSpec().containers[0].env as { name: string; valueFrom?: unknown }[];
  t.same(env.find((e) => e.name === 'IPGATE_ADMIN_TOKEN')?.valueFrom, { secretKeyRef: { name: 'ops-ipgate-token', key: 'admin-token' } });
});

t.test('ServiceMonitor: off by default; on, it scrapes /metrics on the admin Service without credentials', async (t) => {
  t.equal(render({}).all('ServiceMonitor').length, 0);
  const out = render(VARIANTS['serviceMonitor on']!);
  const sm = out.one('ServiceMonitor');
  t.equal(sm.metadata.labels!.release, 'kube-prometheus-stack');
  t.equal(sm.spec.endpoints.length, 1);
  const ep = sm.spec.endpoints[0];
  t.equal(ep.port, 'admin');
  t.equal(ep.path, '/metrics');
  t.equal(ep.bearerTokenSecret, undefined, 'no token: /metrics is open on the admin address');
  t.equal(ep.authorization, undefined);
  const admin = out.one('Service', '-admin');
  for (const [k, v] of Object.entries(sm.spec.selector.matchLabels as Record<string, string>)) {
    t.equal(admin.metadata.labels![k], v, `the admin Service has the selected label ${k}`);
  }
  t.not(out.one('Service', 'edge-ipgate').metadata.labels!['app.kubernetes.io/component'], 'admin', 'the data Service is not scraped');
  t.same(sm.spec.namespaceSelector, { matchNames: ['ipgate-system'] });
});

t.test('the admin API binds 0.0.0.0 in the pod network namespace: no IPGATE_ADMIN_LISTEN, the CLI uses loopback', async (t) => {
  t.equal(envValue({}, 'IPGATE_ADMIN_LISTEN'), undefined);
  t.equal(envValue({}, 'IPGATE_ADMIN_URL'), 'http://127.0.0.1:9901');
  t.equal(envValue({ admin: { bindAddress: '[::]' } }, 'IPGATE_ADMIN_LISTEN'), undefined);
});

t.test("hostNetwork: the admin API binds the pod IP (the node's primary address), not every node address", async (t) => {
  const vars = env(VARIANTS.hostNetwork!);
  const podIp = vars.findIndex((e) => e.name === 'POD_IP');
  const listen = vars.findIndex((e) => e.name === 'IPGATE_ADMIN_LISTEN');
  t.same(vars[podIp]!.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } });
  t.equal(vars[listen]!.value, '$(POD_IP):9901');
  t.ok(podIp < listen, 'POD_IP is defined first: the kubelet expands $(VAR) only from earlier variables');
  t.equal(envValue(VARIANTS.hostNetwork!, 'IPGATE_ADMIN_URL'), 'http://$(POD_IP):9901', 'kubectl exec ... allowlist reaches it');
  const config = YAML.parse(render(VARIANTS.hostNetwork!).one('ConfigMap', '-config').data['config.yaml'] as string) as {
    admin: { listen: string };
  };
  t.equal(config.admin.listen, '0.0.0.0:9901', 'config.yaml keeps the wildcard; the variable takes precedence');
});

t.test('admin.bindAddress: podIP without hostNetwork, IPv6 bracketed, and an explicit wildcard with hostNetwork', async (t) => {
  t.equal(envValue({ admin: { bindAddress: 'podIP', port: 9911 } }, 'IPGATE_ADMIN_LISTEN'), '$(POD_IP):9911');
  t.equal(envValue({ admin: { bindAddress: 'podIP', podIPFamily: 'IPv6' } }, 'IPGATE_ADMIN_LISTEN'), '[$(POD_IP)]:9901');
  t.equal(envValue({ admin: { bindAddress: 'podIP', podIPFamily: 'IPv6' } }, 'IPGATE_ADMIN_URL'), 'http://[$(POD_IP)]:9901');
  t.equal(
    envValue({ hostNetwork: true, admin: { bindAddress: '0.0.0.0' } }, 'IPGATE_ADMIN_LISTEN'),
    undefined,
    'the operator chose the wildcard',
  );
  t.match(render({ hostNetwork: true, admin: { bindAddress: '0.0.0.0' } }).notes(), /admin port 9901 is on every node address/);
  t.match(
    renderError({ admin: { bindAddress: '10.0.0.1' } }),
    /at '\/admin\/bindAddress': value must be one of 'auto', 'podIP', '0\.0\.0\.0', '\[::\]'/,
  );
});

t.test("admin.allowedHosts: the admin Service's DNS names, so in-cluster clients using them are not refused (421)", async (t) => {
  const config = (values: Record<string, unknown>) => parseConfig(render(values).one('ConfigMap', '-config').data['config.yaml'] as string);
  t.same(config({}).admin.allowedHosts, [
    'edge-ipgate-admin',
    'edge-ipgate-admin.ipgate-system',
    'edge-ipgate-admin.ipgate-system.svc',
    'edge-ipgate-admin.ipgate-system.svc.cluster.local',
  ]);
  t.equal(render({}).one('Service', '-admin').metadata.name, 'edge-ipgate-admin', "the names are the Service's");
  const custom = config({ clusterDomain: 'edge.internal', admin: { extraAllowedHosts: ['ipgate-admin.example.com', 'edge-ipgate-admin'] } })
    .admin.allowedHosts;
  t.same(
    custom,
    [
      'edge-ipgate-admin',
      'edge-ipgate-admin.ipgate-system',
      'edge-ipgate-admin.ipgate-system.svc',
      'edge-ipgate-admin.ipgate-system.svc.edge.internal',
      'ipgate-admin.example.com',
    ],
    'the cluster domain and extra names; no duplicates',
  );
  t.match(
    renderError({ admin: { extraAllowedHosts: ['admin.example.com:9901'] } }),
    /at '\/admin\/extraAllowedHosts\/0'/,
    'names only, no ports',
  );
});
