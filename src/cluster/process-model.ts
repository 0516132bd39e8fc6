/**
 * How `ipgate run` is laid out in processes, decided from the config alone: one process, or a
 * primary (store, admin API, /metrics) with N cluster workers (listeners). Why the admin API gets
 * a process of its own even at `workers: 1`, and the scheduling choice: primary.ts. A module with
 * no dependencies, so main.ts can decide before loading either side's code.
 */
import os from 'node:os';
import type { Config } from '../schema/config';

/** The scheduling policy chosen with bench/load for several workers (primary.ts's file comment). */
const SCHEDULING: 'rr' | 'none' = 'rr';

/** The policy for `n` workers: SCHEDULING, except SCHED_NONE for a single worker (nothing to spread). */
export function schedulingFor(n: number): 'rr' | 'none' {
  return n === 1 ? 'none' : SCHEDULING;
}

/** `workers` from the config as a process count: `auto` is one per available core. */
export function workerCount(workers: number | 'auto', cores = os.availableParallelism()): number {
  return workers === 'auto' ? Math.max(1, cores) : workers;
}

/** How the process runs: one process for everything, or a primary with `workers` cluster workers. */
interface ProcessModel {
  kind: 'single' | 'cluster';
  /** Processes running the listeners (1 for `single`: this one). */
  workers: number;
  /** Why, for the start-up log. */
  reason: string;
}

export function processModel(config: Pick<Config, 'workers' | 'admin'>, cores = os.availableParallelism()): ProcessModel {
  const n = workerCount(config.workers, cores);
  if (n > 1) return { kind: 'cluster', workers: n, reason: config.workers === 'auto' ? `workers: auto (${n} cores)` : `workers: ${n}` };
  if (config.admin.listen === null) return { kind: 'single', workers: 1, reason: 'no admin API (admin.listen: null)' };
  if (!config.admin.separateProcess) return { kind: 'single', workers: 1, reason: 'admin.separateProcess: false' };
  return { kind: 'cluster', workers: 1, reason: 'admin API in its own process' };
}
