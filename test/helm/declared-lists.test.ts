/**
 * Declarative (`source: config`) allowlists in the chart: their entries are rendered into their own
 * ConfigMap and mounted beside config.yaml (lists/<name>.yaml), which ipgate's own loader reads; a
 * change of the entries changes that ConfigMap only, not the pod template (no checksum change, no
 * roll); the values schema and the chart's checks refuse what ipgate would.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadConfigFile } from '../../src/config/load';
import { tmpDir } from '../helpers/ipgate';
import { render, renderError } from '../helpers/helm';

const listener = (extra: Record<string, unknown> = {}): Record<string, unknown> =>
  ({ name: 'http', port: 8080, allowlist: 'partners', upstreams: ['backend:8080'], ...extra });

const values = (partners: unknown[]): Record<string, unknown> => ({
  allowlists: {
    partners: { source: 'config', allowTemporary: true, entries: partners },
    balancers: { source: 'config', entries: ['10.0.0.0/8'] },
    office: ['192.0.2.0/24'],
  },
  listeners: [listener({ proxyProtocol: { mode: 'required', trustedSources: 'balancers' } })],
});

const PARTNERS = ['203.0.113.0/24', { cidr: '203.0.113.66/32', action: 'deny', comment: 'compromised' }];

t.test('source: config lists render into their own ConfigMap, mounted beside config.yaml, and ipgate loads them', async (t) => {
  const out = render(values(PARTNERS));
  const lists = out.one('ConfigMap', '-lists');
  t.same(Object.keys(lists.data).sort(), ['balancers.yaml', 'partners.yaml'], 'one key per declarative list, store lists left out');
  const text = out.one('ConfigMap', '-config').data['config.yaml'] as string;
  t.notOk(text.includes('203.0.113'), 'the entries are not in config.yaml');
  const vol = out.podSpec().volumes.find((v: { name: string }) => v.name === 'config');
  t.same(vol.projected.sources.map((s: { configMap: { name: string } }) => s.configMap.name), [out.one('ConfigMap', '-config').metadata.name, lists.metadata.name]);
  t.same(vol.projected.sources[1].configMap.items, [{ key: 'balancers.yaml', path: 'lists/balancers.yaml' }, { key: 'partners.yaml', path: 'lists/partners.yaml' }]);

  // What the pod sees at /etc/ipgate, loaded by ipgate itself.
  const dir = tmpDir('ipgate-helm-lists-');
  fs.mkdirSync(path.join(dir, 'lists'));
  fs.writeFileSync(path.join(dir, 'config.yaml'), text);
  for (const [k, v] of Object.entries(lists.data as Record<string, string>)) fs.writeFileSync(path.join(dir, 'lists', k), v);
  const config = loadConfigFile(path.join(dir, 'config.yaml'));
  t.match(config.allowlists.partners, { source: 'config', allowTemporary: true, file: path.join(dir, 'lists/partners.yaml'),
    entries: [{ cidr: '203.0.113.0/24' }, { cidr: '203.0.113.66/32', action: 'deny', comment: 'compromised' }] });
  t.match(config.allowlists.office, { source: 'store', entries: [{ cidr: '192.0.2.0/24' }] }, 'the array form stays a store seed');
  t.equal(config.listeners[0]!.proxyProtocol.trustedSources, 'balancers', 'trustedSources may name a list');
});

t.test('changing a declarative list\'s entries does not change the pod template (no roll)', async (t) => {
  const a = render(values(PARTNERS));
  const b = render(values([...PARTNERS, '198.51.100.0/24']));
  t.not(a.one('ConfigMap', '-lists').data['partners.yaml'], b.one('ConfigMap', '-lists').data['partners.yaml'], 'the lists ConfigMap changes');
  const template = (r: typeof a): unknown => [...r.all('DaemonSet'), ...r.all('Deployment')][0]!.spec.template;
  t.equal(JSON.stringify(template(a)), JSON.stringify(template(b)), 'the pod template is the same, checksum/config included');
  const c = render({ ...values(PARTNERS), allowlists: { ...(values(PARTNERS).allowlists as object), office: ['192.0.2.0/25'] } });
  t.not((template(c) as { metadata: { annotations: Record<string, string> } }).metadata.annotations['checksum/config'],
    (template(a) as { metadata: { annotations: Record<string, string> } }).metadata.annotations['checksum/config'], 'a seed in config.yaml still does');
});

t.test('without declarative lists: no lists ConfigMap, the plain config volume', async (t) => {
  const out = render({});
  t.equal(out.all('ConfigMap').filter((o) => o.metadata.name.endsWith('-lists')).length, 0);
  t.ok(out.podSpec().volumes.find((v: { name: string }) => v.name === 'config').configMap, 'configMap volume');
});

t.test('values refused: unknown source, bad entry, trustedSources naming no list', async (t) => {
  t.match(renderError({ allowlists: { partners: { source: 'git', entries: [] } }, listeners: [listener()] }), /source/);
  t.match(renderError({ allowlists: { partners: { source: 'config', entries: [{ cidr: '10.0.0.0/8', action: 'block' }] } }, listeners: [listener()] }), /action/);
  t.match(renderError({ allowlists: { partners: { source: 'config', entries: ['10.0.0.1/8'] } }, listeners: [listener()] }), /allowlists\.partners\.entries\[0\]/);
  t.match(renderError({ allowlists: { partners: [] }, listeners: [listener({ proxyProtocol: { mode: 'required', trustedSources: 'nope' } })] }),
    /listeners\[0\]\.proxyProtocol\.trustedSources: "nope" names no allowlist/);
});
