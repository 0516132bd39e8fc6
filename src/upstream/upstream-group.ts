/**
 * An upstream group: the targets of a listener or of a route, tried round robin, the next one on
 * connect failure. Shared by the TCP forwarder, the HTTP forwarder and SNI routes (each route has
 * its own group, so its own round robin).
 */
import net from 'node:net';
import { parseHostPort, type HostPort } from '../address/host-port';
import { formatHostPort } from '../identity/address';

export interface Upstream extends HostPort {
  /** `host:port` for logs. */
  label: string;
  /** 4 or 6 for an IP literal, 0 for a name (net.isIP, once here rather than per connection). */
  family: 0 | 4 | 6;
}

export function parseUpstreams(list: readonly string[]): Upstream[] {
  return list.map((text) => {
    const hp = parseHostPort(text, false);
    if (typeof hp === 'string') throw new Error(`upstream "${text}": ${hp}`);
    return { ...hp, label: formatHostPort(hp.host, hp.port), family: net.isIP(hp.host) as 0 | 4 | 6 };
  });
}

/** Round robin over targets; a failed connect moves to the next one, each tried at most once. */
export class UpstreamGroup {
  private next = 0;
  constructor(readonly targets: readonly Upstream[]) {}
  /** Index of the first target to try for a new connection. */
  start(): number {
    const i = this.next;
    this.next = (i + 1) % this.targets.length;
    return i;
  }
}
