/**
 * Which namespace the ConfigMap store uses, and the watch stream parser of the shared API client
 * (event lines split across chunks, several per chunk, a corrupt line ending the stream).
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { backoffDelay } from '../../../src/kube/backoff';
import { KubeClient, type WatchEvent } from '../../../src/kube/kube-client';
import { resolveTarget } from '../../../src/store/kubernetes-target';
import { tmpDir } from '../../helpers/ipgate';

const access = { server: new URL('http://127.0.0.1:1'), insecureSkipTlsVerify: false, source: 'test', namespace: 'from-context' };

t.test('namespace: store.namespace, then POD_NAMESPACE, then the service account file, then the kubeconfig context', async (t) => {
  const sa = tmpDir('ipgate-sa-');
  fs.writeFileSync(path.join(sa, 'namespace'), 'from-sa\n');
  const empty = tmpDir('ipgate-sa-');
  const rows: Array<[string, string | null, NodeJS.ProcessEnv, string, string]> = [
    ['configured wins', 'configured', { POD_NAMESPACE: 'from-env' }, sa, 'configured'],
    ['POD_NAMESPACE (downward API)', null, { POD_NAMESPACE: 'from-env' }, sa, 'from-env'],
    ['the service account namespace file', null, {}, sa, 'from-sa'],
    ['the kubeconfig context', null, {}, empty, 'from-context'],
  ];
  for (const [desc, namespace, env, dir, want] of rows) {
    t.equal(resolveTarget({ namespace, env, serviceAccountDir: dir, access }).namespace, want, desc);
  }
  t.throws(
    () => resolveTarget({ namespace: null, env: {}, serviceAccountDir: empty, access: { ...access, namespace: undefined } }),
    /no namespace: set store\.namespace, or POD_NAMESPACE/,
  );
  t.throws(() => resolveTarget({ namespace: 'Bad_NS', env: {}, access }), /not a valid namespace name/);
  t.throws(() => resolveTarget({ namespace: 'x', env: { HOME: empty }, serviceAccountDir: empty }), /no Kubernetes API credentials/);
});

t.test('backoff doubles up to the cap, with jitter in the upper half', async (t) => {
  const p = { initialMs: 500, maxMs: 30_000 };
  t.same(
    [0, 1, 2, 3].map((n) => backoffDelay(p, n, () => 1)),
    [500, 1000, 2000, 4000],
  );
  t.equal(
    backoffDelay(p, 20, () => 1),
    30_000,
    'capped',
  );
  t.equal(
    backoffDelay(p, 20, () => 0),
    15_000,
    'at least half',
  );
});

t.test('watch: lines split across chunks and several per chunk; a corrupt line ends the watch as failed', async (t) => {
  const ev = (rv: number) => JSON.stringify({ type: 'MODIFIED', object: { metadata: { name: 'x', resourceVersion: String(rv) } } });
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const all = `${ev(1)}\n${ev(2)}\n${ev(3)}\n`;
    res.write(all.slice(0, 10));
    setTimeout(() => res.write(all.slice(10, 100)), 10);
    setTimeout(() => res.write(all.slice(100)), 20);
    if (req.url?.includes('corrupt')) setTimeout(() => res.write('{"type": "MODIFIED", "object": \n'), 30);
    setTimeout(() => res.end(), 40);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const client = new KubeClient({ ...access, server: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`) });
  t.teardown(() => client.close());
  const seen: WatchEvent[] = [];
  const end = await client.watch('/w?watch=1', { onEvent: (e) => seen.push(e) }).done;
  t.same(
    seen.map((e) => e.object.metadata),
    [1, 2, 3].map((rv) => ({ name: 'x', resourceVersion: String(rv) })),
  );
  t.match(end, { kind: 'closed', events: 3 });
  const bad = await client.watch('/w?watch=1&corrupt', { onEvent: () => undefined }).done;
  t.match(bad, { kind: 'failed', events: 3, error: { code: 'IPGATE_KUBE_UNREACHABLE', message: /not a JSON event/ } });
});
