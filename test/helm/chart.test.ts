/**
 * The chart as a whole: helm lint passes, and every variant renders objects that pass the
 * Kubernetes schemas, with an ipgate config that ipgate's own loader accepts.
 */
import t from 'tap';
import { parseConfig } from '../../src/config/load';
import { CHART, VARIANTS, helm, render, validateObject } from '../helpers/helm';

for (const [name, values] of Object.entries(VARIANTS)) {
  t.test(`${name}: helm lint --strict passes`, async (t) => {
    const r = helm(['lint', '--strict', CHART], values);
    t.equal(r.status, 0, r.status === 0 ? 'lint exit 0' : r.stdout + r.stderr);
    t.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  t.test(`${name}: every rendered object passes its Kubernetes schema`, async (t) => {
    const out = render(values);
    const kinds = new Set(out.objects.map((o) => o.kind));
    for (const k of ['ConfigMap', 'Service', 'ServiceAccount', 'Role', 'RoleBinding']) t.ok(kinds.has(k), `renders a ${k}`);
    t.equal(out.all('DaemonSet').length + out.all('Deployment').length, 1, 'one workload');
    for (const o of out.objects) {
      t.equal(validateObject(o), null, `${o.kind} ${o.metadata.name}`);
      t.equal(
        o.metadata.namespace ?? null,
        o.kind === 'ConfigMap' && o.metadata.name.endsWith('-dashboard') ? o.metadata.namespace : 'ipgate-system',
        `${o.kind} ${o.metadata.name} is namespaced to the release`,
      );
    }
    const names = out.objects.map((o) => `${o.kind}/${o.metadata.name}`);
    t.equal(new Set(names).size, names.length, 'no two objects share kind and name');
  });

  t.test(`${name}: the rendered config.yaml passes ipgate's config validation`, async (t) => {
    const out = render(values);
    const text = out.one('ConfigMap', '-config').data['config.yaml'] as string;
    const config = parseConfig(text, 'config.yaml');
    t.equal(config.store.type, 'kubernetes');
    t.equal(config.store.namespace, null, 'the pod namespace, from POD_NAMESPACE');
    t.equal(config.store.configMap, out.one('ConfigMap', '-allowlists').metadata.name, "the store is the chart's allowlist ConfigMap");
    t.equal(config.admin.listen, '0.0.0.0:9901');
    t.equal(config.admin.tokenEnv, 'IPGATE_ADMIN_TOKEN');
    const listeners = (values.listeners as { name: string; port: number }[] | undefined) ?? [{ name: 'http', port: 8080 }];
    t.same(
      config.listeners.map((l) => [l.name, l.listen]),
      listeners.map((l) => [l.name, `0.0.0.0:${l.port}`]),
    );
  });
}

t.test('the config ConfigMap carries listener options through unchanged', async (t) => {
  const out = render(VARIANTS['two listeners, fixed nodePorts']);
  const config = parseConfig(out.one('ConfigMap', '-config').data['config.yaml'] as string);
  const [web, tls] = config.listeners;
  t.equal(web!.mode, 'http');
  t.same(web!.upstreams, ['web.apps:8080', 'web-b.apps:8080']);
  t.same(web!.http.trustedProxies, ['192.0.2.0/24']);
  t.equal(web!.http.forwarded, true);
  t.equal(tls!.outboundProxyProtocol, 'v2');
  t.equal(tls!.proxyProtocol.mode, 'optional');
  t.same(tls!.proxyProtocol.trustedSources, ['10.0.0.0/8']);
  t.equal(tls!.proxyProtocol.headerTimeoutMs, 3000);
  t.equal(tls!.timeouts.idleMs, 300000);
  // values maps merge over values.yaml: the chart's empty `default` list stays alongside.
  t.same(Object.keys(config.allowlists).sort(), ['default', 'office', 'partners']);
  t.equal(config.allowlists.partners!.entries[0]!.comment, 'partner A');
});

t.test('admin.separateProcess reaches the config: false by default, true when set', async (t) => {
  const config = (values: Record<string, unknown>) => parseConfig(render(values).one('ConfigMap', '-config').data['config.yaml'] as string);
  t.equal(config({}).admin.separateProcess, false, 'one process by default');
  t.equal(config({ admin: { separateProcess: true } }).admin.separateProcess, true);
});

t.test('a config change rolls the pods (checksum annotation)', async (t) => {
  const a = render({}).one('DaemonSet').spec.template.metadata.annotations['checksum/config'];
  const b = render({ config: { logging: { level: 'debug' } } }).one('DaemonSet').spec.template.metadata.annotations['checksum/config'];
  t.match(a, /^[0-9a-f]{64}$/);
  t.not(a, b);
});
