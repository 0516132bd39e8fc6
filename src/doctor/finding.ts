/**
 * One thing doctor found: how bad, what it is in one line, and what to do about it.
 * `id` is stable (scripts and tests match on it); `statement` and `fix` are for people.
 */
export type Severity = 'ok' | 'info' | 'warn' | 'error';

export interface Finding {
  /** Stable code, e.g. `service.external-traffic-policy.cluster`, `nodes.no-ready-pod`. */
  readonly id: string;
  readonly severity: Severity;
  /** What it is about: `service/ipgate/ipgate`, `node/worker-2`, `kube-proxy`, `calico`, `ipgate`. */
  readonly subject: string;
  /** One line: what is true, and why it matters for the client IP. */
  readonly statement: string;
  /** What to change; present on warn and error, optional elsewhere. */
  readonly fix?: string;
  /** A command that shows the same fact on the cluster or node. */
  readonly check?: string;
}

export function countBySeverity(findings: readonly Finding[]): Record<Severity, number> {
  const counts: Record<Severity, number> = { error: 0, warn: 0, info: 0, ok: 0 };
  for (const f of findings) counts[f.severity]++;
  return counts;
}

/** 0: no error findings; 1: at least one. (2, "could not read the API", is decided by the CLI.) */
export function exitCodeFor(findings: readonly Finding[]): 0 | 1 {
  return findings.some((f) => f.severity === 'error') ? 1 : 0;
}
