/**
 * Passive upstream health (docs/edge-rules.md "Upstream health"; nginx `max_fails` /
 * `fail_timeout`): whether each target of a group may take a request now. Every engine reports
 * what became of each attempt (http-events.ts upstreamFailed / upstreamAnswered): `maxFails`
 * failures in a row, the first no older than `failTimeoutMs`, take the target out for
 * `failTimeoutMs`; then it is tried again (one success puts it back, one failure takes it out for
 * another window). As in nginx, a group of one target is never taken out (there is nowhere else
 * to send the request: better to try it).
 *
 * Each worker keeps its own state (it sees its own failures, as each nginx worker does). A group
 * without `upstreamHealth` has no GroupHealth at all: its round robin is a counter, as before.
 */
import type { PassiveHealthConfig } from '../schema/config';

/** One target's state in one group. */
export class TargetHealth {
  /** Out until this performance.now(), 0: not out. */
  outUntil = 0;
  /** Failures in a row, and when the first of them was. */
  fails = 0;
  firstFailAt = 0;

  constructor(private readonly passive: Readonly<PassiveHealthConfig> | null) {}

  up(now: number): boolean {
    return this.outUntil === 0 || now >= this.outUntil;
  }

  /** A failed connect, a timeout, or an upstream fault before the response head. */
  failed(now: number): void {
    const p = this.passive;
    if (p === null) return;
    if (this.fails === 0 || now - this.firstFailAt > p.failTimeoutMs) {
      this.fails = 0;
      this.firstFailAt = now;
    }
    this.fails++;
    if (this.fails >= p.maxFails) {
      this.outUntil = now + p.failTimeoutMs;
      this.fails = 0;
    }
  }

  /** A response head from the target: a failure if `statuses` names its status, else a success. */
  answered(status: number, now: number): void {
    const p = this.passive;
    if (p === null) return;
    if (p.statuses.length > 0 && p.statuses.includes(status)) {
      this.failed(now);
      return;
    }
    this.fails = 0;
    if (this.outUntil !== 0 && now >= this.outUntil) this.outUntil = 0;
  }
}

export class GroupHealth {
  readonly targets: TargetHealth[];

  constructor(size: number, passive: Readonly<PassiveHealthConfig> | null) {
    // One target: never taken out (nginx ignores max_fails for a single server).
    const p = size > 1 ? passive : null;
    this.targets = Array.from({ length: size }, () => new TargetHealth(p));
  }

  up(index: number, now: number): boolean {
    return this.targets[index]!.up(now);
  }
}
