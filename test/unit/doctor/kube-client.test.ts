/**
 * The small API client over TLS: CA verification, client certificates, tls-server-name,
 * insecure-skip-tls-verify, and the errors that make doctor exit 2.
 */
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import t from 'tap';
import { KubeClient } from '../../../src/kube/kube-client';
import { resolveKubeAccess } from '../../../src/kube/kubeconfig';
import { listenLoopback } from '../../helpers/http';
import { FIXTURES } from './fake-api';

const TLS = path.join(FIXTURES, 'tls');
const read = (f: string) => fs.readFileSync(path.join(TLS, f));

async function tlsApi(t: { teardown(fn: () => unknown): void }) {
  const seen: Array<{ cn?: string; authorized: boolean }> = [];
  const server = https.createServer(
    { key: read('server.key'), cert: read('server.crt'), ca: read('ca.crt'), requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const sock = req.socket as import('node:tls').TLSSocket;
      const peer = sock.getPeerCertificate();
      seen.push({ cn: String(peer?.subject?.CN), authorized: sock.authorized });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Service', apiVersion: 'v1', metadata: { name: 'ipgate' } }));
    },
  );
  return { port: await listenLoopback(t, server), seen };
}

function config(dir: string, port: number, clusterExtra: string, userExtra: string): string {
  const file = path.join(dir, 'config');
  fs.writeFileSync(
    file,
    `apiVersion: v1\nkind: Config\ncurrent-context: m\ncontexts:\n- name: m\n  context:\n    cluster: c\n    user: u\n` +
      `clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:${port}\n${clusterExtra}` +
      `users:\n- name: u\n  user:\n${userExtra}`,
  );
  return file;
}

t.test('verifies the server against certificate-authority and presents the client certificate', async (t) => {
  const api = await tlsApi(t);
  const dir = t.testdir();
  const file = config(
    dir,
    api.port,
    `    certificate-authority: ${path.join(TLS, 'ca.crt')}\n`,
    `    client-certificate: ${path.join(TLS, 'client.crt')}\n    client-key-data: ${read('client.key').toString('base64')}\n`,
  );
  const client = new KubeClient(resolveKubeAccess({ kubeconfig: file, env: {} }), { timeoutMs: 2000 });
  t.teardown(() => client.close());
  const svc = await client.getObject<{ metadata: { name: string } }>('/api/v1/namespaces/ipgate/services/ipgate');
  t.equal(svc?.metadata.name, 'ipgate');
  t.same(api.seen, [{ cn: 'doctor', authorized: true }]);
});

t.test('an unknown CA is refused: API unreachable with the TLS reason', async (t) => {
  const api = await tlsApi(t);
  const file = config(t.testdir(), api.port, '', '    token: x\n');
  const client = new KubeClient(resolveKubeAccess({ kubeconfig: file, env: {} }), { timeoutMs: 2000 });
  t.teardown(() => client.close());
  await t.rejects(client.get('/api'), { code: 'IPGATE_KUBE_UNREACHABLE', message: /certificate/i });
});

t.test('insecure-skip-tls-verify and tls-server-name', async (t) => {
  const api = await tlsApi(t);
  const insecure = new KubeClient(
    resolveKubeAccess({ kubeconfig: config(t.testdir(), api.port, '    insecure-skip-tls-verify: true\n', '    token: x\n'), env: {} }),
  );
  t.teardown(() => insecure.close());
  t.equal((await insecure.get('/api')).status, 200);

  // The certificate names 127.0.0.1 and "kubernetes"; a wrong server name fails, the right one passes.
  const dir = path.join(t.testdirName, 'names');
  fs.mkdirSync(dir, { recursive: true });
  const good = new KubeClient(
    resolveKubeAccess({
      kubeconfig: config(
        dir,
        api.port,
        `    certificate-authority: ${path.join(TLS, 'ca.crt')}\n    tls-server-name: kubernetes\n`,
        '    token: x\n',
      ),
      env: {},
    }),
  );
  t.teardown(() => good.close());
  t.equal((await good.get('/api')).status, 200);
  const bad = new KubeClient(
    resolveKubeAccess({
      kubeconfig: config(
        dir,
        api.port,
        `    certificate-authority: ${path.join(TLS, 'ca.crt')}\n    tls-server-name: other.example\n`,
        '    token: x\n',
      ),
      env: {},
    }),
  );
  t.teardown(() => bad.close());
  await t.rejects(bad.get('/api'), { code: 'IPGATE_KUBE_UNREACHABLE', message: /other\.example/ });
});
