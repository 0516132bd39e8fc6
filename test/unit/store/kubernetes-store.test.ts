/**
 * The ConfigMap store against a loopback API server (test/helpers/fake-kube-api.ts): seeding,
 * resourceVersion conflicts, the watch surviving drops, 410 Gone and an API outage, and refused
 * documents leaving the last good lists in force.
 */
import pino from 'pino';
import t, { type Test } from 'tap';
import type { AllowEntry } from '../../../src/allowlist/entry';
import { parseDocument, serializeDocument, seedList } from '../../../src/store/document';
import { DATA_KEY, KubernetesStore, type KubernetesStoreOptions } from '../../../src/store/kubernetes-store';
import { StoreConflictError, StoreLoadError, type ExternalChange } from '../../../src/store/store';
import { FakeKubeApi } from '../../helpers/fake-kube-api';
import { LogCapture, tmpDir } from '../../helpers/ipgate';
import { waitFor } from '../../helpers/net';

const NS = 'edge';
const CM = 'ipgate-allowlists';
const seed = new Map<string, readonly AllowEntry[]>([
  ['main', [{ cidr: '10.0.0.0/8' }]],
  ['other', []],
]);
const doc = (lists: Record<string, { revision: number; entries: AllowEntry[] }>) =>
  JSON.stringify({ format: 'ipgate.allowlists/v1', lists }, null, 2);

async function api(t: Test, opts: ConstructorParameters<typeof FakeKubeApi>[0] = {}): Promise<FakeKubeApi> {
  const fake = await new FakeKubeApi({ bookmarkIntervalMs: 200, ...opts }).start();
  t.teardown(() => fake.close());
  return fake;
}

function store(t: Test, fake: FakeKubeApi, opts: Partial<KubernetesStoreOptions> = {}) {
  const logs = new LogCapture();
  const kubeconfig = fake.writeKubeconfig(tmpDir('ipgate-kube-'));
  const s = new KubernetesStore({
    namespace: NS,
    configMap: CM,
    logger: pino({ level: 'debug' }, logs),
    env: { KUBECONFIG: kubeconfig, HOME: '/nonexistent' },
    backoff: { initialMs: 20, maxMs: 200 },
    requestTimeoutMs: 2000,
    loadTimeoutMs: 2000,
    ...opts,
  });
  const changes: ExternalChange[] = [];
  s.subscribe((c) => changes.push(c));
  t.teardown(() => s.close());
  return { s, logs, changes };
}

const cidrs = (s: KubernetesStore, name = 'main') =>
  s
    .current()
    .lists.get(name)
    ?.entries.map((e) => e.cidr);
const stored = (fake: FakeKubeApi) => {
  const text = fake.get(NS, CM)?.data?.[DATA_KEY];
  const p = text === undefined ? null : parseDocument(text);
  return p?.ok ? p.lists : null;
};

t.test('an empty ConfigMap is filled from the config once, even with two replicas racing', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  const a = store(t, fake);
  const b = store(t, fake);
  const [sa, sb] = await Promise.all([a.s.load(seed), b.s.load(seed)]);
  const puts = fake.requests.filter((r) => r.method === 'PUT');
  t.equal(puts.filter((r) => r.status === 200).length, 1, 'one PUT wins');
  t.ok(puts.filter((r) => r.status === 409).length <= 1, 'the other, if it raced, got 409 and re-read');
  t.same([...sa.lists.values()], [...sb.lists.values()], 'both hold the same lists and versions');
  t.same(stored(fake)?.get('main')?.entries, [{ cidr: '10.0.0.0/8' }]);
  t.equal(
    fake.get(NS, CM)!.data![DATA_KEY],
    serializeDocument(sa, true),
    'the document format of every backend, in its compact form (bare CIDR strings, no indentation)',
  );
  t.equal(a.s.status().resourceVersion, fake.resourceVersion, 'the applied resourceVersion is reported');
  t.same(fake.get(NS, CM)!.metadata.labels, { 'app.kubernetes.io/name': 'ipgate' }, "the chart's metadata is kept");
  for (const r of fake.requests) {
    t.equal(r.authorization, `Bearer ${fake.token}`, `${r.method} ${r.path} carries the token`);
    if (r.path.endsWith('/configmaps'))
      t.equal(r.query.get('fieldSelector'), `metadata.name=${CM}`, 'list/watch by name (RBAC resourceNames)');
  }
});

t.test('a document holding every list is adopted as is; a list new in the config is added', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM, { [DATA_KEY]: doc({ main: { revision: 4, entries: [{ cidr: '192.0.2.0/24' }] } }) });
  const { s } = store(t, fake);
  const snap = await s.load(seed);
  t.same(cidrs(s), ['192.0.2.0/24'], 'the ConfigMap wins over the config');
  t.same(snap.lists.get('other')?.entries, [], 'the missing list was seeded');
  t.ok(stored(fake)?.has('other'), 'and written');
});

t.test('load refuses a missing ConfigMap, an invalid document and a forbidden name, with the fix', async (t) => {
  const rows: Array<{ desc: string; prep: (f: FakeKubeApi) => void; name?: string; message: RegExp }> = [
    { desc: 'missing', prep: () => undefined, message: /not found: create it \(empty\) or install the chart/ },
    {
      desc: 'invalid entry',
      prep: (f) => f.create(NS, CM, { [DATA_KEY]: doc({ main: { revision: 1, entries: [{ cidr: '10.0.0.1/8' }] } }) }),
      message: /refused: lists\.main\.entries\[0\]\.cidr.*ipgate never overwrites it/,
    },
    { desc: 'not JSON', prep: (f) => f.create(NS, CM, { [DATA_KEY]: '{"format": ' }), message: /refused: not valid JSON/ },
    {
      desc: 'RBAC: another name',
      prep: (f) => f.create(NS, 'other-cm'),
      name: 'other-cm',
      message: /forbidden.*resourceNames \[other-cm\]/,
    },
  ];
  for (const row of rows) {
    const fake = await api(t);
    row.prep(fake);
    const before = fake.get(NS, row.name ?? CM);
    const { s } = store(t, fake, { configMap: row.name ?? CM });
    await t.rejects(s.load(seed), { constructor: StoreLoadError, message: row.message }, row.desc);
    t.same(fake.get(NS, row.name ?? CM), before, `${row.desc}: the ConfigMap is untouched`);
  }
});

t.test('boot waits out a short API failure (5xx) instead of giving up', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  fake.failNext(3, 503);
  const { s } = store(t, fake);
  await s.load(seed);
  t.same(cidrs(s), ['10.0.0.0/8']);
});

t.test('a write on a stale version is refused and the other change is kept', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  const a = store(t, fake);
  const b = store(t, fake);
  await a.s.load(seed);
  await b.s.load(seed);
  const v1 = b.s.current().lists.get('main')!.version;
  fake.pauseWatches(); // b does not hear of a's write before its own: its PUT carries a stale resourceVersion
  await a.s.write('main', [{ cidr: '192.0.2.0/24' }], v1);
  const err = await b.s.write('main', [{ cidr: '198.51.100.0/24' }], v1).catch((e: unknown) => e);
  t.type(err, StoreConflictError, 'StoreConflictError (the API answers 412)');
  t.ok(
    fake.requests.some((r) => r.method === 'PUT' && r.status === 409),
    'after a 409 and a re-read',
  );
  t.same(stored(fake)!.get('main')!.entries, [{ cidr: '192.0.2.0/24' }], "a's change is not lost");
  t.same(cidrs(b.s), ['192.0.2.0/24'], 'b adopted what it re-read');
  t.equal(b.changes.at(-1)?.source, 'configmap update', 'and told its subscribers');
  const v2 = b.s.current().lists.get('main')!.version;
  await b.s.write('main', [{ cidr: '198.51.100.0/24' }], v2);
  t.same(stored(fake)!.get('main')!.entries, [{ cidr: '198.51.100.0/24' }], 'with the current version it goes through');
});

t.test('a 409 caused by another list or by metadata only is retried, and nothing is lost', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  const a = store(t, fake);
  const b = store(t, fake);
  await a.s.load(seed);
  await b.s.load(seed);
  fake.pauseWatches();
  await a.s.write('other', [{ cidr: '203.0.113.0/24' }], a.s.current().lists.get('other')!.version);
  const written = await b.s.write('main', [{ cidr: '192.0.2.0/24' }], b.s.current().lists.get('main')!.version);
  const lists = stored(fake)!;
  t.same(lists.get('main'), written, "b's list written");
  t.same(lists.get('other')!.entries, [{ cidr: '203.0.113.0/24' }], "a's other list kept");
  t.same(cidrs(b.s, 'other'), ['203.0.113.0/24'], 'b holds both');
  fake.touch(NS, CM);
  const again = await b.s.write('main', [{ cidr: '192.0.2.0/25' }], written.version);
  t.same(stored(fake)!.get('main'), again, 'a label change does not block a write');
});

t.test('transient PUT failures (500, 429) are retried with backoff', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  const { s } = store(t, fake);
  await s.load(seed);
  fake.failNext(1, 500, (r) => r.method === 'PUT');
  fake.failNext(1, 429, (r) => r.method === 'PUT');
  await s.write('main', [{ cidr: '192.0.2.0/24' }], s.current().lists.get('main')!.version);
  t.same(stored(fake)!.get('main')!.entries, [{ cidr: '192.0.2.0/24' }]);
  fake.failNext(10, 500, (r) => r.method === 'PUT');
  await t.rejects(
    s.write('main', [], s.current().lists.get('main')!.version),
    { code: 'ERR_STORE_WRITE', message: /injected fault/ },
    'bounded',
  );
});

t.test('the watch applies an edit at once; an invalid one is refused and the last good stays', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  const { s, logs, changes } = store(t, fake);
  await s.load(seed);
  await waitFor(() => s.status().watchConnected, 5000, 'watch connected');
  fake.setData(NS, CM, DATA_KEY, doc({ main: { revision: 2, entries: [{ cidr: '192.0.2.0/24' }] }, other: { revision: 1, entries: [] } }));
  await waitFor(() => cidrs(s)?.[0] === '192.0.2.0/24', 5000, 'edit applied');
  t.equal(changes.length, 1, 'one external change');
  t.equal(s.status().resourceVersion, fake.resourceVersion);
  const good = s.current();

  const bad: Array<[string, string | null, RegExp]> = [
    ['host bits set', doc({ main: { revision: 3, entries: [{ cidr: '10.0.0.1/8' }] }, other: { revision: 1, entries: [] } }), /cidr/],
    ['a list removed', doc({ main: { revision: 3, entries: [] } }), /list\(s\) other missing/],
    ['not JSON', '{', /not valid JSON/],
    ['the key removed', null, /no allowlists\.json/],
  ];
  for (const [desc, text, reason] of bad) {
    fake.setData(NS, CM, DATA_KEY, text);
    await waitFor(() => reason.test(s.lastRefusal()?.reason ?? ''), 5000, `${desc} refused`);
    t.equal(s.current(), good, `${desc}: the last good lists stay in force`);
    t.ok(
      logs.find((l) => l.msg === 'allowlist store ConfigMap refused; the last good lists stay in force' && reason.test(String(l.reason))),
      `${desc}: logged`,
    );
  }
  t.equal(changes.length, 1, 'no change reached the subscribers');
  fake.setData(
    NS,
    CM,
    DATA_KEY,
    doc({ main: { revision: 3, entries: [{ cidr: '198.51.100.0/24' }] }, other: { revision: 1, entries: [] } }),
  );
  await waitFor(() => cidrs(s)?.[0] === '198.51.100.0/24', 5000, 'valid again');
  t.equal(s.lastRefusal(), null, 'refusal cleared');
});

t.test('a dropped watch is re-watched from the last resourceVersion seen', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  const { s } = store(t, fake);
  await s.load(seed);
  await waitFor(() => fake.openWatches() === 1, 5000, 'watching');
  fake.touch(NS, CM); // moves the revision without changing the lists
  const rv = fake.resourceVersion;
  await waitFor(() => s.status().resourceVersion === rv, 5000, 'the metadata-only change seen');
  fake.dropWatches();
  fake.setData(NS, CM, DATA_KEY, doc({ main: { revision: 2, entries: [{ cidr: '192.0.2.0/24' }] }, other: { revision: 1, entries: [] } }));
  await waitFor(() => cidrs(s)?.[0] === '192.0.2.0/24', 5000, 'converged after the drop');
  const watches = fake.requests.filter((r) => r.watch);
  t.ok(watches.length >= 2, 're-watched');
  t.equal(watches.at(-1)!.query.get('resourceVersion'), rv, 'from the last resourceVersion seen, not from scratch');
  t.equal(watches.at(-1)!.query.get('allowWatchBookmarks'), 'true');
});

for (const goneAs of ['event', 'http'] as const) {
  t.test(`410 Gone (${goneAs === 'event' ? 'an ERROR event' : 'HTTP 410'}) relists, then watches again`, async (t) => {
    const fake = await api(t, { goneAs, bookmarkIntervalMs: 60_000 });
    fake.create(NS, CM);
    const { s, logs } = store(t, fake);
    await s.load(seed);
    await waitFor(() => fake.openWatches() === 1, 5000, 'watching');
    fake.pauseWatches();
    fake.setData(
      NS,
      CM,
      DATA_KEY,
      doc({ main: { revision: 2, entries: [{ cidr: '192.0.2.0/24' }] }, other: { revision: 1, entries: [] } }),
    );
    fake.compact();
    fake.resumeWatches();
    const lists = fake.requests.filter((r) => !r.watch && r.path.endsWith('/configmaps')).length;
    fake.dropWatches();
    await waitFor(() => cidrs(s)?.[0] === '192.0.2.0/24', 5000, 'converged through a relist');
    t.ok(fake.requests.filter((r) => !r.watch && r.path.endsWith('/configmaps')).length > lists, 'relisted');
    t.ok(
      logs.find((l) => /410 Gone/.test(String(l.msg))),
      'logged',
    );
    await waitFor(() => s.status().watchConnected, 5000, 'watching again');
    t.equal(
      fake.requests
        .filter((r) => r.watch)
        .at(-1)!
        .query.get('resourceVersion'),
      fake.resourceVersion,
      "from the list's resourceVersion",
    );
  });
}

t.test('API down: the last good lists stay, the status says so, and it recovers', async (t) => {
  const fake = await api(t);
  fake.create(NS, CM);
  const { s } = store(t, fake);
  await s.load(seed);
  await waitFor(() => s.status().watchConnected, 5000, 'watch connected');
  const good = s.current();
  await fake.down();
  await waitFor(() => !s.status().watchConnected && /ECONNREFUSED/.test(s.status().lastError ?? ''), 5000, 'outage noticed');
  t.equal(s.current(), good, 'last good lists in force');
  await t.rejects(s.write('main', [], good.lists.get('main')!.version), { code: 'ERR_STORE_WRITE' }, 'a write fails cleanly (503)');
  fake.setData(NS, CM, DATA_KEY, doc({ main: { revision: 2, entries: [{ cidr: '192.0.2.0/24' }] }, other: { revision: 1, entries: [] } }));
  await fake.up();
  await waitFor(() => cidrs(s)?.[0] === '192.0.2.0/24', 5000, 'caught up after the outage');
  await waitFor(() => s.status().watchConnected && s.status().lastError === null, 5000, 'healthy again');
});

t.test('the periodic relist catches a change the watch missed; a deleted ConfigMap is refused', async (t) => {
  const fake = await api(t, { bookmarkIntervalMs: 60_000 });
  fake.create(NS, CM);
  const { s } = store(t, fake, { resyncIntervalMs: 100 });
  await s.load(seed);
  await waitFor(() => s.status().watchConnected, 5000, 'watch connected');
  fake.pauseWatches(); // the watch hangs silently
  fake.setData(NS, CM, DATA_KEY, doc({ main: { revision: 2, entries: [{ cidr: '192.0.2.0/24' }] }, other: { revision: 1, entries: [] } }));
  await waitFor(() => cidrs(s)?.[0] === '192.0.2.0/24', 5000, 'resync applied it');
  fake.resumeWatches();
  fake.delete(NS, CM);
  await waitFor(() => /deleted|missing/.test(s.lastRefusal()?.reason ?? ''), 5000, 'deletion refused');
  t.same(cidrs(s), ['192.0.2.0/24'], 'last good lists in force');
});

t.test('seedList and the document: what the store writes parses back to the same versions', async (t) => {
  const lists = new Map([['main', seedList('main', [{ cidr: '10.0.0.0/8' }])]]);
  const parsed = parseDocument(serializeDocument({ lists }));
  t.ok(parsed.ok);
  if (parsed.ok) t.same(parsed.lists.get('main'), lists.get('main'));
});
