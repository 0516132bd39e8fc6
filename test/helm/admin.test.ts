/**
 * The admin API: a ClusterIP Service only, a token Secret (generated or existing) handed over as
 * IPGATE_ADMIN_TOKEN, and an optional ServiceMonitor on /metrics that needs no token.
 */
import t from 'tap';
import { VARIANTS, render, renderFresh } from '../helpers/helm';

t.test('the admin Service is ClusterIP and carries only the admin port', async (t) => {
  const svc = render({}).one('Service', '-admin');
  t.equal(svc.spec.type, 'ClusterIP');
  t.same(svc.spec.ports, [{ name: 'admin', protocol: 'TCP', port: 9901, targetPort: 'admin' }]);
  t.equal(svc.spec.selector['app.kubernetes.io/component'], 'controller');
  t.equal(svc.spec.externalTrafficPolicy, undefined);
});

t.test('the container exposes the admin port under the name both Services and probes use', async (t) => {
  const c = render({ admin: { port: 9911 } }).podSpec().containers[0];
  t.same(c.ports.find((p: { name: string }) => p.name === 'admin'), { name: 'admin', containerPort: 9911, protocol: 'TCP' });
});

t.test('a generated token Secret: 48 random characters, fed to IPGATE_ADMIN_TOKEN', async (t) => {
  const out = render({});
  const secret = out.one('Secret');
  t.equal(secret.metadata.name, 'edge-ipgate-admin-token');
  const token = Buffer.from(secret.data.token as string, 'base64').toString();
  t.match(token, /^[A-Za-z0-9]{48}$/);
  t.not(Buffer.from(renderFresh({}).one('Secret').data.token as string, 'base64').toString(), token, 'random per render (lookup keeps it on upgrades)');
  const env = out.podSpec().containers[0].env as { name: string; valueFrom?: unknown }[];
  t.same(env.find((e) => e.name === 'IPGATE_ADMIN_TOKEN')?.valueFrom, { secretKeyRef: { name: 'edge-ipgate-admin-token', key: 'token' } });
  t.same(env.find((e) => e.name === 'POD_NAMESPACE')?.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } });
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
