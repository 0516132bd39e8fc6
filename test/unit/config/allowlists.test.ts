/**
 * `allowlists.NAME` in the config: the array form (a store seed) and the object form
 * `{source, entries | file, allowTemporary}`, deny entries, and lists named by trustedSources /
 * trustedProxies. Every refusal names the field and quotes the value.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { problemsOf } from '../../helpers/config-problems';
import { buildConfig, loadConfigFile } from '../../../src/config/load';
import { tmpDir } from '../../helpers/ipgate';

const listener = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name: 'a',
  listen: '127.0.0.1:7000',
  allowlist: 'main',
  upstreams: ['127.0.0.1:7100'],
  ...extra,
});

t.test('both forms load into one shape, with the defaults', async (t) => {
  const c = buildConfig({
    allowlists: {
      main: ['10.0.0.0/8', { cidr: '10.6.6.0/24', action: 'deny' }, { cidr: '10.7.0.0/16', action: 'allow' }],
      partners: { source: 'config', entries: ['192.0.2.0/24'] },
      seeded: { source: 'store' },
    },
    listeners: [listener({ proxyProtocol: { mode: 'required', trustedSources: 'partners' } })],
  });
  t.same(
    c.allowlists.main,
    {
      source: 'store',
      file: null,
      configMap: null,
      allowTemporary: false,
      entries: [{ cidr: '10.0.0.0/8' }, { cidr: '10.6.6.0/24', action: 'deny' }, { cidr: '10.7.0.0/16' }],
    },
    'action allow is left out, deny kept',
  );
  t.same(c.allowlists.partners, {
    source: 'config',
    entries: [{ cidr: '192.0.2.0/24' }],
    file: null,
    configMap: null,
    allowTemporary: false,
  });
  t.same(c.allowlists.seeded, { source: 'store', entries: [], file: null, configMap: null, allowTemporary: false });
  t.equal(c.listeners[0]!.proxyProtocol.trustedSources, 'partners');
});

t.test('a ConfigMap list: the reference kept, the entries left for the API (config/configmap-lists.ts)', async (t) => {
  const dir = tmpDir('ipgate-config-cm-');
  fs.writeFileSync(
    path.join(dir, 'config.yaml'),
    'allowlists:\n  main: {source: config, configMap: {name: edge-lists, key: main.yaml}}\nlisteners:\n  - {name: a, listen: "127.0.0.1:7000", allowlist: main, upstreams: ["127.0.0.1:7100"]}\n',
  );
  const c = loadConfigFile(path.join(dir, 'config.yaml'));
  t.same(c.allowlists.main, {
    source: 'config',
    entries: [],
    file: null,
    configMap: { name: 'edge-lists', key: 'main.yaml', namespace: null },
    allowTemporary: false,
  });
});

t.test('a list file, relative to the config file', async (t) => {
  const dir = tmpDir('ipgate-config-file-');
  fs.mkdirSync(path.join(dir, 'lists'));
  fs.writeFileSync(path.join(dir, 'lists', 'p.yaml'), '- 192.0.2.0/24\n- {cidr: 192.0.2.66/32, action: deny}\n');
  fs.writeFileSync(
    path.join(dir, 'config.yaml'),
    'allowlists:\n  main: {source: config, file: lists/p.yaml}\nlisteners:\n  - {name: a, listen: "127.0.0.1:7000", allowlist: main, upstreams: ["127.0.0.1:7100"]}\n',
  );
  const c = loadConfigFile(path.join(dir, 'config.yaml'));
  t.same(c.allowlists.main, {
    source: 'config',
    file: path.join(dir, 'lists', 'p.yaml'),
    configMap: null,
    allowTemporary: false,
    entries: [{ cidr: '192.0.2.0/24' }, { cidr: '192.0.2.66/32', action: 'deny' }],
  });
  fs.writeFileSync(path.join(dir, 'lists', 'p.yaml'), '{not: a list}\n');
  t.throws(
    () => loadConfigFile(path.join(dir, 'config.yaml')),
    /allowlists\.main\.file: "lists\/p\.yaml": .*must hold an array of entries/,
  );
  fs.rmSync(path.join(dir, 'lists', 'p.yaml'));
  t.throws(() => loadConfigFile(path.join(dir, 'config.yaml')), /allowlists\.main\.file: "lists\/p\.yaml": cannot read .*ENOENT/);
});

t.test('refusals name the field and quote the value', async (t) => {
  const rows: Array<[desc: string, allowlists: Record<string, unknown>, extra: Record<string, unknown>, expected: RegExp]> = [
    [
      'same CIDR twice (two actions)',
      { main: ['10.0.0.0/8', { cidr: '10.0.0.0/8', action: 'deny' }] },
      {},
      /allowlists\.main\[1\]\.cidr: "10\.0\.0\.0\/8": is listed twice \(also allowlists\.main\[0\]\)/,
    ],
    ['an unknown action', { main: [{ cidr: '10.0.0.0/8', action: 'block' }] }, {}, /allowlists\.main/],
    ['source missing in the object form', { main: { entries: [] } }, {}, /source/],
    ['an unknown source', { main: { source: 'git' } }, {}, /source/],
    [
      'file on a store list',
      { main: { source: 'store', file: 'x.yaml' } },
      {},
      /allowlists\.main\.file: "x\.yaml": is for source: config lists/,
    ],
    [
      'allowTemporary on a store list',
      { main: { source: 'store', allowTemporary: true } },
      {},
      /allowlists\.main\.allowTemporary: true: is for source: config lists/,
    ],
    [
      'configMap on a store list',
      { main: { source: 'store', configMap: { name: 'lists', key: 'main.yaml' } } },
      {},
      /allowlists\.main\.configMap: .*is for source: config lists/,
    ],
    [
      'configMap and entries',
      { main: { source: 'config', entries: [], configMap: { name: 'lists', key: 'main.yaml' } } },
      {},
      /allowlists\.main\.entries: 0: and allowlists\.main\.configMap both given/,
    ],
    [
      'configMap and file',
      { main: { source: 'config', file: 'x.yaml', configMap: { name: 'lists', key: 'main.yaml' } } },
      {},
      /allowlists\.main\.file: "x\.yaml": and allowlists\.main\.configMap both given/,
    ],
    [
      'configMap without a key',
      { main: { source: 'config', configMap: { name: 'lists' } } },
      {},
      /allowlists\.main\.configMap\.key: \(missing\): required/,
    ],
    [
      'configMap name not a Kubernetes name',
      { main: { source: 'config', configMap: { name: 'My_Lists', key: 'main.yaml' } } },
      {},
      /allowlists\.main\.configMap\.name: "My_Lists"/,
    ],
    [
      'configMap key with a slash',
      { main: { source: 'config', configMap: { name: 'lists', key: 'a/b' } } },
      {},
      /allowlists\.main\.configMap\.key: "a\/b"/,
    ],
    [
      'configMap with an unknown field',
      { main: { source: 'config', configMap: { name: 'lists', key: 'k', ns: 'x' } } },
      {},
      /allowlists\.main\.configMap\.ns: .*unknown key/,
    ],
    [
      'a bad CIDR in the object form',
      { main: { source: 'config', entries: ['10.0.0.1/33'] } },
      {},
      /allowlists\.main\.entries\[0\]: "10\.0\.0\.1\/33"/,
    ],
    [
      'trustedSources naming no list',
      { main: [] },
      { proxyProtocol: { mode: 'required', trustedSources: 'lbs' } },
      /listeners\[0\]\.proxyProtocol\.trustedSources: "lbs": names no allowlist \(defined: main/,
    ],
    [
      'trustedProxies naming no list',
      { main: [] },
      { mode: 'http', http: { trustedProxies: 'proxies' } },
      /listeners\[0\]\.http\.trustedProxies: "proxies": names no allowlist/,
    ],
  ];
  for (const [desc, allowlists, extra, expected] of rows) {
    const problems = problemsOf({ allowlists, listeners: [listener(extra)] });
    t.ok(
      problems.some((p) => expected.test(p)),
      `${desc}: ${JSON.stringify(problems)}`,
    );
  }
});
