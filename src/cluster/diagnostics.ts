/**
 * What the primary's admin API answers about listeners it does not have: the workers' self-checks
 * merged for /readyz, and the listeners as /v1/explain sees them.
 */
import type { ExplainTarget } from '../admin/routes/explain';
import type { Config } from '../schema/config';
import type { SelfCheckReadiness } from '../selfcheck/self-checks';
import type { LiveLists } from '../store/live-lists';

const RANK = { ok: 0, warn: 1, error: 2 } as const;

/**
 * The workers' self-checks as one list, in first-seen order: per check name the worst status wins,
 * with that worker's message and fix. With one worker its checks pass through unchanged; with
 * several, the message says which worker it is from (each worker sees only its own connections).
 */
export function mergeSelfChecks(answers: ReadonlyArray<{ worker: number; reply: readonly SelfCheckReadiness[] }>): SelfCheckReadiness[] {
  if (answers.length === 1) return [...answers[0]!.reply];
  const worst = new Map<string, { check: SelfCheckReadiness; worker: number; count: number }>();
  for (const { worker, reply } of answers) {
    for (const check of reply) {
      const seen = worst.get(check.name);
      if (seen === undefined) worst.set(check.name, { check, worker, count: 1 });
      else {
        seen.count++;
        if (RANK[check.status] > RANK[seen.check.status]) Object.assign(seen, { check, worker });
      }
    }
  }
  return [...worst.values()].map(({ check, worker, count }) => ({
    ...check,
    message: `${check.message} (worker ${worker}, the worst of ${count} workers reporting it)`,
  }));
}

/** The listeners of `config` with the primary's own lists (the ones every worker is sent). */
export function explainTargets(config: Pick<Config, 'listeners'>, lists: LiveLists): ExplainTarget[] {
  return config.listeners.map((lc) => ({ name: lc.name, config: lc, list: lists.get(lc.allowlist) }));
}
