/**
 * "Source NAT suspected": the signature of a client address lost before ipgate.
 *
 * Under `externalTrafficPolicy: Cluster` (or an SNAT eBPF dataplane, or a proxying balancer inside
 * the cluster) every connection to a public listener arrives from a node or pod address instead of
 * the client's. No single connection proves it (a pod may legitimately call a public listener), but
 * when most of the recent peers of a public listener come from `clusterNetworks`, the client
 * addresses are being rewritten on the way, and every allowlist decision is made on the wrong
 * address.
 *
 * What counts:
 * - only listeners bound to a non-loopback address (`public`); a loopback listener only ever sees
 *   local peers;
 * - peers in `clusterNetworks` that are trusted by the listener (`proxyProtocol.trustedSources`,
 *   `http.trustedProxies`) are not counted at all: an in-cluster balancer or ingress is expected
 *   there, and the client comes from its header.
 *
 * The window is the last `windowConnections` counted connections (a ring of bits), so the verdict
 * follows a change of the network within that many connections at any rate, and needs no timer.
 * SNAT is structural (all or nothing per path), so a simple majority over a modest window is both
 * sensitive and stable: a few in-cluster callers among public clients do not trip it.
 *
 * Hot path cost: one matcher lookup per accepted connection (two for peers inside clusterNetworks),
 * a few integer operations, no allocation.
 */
import { addressSet, type AddressLookup } from '../store/list-ref';
import type { LiveLists } from '../store/live-lists';
import { Matcher } from '../allowlist/matcher';
import type { ListenerConfig } from '../schema/config';
import { parseHostPort } from '../address/host-port';

export interface SourceNatOptions {
  /** Connections in the sliding window. Default 100. */
  windowConnections: number;
  /** No verdict before this many connections are in the window. Default 20. */
  minConnections: number;
  /** Share of the window from clusterNetworks at or above which SNAT is suspected. Default 0.5. */
  threshold: number;
}

export const SOURCE_NAT_DEFAULTS: Readonly<SourceNatOptions> = Object.freeze({
  windowConnections: 100,
  minConnections: 20,
  threshold: 0.5,
});

/** The plain-number state of one listener's check (for /readyz, metrics and logs). */
export interface SourceNatState {
  /** Bound to a non-loopback address: the check applies. */
  public: boolean;
  suspected: boolean;
  /** Counted connections in the window, and how many of them came from clusterNetworks. */
  windowConnections: number;
  windowFromClusterNetworks: number;
  /** windowFromClusterNetworks / windowConnections (0 for an empty window). */
  share: number;
  /** Since start: counted connections, and those from clusterNetworks. */
  connectionsTotal: number;
  fromClusterNetworksTotal: number;
  /** Since start: peers in clusterNetworks not counted because the listener trusts them. */
  trustedClusterPeersTotal: number;
  /** The most recent peer from clusterNetworks (a node or pod address, never a client's). */
  lastClusterPeer: string | null;
}

export class SourceNatCheck {
  readonly public: boolean;
  private readonly ring: Uint8Array;
  private next = 0;
  private filled = 0;
  private inWindow = 0;
  private total = 0;
  private fromCluster = 0;
  private trustedInCluster = 0;
  private lastPeer: string | null = null;
  private readonly trusted: AddressLookup[];

  constructor(
    config: Readonly<ListenerConfig>,
    private readonly clusterNetworks: Matcher,
    private readonly options: Readonly<SourceNatOptions> = SOURCE_NAT_DEFAULTS,
    /** Resolves trustedSources / trustedProxies given as a list name (null: such a name trusts nobody here). */
    lists: LiveLists | null = null,
  ) {
    this.public = clusterNetworks.size > 0 && isPublicBind(config.listen);
    const specs = [config.proxyProtocol.trustedSources, ...(config.mode === 'http' ? [config.http.trustedProxies] : [])];
    this.trusted = specs.map((spec) =>
      typeof spec === 'string' ? (lists ? addressSet(spec, lists) : Matcher.EMPTY) : Matcher.compile(spec.map((cidr) => ({ cidr }))),
    );
    this.ring = new Uint8Array(options.windowConnections);
  }

  /** Record the peer (canonical address) of an accepted connection. */
  observe(peer: string): void {
    if (!this.public) return;
    let bit = 0;
    if (this.clusterNetworks.admits(peer)) {
      if (this.trusted.some((t) => t.admits(peer))) {
        this.trustedInCluster++;
        return;
      }
      bit = 1;
      this.fromCluster++;
      this.lastPeer = peer;
    }
    this.total++;
    if (this.filled === this.ring.length) this.inWindow -= this.ring[this.next]!;
    else this.filled++;
    this.ring[this.next] = bit;
    this.inWindow += bit;
    this.next = this.next + 1 === this.ring.length ? 0 : this.next + 1;
  }

  get suspected(): boolean {
    return this.filled >= this.options.minConnections && this.inWindow >= this.options.threshold * this.filled;
  }

  state(): SourceNatState {
    return {
      public: this.public,
      suspected: this.suspected,
      windowConnections: this.filled,
      windowFromClusterNetworks: this.inWindow,
      share: this.filled === 0 ? 0 : this.inWindow / this.filled,
      connectionsTotal: this.total,
      fromClusterNetworksTotal: this.fromCluster,
      trustedClusterPeersTotal: this.trustedInCluster,
      lastClusterPeer: this.lastPeer,
    };
  }
}

/** A listener bound to loopback only ever sees local peers; everything else may face clients. */
export function isPublicBind(listen: string): boolean {
  const hp = parseHostPort(listen, true);
  if (typeof hp === 'string') return true;
  const host = hp.host;
  return !(host === 'localhost' || host === '::1' || /^127\./.test(host) || /^::ffff:127\./i.test(host));
}
