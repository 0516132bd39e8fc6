/**
 * A set of addresses given in the config either as CIDRs or as the name of an allowlist
 * (`proxyProtocol.trustedSources`, `http.trustedProxies`): CIDRs compile once into a Matcher; a
 * name resolves to the list's LiveList holder, whose `.matcher` is read per lookup, so an edit of
 * that list (admin API, config file, another replica) takes effect at the next connection or
 * request, without a restart. A deny entry in such a list means "not trusted" (lookup < 0).
 */
import { Matcher } from '../allowlist/matcher';
import type { LiveList, LiveLists } from './live-lists';

/** What the identity stage needs of a set of trusted peers. */
export interface AddressLookup {
  /** Whether `address` is in the set (Matcher.admits). */
  admits(address: string): boolean;
}

/** A named list, read live. */
class ListRef implements AddressLookup {
  constructor(readonly list: LiveList) {}

  admits(address: string): boolean {
    return this.list.matcher.admits(address);
  }
}

/** Whether `set` is the named list `list` read live (a change of it may withdraw trust). */
export function readsList(set: AddressLookup, list: LiveList): boolean {
  return set instanceof ListRef && set.list === list;
}

/** CIDRs (compiled now) or a list name (read live from `lists`). */
export function addressSet(spec: readonly string[] | string, lists: LiveLists): AddressLookup {
  return typeof spec === 'string' ? new ListRef(lists.get(spec)) : Matcher.compile(spec.map((cidr) => ({ cidr })));
}

/** Config fields (`listeners[0].allowlist`, ...) that name the list `name`: DELETE refuses while any does. */
export function listUsers(
  listeners: ReadonlyArray<{
    name: string;
    allowlist: string;
    proxyProtocol: { trustedSources: readonly string[] | string };
    http: { trustedProxies: readonly string[] | string };
    mode: string;
    routes?: ReadonlyArray<{ name: string; allowlist?: string; limits?: LimitExempts }>;
    limits?: LimitExempts;
  }>,
  name: string,
): string[] {
  const out: string[] = [];
  listeners.forEach((l, i) => {
    const at = `listeners[${i}] (${l.name})`;
    if (l.allowlist === name) out.push(`${at}.allowlist`);
    if (l.proxyProtocol.trustedSources === name) out.push(`${at}.proxyProtocol.trustedSources`);
    if (l.http.trustedProxies === name) out.push(`${at}.http.trustedProxies`);
    exemptUsers(l.limits, `${at}.limits`, name, out);
    l.routes?.forEach((r, k) => {
      if (r.allowlist === name) out.push(`${at}.routes[${k}] (${r.name}).allowlist`);
      exemptUsers(r.limits, `${at}.routes[${k}] (${r.name}).limits`, name, out);
    });
  });
  return out;
}

/** A listener's or route's limits, as far as their `exempt` lists go. */
type LimitExempts = Readonly<Record<string, { exempt: readonly string[] } | null | undefined>>;

/** The limits (`limits.requests.exempt`, ...) that name the list `name`. */
function exemptUsers(limits: LimitExempts | undefined, at: string, name: string, out: string[]): void {
  if (limits === undefined) return;
  for (const [kind, l] of Object.entries(limits)) if (l?.exempt.includes(name)) out.push(`${at}.${kind}.exempt`);
}
