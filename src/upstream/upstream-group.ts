/**
 * An upstream group: the targets of a listener or of a route, tried round robin, the next one on
 * connect failure. Shared by the TCP forwarder, the HTTP forwarder and SNI routes (a route with
 * its own upstreams has its own group, so its own round robin; routes with the same targets and
 * health rules share one, as HTTP routes always have).
 *
 * With `upstreamHealth` (upstream-health.ts) the round robin skips targets that are out, a retry
 * goes to the next target that is up, and `anyUp` lets the policy answer 503 (a TCP listener:
 * close) without a connect when none is. With `upstreamHealth.active` the group owns the checks
 * of its targets (active-check.ts): whoever puts a group into force starts them (`startChecks`),
 * and stops them when it leaves (`stopChecks`). Without health rules (`health` null) the round
 * robin is a counter, as it always was.
 */
import { performance } from 'node:perf_hooks';
import net from 'node:net';
import { parseHostPort, type HostPort } from '../address/host-port';
import { formatHostPort } from '../identity/address';
import type { UpstreamHealthConfig } from '../schema/config';
import { ActiveChecker, type CheckContext } from './active-check';
import { GroupHealth, type TargetHealth } from './upstream-health';

export interface Upstream extends HostPort {
  /** `host:port` for logs. */
  label: string;
  /** 4 or 6 for an IP literal, 0 for a name (net.isIP, once here rather than per connection). */
  family: 0 | 4 | 6;
  /** Its state in its group (passive reports go here), null when the group has no health rules. */
  health: TargetHealth | null;
}

export function parseUpstreams(list: readonly string[]): Upstream[] {
  return list.map((text) => {
    const hp = parseHostPort(text, false);
    if (typeof hp === 'string') throw new Error(`upstream "${text}": ${hp}`);
    return { ...hp, label: formatHostPort(hp.host, hp.port), family: net.isIP(hp.host) as 0 | 4 | 6, health: null };
  });
}

/**
 * HTTP groups whose upstreams speak HTTP/2 (`upstreamProtocol` h2c or h2): streams go over a shared
 * HTTP/2 connection per target (forward/http/h2/h2-upstream.ts) instead of the HTTP/1.1 pool.
 */
export interface Http2Upstream {
  /** `h2`: over TLS, verified against `ca`; `h2c`: plaintext. */
  readonly tls: boolean;
  /** PEM of the CAs to trust (`upstreamCA`), null: Node's bundled CAs. */
  readonly ca: Buffer | null;
}

/** Round robin over targets; a failed connect moves to the next one, each tried at most once. */
export class UpstreamGroup {
  private next = 0;
  /** The group's active checks (null: none). */
  private readonly checker: ActiveChecker | null = null;

  constructor(
    readonly targets: readonly Upstream[],
    /** The group's health (its targets' `health` point into it), null without `upstreamHealth`. */
    readonly health: GroupHealth | null = null,
    /** HTTP listeners: the group's upstreams speak HTTP/2 (null: HTTP/1.1, and every TCP group). */
    readonly http2: Http2Upstream | null = null,
  ) {
    if (health !== null) {
      targets.forEach((t, i) => {
        t.health = health.targets[i]!;
      });
      if (health.active !== null) this.checker = new ActiveChecker(targets, health.active);
    }
  }

  /** Start the active checks, if the group has them (idempotent: a group kept by a reload keeps its timers). */
  startChecks(ctx: CheckContext): void {
    this.checker?.start(ctx);
  }

  /** Stop them: the group left the config in force, or the listener drains. */
  stopChecks(): void {
    this.checker?.stop();
  }

  /** Whether active checks are running (tests, and the reload's bookkeeping). */
  get checking(): boolean {
    return this.checker?.active === true;
  }

  /**
   * Index of the first target to try for a new connection: the round robin's next one that is up;
   * when none is (the policy answers those requests 503 before they get here, so this is a race
   * with a state change), the round robin's next one regardless.
   */
  start(): number {
    const n = this.targets.length;
    const i = this.next;
    this.next = (i + 1) % n;
    const h = this.health;
    if (h === null) return i;
    const now = performance.now();
    for (let k = 0; k < n; k++) {
      const j = (i + k) % n;
      if (h.up(j, now)) {
        this.next = (j + 1) % n;
        return j;
      }
    }
    return i;
  }

  /**
   * The offset from `first` (a request's first target) of the next target to try, at `from` or
   * after it, skipping targets that are out; -1 when none is left (each target is tried at most
   * once per request: offsets run from 1 to the group's size - 1).
   */
  nextOffset(first: number, from: number): number {
    const n = this.targets.length;
    const h = this.health;
    if (h === null) return from < n ? from : -1;
    const now = performance.now();
    for (let k = from; k < n; k++) if (h.up((first + k) % n, now)) return k;
    return -1;
  }

  /** Whether any target may take a request now (always, without health rules). */
  anyUp(): boolean {
    const h = this.health;
    if (h === null) return true;
    const now = performance.now();
    for (let i = 0; i < this.targets.length; i++) if (h.up(i, now)) return true;
    return false;
  }
}

/** The key a group is shared and kept across reloads by: its targets, and its health rules if any. */
export function groupKey(targets: readonly string[], health: Readonly<UpstreamHealthConfig>): string {
  return (health.passive ?? null) !== null || (health.active ?? null) !== null
    ? `${targets.join(',')}|${JSON.stringify(health)}`
    : targets.join(',');
}

/** A group of `targets` with `health`'s rules (none: a plain round robin); its checks are not started. */
export function buildGroup(
  targets: readonly string[],
  health: Readonly<UpstreamHealthConfig>,
  http2: Http2Upstream | null = null,
): UpstreamGroup {
  const ups = parseUpstreams(targets);
  // A config built in code rather than loaded may leave out a section whose default is null.
  const passive = health.passive ?? null;
  const active = health.active ?? null;
  const h = passive === null && active === null ? null : new GroupHealth(ups.length, passive, active);
  return new UpstreamGroup(ups, h, http2);
}
