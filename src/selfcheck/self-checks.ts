/**
 * ipgate's self-checks, per listener: source NAT suspicion (source-nat-check.ts) and the PROXY
 * header counts that reveal a misplaced trust boundary. One plain object (`state()`) serves
 * `/readyz` (`readinessChecks()`), the metrics collector and the log.
 *
 * Logging: the state is evaluated every `evaluateMs` (1 s, a few integer reads per listener); a
 * listener that becomes suspected is logged at once (warn), then at most once per `logIntervalMs`
 * while it stays so, and once more (info) when it clears. Never a line per connection.
 */
import type { Logger } from 'pino';
import { Matcher } from '../allowlist/matcher';
import type { ListenerConfig } from '../schema/config';
import type { ListenerStats } from '../metrics/listener-stats';
import type { LiveLists } from '../store/live-lists';
import { SourceNatCheck, SOURCE_NAT_DEFAULTS, type SourceNatOptions, type SourceNatState } from './source-nat-check';

interface SelfCheckOptions extends SourceNatOptions {
  /** Evaluation tick. Default 1000. */
  evaluateMs: number;
  /** A suspicion that persists is logged again after this long. Default 60000. */
  logIntervalMs: number;
  /** The PROXY trust checks compare refusals and accepted headers over this window. Default 60000. */
  trustWindowMs: number;
}

const SELF_CHECK_DEFAULTS: Readonly<SelfCheckOptions> = Object.freeze({
  ...SOURCE_NAT_DEFAULTS,
  evaluateMs: 1000,
  logIntervalMs: 60_000,
  trustWindowMs: 60_000,
});

/** PROXY header counts of one listener, from `ListenerStats.proxyHeader`. */
interface ProxyHeaderState {
  /** Headers refused because the peer is not in trustedSources (`v1/pp_untrusted`, `v2/pp_untrusted`). */
  refusedUntrustedV1: number;
  refusedUntrustedV2: number;
  /** `required` mode: untrusted peers closed before reading (`none/pp_untrusted`). */
  closedUntrusted: number;
  /** Trusted peers that sent no header: `required` -> closed (`none/pp_missing`), `optional` -> admitted (`none/trusted_none`). */
  trustedMissing: number;
  trustedWithoutHeader: number;
  /** Headers believed (`v1/ok` + `v2/ok`). */
  accepted: number;
}

/** The same counts over the last `trustWindowMs` (sampled every `evaluateMs`). */
interface ProxyHeaderWindow {
  windowMs: number;
  refusedUntrusted: number;
  trustedWithoutHeader: number;
  accepted: number;
}

interface ListenerSelfCheckState {
  sourceNat: SourceNatState;
  /** Totals since start. */
  proxyHeader: ProxyHeaderState;
  proxyHeaderRecent: ProxyHeaderWindow;
}

interface SelfCheckState {
  /** The configured clusterNetworks (empty: the source NAT check is off). */
  clusterNetworks: readonly string[];
  thresholds: { windowConnections: number; minConnections: number; threshold: number };
  listeners: Record<string, ListenerSelfCheckState>;
}

/** The `/readyz` check shape (the admin API's ReadinessCheck, plus the fix doctor shows). */
export interface SelfCheckReadiness {
  name: string;
  status: 'ok' | 'warn' | 'error';
  message: string;
  fix?: string;
}

interface Entry {
  name: string;
  config: Readonly<ListenerConfig>;
  stats: ListenerStats;
  check: SourceNatCheck;
  /** Time of the last "suspected" log line; 0 while not suspected. */
  loggedAt: number;
  /** Per evaluation tick: deltas of [refusedUntrusted, trustedWithoutHeader, accepted], a ring. */
  ticks: Int32Array;
  tick: number;
  last: [number, number, number];
}

const SNAT_FIX =
  'set externalTrafficPolicy: Local on the ipgate Service (and run ipgate on every node that receives traffic), or have the load balancer send PROXY v2 and trust only its addresses; see docs/real-ip.md and `ipgate doctor`';
const UNTRUSTED_FIX =
  'if these are your load balancer, add the addresses it connects from (as ipgate sees them) to proxyProtocol.trustedSources; under externalTrafficPolicy: Cluster those are node addresses, so use Local instead (docs/real-ip.md)';
const MISSING_FIX = 'enable PROXY protocol (v2) on the load balancer for this port, or remove its address from trustedSources';

export class SelfChecks {
  private readonly entries: Entry[] = [];
  private readonly clusterNetworks: Matcher;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly networks: readonly string[],
    private readonly log: Logger,
    private readonly options: Readonly<SelfCheckOptions> = SELF_CHECK_DEFAULTS,
  ) {
    this.clusterNetworks = Matcher.compile(networks.map((cidr) => ({ cidr })));
  }

  /** The observer a listener feeds with its peers. */
  add(config: Readonly<ListenerConfig>, stats: ListenerStats, lists: LiveLists | null = null): SourceNatCheck {
    const check = new SourceNatCheck(config, this.clusterNetworks, this.options, lists);
    const slots = Math.max(1, Math.ceil(this.options.trustWindowMs / this.options.evaluateMs));
    this.entries.push({
      name: config.name,
      config,
      stats,
      check,
      loggedAt: 0,
      ticks: new Int32Array(slots * 3),
      tick: 0,
      last: trustCounts(stats),
    });
    return check;
  }

  start(): void {
    if (this.timer !== null || this.entries.length === 0) return;
    this.timer = setInterval(() => this.evaluate(Date.now()), this.options.evaluateMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** One evaluation tick (exported for tests: they pass the clock). */
  evaluate(now: number): void {
    for (const e of this.entries) {
      const now3 = trustCounts(e.stats);
      const at = e.tick * 3;
      for (let i = 0; i < 3; i++) e.ticks[at + i] = now3[i]! - e.last[i]!;
      e.last = now3;
      e.tick = (e.tick + 1) % (e.ticks.length / 3);
      const suspected = e.check.suspected;
      if (suspected && (e.loggedAt === 0 || now - e.loggedAt >= this.options.logIntervalMs)) {
        const s = e.check.state();
        this.log.warn(
          {
            listener: e.name,
            selfCheck: 'source_nat',
            windowConnections: s.windowConnections,
            fromClusterNetworks: s.windowFromClusterNetworks,
            share: round(s.share),
            lastClusterPeer: s.lastClusterPeer,
          },
          `source NAT suspected on listener ${e.name}: ${pct(s.share)} of the last ${s.windowConnections} connections came from clusterNetworks (e.g. ${s.lastClusterPeer ?? '?'}); client addresses are being rewritten before ipgate`,
        );
        e.loggedAt = now;
      } else if (!suspected && e.loggedAt !== 0) {
        this.log.info({ listener: e.name, selfCheck: 'source_nat' }, `source NAT no longer suspected on listener ${e.name}`);
        e.loggedAt = 0;
      }
    }
  }

  state(): SelfCheckState {
    const listeners: Record<string, ListenerSelfCheckState> = {};
    for (const e of this.entries) {
      listeners[e.name] = { sourceNat: e.check.state(), proxyHeader: proxyHeaderState(e.stats), proxyHeaderRecent: this.recent(e) };
    }
    const o = this.options;
    return {
      clusterNetworks: this.networks,
      thresholds: { windowConnections: o.windowConnections, minConnections: o.minConnections, threshold: o.threshold },
      listeners,
    };
  }

  /** `/readyz` checks: warnings never make ipgate unready (it still serves; the warning is the news). */
  readinessChecks(): SelfCheckReadiness[] {
    const out: SelfCheckReadiness[] = [];
    for (const e of this.entries) {
      const s = e.check.state();
      if (s.public) {
        out.push(
          s.suspected
            ? {
                name: `source_nat.${e.name}`,
                status: 'warn',
                fix: SNAT_FIX,
                message: `source NAT suspected: ${pct(s.share)} of the last ${s.windowConnections} connections to listener ${e.name} came from clusterNetworks (last ${s.lastClusterPeer ?? '?'}), not from clients`,
              }
            : {
                name: `source_nat.${e.name}`,
                status: 'ok',
                message: `${s.windowFromClusterNetworks} of the last ${s.windowConnections} connections to listener ${e.name} came from clusterNetworks`,
              },
        );
      }
      if (e.config.proxyProtocol.mode === 'off') continue;
      const p = proxyHeaderState(e.stats);
      const w = this.recent(e);
      const secs = Math.round(w.windowMs / 1000);
      const refused = p.refusedUntrustedV1 + p.refusedUntrustedV2 + p.closedUntrusted;
      // Scanners get refused too: a warning needs refusals to outnumber accepted headers recently
      // (the balancer's own connections refused: trustedSources does not match what ipgate sees).
      if (refused > 0) {
        out.push({
          name: `proxy_untrusted.${e.name}`,
          status: w.refusedUntrusted > 0 && w.refusedUntrusted >= w.accepted ? 'warn' : 'ok',
          fix: UNTRUSTED_FIX,
          message: `listener ${e.name}: in the last ${secs} s ${w.refusedUntrusted} connection(s) from peers outside proxyProtocol.trustedSources refused, ${w.accepted} PROXY header(s) accepted (since start: headers v1 ${p.refusedUntrustedV1}, v2 ${p.refusedUntrustedV2}, closed unread in required mode ${p.closedUntrusted}; accepted ${p.accepted})`,
        });
      }
      const missing = p.trustedMissing + p.trustedWithoutHeader;
      if (missing > 0) {
        out.push({
          name: `proxy_missing.${e.name}`,
          status: w.trustedWithoutHeader > 0 && w.trustedWithoutHeader >= w.accepted ? 'warn' : 'ok',
          fix: MISSING_FIX,
          message: `listener ${e.name}: in the last ${secs} s ${w.trustedWithoutHeader} connection(s) from trusted sources without a PROXY header, ${w.accepted} with one (since start: ${p.trustedMissing} closed, ${p.trustedWithoutHeader} admitted with the socket address)`,
        });
      }
    }
    return out;
  }

  /** Window sums, plus what happened since the last tick (so a fresh refusal shows at once). */
  private recent(e: Entry): ProxyHeaderWindow {
    const sums = trustCounts(e.stats).map((v, i) => v - e.last[i]!);
    for (let k = 0; k < e.ticks.length; k += 3) for (let i = 0; i < 3; i++) sums[i]! += e.ticks[k + i]!;
    return { windowMs: this.options.trustWindowMs, refusedUntrusted: sums[0]!, trustedWithoutHeader: sums[1]!, accepted: sums[2]! };
  }
}

/** [refused from untrusted peers, trusted peers without a header, accepted headers] since start. */
function trustCounts(stats: ListenerStats): [number, number, number] {
  const p = proxyHeaderState(stats);
  return [p.refusedUntrustedV1 + p.refusedUntrustedV2 + p.closedUntrusted, p.trustedMissing + p.trustedWithoutHeader, p.accepted];
}

function proxyHeaderState(stats: ListenerStats): ProxyHeaderState {
  const m = stats.proxyHeader;
  const n = (k: string): number => m.get(k) ?? 0;
  return {
    refusedUntrustedV1: n('v1/pp_untrusted'),
    refusedUntrustedV2: n('v2/pp_untrusted'),
    closedUntrusted: n('none/pp_untrusted'),
    trustedMissing: n('none/pp_missing'),
    trustedWithoutHeader: n('none/trusted_none'),
    accepted: n('v1/ok') + n('v2/ok'),
  };
}

function pct(share: number): string {
  return `${Math.round(share * 100)}%`;
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
