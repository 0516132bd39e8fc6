/**
 * Why `ipgate doctor` could not run at all (exit code 2). Findings about the cluster are values
 * (see finding.ts), never errors: only "I could not look" is thrown.
 */
export type DoctorErrorCode =
  | 'IPGATE_DOCTOR_USAGE' // bad flags
  | 'IPGATE_DOCTOR_KUBECONFIG' // no usable kubeconfig / in-cluster credentials
  | 'IPGATE_DOCTOR_API_UNREACHABLE' // TCP/TLS failure or timeout talking to the API server
  | 'IPGATE_DOCTOR_API_STATUS'; // the API answered, but not with what we asked for (401, 403, 5xx)

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

/** An HTTP answer from the API server other than 2xx (and other than 404 where 404 means "absent"). */
export class KubeStatusError extends DoctorError {
  constructor(
    readonly status: number,
    readonly path: string,
    readonly reason: string,
  ) {
    super('IPGATE_DOCTOR_API_STATUS', `GET ${path}: HTTP ${status}: ${reason}`);
    this.name = 'KubeStatusError';
  }
}
