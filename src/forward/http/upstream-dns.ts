/**
 * Upstream names (a Kubernetes Service, `backend.ns.svc:8080`) resolved with a cache: the system
 * resolver (getaddrinfo, so /etc/hosts and the pod's resolv.conf search list apply) is asked at most
 * once per name per `http.upstreamDnsTtlMs`, not once per connection as net.connect would, and
 * every address it gave is kept: net.connect (autoSelectFamily) tries them in turn, so a refused or
 * unreachable address fails over to the next one.
 *
 * getaddrinfo gives no TTL, so the cache's lifetime is the operator's (nginx `resolver ... valid=`
 * plays the same role). A failed lookup with an expired entry still cached serves the old addresses
 * (a resolver outage should not take a working upstream down) and asks again on the next connect.
 */
import dns, { type LookupAddress } from 'node:dns';

type LookupOptions = dns.LookupOptions;
type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
type Resolve = (
  host: string,
  options: dns.LookupAllOptions,
  cb: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

interface Entry {
  addresses: LookupAddress[] | null;
  expires: number;
  /** Callbacks waiting for a lookup in progress (one lookup per name at a time). */
  waiting: ((err: NodeJS.ErrnoException | null, addresses: LookupAddress[] | null) => void)[] | null;
}

export class DnsCache {
  private readonly entries = new Map<string, Entry>();
  /** Lookups made (cache misses): tests and the doctor read it. */
  lookups = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly resolve: Resolve = dns.lookup as unknown as Resolve,
    private readonly now: () => number = Date.now,
  ) {}

  /** net.connect's `lookup` option. */
  readonly lookup = (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    this.addresses(hostname, (err, addresses) => {
      if (addresses === null || addresses.length === 0) {
        callback(err ?? Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
        return;
      }
      const family = options.family === 4 || options.family === 6 ? options.family : 0;
      const list = family === 0 ? addresses : addresses.filter((a) => a.family === family);
      if (list.length === 0) {
        callback(Object.assign(new Error(`no IPv${family} address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
        return;
      }
      if (options.all === true) callback(null, list);
      else callback(null, list[0]!.address, list[0]!.family);
    });
  };

  private addresses(host: string, cb: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[] | null) => void): void {
    let e = this.entries.get(host);
    const now = this.now();
    if (e !== undefined && e.addresses !== null && now < e.expires) {
      cb(null, e.addresses);
      return;
    }
    if (e === undefined) this.entries.set(host, (e = { addresses: null, expires: 0, waiting: null }));
    if (e.waiting !== null) {
      e.waiting.push(cb);
      return;
    }
    const entry = e;
    entry.waiting = [cb];
    this.lookups++;
    this.resolve(host, { all: true }, (err, addresses) => {
      const waiting = entry.waiting ?? [];
      entry.waiting = null;
      if (err === null && addresses.length > 0) {
        entry.addresses = addresses;
        entry.expires = this.now() + this.ttlMs;
      }
      // On failure the old addresses, if any, are served (and asked for again next time).
      const result = entry.addresses;
      for (const w of waiting) w(result === null ? err : null, result);
    });
  }
}
