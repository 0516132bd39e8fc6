/**
 * ingress-nginx source ranges as ipgate entries (src/import/source-ranges.ts): parsing as
 * ingress-nginx's ParseIPNets reads them, and the merged allow/deny list deciding exactly as
 * nginx's first-match `deny ...; allow ...; deny all;` does, checked against a reference of that
 * rule on random lists through ipgate's real matcher.
 */
import t from 'tap';
import { Matcher } from '../../../src/allowlist/matcher';
import { mergeRanges, parseSourceRange } from '../../../src/import/source-ranges';
import type { Cidr } from '../../../src/allowlist/cidr';
import { prng } from '../../helpers/prng';

t.test("parsing: what ingress-nginx accepts, in ipgate's form", async (t) => {
  const rows: Array<{ name: string; value: string; cidrs?: string[]; rewritten?: number; error?: RegExp }> = [
    {
      name: 'CIDRs and bare addresses, spaces trimmed',
      value: ' 10.0.0.0/8 , 192.0.2.1,2001:db8::/32',
      cidrs: ['10.0.0.0/8', '192.0.2.1/32', '2001:db8::/32'],
      rewritten: 0,
    },
    {
      name: 'host bits masked (Go ParseCIDR does so)',
      value: '10.1.2.3/8,2001:db8::1/32',
      cidrs: ['10.0.0.0/8', '2001:db8::/32'],
      rewritten: 2,
    },
    { name: 'IPv4-mapped IPv6 written as IPv4', value: '::ffff:10.0.0.0/104', cidrs: ['10.0.0.0/8'], rewritten: 1 },
    { name: 'duplicates collapse (a set in ingress-nginx)', value: '10.0.0.0/8,10.0.0.0/8', cidrs: ['10.0.0.0/8'] },
    { name: 'IPv6 canonical form', value: '2001:DB8:0:0::/64', cidrs: ['2001:db8::/64'] },
    { name: 'an octet over 255 makes the whole value invalid', value: '10.0.0.0/8,10.300.0.0/16', error: /"10\.300\.0\.0"/ },
    { name: 'a word', value: 'office', error: /"office"/ },
    { name: 'a prefix out of range', value: '10.0.0.0/33', error: /33/ },
    { name: 'an empty item (trailing comma)', value: '10.0.0.0/8,', error: /empty item/ },
  ];
  for (const row of rows) {
    const r = parseSourceRange(row.value);
    if (row.error !== undefined) {
      t.equal(r.ok, false, `${row.name}: refused`);
      if (!r.ok) t.match(r.message, row.error, `${row.name}: the message names the value`);
      continue;
    }
    t.ok(r.ok, row.name);
    if (!r.ok) continue;
    t.same(
      r.cidrs.map((c) => c.text),
      row.cidrs,
      `${row.name}: entries`,
    );
    if (row.rewritten !== undefined) t.equal(r.rewritten.length, row.rewritten, `${row.name}: rewrites reported`);
  }
});

const cidrs = (text: string): Cidr[] => {
  const r = parseSourceRange(text);
  if (!r.ok) throw new Error(r.message);
  return r.cidrs;
};
const WHY = { allow: 'a', deny: 'd', everyone: 'e' };

t.test('merging: the shapes an operator writes', async (t) => {
  const rows: Array<{ name: string; allow: string | null; deny: string | null; entries: string[]; shadowed: number }> = [
    { name: 'allowlist only', allow: '10.0.0.0/8', deny: null, entries: ['10.0.0.0/8'], shadowed: 0 },
    {
      name: 'denylist only: everyone else admitted',
      allow: null,
      deny: '10.0.0.0/8',
      entries: ['0.0.0.0/0', '::/0', 'deny 10.0.0.0/8'],
      shadowed: 0,
    },
    {
      name: 'deny inside allow: kept as is',
      allow: '10.0.0.0/8',
      deny: '10.6.6.0/24',
      entries: ['10.0.0.0/8', 'deny 10.6.6.0/24'],
      shadowed: 0,
    },
    {
      name: 'allow inside deny: left out (nginx denied it first)',
      allow: '10.1.2.3,192.0.2.0/24',
      deny: '10.0.0.0/8',
      entries: ['192.0.2.0/24', 'deny 10.0.0.0/8'],
      shadowed: 1,
    },
    {
      name: 'the same CIDR allowed and denied: deny only',
      allow: '10.0.0.0/8',
      deny: '10.0.0.0/8',
      entries: ['deny 10.0.0.0/8'],
      shadowed: 1,
    },
    {
      name: 'deny 0.0.0.0/0 without an allowlist: IPv4 all denied, IPv6 admitted',
      allow: null,
      deny: '0.0.0.0/0',
      entries: ['::/0', 'deny 0.0.0.0/0'],
      shadowed: 1,
    },
  ];
  for (const row of rows) {
    const m = mergeRanges(row.allow === null ? null : cidrs(row.allow), row.deny === null ? null : cidrs(row.deny), WHY);
    t.same(
      m.entries.map((e) => `${e.action === 'deny' ? 'deny ' : ''}${e.cidr}`),
      row.entries,
      row.name,
    );
    t.equal(m.shadowed.length, row.shadowed, `${row.name}: left-out entries reported`);
  }
});

/** nginx's access phase as ingress-nginx writes it: deny lines, then allow lines, then `deny all` when any allow line exists. */
function nginxAdmits(allow: Cidr[] | null, deny: Cidr[], ip: number): boolean {
  const inside = (c: Cidr): boolean => c.family === 4 && ip >= c.start[0]! && ip <= c.end[0]!;
  if (deny.some(inside)) return false;
  if (allow === null) return true;
  return allow.some(inside);
}

t.test('random lists: the merged list admits exactly whom ingress-nginx admitted (seeded)', async (t) => {
  const seed = 0x1f00d;
  const rnd = prng(seed);
  // Small address space (10.0.0.0/20) so ranges nest and overlap often.
  const randomCidr = (): string => {
    const prefix = 20 + Math.floor(rnd() * 13);
    const addr = (0x0a000000 + Math.floor(rnd() * 4096)) >>> 0;
    const masked = prefix === 32 ? addr : (addr & (0xffffffff << (32 - prefix))) >>> 0;
    return `${masked >>> 24}.${(masked >>> 16) & 255}.${(masked >>> 8) & 255}.${masked & 255}/${prefix}`;
  };
  let disagreements = 0;
  let checks = 0;
  for (let round = 0; round < 300; round++) {
    const allowText = rnd() < 0.2 ? null : Array.from({ length: 1 + Math.floor(rnd() * 5) }, randomCidr).join(',');
    const denyText = Array.from({ length: Math.floor(rnd() * 5) }, randomCidr).join(',');
    const allow = allowText === null ? null : cidrs(allowText);
    const deny = denyText === '' ? [] : cidrs(denyText);
    const merged = mergeRanges(allow, deny.length === 0 ? null : deny, WHY);
    const matcher = Matcher.compile(merged.entries);
    for (let k = 0; k < 64; k++) {
      const ip = (0x0a000000 + Math.floor(rnd() * 4096)) >>> 0;
      const text = `${ip >>> 24}.${(ip >>> 16) & 255}.${(ip >>> 8) & 255}.${ip & 255}`;
      checks++;
      if (matcher.decide(text).allowed !== nginxAdmits(allow, deny, ip)) {
        disagreements++;
        if (disagreements <= 3) t.fail(`seed ${seed} round ${round}: allow ${allowText} deny ${denyText}: ${text}`);
      }
    }
  }
  t.equal(disagreements, 0, `${checks} decisions, seed ${seed}`);
});
