/**
 * Declarative (`source: config`) allowlists in the chart: their entries are rendered into their own
 * ConfigMap, which config.yaml names key by key (allowlists.<name>.configMap) and ipgate reads and
 * watches through the API server (the Role grants get/list/watch on that name only; nothing is
 * mounted); a change of the entries changes that ConfigMap only, not the pod template (no checksum
 * change, no roll); the values schema and the chart's checks refuse what ipgate would.
 */
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import t from 'tap';
import { ConfigMapLists } from '../../src/config/configmap-lists';
import { loadConfigFile } from '../../src/config/load';
import { FakeKubeApi } from '../helpers/fake-kube-api';
import { tmpDir } from '../helpers/ipgate';
import { NAMESPACE, render, renderError } from '../helpers/helm';

const listener = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name: 'http',
  port: 8080,
  allowlist: 'partners',
  upstreams: ['backend:8080'],
  ...extra,
});

const values = (partners: unknown[]): Record<string, unknown> => ({
  allowlists: {
    partners: { source: 'config', allowTemporary: true, entries: partners },
    balancers: { source: 'config', entries: ['10.0.0.0/8'] },
    office: ['192.0.2.0/24'],
  },
  listeners: [listener({ proxyProtocol: { mode: 'required', trustedSources: 'balancers' } })],
});

const PARTNERS = ['203.0.113.0/24', { cidr: '203.0.113.66/32', action: 'deny', comment: 'compromised' }];

t.test('source: config lists render into their own ConfigMap, named in config.yaml, readable through the Role', async (t) => {
  const out = render(values(PARTNERS));
  const lists = out.one('ConfigMap', '-lists');
  t.same(Object.keys(lists.data).sort(), ['balancers.yaml', 'partners.yaml'], 'one key per declarative list, store lists left out');
  const text = out.one('ConfigMap', '-config').data['config.yaml'] as string;
  t.notOk(text.includes('203.0.113'), 'the entries are not in config.yaml');
  const vol = out.podSpec().volumes.find((v: { name: string }) => v.name === 'config');
  t.same(
    vol.configMap.items,
    [{ key: 'config.yaml', path: 'config.yaml' }],
    'only config.yaml is mounted: the lists are read through the API',
  );
  t.same(
    out.one('Role').rules[1],
    { apiGroups: [''], resources: ['configmaps'], resourceNames: [lists.metadata.name], verbs: ['get', 'list', 'watch'] },
    'the Role reads the lists ConfigMap by name, and cannot write it',
  );

  // What the pod does: ipgate loads config.yaml, then reads the keys through the API with the
  // Role's names only (the fake API enforces resourceNames as RBAC does).
  const names = (out.one('Role').rules as { resourceNames: string[] }[]).flatMap((r) => r.resourceNames);
  const fake = await new FakeKubeApi({ allowedNames: names }).start();
  t.teardown(() => fake.close());
  fake.create(NAMESPACE, lists.metadata.name, lists.data as Record<string, string>);
  const dir = tmpDir('ipgate-helm-lists-');
  fs.writeFileSync(path.join(dir, 'config.yaml'), text);
  const cms = new ConfigMapLists({
    logger: pino({ level: 'silent' }),
    env: { KUBECONFIG: fake.writeKubeconfig(dir), POD_NAMESPACE: NAMESPACE },
  });
  t.teardown(() => cms.close());
  const config = await cms.fill(loadConfigFile(path.join(dir, 'config.yaml')));
  t.match(config.allowlists.partners, {
    source: 'config',
    allowTemporary: true,
    file: null,
    configMap: { name: lists.metadata.name, key: 'partners.yaml', namespace: NAMESPACE },
    entries: [{ cidr: '203.0.113.0/24' }, { cidr: '203.0.113.66/32', action: 'deny', comment: 'compromised' }],
  });
  t.match(config.allowlists.balancers, { entries: [{ cidr: '10.0.0.0/8' }] });
  t.match(
    config.allowlists.office,
    { source: 'store', configMap: null, entries: [{ cidr: '192.0.2.0/24' }] },
    'the array form stays a store seed',
  );
  t.equal(config.listeners[0]!.proxyProtocol.trustedSources, 'balancers', 'trustedSources may name a list');
});

t.test('without declarative lists the Role grants nothing on a lists ConfigMap', async (t) => {
  t.equal(render({}).one('Role').rules.length, 1);
});

t.test('a store ConfigMap named like the lists ConfigMap is refused', async (t) => {
  t.match(
    renderError({ ...values(PARTNERS), store: { configMapName: 'edge-ipgate-lists' } }),
    /store\.configMapName: "edge-ipgate-lists" is the declarative lists' ConfigMap/,
  );
});

t.test("changing a declarative list's entries does not change the pod template (no roll)", async (t) => {
  const a = render(values(PARTNERS));
  const b = render(values([...PARTNERS, '198.51.100.0/24']));
  t.not(
    a.one('ConfigMap', '-lists').data['partners.yaml'],
    b.one('ConfigMap', '-lists').data['partners.yaml'],
    'the lists ConfigMap changes',
  );
  const template = (r: typeof a): unknown => [...r.all('DaemonSet'), ...r.all('Deployment')][0]!.spec.template;
  t.equal(JSON.stringify(template(a)), JSON.stringify(template(b)), 'the pod template is the same, checksum/config included');
  const c = render({ ...values(PARTNERS), allowlists: { ...(values(PARTNERS).allowlists as object), office: ['192.0.2.0/25'] } });
  t.not(
    (template(c) as { metadata: { annotations: Record<string, string> } }).metadata.annotations['checksum/config'],
    (template(a) as { metadata: { annotations: Record<string, string> } }).metadata.annotations['checksum/config'],
    'a seed in config.yaml still does',
  );
});

t.test('without declarative lists: no lists ConfigMap', async (t) => {
  const out = render({});
  t.equal(out.all('ConfigMap').filter((o) => o.metadata.name.endsWith('-lists')).length, 0);
  t.notOk((out.one('ConfigMap', '-config').data['config.yaml'] as string).includes('-lists'), 'config.yaml names none');
});

t.test('values refused: unknown source, bad entry, trustedSources naming no list', async (t) => {
  t.match(renderError({ allowlists: { partners: { source: 'git', entries: [] } }, listeners: [listener()] }), /source/);
  t.match(
    renderError({
      allowlists: { partners: { source: 'config', entries: [{ cidr: '10.0.0.0/8', action: 'block' }] } },
      listeners: [listener()],
    }),
    /action/,
  );
  t.match(
    renderError({ allowlists: { partners: { source: 'config', entries: ['10.0.0.1/8'] } }, listeners: [listener()] }),
    /allowlists\.partners\.entries\[0\]/,
  );
  t.match(
    renderError({ allowlists: { partners: [] }, listeners: [listener({ proxyProtocol: { mode: 'required', trustedSources: 'nope' } })] }),
    /listeners\[0\]\.proxyProtocol\.trustedSources: "nope" names no allowlist/,
  );
});
