/**
 * Failures talking to the Kubernetes API, shared by `ipgate doctor` and the ConfigMap store. Only
 * "could not talk" and "the API said no" are errors; what a caller makes of a 404 is its own call.
 */
export type KubeErrorCode =
  | 'IPGATE_KUBE_CONFIG' // no usable kubeconfig / in-cluster credentials
  | 'IPGATE_KUBE_UNREACHABLE' // TCP/TLS failure or timeout talking to the API server
  | 'IPGATE_KUBE_STATUS'; // the API answered, but not with what we asked for (401, 403, 5xx)

export class KubeError extends Error {
  constructor(
    readonly code: KubeErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'KubeError';
  }
}

/** An HTTP answer from the API server other than 2xx (and other than 404 where 404 means "absent"). */
export class KubeStatusError extends KubeError {
  constructor(
    readonly status: number,
    readonly path: string,
    readonly reason: string,
    readonly method = 'GET',
  ) {
    super('IPGATE_KUBE_STATUS', `${method} ${path}: HTTP ${status}: ${reason}`);
    this.name = 'KubeStatusError';
  }
}

/** Worth retrying: no answer at all, or the API server overloaded or failing. */
export function isTransient(err: unknown): boolean {
  if (err instanceof KubeStatusError) return err.status === 429 || err.status >= 500;
  return err instanceof KubeError && err.code === 'IPGATE_KUBE_UNREACHABLE';
}

/**
 * Whether resourceVersion `a` is newer than `b`. They are opaque, but the API server's are etcd
 * revisions (decimal, increasing; KEP-5504 makes that a contract): compared as numbers when they
 * are, else any difference is news.
 */
export function isNewerVersion(a: string, b: string): boolean {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) > BigInt(b);
  return a !== b;
}
