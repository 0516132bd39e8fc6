/**
 * What an operator of a node-local edge sets beyond the listeners (issue 32 item 11, compared with
 * the ingress-nginx and Traefik charts; docs/kubernetes.md "Options" says what was left out and
 * why): annotations and labels per object, the workload's history, DNS options, extra containers
 * and environment sources, ServiceMonitor relabelings, and extra objects rendered with the release.
 * Every rendered object still passes its Kubernetes schema.
 */
import t from 'tap';
import YAML from 'yaml';
import { render, renderError, templateText, validateObject } from '../helpers/helm';

t.test('annotations and labels on the workload itself, apart from its pods, for both kinds', async (t) => {
  for (const kind of ['DaemonSet', 'Deployment'] as const) {
    const out = render({
      kind,
      workloadAnnotations: { 'secret.reloader.stakater.com/reload': 'edge-ipgate-admin-token', 'argocd.argoproj.io/sync-wave': '2' },
      workloadLabels: { team: 'edge' },
      podAnnotations: { 'example.com/pod': 'yes-pod' },
      podLabels: { tier: 'edge-pod' },
    });
    const w = out.one(kind);
    t.same(
      w.metadata.annotations,
      { 'secret.reloader.stakater.com/reload': 'edge-ipgate-admin-token', 'argocd.argoproj.io/sync-wave': '2' },
      `${kind}: the workload's annotations`,
    );
    t.equal(w.metadata.labels!.team, 'edge', `${kind}: the workload's label`);
    t.equal(w.metadata.labels!['app.kubernetes.io/component'], 'controller', `${kind}: the chart's labels stay`);
    t.equal(w.spec.template.metadata.labels.team, undefined, `${kind}: workload labels are not pod labels`);
    t.equal(w.spec.template.metadata.labels.tier, 'edge-pod', `${kind}: pod labels on the pods`);
    t.equal(w.spec.template.metadata.annotations['example.com/pod'], 'yes-pod');
    t.equal(w.spec.template.metadata.annotations['secret.reloader.stakater.com/reload'], undefined);
    t.same(
      Object.keys(w.spec.selector.matchLabels).sort(),
      ['app.kubernetes.io/component', 'app.kubernetes.io/instance', 'app.kubernetes.io/name'],
      `${kind}: the selector is unchanged (a selector cannot change on upgrade)`,
    );
    t.equal(validateObject(w), null, `${kind} passes its schema`);
  }
  t.equal(render({}).one('DaemonSet').metadata.annotations, undefined, 'none by default');
});

t.test('labels on the ServiceAccount and the admin Service; annotations were already theirs', async (t) => {
  const out = render({
    serviceAccount: { labels: { team: 'edge' }, annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/x' } },
    admin: { service: { labels: { scrape: 'admin' } } },
  });
  t.equal(out.one('ServiceAccount').metadata.labels!.team, 'edge');
  t.equal(out.one('ServiceAccount').metadata.annotations!['eks.amazonaws.com/role-arn'], 'arn:aws:iam::1:role/x');
  const admin = out.one('Service', '-admin');
  t.equal(admin.metadata.labels!.scrape, 'admin');
  t.equal(admin.metadata.labels!['app.kubernetes.io/component'], 'admin', 'the ServiceMonitor still selects it');
});

t.test("revisionHistoryLimit: Kubernetes' default unless set, on either kind", async (t) => {
  t.equal(render({}).one('DaemonSet').spec.revisionHistoryLimit, undefined);
  t.equal(render({ revisionHistoryLimit: 3 }).one('DaemonSet').spec.revisionHistoryLimit, 3);
  t.equal(
    render({ kind: 'Deployment', revisionHistoryLimit: 0 }).one('Deployment').spec.revisionHistoryLimit,
    0,
    '0 is a value, not "unset"',
  );
  t.match(renderError({ revisionHistoryLimit: -1 }), /at '\/revisionHistoryLimit'/);
});

t.test("dnsConfig, extraEnvFrom and extraContainers reach the pod after the chart's own", async (t) => {
  const out = render({
    dnsConfig: { options: [{ name: 'ndots', value: '2' }] },
    extraEnvFrom: [{ secretRef: { name: 'ipgate-extra-env' } }],
    extraContainers: [{ name: 'log-shipper', image: 'registry.example/vector:0.40', args: ['--config', '/etc/vector/vector.yaml'] }],
    hostNetwork: true,
  });
  const spec = out.podSpec();
  t.same(spec.dnsConfig, { options: [{ name: 'ndots', value: '2' }] });
  t.equal(spec.dnsPolicy, 'ClusterFirstWithHostNet', "hostNetwork's DNS policy stays");
  t.same(
    spec.containers.map((c: { name: string }) => c.name),
    ['ipgate', 'log-shipper'],
    'ipgate first, then the extra container',
  );
  t.same(spec.containers[0].envFrom, [{ secretRef: { name: 'ipgate-extra-env' } }]);
  t.equal(validateObject(out.one('DaemonSet')), null);
  t.match(
    renderError({ extraContainers: [{ name: 'ipgate', image: 'x' }] }),
    /at '\/extraContainers\/0\/name'/,
    "the chart's own container name is taken",
  );
  t.match(renderError({ extraContainers: [{ name: 'sidecar' }] }), /at '\/extraContainers\/0': missing property 'image'/);
  t.match(renderError({ dnsConfig: { ndots: 2 } }), /at '\/dnsConfig': additional properties 'ndots' not allowed/);
});

t.test("ServiceMonitor: annotations, honorLabels, relabelings after the chart's node label, metricRelabelings", async (t) => {
  const out = render({
    serviceMonitor: {
      enabled: true,
      annotations: { 'example.com/owner': 'edge' },
      honorLabels: true,
      relabelings: [{ targetLabel: 'cluster', replacement: 'eu-1', action: 'replace' }],
      metricRelabelings: [{ sourceLabels: ['__name__'], regex: 'ipgate_tls_handshake_duration_seconds_bucket', action: 'drop' }],
    },
  });
  const sm = out.one('ServiceMonitor');
  t.same(sm.metadata.annotations, { 'example.com/owner': 'edge' });
  const ep = sm.spec.endpoints[0];
  t.equal(ep.honorLabels, true);
  t.same(
    ep.relabelings,
    [
      { sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node' },
      { targetLabel: 'cluster', replacement: 'eu-1', action: 'replace' },
    ],
    "the chart's node label first, the operator's after",
  );
  t.same(ep.metricRelabelings, [{ sourceLabels: ['__name__'], regex: 'ipgate_tls_handshake_duration_seconds_bucket', action: 'drop' }]);
  t.equal(validateObject(sm), null, 'passes the Prometheus Operator schema');
  const plain = render({ serviceMonitor: { enabled: true } }).one('ServiceMonitor').spec.endpoints[0];
  t.equal(plain.honorLabels, undefined);
  t.equal(plain.metricRelabelings, undefined);
  t.match(
    renderError({ serviceMonitor: { enabled: true, relabelings: [{ action: 'dorp' }] } }),
    /at '\/serviceMonitor\/relabelings\/0\/action'/,
  );
});

t.test("extraObjects: maps as they are, strings through tpl with the release's values", async (t) => {
  const values = {
    extraObjects: [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'edge-extra' }, data: { a: 'b' } },
      'apiVersion: external-secrets.io/v1beta1\nkind: ExternalSecret\nmetadata:\n  name: {{ include "ipgate.suffixed" (list . "admin-token") }}\n  namespace: {{ .Release.Namespace }}\nspec:\n  target: {name: {{ .Values.admin.existingSecret }}}\n',
    ],
  };
  const docs = YAML.parseAllDocuments(templateText(values))
    .map((d) => d.toJS() as Record<string, any> | null)
    .filter((o) => o !== null);
  const cm = docs.find((o) => o!.kind === 'ConfigMap' && o!.metadata.name === 'edge-extra');
  t.same(cm?.data, { a: 'b' }, 'the map, rendered');
  const es = docs.find((o) => o!.kind === 'ExternalSecret');
  t.same(es?.metadata, { name: 'edge-ipgate-admin-token', namespace: 'ipgate-system' }, 'the string, through tpl: helpers and the release');
  t.same(es?.spec, { target: { name: 'edge-ipgate-admin-token' } }, 'and the values');
  t.equal(render({}).objects.length, render({ extraObjects: [] }).objects.length, 'none by default');
  t.match(renderError({ extraObjects: [{ kind: 'ConfigMap' }] }), /at '\/extraObjects\/0'/, 'a map needs apiVersion, kind and metadata');
});
