/**
 * Two ipgate instances sharing one ConfigMap store on a loopback Kubernetes API
 * (test/helpers/fake-kube-api.ts), each found through a kubeconfig ($KUBECONFIG), as two replicas of
 * the DaemonSet would: they converge on every change made through either admin API or directly on
 * the ConfigMap, a change made on a stale version is refused (412) and the other one kept, and they
 * keep converging through a dropped watch, 410 Gone and an invalid document.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { request, type Reply } from '../helpers/admin-api';
import { FakeKubeApi } from '../helpers/fake-kube-api';
import { startIpgate, tmpDir, type Started } from '../helpers/ipgate';
import { closed, connect, readUntil, waitFor } from '../helpers/net';

const NS = 'edge';
const CM = 'edge-ipgate-allowlists';
const KEY = 'allowlists.json';
const TOKEN = 'admin-token-0123456789abcdef';
const ALLOWED = '127.0.0.7';
const OTHER = '127.0.0.8';

interface Replica extends Started {
  api: (method: string, url: string, body?: unknown, ifMatch?: string) => Promise<Reply>;
  allows: (ip: string) => boolean;
}

async function echoUpstream(t: Test): Promise<number> {
  const server = net.createServer((s) => s.pipe(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

async function cluster(t: Test): Promise<{ fake: FakeKubeApi; a: Replica; b: Replica }> {
  const fake = await new FakeKubeApi({ allowedNames: [CM], bookmarkIntervalMs: 500 }).start();
  t.teardown(() => fake.close());
  fake.create(NS, CM); // the chart creates it empty
  const dir = tmpDir('ipgate-kube-it-');
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, `${TOKEN}\n`);
  const saved = { KUBECONFIG: process.env.KUBECONFIG, POD_NAMESPACE: process.env.POD_NAMESPACE };
  process.env.KUBECONFIG = fake.writeKubeconfig(dir);
  process.env.POD_NAMESPACE = NS; // store.namespace null: the pod's own, from the downward API
  t.teardown(() => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  });
  const upstream = await echoUpstream(t);
  const start = async (): Promise<Replica> => {
    const g = await startIpgate({
      store: { type: 'kubernetes', namespace: null, configMap: CM },
      admin: { listen: '127.0.0.1:0', tokenFile },
      allowlists: { main: [`${OTHER}/32`] },
      listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${upstream}`] }],
    });
    t.teardown(() => g.app.shutdown(0));
    const base = `http://127.0.0.1:${g.app.admin!.address.port}`;
    return {
      ...g,
      api: (method, url, body, ifMatch) =>
        request(base, method, url, { token: TOKEN, body, headers: ifMatch ? { 'if-match': ifMatch } : {} }),
      allows: (ip) => g.app.service.check('main', ip).allowed,
    };
  };
  const [a, b] = await Promise.all([start(), start()]);
  return { fake, a, b };
}

/** A real client from `ip` through the replica's listener: echoed (allowed) or closed (denied). */
async function through(r: Replica, ip: string): Promise<'allowed' | 'denied'> {
  const s = await connect({ port: r.port('tcp'), localAddress: ip });
  s.on('error', () => undefined);
  s.write('ping\n');
  const outcome = await Promise.race([
    readUntil(s, 'ping\n', 5000).then(
      () => 'allowed' as const,
      () => 'denied' as const,
    ),
    closed(s, 5000).then(() => 'denied' as const),
  ]);
  s.destroy();
  return outcome;
}

const both = (a: Replica, b: Replica, ip: string, allowed: boolean) => () => a.allows(ip) === allowed && b.allows(ip) === allowed;

t.test('two replicas converge on every change, whoever makes it; stale writes get 412 and lose nothing', async (t) => {
  const { fake, a, b } = await cluster(t);
  t.equal(fake.requests.filter((r) => r.method === 'PUT' && r.status === 200).length, 1, 'the empty ConfigMap was seeded once');
  t.ok(a.allows(OTHER) && b.allows(OTHER), 'both enforce the seeded list');
  t.equal(await through(a, ALLOWED), 'denied', 'a real client is denied through a');

  // Through a's admin API.
  const g1 = await a.api('GET', '/v1/allowlists/main');
  const put = await a.api('PUT', '/v1/allowlists/main', { entries: [{ cidr: `${ALLOWED}/32` }] }, g1.headers.etag);
  t.equal(put.status, 200, put.text);
  await waitFor(both(a, b, ALLOWED, true), 5000, "b applies a's change");
  t.equal(b.app.lists.get('main').version, put.json.version, 'b enforces the version a wrote');
  t.equal(await through(b, ALLOWED), 'allowed', 'a real client is now allowed through b');
  t.equal(await through(b, OTHER), 'denied', 'and the removed one denied');

  // A stale version through b: 412, and a's change stays.
  const stale = await b.api('PUT', '/v1/allowlists/main', { entries: [{ cidr: `${OTHER}/32` }] }, g1.headers.etag);
  t.equal(stale.status, 412, stale.text);
  t.ok(a.allows(ALLOWED) && b.allows(ALLOWED) && !b.allows(OTHER), "a's change is not lost");

  // The same race with b not yet told (its watch lagging): the PUT gets 409, b re-reads, 412.
  fake.pauseWatches();
  const g2 = await b.api('GET', '/v1/allowlists/main');
  const add = await a.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: '192.0.2.0/24' }] });
  t.equal(add.status, 200, add.text);
  const lagging = await b.api('PUT', '/v1/allowlists/main', { entries: [] }, g2.headers.etag);
  t.equal(lagging.status, 412, 'refused after the 409 re-read');
  t.ok(
    fake.requests.some((r) => r.method === 'PUT' && r.status === 409),
    'the API answered 409',
  );
  t.ok(b.allows('192.0.2.1') && b.allows(ALLOWED), "b holds a's change, re-read on the conflict");
  fake.resumeWatches();

  // Through b's admin API (no If-Match: add re-applies on conflict).
  const addB = await b.api('POST', '/v1/allowlists/main/entries', { entries: [{ cidr: '198.51.100.0/24' }] });
  t.equal(addB.status, 200, addB.text);
  await waitFor(both(a, b, '198.51.100.9', true), 5000, "a applies b's change");
  t.ok(a.allows('192.0.2.1') && a.allows(ALLOWED), 'nothing lost on the way');

  // Directly on the ConfigMap (kubectl edit).
  const text = fake.get(NS, CM)!.data![KEY]!;
  const doc = JSON.parse(text) as { lists: { main: { revision: number; entries: unknown[] } } };
  doc.lists.main = { revision: doc.lists.main.revision + 1, entries: [{ cidr: `${OTHER}/32`, comment: 'kubectl edit' }] };
  fake.setData(NS, CM, KEY, JSON.stringify({ format: 'ipgate.allowlists/v1', lists: doc.lists }));
  await waitFor(both(a, b, OTHER, true), 5000, 'both apply the edit');
  t.ok(!a.allows(ALLOWED) && !b.allows(ALLOWED), 'and revoke what it removed');
  t.equal(await through(a, OTHER), 'allowed');
  t.equal(await through(a, ALLOWED), 'denied');
  const audit = await b.api('GET', '/v1/audit');
  t.ok(JSON.stringify(audit.json).includes('configmap update'), 'audited as a ConfigMap change');
});

t.test('a dropped watch, 410 Gone and an invalid document: both replicas keep the last good list and converge', async (t) => {
  const { fake, a, b } = await cluster(t);
  const set = (entries: unknown[], revision: number) =>
    fake.setData(NS, CM, KEY, JSON.stringify({ format: 'ipgate.allowlists/v1', lists: { main: { revision, entries } } }));

  fake.dropWatches();
  set([{ cidr: '192.0.2.0/24' }], 10);
  await waitFor(both(a, b, '192.0.2.1', true), 8000, 'converged after a dropped watch');

  fake.pauseWatches();
  set([{ cidr: '198.51.100.0/24' }], 11);
  fake.compact();
  fake.resumeWatches();
  fake.dropWatches();
  await waitFor(both(a, b, '198.51.100.1', true), 8000, 'converged through 410 Gone and a relist');
  t.ok(
    a.logs.find((l) => /410 Gone/.test(String(l.msg))),
    'a logged the relist',
  );

  set([{ cidr: '10.0.0.1/8' }], 12); // host bits set: invalid
  await waitFor(() => a.app.service.store.lastRefusal() !== null && b.app.service.store.lastRefusal() !== null, 5000, 'refused by both');
  t.ok(a.allows('198.51.100.1') && b.allows('198.51.100.1'), 'the last good list stays in force');
  const ready = await a.api('GET', '/readyz');
  t.match(ready.json.checks, [{ name: 'listeners' }, { name: 'store', status: 'warn', message: /refused/ }], '/readyz says so');
  // Each replica reports the ConfigMap version it has applied: the refused one is not it.
  const refusedRv = fake.get(NS, CM)!.metadata!.resourceVersion;
  t.match(ready.json.store, { kind: 'kubernetes', watchConnected: true, resourceVersion: /^\d+$/ }, '/readyz store detail');
  t.not(ready.json.store.resourceVersion, refusedRv, 'the applied resourceVersion is the last good one, not the refused one');

  const g = await a.api('GET', '/v1/allowlists/main');
  const fix = await a.api('PUT', '/v1/allowlists/main', { entries: [{ cidr: `${ALLOWED}/32` }] }, g.headers.etag);
  t.equal(fix.status, 200, 'an admin write replaces the refused document');
  await waitFor(both(a, b, ALLOWED, true), 5000, 'both apply it');
  t.equal(b.app.service.store.lastRefusal(), null, 'the refusal is cleared');
  t.equal(await through(b, ALLOWED), 'allowed');
});
