/**
 * ConfigMapWatch against the loopback Kubernetes API (test/helpers/fake-kube-api.ts, real sockets):
 * each newer version handed on once, deletion and re-creation, 410 Gone answered both ways the API
 * server does (an ERROR event in a 200 stream, HTTP 410), a dropped watch re-opened, a failing API
 * retried at load and a forbidden one not.
 */
import pino from 'pino';
import t, { type Test } from 'tap';
import { ConfigMapWatch, type ConfigMapObject } from '../../../src/kube/configmap-watch';
import { KubeClient } from '../../../src/kube/kube-client';
import { resolveKubeAccess } from '../../../src/kube/kubeconfig';
import { FakeKubeApi } from '../../helpers/fake-kube-api';
import { tmpDir } from '../../helpers/ipgate';
import { waitFor } from '../../helpers/net';

const NS = 'edge';
const CM = 'lists';

async function setup(t: Test, opts: { goneAs?: 'event' | 'http'; allowed?: string[]; bookmarkIntervalMs?: number } = {}) {
  const fake = await new FakeKubeApi({
    allowedNames: opts.allowed ?? [CM],
    goneAs: opts.goneAs,
    bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 600_000,
  }).start();
  t.teardown(() => fake.close());
  const dir = tmpDir('ipgate-cm-watch-');
  const client = new KubeClient(resolveKubeAccess({ env: { KUBECONFIG: fake.writeKubeconfig(dir) } }), { timeoutMs: 2000 });
  t.teardown(() => client.close());
  const seen: Array<Record<string, string> | null> = [];
  const watch = new ConfigMapWatch({
    client,
    namespace: NS,
    name: CM,
    logger: pino({ level: 'silent' }),
    backoff: { initialMs: 20, maxMs: 200 },
    onObject: (obj: ConfigMapObject | null) => seen.push(obj === null ? null : { ...(obj.data ?? {}) }),
  });
  t.teardown(() => watch.close());
  return { fake, watch, seen };
}

t.test('each newer version once, in order; deletion and re-creation', async (t) => {
  const { fake, watch, seen } = await setup(t);
  fake.create(NS, CM, { k: 'v1' });
  await watch.load(Date.now() + 2000);
  t.same(seen, [{ k: 'v1' }], 'the list at load');
  watch.start();
  await waitFor(() => fake.openWatches() === 1, 2000, 'watch open');
  fake.setData(NS, CM, 'k', 'v2');
  fake.touch(NS, CM); // metadata only: a newer version all the same (the caller compares data)
  fake.delete(NS, CM);
  fake.create(NS, CM, { k: 'v3' });
  await waitFor(() => seen.length === 5, 2000, 'five versions');
  t.same(seen, [{ k: 'v1' }, { k: 'v2' }, { k: 'v2' }, null, { k: 'v3' }]);
  t.match(watch.status(), { watchConnected: true, lastError: null, resourceVersion: fake.resourceVersion });
});

for (const goneAs of ['event', 'http'] as const) {
  t.test(`410 Gone (${goneAs === 'event' ? 'an ERROR event' : 'HTTP 410'}): relist, then watch from the list`, async (t) => {
    const { fake, watch, seen } = await setup(t, { goneAs });
    fake.create(NS, CM, { k: 'v1' });
    await watch.load(Date.now() + 2000);
    watch.start();
    await waitFor(() => fake.openWatches() === 1, 2000, 'watch open');
    fake.pauseWatches();
    fake.setData(NS, CM, 'k', 'missed');
    fake.compact();
    fake.resumeWatches();
    fake.dropWatches();
    await waitFor(() => seen.length === 2, 5000, 'the missed version, from the relist');
    t.same(seen[1], { k: 'missed' });
    const lists = fake.requests.filter((r) => !r.watch && r.method === 'GET');
    t.equal(lists.length, 2, 'one list at load, one after 410');
    await waitFor(() => fake.openWatches() === 1, 2000, 'watching again');
    fake.setData(NS, CM, 'k', 'v3');
    await waitFor(() => seen.length === 3, 2000, 'the next edit through the new watch');
    t.same(seen[2], { k: 'v3' });
  });
}

t.test('a dropped watch is re-opened from where it was; nothing repeated', async (t) => {
  const { fake, watch, seen } = await setup(t);
  fake.create(NS, CM, { k: 'v1' });
  await watch.load(Date.now() + 2000);
  watch.start();
  await waitFor(() => fake.openWatches() === 1, 2000, 'watch open');
  fake.dropWatches();
  fake.setData(NS, CM, 'k', 'v2');
  await waitFor(() => seen.length === 2, 5000, 'the edit made while disconnected');
  t.same(seen, [{ k: 'v1' }, { k: 'v2' }]);
  const watches = fake.requests.filter((r) => r.watch);
  t.ok(watches.length >= 2, 'watched again');
  t.equal(watches.at(-1)!.query.get('fieldSelector'), `metadata.name=${CM}`, 'by name (RBAC resourceNames)');
  t.equal(watches.at(-1)!.query.get('allowWatchBookmarks'), 'true');
});

t.test('load: a failing API (5xx, 429) is retried until it answers; 403 is not retried', async (t) => {
  const rows = [
    { description: '500 twice, then the list', status: 500, allowed: [CM], loads: true, lists: 3 },
    { description: '429 once, then the list', status: 429, allowed: [CM], loads: true, lists: 2 },
    { description: '403: the Role does not name it', status: 0, allowed: ['other'], loads: false, lists: 1 },
  ];
  for (const row of rows) {
    const { fake, watch, seen } = await setup(t, { allowed: row.allowed });
    fake.create(NS, CM, { k: 'v1' });
    if (row.status !== 0) fake.failNext(row.lists - 1, row.status);
    const r = await watch.load(Date.now() + 3000).then(
      () => null,
      (err: Error) => err,
    );
    if (row.loads) {
      t.equal(r, null, `${row.description}: loaded`);
      t.same(seen, [{ k: 'v1' }], `${row.description}: the ConfigMap`);
    } else {
      t.match(r?.message, /HTTP 403/, `${row.description}: ${r?.message}`);
      t.same(seen, [], `${row.description}: nothing handed on`);
    }
    t.equal(fake.requests.filter((x) => !x.watch).length, row.lists, `${row.description}: ${row.lists} list request(s)`);
  }
});
