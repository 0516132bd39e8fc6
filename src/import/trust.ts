/**
 * Whom an imported listener believes about the client address: the controller ConfigMap's
 * `use-proxy-protocol`, `use-forwarded-headers`, `enable-real-ip`, `proxy-real-ip-cidr`,
 * `forwarded-for-header` and `compute-full-forwarded-for`, and the operator's
 * `--proxy-real-ip-cidr` / `--trust-all-proxies` (docs/migrating-from-ingress-nginx.md, "Client
 * addresses and trust").
 *
 * What ingress-nginx does (nginx.tmpl, v1.15): the realip module is on when any of the three
 * booleans is; `set_real_ip_from` is `proxy-real-ip-cidr` (default `0.0.0.0/0`), checked against
 * the socket peer; `real_ip_recursive on`. `real_ip_header` is `proxy_protocol` with
 * use-proxy-protocol, else `forwarded-for-header` (default X-Forwarded-For). So:
 *   - use-proxy-protocol: the PROXY header's source is the client. X-Forwarded-For never chose it
 *     before 1.13; from 1.13, with use-forwarded-headers too, X-Forwarded-For is walked when the
 *     PROXY source itself lies in proxy-real-ip-cidr (kubernetes/ingress-nginx#12768, for an HTTP
 *     proxy in front of a TCP balancer). The importer cannot know the release, so it takes what
 *     every release did: the PROXY header names the client, and no `http.trustedProxies` is
 *     written (the report says how to add the 1.13 behaviour by hand).
 *   - use-forwarded-headers or enable-real-ip alone: the X-Forwarded-For walk from the peers in
 *     proxy-real-ip-cidr, which is `http.trustedProxies`.
 *
 * Two rules on top, so that an import never opens what the source had closed and never writes an
 * open door without being told to:
 *   - The peers trusted are proxy-real-ip-cidr, or the operator's `--proxy-real-ip-cidr`, which
 *     must lie inside it (ingress-nginx never believed a header from a peer outside it).
 *   - A range covering every address of a family (`0.0.0.0/0`, `::/0`, the default when
 *     proxy-real-ip-cidr is unset, or pieces adding up to it) lets any client choose the address
 *     the allowlist checks. It is written only with `--trust-all-proxies`; otherwise the import
 *     is refused, naming the flag that takes the balancers' CIDRs.
 */
import type { Cidr } from '../allowlist/cidr';
import { parseCidr } from '../allowlist/cidr';
import { TRUE } from './objects';
import type { ImportReport } from './report';
import { parseSourceRange, within } from './source-ranges';

/** The ConfigMap keys read here. */
export const TRUST_KEYS: readonly string[] = [
  'use-proxy-protocol',
  'use-forwarded-headers',
  'enable-real-ip',
  'proxy-real-ip-cidr',
  'forwarded-for-header',
  'compute-full-forwarded-for',
];

export interface TrustOptions {
  /** `--proxy-real-ip-cidr`: the balancers, in place of the ConfigMap's proxy-real-ip-cidr; null: the ConfigMap's. */
  proxyRealIpCidr: readonly Cidr[] | null;
  /** `--trust-all-proxies`: a trust-all range may be written. */
  trustAllProxies: boolean;
}

export interface Trust {
  /** `proxyProtocol.trustedSources` (mode `required`), or null: no PROXY protocol. */
  proxyProtocol: string[] | null;
  /** `http.trustedProxies`, or null: nobody's X-Forwarded-For. */
  trustedProxies: string[] | null;
  xForwardedFor: 'append' | 'replace';
}

const FLAG = '--proxy-real-ip-cidr';
const ALL_FLAG = '--trust-all-proxies';
const DEFAULT_CIDR = '0.0.0.0/0';

/**
 * The listener's trust from the ConfigMap's data (`source` names it in the report). A refusal
 * goes to `report.refused` and the result trusts nobody.
 */
export function importTrust(data: Readonly<Record<string, string>>, source: string, opts: TrustOptions, report: ImportReport): Trust {
  const out: Trust = { proxyProtocol: null, trustedProxies: null, xForwardedFor: 'replace' };
  const on = (key: string): boolean => TRUE.has(data[key] ?? '');
  const pp = on('use-proxy-protocol');
  const fh = on('use-forwarded-headers');
  const er = on('enable-real-ip');
  const note = (item: string, reason: string, value = data[item]): void => {
    report.notes.push({ source, item, ...(value !== undefined ? { value } : {}), reason });
  };

  // nginx.tmpl: `and $cfg.UseForwardedHeaders $cfg.ComputeFullForwardedFor`; else X-Forwarded-For: $remote_addr.
  if (on('compute-full-forwarded-for')) {
    if (!fh)
      note(
        'compute-full-forwarded-for',
        'has no effect without use-forwarded-headers (ingress-nginx sent X-Forwarded-For: <client>): http.xForwardedFor: replace',
      );
    else {
      out.xForwardedFor = 'append';
      if (pp)
        note(
          'compute-full-forwarded-for',
          'ingress-nginx appended the PROXY source to the X-Forwarded-For the client sent, unchecked; ipgate appends to the entries of trusted proxies only (none here), so the upstream gets the client alone, never an address the client wrote',
        );
    }
  }

  if (!pp && !fh && !er) {
    if (data['proxy-real-ip-cidr'] !== undefined)
      note('proxy-real-ip-cidr', 'has no effect without use-proxy-protocol, use-forwarded-headers or enable-real-ip: no peer is trusted');
    if (data['forwarded-for-header'] !== undefined)
      note('forwarded-for-header', 'has no effect without use-forwarded-headers or enable-real-ip (nothing to carry over)');
    const none =
      'ingress-nginx believed no PROXY header and no X-Forwarded-For (use-proxy-protocol, use-forwarded-headers and enable-real-ip are off), and neither does the import';
    if (opts.proxyRealIpCidr !== null) note(FLAG, `not used: ${none}`, cidrText(opts.proxyRealIpCidr));
    if (opts.trustAllProxies) report.notes.push({ source, item: ALL_FLAG, reason: `not used: ${none}` });
    return out;
  }

  if (pp && data['forwarded-for-header'] !== undefined) {
    note('forwarded-for-header', 'not used: with use-proxy-protocol the PROXY header names the client');
  }
  if (!pp) {
    const header = data['forwarded-for-header'] ?? 'X-Forwarded-For';
    if (header.toLowerCase() !== 'x-forwarded-for') {
      report.unconverted.push({
        source,
        item: 'forwarded-for-header',
        value: header,
        reason: 'ipgate reads the client address from X-Forwarded-For only; no proxy is trusted',
      });
      if (opts.proxyRealIpCidr !== null)
        note(FLAG, `not used: ingress-nginx read the client from ${header}, which ipgate does not read`, cidrText(opts.proxyRealIpCidr));
      return out;
    }
  }

  // The source's set_real_ip_from.
  const text = data['proxy-real-ip-cidr'];
  let sourceCidrs: readonly Cidr[];
  let sourceWhat: string;
  if (text === undefined || text.trim() === '') {
    sourceCidrs = [parsed(DEFAULT_CIDR)];
    sourceWhat = `proxy-real-ip-cidr (not set: ingress-nginx's default ${DEFAULT_CIDR})`;
  } else {
    const r = parseSourceRange(text);
    if (!r.ok) {
      // nginx -t refuses it, so the controller kept running an older configuration: which peers it
      // trusted is unknown here, and a flag cannot be checked against it.
      report.refused.push({
        source,
        item: 'proxy-real-ip-cidr',
        value: text,
        reason: `invalid: ${r.message}; nginx refuses such a configuration (the controller keeps running an older one), so which peers ingress-nginx trusted is unknown. Correct it in the input to the CIDRs ingress-nginx runs with (then ${FLAG} 10.0.0.0/24 may narrow them to your load balancers)`,
      });
      return out;
    } else {
      if (r.rewritten.length > 0) note('proxy-real-ip-cidr', `written as ipgate reads it: ${r.rewritten.join(', ')}`);
      sourceCidrs = r.cidrs;
    }
    sourceWhat = `proxy-real-ip-cidr ${JSON.stringify(text)}`;
  }

  let peers: readonly Cidr[];
  /** The peers trusted, as the report names them. */
  let peersWhat: string;
  /** The finding that names them: item, value, and the words before "trusts". */
  let cause: { item: string; value?: string; lead: string };
  if (opts.proxyRealIpCidr !== null) {
    const outside = opts.proxyRealIpCidr.filter((c) => !sourceCidrs.some((s) => within(c, s)));
    if (outside.length > 0) {
      report.refused.push({
        source,
        item: FLAG,
        value: cidrText(outside),
        reason: `outside the ConfigMap's ${sourceWhat}: ingress-nginx never believed a ${pp ? 'PROXY header' : 'X-Forwarded-For'} from ${outside.length === 1 ? 'it' : 'them'}, and the import trusts no more than ingress-nginx did; pass CIDRs inside it`,
      });
      return out;
    }
    peers = opts.proxyRealIpCidr;
    peersWhat = `${FLAG} ${cidrText(peers)}`;
    cause = { item: FLAG, value: cidrText(peers), lead: 'it' };
  } else {
    peers = sourceCidrs;
    peersWhat = sourceWhat;
    cause =
      text === undefined || text.trim() === ''
        ? { item: 'proxy-real-ip-cidr', lead: `not set: ingress-nginx's default ${DEFAULT_CIDR}` }
        : { item: 'proxy-real-ip-cidr', value: text, lead: 'it' };
  }

  const all = familiesCovered(peers);
  if (all.length > 0) {
    const everyone = all.map((f) => `every IPv${f} peer`).join(' and ');
    const what = pp ? `${everyone} to name the client in a PROXY header` : `${everyone} to name the client in X-Forwarded-For`;
    if (!opts.trustAllProxies) {
      report.refused.push({
        source,
        item: cause.item,
        ...(cause.value !== undefined ? { value: cause.value } : {}),
        reason: `${cause.lead} trusts ${what}, so any client could choose the address the allowlist checks. Pass your load balancers' CIDRs (${pp ? 'the addresses their PROXY-protocol connections come from' : 'the addresses of the proxies that connect to ipgate'}): ${FLAG} 10.0.0.0/24 (repeat it, or separate CIDRs with commas); or ${ALL_FLAG} to write the trust-all range as ingress-nginx had it`,
      });
      return out;
    }
    note(
      ALL_FLAG,
      `written as asked: ${peersWhat} trusts ${what} (check-config warns about it); list only your load balancers as soon as you know their CIDRs`,
      cidrText(peers),
    );
  } else if (opts.trustAllProxies) {
    report.notes.push({ source, item: ALL_FLAG, reason: `not needed: ${peersWhat} does not trust everyone` });
  }

  const texts = peers.map((c) => c.text);
  if (pp) {
    out.proxyProtocol = texts;
    note(
      'use-proxy-protocol',
      `proxyProtocol: {mode: required, trustedSources: ${peersWhat}}: the PROXY header names the client. ingress-nginx read the header of a peer outside these CIDRs and took the peer's own address as the client; ipgate closes such connections (pp_untrusted)`,
    );
    if (fh) {
      note(
        'use-forwarded-headers',
        'with use-proxy-protocol, X-Forwarded-For does not choose the client (no http.trustedProxies), as in ingress-nginx before 1.13. From 1.13 ingress-nginx walked X-Forwarded-For when the PROXY source itself was in proxy-real-ip-cidr (an HTTP proxy in front of the balancer); if yours is such a chain, list those proxies (not the balancers) in http.trustedProxies by hand',
      );
    }
  } else {
    out.trustedProxies = texts;
  }
  return out;
}

function parsed(text: string): Cidr {
  const r = parseCidr(text);
  if (!r.ok) throw new Error(`${text}: ${r.message}`);
  return r.cidr;
}

function cidrText(cidrs: readonly Cidr[]): string {
  return cidrs.map((c) => c.text).join(',');
}

function big(words: readonly number[]): bigint {
  let v = 0n;
  for (const w of words) v = (v << 32n) | BigInt(w >>> 0);
  return v;
}

/**
 * The families whose every address lies in one of `cidrs`: `0.0.0.0/0`, or `0.0.0.0/1` with
 * `128.0.0.0/1`, and so on. Ranges are merged in order of their first address.
 */
export function familiesCovered(cidrs: readonly Cidr[]): Array<4 | 6> {
  const out: Array<4 | 6> = [];
  for (const family of [4, 6] as const) {
    const ranges = cidrs
      .filter((c) => c.family === family)
      .map((c) => [big(c.start), big(c.end)] as const)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    let next = 0n;
    for (const [start, end] of ranges) {
      if (start > next) break;
      if (end + 1n > next) next = end + 1n;
    }
    if (ranges.length > 0 && next === 1n << (family === 4 ? 32n : 128n)) out.push(family);
  }
  return out;
}
