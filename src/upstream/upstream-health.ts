/**
 * Upstream health (docs/edge-rules.md "Upstream health"): whether each target of a group may take
 * a request now.
 *
 * Passive (nginx `max_fails` / `fail_timeout`): every engine reports what became of each attempt
 * (http-events.ts upstreamFailed / upstreamAnswered, the TCP forwarder's connects): `maxFails`
 * failures in a row, the first no older than `failTimeoutMs`, take the target out for
 * `failTimeoutMs`; then it is tried again (one success puts it back, one failure takes it out for
 * another window). As in nginx, a group of one target is never taken out passively (there is
 * nowhere else to send the request: better to try it).
 *
 * Active (HAProxy `check inter / rise / fall`; active-check.ts runs the probes): `fall` failed
 * checks in a row take the target down, `rise` good ones in a row bring it back. With both, a
 * passive failure run takes the target down the same way and only the checks bring it back
 * (HAProxy `observe layer4|layer7` with `on-error mark-down`): a window that runs out says nothing
 * about whether the target recovered, a check does. Active checks apply to a group of one target
 * too (HAProxy's 503 "no server available", rather than a connect that is known to fail).
 *
 * Each worker keeps its own state (it sees its own failures and runs its own checks, as each nginx
 * worker and each HAProxy process does). A group without `upstreamHealth` has no GroupHealth at
 * all: its round robin is a counter, as before.
 */
import type { ActiveHealthConfig, PassiveHealthConfig } from '../schema/config';

/** One target's state in one group. */
export class TargetHealth {
  /** Passive only: out until this performance.now(), 0: not out. */
  outUntil = 0;
  /** Failures in a row, and when the first of them was. */
  fails = 0;
  firstFailAt = 0;
  /** With active checks: down (by `fall` checks, or by a passive failure run) until `rise` good checks. */
  down = false;
  /** With active checks: good checks in a row while down, failed ones in a row while up. */
  run = 0;

  constructor(
    private readonly passive: Readonly<PassiveHealthConfig> | null,
    readonly active: Readonly<ActiveHealthConfig> | null,
  ) {}

  up(now: number): boolean {
    return !this.down && (this.outUntil === 0 || now >= this.outUntil);
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
      this.fails = 0;
      if (this.active !== null) {
        // Down until the checks see it back (HAProxy on-error mark-down), not for a window.
        this.down = true;
        this.run = 0;
      } else {
        this.outUntil = now + p.failTimeoutMs;
      }
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
    this.succeeded(now);
  }

  /** A success (a response head not counted as a failure; TCP: a connect): the failure run ends. */
  succeeded(now: number): void {
    this.fails = 0;
    if (this.outUntil !== 0 && now >= this.outUntil) this.outUntil = 0;
  }

  /** An active check's outcome; true when it changed the target's state (down <-> up). */
  checked(ok: boolean): boolean {
    const a = this.active;
    if (a === null) return false;
    if (this.down === ok) this.run++;
    else this.run = 0;
    if (this.down && this.run >= a.rise) {
      this.down = false;
      this.run = 0;
      this.fails = 0;
      return true;
    }
    if (!this.down && this.run >= a.fall) {
      this.down = true;
      this.run = 0;
      return true;
    }
    return false;
  }
}

export class GroupHealth {
  readonly targets: TargetHealth[];

  constructor(
    size: number,
    passive: Readonly<PassiveHealthConfig> | null,
    readonly active: Readonly<ActiveHealthConfig> | null,
  ) {
    // One target: never taken out passively (nginx ignores max_fails for a single server).
    const p = size > 1 ? passive : null;
    this.targets = Array.from({ length: size }, () => new TargetHealth(p, active));
  }

  up(index: number, now: number): boolean {
    return this.targets[index]!.up(now);
  }
}
