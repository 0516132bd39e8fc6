/**
 * The reason label of an upstream failure: the log field and the metric label
 * (`ipgate_upstream_errors_total{reason}`), shared by the TCP and HTTP forwarders so both name a
 * failure the same way.
 */
import type { UpstreamReason } from '../reasons';

export function upstreamReason(err: NodeJS.ErrnoException): UpstreamReason {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'upstream_refused';
    case 'ETIMEDOUT':
      return 'upstream_timeout';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'upstream_dns';
    case 'ECONNRESET':
    case 'EPIPE':
      return 'upstream_reset';
    default:
      return 'upstream_error';
  }
}
