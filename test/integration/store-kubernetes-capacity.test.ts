/**
 * Capacity of the ConfigMap store (loopback Kubernetes API, test/helpers/fake-kube-api.ts): a
 * 40,000-entry list of /32s written through one replica's admin API fits the 1 MiB object limit
 * in the compact document and round-trips to a second replica (same entries, same version, the
 * same decisions); a list past the limit is refused with 413, naming the limit and how many
 * entries fit, and nothing changes.
 */
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { request } from '../helpers/admin-api';
import { FakeKubeApi } from '../helpers/fake-kube-api';
import { startIpgate, tmpDir, type Started } from '../helpers/ipgate';
import { waitFor } from '../helpers/net';

const NS = 'edge';
const CM = 'edge-ipgate-allowlists';
const TOKEN = 'admin-token-0123456789abcdef';
const LIMIT = 1024 * 1024;

function hosts(n: number, offset = 0): Array<{ cidr: string }> {
  return Array.from({ length: n }, (_, i) => {
    const v = 0x0a000000 + offset + i * 7919; // spread over 10.0.0.0/8
    return { cidr: `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}/32` };
  });
}

async function replicas(t: Test): Promise<{ fake: FakeKubeApi; a: Started & { base: string }; b: Started & { base: string } }> {
  const fake = await new FakeKubeApi({ allowedNames: [CM], bookmarkIntervalMs: 500 }).start();
  t.teardown(() => fake.close());
  fake.create(NS, CM);
  const dir = tmpDir('ipgate-kube-cap-');
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, `${TOKEN}\n`);
  const saved = process.env.KUBECONFIG;
  process.env.KUBECONFIG = fake.writeKubeconfig(dir);
  t.teardown(() => {
    if (saved === undefined) delete process.env.KUBECONFIG;
    else process.env.KUBECONFIG = saved;
  });
  const start = async (): Promise<Started & { base: string }> => {
    const g = await startIpgate(
      {
        store: { type: 'kubernetes', namespace: NS, configMap: CM },
        admin: { listen: '127.0.0.1:0', tokenFile, bodyLimit: 8 * 1024 * 1024 },
        allowlists: { main: [] },
        listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
      },
      'info',
    );
    t.teardown(() => g.app.shutdown(0));
    return { ...g, base: `http://127.0.0.1:${g.app.admin!.address.port}` };
  };
  const a = await start();
  const b = await start();
  return { fake, a, b };
}

t.test('40,000 /32 entries round-trip through the ConfigMap within 1 MiB; past the limit: 413 naming it and what fits', async (t) => {
  const { fake, a, b } = await replicas(t);
  const entries = hosts(40_000);
  const put = await request(a.base, 'PUT', '/v1/allowlists/main', { token: TOKEN, headers: { 'if-match': '*' }, body: { entries } });
  t.equal(put.status, 200, put.text.slice(0, 300));
  const text = fake.get(NS, CM)!.data!['allowlists.json']!;
  const size = Buffer.byteLength(text);
  t.ok(size < LIMIT, `the document is ${size} bytes, under ${LIMIT}`);
  t.comment(`40,000 /32 entries: ${size} bytes in the ConfigMap (${(size / 40_000).toFixed(1)} bytes per entry)`);
  await waitFor(() => b.app.lists.get('main').version === put.json.version, 15_000, 'the second replica applies it');
  t.equal(b.app.service.get('main').entries.length, 40_000, 'all entries read back');
  t.same(b.app.service.get('main').entries, a.app.service.get('main').entries, 'the same entries, in order');
  for (const probe of [entries[0]!.cidr, entries[39_999]!.cidr]) {
    const ip = probe.slice(0, -3);
    t.ok(b.app.service.check('main', ip).allowed, `${ip} allowed on the second replica`);
  }

  const before = fake.get(NS, CM)!.metadata.resourceVersion;
  const big = await request(a.base, 'PUT', '/v1/allowlists/main', {
    token: TOKEN,
    headers: { 'if-match': '*' },
    body: { entries: hosts(70_000) },
  });
  t.equal(big.status, 413, big.text.slice(0, 300));
  t.equal(big.json.error, 'too_large');
  t.match(big.json.message, /at most 1048576 bytes \(1 MiB\): about \d+ entries like these fit/, 'names the limit and what fits');
  const fit = Number(/about (\d+) entries/.exec(big.json.message)![1]);
  t.ok(fit > 40_000 && fit < 70_000, `the estimate (${fit}) is between what fit and what did not`);
  t.equal(fake.get(NS, CM)!.metadata.resourceVersion, before, 'the ConfigMap was not written');
  t.equal(a.app.service.get('main').entries.length, 40_000, 'the list in force is unchanged');
});
