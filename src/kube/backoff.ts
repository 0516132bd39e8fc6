/**
 * Exponential backoff with jitter for retrying the Kubernetes API: `initialMs * 2^attempt`, capped
 * at `maxMs`, then a random point in its upper half ("equal jitter"), so replicas that lost the API
 * at the same moment do not come back in lockstep and hammer it together.
 */
export interface BackoffPolicy {
  /** First delay. */
  readonly initialMs: number;
  /** Largest delay. */
  readonly maxMs: number;
}

/** Delay before retry number `attempt` (0 = the first retry). */
export function backoffDelay(policy: BackoffPolicy, attempt: number, random: () => number = Math.random): number {
  const exp = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(exp / 2 + random() * (exp / 2));
}
