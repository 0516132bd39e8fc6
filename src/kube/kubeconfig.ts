/**
 * Where the API server is and how to authenticate to it, resolved the way kubectl does it,
 * without client-go: `--kubeconfig`, else `$KUBECONFIG` (a path list, merged first-wins), else
 * `~/.kube/config`; when none exists and the process runs in a pod, the in-cluster service account.
 *
 * Supported user credentials: token / tokenFile, client-certificate(-data) + client-key(-data),
 * username/password, and `exec` credential plugins (EKS, GKE, AKS print an ExecCredential).
 * Not supported: `auth-provider` (removed from kubectl in 1.26) and `proxy-url`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { KubeError } from './errors';

export interface KubeAccess {
  /** API server base URL (may carry a path prefix, e.g. a Rancher proxy). */
  readonly server: URL;
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly token?: string;
  /**
   * Where `token` was read from, when it rotates: the kubelet refreshes a projected service account
   * token (bound tokens expire, an hour by default), so a long-running client re-reads it (as
   * client-go does); a short doctor run never notices.
   */
  readonly tokenFile?: string;
  readonly basicAuth?: { readonly username: string; readonly password: string };
  readonly insecureSkipTlsVerify: boolean;
  readonly tlsServerName?: string;
  /** Namespace of the context (or the pod's namespace in-cluster); undefined when not set. */
  readonly namespace?: string;
  /** For humans: `kubeconfig /home/me/.kube/config, context kind-lab` or `in-cluster service account`. */
  readonly source: string;
}

interface ResolveOptions {
  kubeconfig?: string;
  context?: string;
  env: NodeJS.ProcessEnv;
  /** Where the service account is mounted; a parameter so tests can point elsewhere. */
  serviceAccountDir?: string;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export function resolveKubeAccess(opts: ResolveOptions): KubeAccess {
  if (opts.kubeconfig) return fromKubeconfigFiles([opts.kubeconfig], opts.context, opts.env);
  const fromEnv = (opts.env.KUBECONFIG ?? '').split(path.delimiter).filter((p) => p !== '');
  const existing = fromEnv.filter((p) => fs.existsSync(p));
  if (existing.length > 0) return fromKubeconfigFiles(existing, opts.context, opts.env);
  const home = opts.env.HOME ?? os.homedir();
  const defaultFile = path.join(home, '.kube', 'config');
  if (fromEnv.length === 0 && fs.existsSync(defaultFile)) {
    return fromKubeconfigFiles([defaultFile], opts.context, opts.env);
  }
  const saDir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (opts.env.KUBERNETES_SERVICE_HOST && fs.existsSync(path.join(saDir, 'token'))) {
    return inCluster(opts.env, saDir);
  }
  throw new KubeError('IPGATE_KUBE_CONFIG', 'no kubeconfig found (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a pod');
}

function inCluster(env: NodeJS.ProcessEnv, saDir: string): KubeAccess {
  const host = env.KUBERNETES_SERVICE_HOST as string;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  // An IPv6 service host must be bracketed in a URL.
  const server = new URL(`https://${host.includes(':') ? `[${host}]` : host}:${port}`);
  const namespaceFile = path.join(saDir, 'namespace');
  return {
    server,
    ca: readFile(path.join(saDir, 'ca.crt'), 'in-cluster CA'),
    token: readFile(path.join(saDir, 'token'), 'service account token').toString('utf8').trim(),
    tokenFile: path.join(saDir, 'token'),
    insecureSkipTlsVerify: false,
    namespace: fs.existsSync(namespaceFile) ? fs.readFileSync(namespaceFile, 'utf8').trim() : undefined,
    source: 'in-cluster service account',
  };
}

interface Named<T> {
  name: string;
  value: T;
  dir: string; // relative paths in a kubeconfig are relative to the file that holds them
}

interface Merged {
  currentContext?: string;
  contexts: Map<string, Named<Record<string, unknown>>>;
  clusters: Map<string, Named<Record<string, unknown>>>;
  users: Map<string, Named<Record<string, unknown>>>;
}

function fromKubeconfigFiles(files: string[], contextFlag: string | undefined, env: NodeJS.ProcessEnv): KubeAccess {
  // kubectl merge rule: the first file to set a value (or a named entry) wins.
  const merged: Merged = { contexts: new Map(), clusters: new Map(), users: new Map() };
  for (const file of files) {
    const text = readFile(file, 'kubeconfig').toString('utf8');
    let doc: unknown;
    try {
      doc = YAML.parse(text);
    } catch (err) {
      throw new KubeError('IPGATE_KUBE_CONFIG', `${file}: not valid YAML: ${(err as Error).message}`, { cause: err });
    }
    if (doc === null || doc === undefined) continue;
    if (typeof doc !== 'object' || Array.isArray(doc)) {
      throw new KubeError('IPGATE_KUBE_CONFIG', `${file}: not a kubeconfig (top level is not a mapping)`);
    }
    const d = doc as Record<string, unknown>;
    const dir = path.dirname(path.resolve(file));
    if (merged.currentContext === undefined && typeof d['current-context'] === 'string' && d['current-context'] !== '') {
      merged.currentContext = d['current-context'];
    }
    addNamed(merged.contexts, d.contexts, 'context', dir);
    addNamed(merged.clusters, d.clusters, 'cluster', dir);
    addNamed(merged.users, d.users, 'user', dir);
  }
  const where = files.join(path.delimiter);
  const contextName = contextFlag ?? merged.currentContext;
  if (!contextName) {
    throw new KubeError('IPGATE_KUBE_CONFIG', `${where}: no current-context set and no --context given`);
  }
  const context = merged.contexts.get(contextName);
  if (!context) throw new KubeError('IPGATE_KUBE_CONFIG', `${where}: context "${contextName}" not found`);
  const clusterName = str(context.value.cluster);
  const cluster = clusterName ? merged.clusters.get(clusterName) : undefined;
  if (!cluster) {
    throw new KubeError(
      'IPGATE_KUBE_CONFIG',
      `${where}: context "${contextName}" names cluster "${clusterName ?? ''}", which is not defined`,
    );
  }
  const userName = str(context.value.user);
  const user = userName ? merged.users.get(userName) : undefined;
  if (userName && !user) {
    throw new KubeError('IPGATE_KUBE_CONFIG', `${where}: context "${contextName}" names user "${userName}", which is not defined`);
  }

  const c = cluster.value;
  const serverText = str(c.server);
  if (!serverText) throw new KubeError('IPGATE_KUBE_CONFIG', `${where}: cluster "${cluster.name}" has no server`);
  let server: URL;
  try {
    server = new URL(serverText);
  } catch (err) {
    throw new KubeError('IPGATE_KUBE_CONFIG', `${where}: cluster "${cluster.name}": server "${serverText}" is not a URL`, { cause: err });
  }
  if (server.protocol !== 'https:' && server.protocol !== 'http:') {
    throw new KubeError('IPGATE_KUBE_CONFIG', `${where}: cluster "${cluster.name}": server "${serverText}" is not http(s)`);
  }

  const access: {
    -readonly [K in keyof KubeAccess]: KubeAccess[K];
  } = {
    server,
    insecureSkipTlsVerify: c['insecure-skip-tls-verify'] === true,
    source: `kubeconfig ${where}, context ${contextName}`,
  };
  const ns = str(context.value.namespace);
  if (ns) access.namespace = ns;
  const tlsServerName = str(c['tls-server-name']);
  if (tlsServerName) access.tlsServerName = tlsServerName;
  const ca = dataOrFile(c, 'certificate-authority', cluster.dir, `cluster "${cluster.name}" CA`);
  if (ca) access.ca = ca;

  if (user) {
    const u = user.value;
    const cert = dataOrFile(u, 'client-certificate', user.dir, `user "${user.name}" client certificate`);
    const key = dataOrFile(u, 'client-key', user.dir, `user "${user.name}" client key`);
    if (cert) access.cert = cert;
    if (key) access.key = key;
    const token = str(u.token);
    const tokenFile = str(u.tokenFile);
    if (token) access.token = token;
    else if (tokenFile) {
      access.tokenFile = resolveIn(user.dir, tokenFile);
      access.token = readFile(access.tokenFile, `user "${user.name}" tokenFile`).toString('utf8').trim();
    }
    const username = str(u.username);
    if (username) access.basicAuth = { username, password: str(u.password) ?? '' };
    if (u.exec && typeof u.exec === 'object') {
      const cred = runExecPlugin(u.exec as Record<string, unknown>, user.dir, env, `user "${user.name}"`);
      if (cred.token) access.token = cred.token;
      if (cred.cert) access.cert = cred.cert;
      if (cred.key) access.key = cred.key;
    }
    if (u['auth-provider']) {
      throw new KubeError(
        'IPGATE_KUBE_CONFIG',
        `${where}: user "${user.name}" uses an auth-provider, which ipgate does not support; use a token, a client certificate or an exec plugin`,
      );
    }
  }
  return access;
}

function addNamed(into: Map<string, Named<Record<string, unknown>>>, list: unknown, field: string, dir: string): void {
  if (!Array.isArray(list)) return;
  for (const entry of list) {
    if (!entry || typeof entry !== 'object') continue;
    const e = entry as Record<string, unknown>;
    const name = str(e.name);
    const value = e[field];
    if (!name || into.has(name) || !value || typeof value !== 'object') continue;
    into.set(name, { name, value: value as Record<string, unknown>, dir });
  }
}

/** `<field>-data` (base64 PEM) wins over `<field>` (a path), as in kubectl. */
function dataOrFile(obj: Record<string, unknown>, field: string, dir: string, what: string): Buffer | undefined {
  const data = str(obj[`${field}-data`]);
  if (data) return Buffer.from(data, 'base64');
  const file = str(obj[field]);
  return file ? readFile(resolveIn(dir, file), what) : undefined;
}

function resolveIn(dir: string, file: string): string {
  return path.isAbsolute(file) ? file : path.join(dir, file);
}

function readFile(file: string, what: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new KubeError('IPGATE_KUBE_CONFIG', `cannot read ${what} ${file}: ${(err as Error).message}`, { cause: err });
  }
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/**
 * client.authentication.k8s.io ExecCredential: run the plugin, read `status` from its stdout.
 * Non-interactive: doctor may run in CI and the store in a pod, where a prompt would hang.
 */
function runExecPlugin(
  exec: Record<string, unknown>,
  dir: string,
  env: NodeJS.ProcessEnv,
  who: string,
): { token?: string; cert?: Buffer; key?: Buffer } {
  const command = str(exec.command);
  if (!command) throw new KubeError('IPGATE_KUBE_CONFIG', `${who}: exec plugin has no command`);
  const apiVersion = str(exec.apiVersion) ?? 'client.authentication.k8s.io/v1';
  const args = Array.isArray(exec.args) ? exec.args.map(String) : [];
  const childEnv: NodeJS.ProcessEnv = { ...env };
  if (Array.isArray(exec.env)) {
    for (const e of exec.env as Array<Record<string, unknown>>) {
      const name = str(e?.name);
      if (name) childEnv[name] = String(e.value ?? '');
    }
  }
  childEnv.KUBERNETES_EXEC_INFO = JSON.stringify({ apiVersion, kind: 'ExecCredential', spec: { interactive: false } });
  // kubectl resolves a command containing a path separator relative to the kubeconfig's folder.
  const file = command.includes('/') ? resolveIn(dir, command) : command;
  let out: string;
  try {
    out = execFileSync(file, args, { env: childEnv, encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    throw new KubeError('IPGATE_KUBE_CONFIG', `${who}: exec plugin "${command}" failed: ${(err as Error).message}`, { cause: err });
  }
  let status: Record<string, unknown> | undefined;
  try {
    status = (JSON.parse(out) as { status?: Record<string, unknown> }).status;
  } catch (err) {
    throw new KubeError('IPGATE_KUBE_CONFIG', `${who}: exec plugin "${command}" printed no ExecCredential JSON`, { cause: err });
  }
  const result: { token?: string; cert?: Buffer; key?: Buffer } = {};
  const token = str(status?.token);
  const cert = str(status?.clientCertificateData);
  const key = str(status?.clientKeyData);
  if (token) result.token = token;
  if (cert) result.cert = Buffer.from(cert, 'utf8');
  if (key) result.key = Buffer.from(key, 'utf8');
  return result;
}
