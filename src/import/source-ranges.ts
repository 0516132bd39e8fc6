/**
 * ingress-nginx source ranges (`allowlist-source-range`, `denylist-source-range`, and the
 * controller ConfigMap's `whitelist-source-range` / `denylist-source-range`) as ipgate allowlist
 * entries (docs/migrating-from-ingress-nginx.md, "Allowlists").
 *
 * Parsing follows ingress-nginx's (internal/net ParseIPNets): comma-separated, each item trimmed,
 * a CIDR or a bare address; a CIDR with host bits set is masked (Go's net.ParseCIDR does that);
 * one bad item makes the whole value invalid. ipgate's own parser refuses host bits, so the
 * masked form is written and a note says so.
 *
 * Semantics. ingress-nginx writes, per location, `deny` lines for the denylist first, then `allow`
 * lines and `deny all` when there is an allowlist (nginx.tmpl); nginx's access module takes the
 * first matching line, so a denied range is refused even where a narrower allowed range lies
 * inside it. ipgate's lists decide by the most specific entry (deny at equal prefix). The two
 * agree once every allow entry that lies inside (or equals) a deny entry is left out, because
 * two CIDRs are either disjoint or nested: such an allow entry never admitted anyone under
 * ingress-nginx. A denylist without an allowlist admits everyone else: ipgate gets allow
 * entries 0.0.0.0/0 and ::/0 beside the deny entries.
 */
import { formatV4, formatV6Words } from '../address/canonical';
import { isMappedWords, scanAddress } from '../address/scan';
import { parseCidr, type Cidr } from '../allowlist/cidr';

export interface RangeEntry {
  cidr: string;
  action?: 'deny';
  comment?: string;
}

type RangeParse =
  | { ok: true; cidrs: Cidr[] /** items rewritten on the way (host bits masked, mapped IPv4) */; rewritten: string[] }
  | { ok: false; message: string };

const words = new Uint32Array(4);

/** One item as Go's ParseCIDR / ParseIP would read it, in ipgate's canonical form. */
function parseItem(item: string): { cidr: Cidr; rewritten: string | null } | string {
  const direct = parseCidr(item);
  if (direct.ok) return { cidr: direct.cidr, rewritten: null };
  const slash = item.indexOf('/');
  const addr = slash < 0 ? item : item.slice(0, slash);
  const family = scanAddress(addr, words);
  if (family === 0) return direct.message;
  const max = family === 4 ? 32 : 128;
  const prefixText = slash < 0 ? String(max) : item.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > max) return direct.message;
  let prefix = Number(prefixText);
  let w: number[] = family === 4 ? [words[0]!] : Array.from(words);
  let fam: 4 | 6 = family;
  // Go reads ::ffff:a.b.c.d as the IPv4 address; so does ipgate's identity (canonical addresses).
  if (family === 6 && isMappedWords(w) && prefix >= 96) {
    w = [w[3]!];
    prefix -= 96;
    fam = 4;
  }
  const masked = w.map((x, i) => {
    const bits = Math.min(32, Math.max(0, prefix - i * 32));
    return bits === 0 ? 0 : bits === 32 ? x >>> 0 : (x & (0xffffffff << (32 - bits))) >>> 0;
  });
  const text = `${fam === 4 ? formatV4(masked[0]!) : formatV6Words(masked)}/${prefix}`;
  const again = parseCidr(text);
  if (!again.ok) return direct.message;
  return { cidr: again.cidr, rewritten: `${item} -> ${again.cidr.text}` };
}

/** A comma-separated source range value. Duplicates collapse (ingress-nginx keeps a set). */
export function parseSourceRange(value: string): RangeParse {
  const items = value.split(',').map((s) => s.trim());
  const out = new Map<string, Cidr>();
  const rewritten: string[] = [];
  for (const item of items) {
    if (item === '') return { ok: false, message: `empty item in ${JSON.stringify(value)}` };
    const r = parseItem(item);
    if (typeof r === 'string') return { ok: false, message: r };
    if (r.rewritten !== null) rewritten.push(r.rewritten);
    out.set(r.cidr.text, r.cidr);
  }
  return { ok: true, cidrs: [...out.values()], rewritten };
}

/**
 * `inner` lies inside `outer` (or is it). Two CIDRs are nested or disjoint, so a start address
 * inside the range and a prefix no shorter is enough.
 */
export function within(inner: Cidr, outer: Cidr): boolean {
  if (inner.family !== outer.family || outer.prefix > inner.prefix) return false;
  return compareWords(inner.start, outer.start) >= 0 && compareWords(inner.start, outer.end) <= 0;
}

function compareWords(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  return 0;
}

const ALLOW_ALL: readonly string[] = ['0.0.0.0/0', '::/0'];

interface MergedList {
  entries: RangeEntry[];
  /** Allow entries left out because a deny entry covers them (never admitted anyone in ingress-nginx). */
  shadowed: string[];
}

/**
 * The ipgate entries for an allowlist and a denylist (either may be null: not set), with
 * ingress-nginx's meaning (see the file comment). `why` goes into each entry's comment.
 */
export function mergeRanges(allow: Cidr[] | null, deny: Cidr[] | null, why: { allow: string; deny: string; everyone: string }): MergedList {
  const denies = deny ?? [];
  const allows: Array<{ cidr: Cidr; comment: string }> =
    allow !== null
      ? allow.map((c) => ({ cidr: c, comment: why.allow }))
      : ALLOW_ALL.map((t) => ({ cidr: (parseCidr(t) as { ok: true; cidr: Cidr }).cidr, comment: why.everyone }));
  const shadowed: string[] = [];
  const entries: RangeEntry[] = [];
  for (const a of allows) {
    const cover = denies.find((d) => within(a.cidr, d));
    if (cover !== undefined) {
      shadowed.push(`${a.cidr.text} (inside deny ${cover.text})`);
      continue;
    }
    entries.push({ cidr: a.cidr.text, comment: a.comment });
  }
  for (const d of denies) entries.push({ cidr: d.text, action: 'deny', comment: why.deny });
  return { entries, shadowed };
}
