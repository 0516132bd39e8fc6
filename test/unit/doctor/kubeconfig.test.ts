/**
 * Kubernetes access resolution: kubeconfig files (as kubectl reads them) and in-cluster.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { KubeError } from '../../../src/kube/errors';
import { resolveKubeAccess } from '../../../src/kube/kubeconfig';

const PEM_CA = '-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n';
const PEM_CERT = '-----BEGIN CERTIFICATE-----\nMIIBfakeCLIENT\n-----END CERTIFICATE-----\n';
const PEM_KEY = '-----BEGIN EC PRIVATE KEY-----\nMHcfakeKEY\n-----END EC PRIVATE KEY-----\n';
const b64 = (s: string) => Buffer.from(s).toString('base64');

function kubeconfig(clusters: string, users: string, contexts: string, current = 'main'): string {
  return `apiVersion: v1\nkind: Config\nclusters:\n${clusters}\nusers:\n${users}\ncontexts:\n${contexts}\ncurrent-context: ${current}\n`;
}

t.test('inline data: CA, client certificate and key, namespace, tls-server-name', async (t) => {
  const dir = t.testdir({
    config: kubeconfig(
      `- name: prod\n  cluster:\n    server: https://api.example.test:6443\n    certificate-authority-data: ${b64(PEM_CA)}\n    tls-server-name: kubernetes`,
      `- name: admin\n  user:\n    client-certificate-data: ${b64(PEM_CERT)}\n    client-key-data: ${b64(PEM_KEY)}`,
      '- name: main\n  context:\n    cluster: prod\n    user: admin\n    namespace: edge',
    ),
  });
  const a = resolveKubeAccess({ kubeconfig: path.join(dir, 'config'), env: {} });
  t.equal(a.server.href, 'https://api.example.test:6443/');
  t.equal(a.ca?.toString(), PEM_CA);
  t.equal(a.cert?.toString(), PEM_CERT);
  t.equal(a.key?.toString(), PEM_KEY);
  t.equal(a.namespace, 'edge');
  t.equal(a.tlsServerName, 'kubernetes');
  t.equal(a.insecureSkipTlsVerify, false);
  t.equal(a.token, undefined);
  t.match(a.source, /context main$/);
});

t.test('file paths are relative to the kubeconfig; tokenFile; insecure-skip-tls-verify; --context', async (t) => {
  const dir = t.testdir({
    certs: { 'ca.crt': PEM_CA, token: 'file-token\n' },
    config: kubeconfig(
      '- name: a\n  cluster:\n    server: https://a.test\n    certificate-authority: certs/ca.crt\n' +
        '- name: b\n  cluster:\n    server: https://b.test\n    insecure-skip-tls-verify: true',
      '- name: u1\n  user:\n    tokenFile: certs/token\n- name: u2\n  user:\n    token: inline-token',
      '- name: main\n  context:\n    cluster: a\n    user: u1\n- name: other\n  context:\n    cluster: b\n    user: u2',
    ),
  });
  const a = resolveKubeAccess({ kubeconfig: path.join(dir, 'config'), env: {} });
  t.equal(a.ca?.toString(), PEM_CA);
  t.equal(a.token, 'file-token');
  const b = resolveKubeAccess({ kubeconfig: path.join(dir, 'config'), context: 'other', env: {} });
  t.equal(b.server.host, 'b.test');
  t.equal(b.insecureSkipTlsVerify, true);
  t.equal(b.token, 'inline-token');
});

t.test('$KUBECONFIG is a path list merged first-wins', async (t) => {
  const dir = t.testdir({
    one: 'apiVersion: v1\nkind: Config\ncurrent-context: main\ncontexts:\n- name: main\n  context:\n    cluster: c\n    user: u\n',
    two:
      'apiVersion: v1\nkind: Config\ncurrent-context: ignored\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:8001\n' +
      'users:\n- name: u\n  user:\n    token: from-two\n',
  });
  const env = { KUBECONFIG: [path.join(dir, 'one'), path.join(dir, 'missing'), path.join(dir, 'two')].join(path.delimiter) };
  const a = resolveKubeAccess({ env });
  t.equal(a.server.href, 'http://127.0.0.1:8001/');
  t.equal(a.token, 'from-two');
});

t.test('~/.kube/config when nothing else is given', async (t) => {
  const home = t.testdir({
    '.kube': {
      config: kubeconfig(
        '- name: c\n  cluster:\n    server: https://home.test',
        '- name: u\n  user:\n    token: home',
        '- name: main\n  context:\n    cluster: c\n    user: u',
      ),
    },
  });
  t.equal(resolveKubeAccess({ env: { HOME: home } }).token, 'home');
});

t.test('exec credential plugin: token from ExecCredential status, non-interactive', async (t) => {
  const dir = t.testdir({
    'get-token': `#!/bin/sh\necho "$KUBERNETES_EXEC_INFO" > "$(dirname "$0")/exec-info.json"\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-'"$CLUSTER"'"}}'\n`,
    config: kubeconfig(
      '- name: c\n  cluster:\n    server: https://eks.test',
      '- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ./get-token\n      env:\n      - name: CLUSTER\n        value: prod\n      interactiveMode: Never',
      '- name: main\n  context:\n    cluster: c\n    user: u',
    ),
  });
  fs.chmodSync(path.join(dir, 'get-token'), 0o755);
  const a = resolveKubeAccess({ kubeconfig: path.join(dir, 'config'), env: { PATH: process.env.PATH } });
  t.equal(a.token, 'exec-prod');
  const info = JSON.parse(fs.readFileSync(path.join(dir, 'exec-info.json'), 'utf8'));
  t.same(info, { apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', spec: { interactive: false } });
});

t.test('in-cluster: service host and port, token, CA and namespace from the service account', async (t) => {
  const dir = t.testdir({ sa: { token: 'sa-token\n', 'ca.crt': PEM_CA, namespace: 'ipgate' }, home: {} });
  const sa = path.join(dir, 'sa');
  const home = path.join(dir, 'home');
  const a = resolveKubeAccess({
    env: { HOME: home, KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
    serviceAccountDir: sa,
  });
  t.equal(a.server.href, 'https://10.96.0.1/');
  t.equal(a.token, 'sa-token');
  t.equal(a.ca?.toString(), PEM_CA);
  t.equal(a.namespace, 'ipgate');
  t.equal(a.source, 'in-cluster service account');
  const v6 = resolveKubeAccess({
    env: { HOME: home, KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '6443' },
    serviceAccountDir: sa,
  });
  t.equal(v6.server.host, '[fd00:10:96::1]:6443');
});

const bad: Array<[string, string, RegExp]> = [
  ['no current-context', 'apiVersion: v1\nkind: Config\n', /no current-context set and no --context given/],
  ['context not defined', 'current-context: nope\n', /context "nope" not found/],
  [
    'cluster not defined',
    'current-context: m\ncontexts:\n- name: m\n  context:\n    cluster: gone\n',
    /names cluster "gone", which is not defined/,
  ],
  [
    'server not a URL',
    'current-context: m\ncontexts:\n- name: m\n  context:\n    cluster: c\nclusters:\n- name: c\n  cluster:\n    server: "::"\n',
    /server "::" is not a URL/,
  ],
  ['not YAML', 'current-context: [\n', /not valid YAML/],
  [
    'auth-provider',
    'current-context: m\ncontexts:\n- name: m\n  context:\n    cluster: c\n    user: u\nclusters:\n- name: c\n  cluster:\n    server: https://x.test\nusers:\n- name: u\n  user:\n    auth-provider:\n      name: gcp\n',
    /auth-provider, which ipgate does not support/,
  ],
];
for (const [name, text, message] of bad) {
  t.test(`refused with a clear reason: ${name}`, async (t) => {
    const dir = t.testdir({ config: text });
    let caught: unknown;
    try {
      resolveKubeAccess({ kubeconfig: path.join(dir, 'config'), env: {} });
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof KubeError, 'a KubeError');
    t.match(caught, { code: 'IPGATE_KUBE_CONFIG', message });
  });
}

t.test('a missing --kubeconfig file names the file', async (t) => {
  t.throws(() => resolveKubeAccess({ kubeconfig: '/nonexistent/kubeconfig', env: {} }), {
    code: 'IPGATE_KUBE_CONFIG',
    message: /cannot read kubeconfig \/nonexistent\/kubeconfig/,
  });
});
