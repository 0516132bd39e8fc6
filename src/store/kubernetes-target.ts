/**
 * Which ConfigMap the Kubernetes store uses and how it reaches the API server: resolved once, at
 * load, so a missing namespace or credential is a boot error with the place to fix it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { KubeError } from '../kube/errors';
import { resolveKubeAccess, SERVICE_ACCOUNT_DIR, type KubeAccess } from '../kube/kubeconfig';

interface TargetOptions {
  /** `store.namespace`; null: POD_NAMESPACE, then the service account's namespace file, then the kubeconfig context's. */
  namespace: string | null;
  env: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
  /** The option `namespace` came from, for messages. Default `store.namespace`. */
  namespaceField?: string;
  /** Resolved access (tests); otherwise $KUBECONFIG, ~/.kube/config, then in-cluster, as kubectl. */
  access?: KubeAccess;
}

export interface Target {
  readonly namespace: string;
  /** For logs: where the namespace came from. */
  readonly namespaceSource: string;
  readonly access: KubeAccess;
}

/** Kubernetes names (RFC 1123 label for namespaces): checked so a typo fails here, not as a 404 later. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Throws Error with a message that names the setting to change. */
export function resolveTarget(opts: TargetOptions): Target {
  let access: KubeAccess;
  try {
    access = opts.access ?? resolveKubeAccess({ env: opts.env, serviceAccountDir: opts.serviceAccountDir });
  } catch (err) {
    const why = err instanceof KubeError ? err.message : String(err);
    throw new Error(`no Kubernetes API credentials: ${why}`, { cause: err });
  }
  const saFile = path.join(opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR, 'namespace');
  const candidates: Array<[string | undefined | null, string]> = [
    [opts.namespace, opts.namespaceField ?? 'store.namespace'],
    [opts.env.POD_NAMESPACE, 'POD_NAMESPACE'],
    [readTrimmed(saFile), saFile],
    [access.namespace, 'the kubeconfig context'],
  ];
  for (const [value, source] of candidates) {
    if (value === undefined || value === null || value === '') continue;
    if (value.length > 63 || !DNS_LABEL.test(value))
      throw new Error(`namespace ${JSON.stringify(value)} (from ${source}) is not a valid namespace name`);
    return { namespace: value, namespaceSource: source, access };
  }
  throw new Error(
    `no namespace: set ${opts.namespaceField ?? 'store.namespace'}, or POD_NAMESPACE (the chart sets it from the downward API), or run in a pod (${saFile})`,
  );
}

function readTrimmed(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}
