/**
 * Why `ipgate doctor` could not run at all (exit code 2). Findings about the cluster are values
 * (see finding.ts), never errors: only "I could not look" is thrown.
 *
 * The API client lives in src/kube (shared with the ConfigMap store) and throws KubeError;
 * `fromKubeError` keeps doctor's own codes, which are part of its JSON output.
 */
import { KubeError, type KubeErrorCode } from '../kube/errors';

export { KubeStatusError } from '../kube/errors';

type DoctorErrorCode =
  | 'IPGATE_DOCTOR_USAGE' // bad flags
  | 'IPGATE_DOCTOR_KUBECONFIG' // no usable kubeconfig / in-cluster credentials
  | 'IPGATE_DOCTOR_API_UNREACHABLE' // TCP/TLS failure or timeout talking to the API server
  | 'IPGATE_DOCTOR_API_STATUS' // the API answered, but not with what we asked for (401, 403, 5xx)
  | 'IPGATE_DOCTOR_CONFIG'; // --config names a file that cannot be read or is not an ipgate config

export class DoctorError extends Error {
  constructor(
    readonly code: DoctorErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'DoctorError';
  }
}

const FROM_KUBE: Record<KubeErrorCode, DoctorErrorCode> = {
  IPGATE_KUBE_CONFIG: 'IPGATE_DOCTOR_KUBECONFIG',
  IPGATE_KUBE_UNREACHABLE: 'IPGATE_DOCTOR_API_UNREACHABLE',
  IPGATE_KUBE_STATUS: 'IPGATE_DOCTOR_API_STATUS',
};

/** A DoctorError for anything that means "could not run"; null for a bug (rethrow it). */
export function asDoctorError(err: unknown): DoctorError | null {
  if (err instanceof DoctorError) return err;
  if (err instanceof KubeError) return new DoctorError(FROM_KUBE[err.code], err.message, { cause: err });
  return null;
}
