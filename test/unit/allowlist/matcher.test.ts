import t from 'tap';
import ipaddr from 'ipaddr.js';
import { Matcher, AllowlistCompileError } from '../../../src/allowlist/matcher';
import { parseAddress } from '../../../src/allowlist/cidr';
import type { AllowEntry } from '../../../src/allowlist/entry';
import { prng } from '../../helpers/prng';

const BITS = { 4: 32, 6: 128 } as const;

function format(family: 4 | 6, v: bigint): string {
  if (family === 4) return `${(v >> 24n) & 255n}.${(v >> 16n) & 255n}.${(v >> 8n) & 255n}.${v & 255n}`;
  const parts: number[] = [];
  for (let i = 7; i >= 0; i--) parts.push(Number((v >> BigInt(i * 16)) & 0xffffn));
  return new ipaddr.IPv6(parts).toString();
}

/** The slow, obviously right answer: every entry through ipaddr.js, longest prefix, first wins. */
function referenceMatcher(entries: readonly AllowEntry[]): (address: string) => number {
  const nets = entries.map((e) => ipaddr.parseCIDR(e.cidr));
  return (address) => {
    const addr = ipaddr.process(address);
    let best = -1;
    let bestPrefix = -1;
    nets.forEach(([net, prefix], i) => {
      if (net.kind() === addr.kind() && addr.match(net, prefix) && prefix > bestPrefix) {
        best = i;
        bestPrefix = prefix;
      }
    });
    return best;
  };
}

interface Range {
  family: 4 | 6;
  start: bigint;
  end: bigint;
}

/** A random list with nesting, adjacency, duplicates, /0 and host routes in both families. */
function randomList(rnd: () => number, size: number): { entries: AllowEntry[]; ranges: Range[] } {
  const entries: AllowEntry[] = [];
  const ranges: Range[] = [];
  const randBits = (bits: number): bigint => {
    let v = 0n;
    for (let i = 0; i < bits; i += 16) v = (v << 16n) | BigInt(Math.floor(rnd() * 65536));
    return v & ((1n << BigInt(bits)) - 1n);
  };
  const add = (family: 4 | 6, base: bigint, prefix: number): void => {
    const bits = BITS[family];
    const host = BigInt(bits - prefix);
    const start = (base >> host) << host;
    const end = start | ((1n << host) - 1n);
    entries.push({ cidr: `${format(family, start)}/${prefix}` });
    ranges.push({ family, start, end });
  };
  // Clustered bases so that CIDRs nest and touch instead of being scattered across 2^128.
  const bases = { 4: [randBits(32), randBits(32)], 6: [randBits(128), randBits(128)] };
  while (entries.length < size) {
    const family: 4 | 6 = rnd() < 0.5 ? 4 : 6;
    const bits = BITS[family];
    const r = rnd();
    if (r < 0.03) {
      add(family, 0n, 0);
    } else if (r < 0.12 && ranges.length > 0) {
      const i = Math.floor(rnd() * ranges.length); // duplicate
      entries.push({ ...entries[i]! });
      ranges.push(ranges[i]!);
    } else if (r < 0.25 && ranges.length > 0) {
      const prev = ranges[Math.floor(rnd() * ranges.length)]!; // adjacent: the next block
      const size = prev.end - prev.start + 1n;
      const prevBits = BITS[prev.family];
      const prefix = prevBits - (size.toString(2).length - 1);
      if (prev.end < (1n << BigInt(prevBits)) - 1n) add(prev.family, prev.end + 1n, prefix);
    } else {
      const cluster = bases[family][Math.floor(rnd() * 2)]!;
      const prefix = rnd() < 0.15 ? bits : Math.floor(rnd() * (bits + 1));
      // keep the cluster's high bits mostly, so prefixes nest
      const keep = BigInt(Math.floor(rnd() * bits));
      const mixed = ((cluster >> keep) << keep) | (randBits(bits) & ((1n << keep) - 1n));
      add(family, mixed, prefix);
    }
  }
  return { entries, ranges };
}

t.test('lookup equals the ipaddr.js longest-prefix loop on random lists (time-boxed)', async (t) => {
  const seed = Date.now() >>> 0;
  const rnd = prng(seed);
  // Time-boxed (~3 s), but never fewer than 12 lists, so a loaded CI machine still tests enough.
  const deadline = Date.now() + 3000;
  let lists = 0;
  let checks = 0;
  let hits = 0;
  let mismatch: string | null = null;
  while ((lists < 12 || Date.now() < deadline) && mismatch === null) {
    // Some lists are long enough (>= 256 ranges per family) for the matcher's /16 bucket index.
    const large = lists % 4 === 0;
    const { entries, ranges } = randomList(rnd, large ? 700 + Math.floor(rnd() * 800) : 1 + Math.floor(rnd() * 120));
    const m = Matcher.compile(entries);
    const referenceLookup = referenceMatcher(entries);
    lists++;
    const probes: Array<[4 | 6, bigint]> = [];
    const probed = large ? Array.from({ length: 100 }, () => ranges[Math.floor(rnd() * ranges.length)]!) : ranges;
    for (const r of probed) {
      const max = (1n << BigInt(BITS[r.family])) - 1n;
      for (const v of [r.start, r.end, r.start - 1n, r.end + 1n, r.start + (r.end - r.start) / 2n]) {
        if (v >= 0n && v <= max) probes.push([r.family, v]);
      }
    }
    for (let i = 0; i < 50; i++) probes.push([4, BigInt(Math.floor(rnd() * 2 ** 32))]);
    for (const [family, v] of probes) {
      const text = format(family, v);
      const want = referenceLookup(text);
      const spellings = family === 4 ? [text, `::ffff:${text}`, format(6, 0xffff00000000n | v)] : [text, text.toUpperCase()];
      for (const s of spellings) {
        const got = m.lookup(s);
        checks++;
        if (got !== want) mismatch = `lookup(${s}) = ${got}, reference ${want}`;
      }
      if (family === 4 && m.lookupV4(Number(v)) !== want) mismatch = `lookupV4(${text}) = ${m.lookupV4(Number(v))}, reference ${want}`;
      if (want >= 0) hits++;
      if (mismatch !== null) {
        mismatch += ` (seed ${seed}, list ${JSON.stringify(entries.map((e) => e.cidr))})`;
        break;
      }
    }
  }
  t.equal(mismatch, null, 'no disagreement with the reference');
  t.comment(`${lists} lists (every 4th with 700+ entries), ${checks} lookups`);
  t.ok(hits > checks / 10 && hits < checks / 2, `both hits and misses exercised (${hits} hits)`);
});

t.test('crowded IPv6 /16s (the second-level index) agree with the reference', async (t) => {
  // Real IPv6 lists crowd into a few /16s, so each of these buckets gets a second table (more
  // than 32 ranges in one /16, 256+ ranges in all); the shapes put its window in different bits.
  const rnd = prng(7);
  const hex = (bits: number): string => Math.floor(rnd() * 2 ** bits).toString(16);
  const cidrs = new Set<string>(['2000::/12', '2001:db8::/32', '2a00:1450:4001::/48', '2600::/15', '2400:cb0::/28']);
  while (cidrs.size < 300) cidrs.add(`2001:db8:${hex(16)}::/48`); // /48s in a /32: bits 32-47
  while (cidrs.size < 600) cidrs.add(`2a00:1450:4001:${hex(16)}::/64`); // /64s in a /48: bits 48-63
  while (cidrs.size < 800) cidrs.add(`2600:1f18::${hex(16)}/128`); // hosts in a /112: bits 112-127
  while (cidrs.size < 900) cidrs.add(`2c0f:${hex(16)}:${hex(16)}::/48`); // scattered in a /16: bits 16-31
  while (cidrs.size < 1000) cidrs.add(`2400:cb${hex(4)}:${hex(12)}0::/44`); // /44s in a /28: bits 28-36, across a word
  const entries: AllowEntry[] = [...cidrs].map((cidr) => ({ cidr }));
  const m = Matcher.compile(entries);
  const reference = referenceMatcher(entries);
  const probes: bigint[] = [];
  const max = (1n << 128n) - 1n;
  for (const e of entries) {
    const [net, prefix] = ipaddr.parseCIDR(e.cidr);
    const start = BigInt(
      `0x${(net as ipaddr.IPv6)
        .toNormalizedString()
        .split(':')
        .map((g) => g.padStart(4, '0'))
        .join('')}`,
    );
    const end = start | ((1n << BigInt(128 - prefix)) - 1n);
    for (const v of [start, end, start - 1n, end + 1n, start + (end - start) / 3n]) if (v >= 0n && v <= max) probes.push(v);
  }
  for (const top of [0x2000n, 0x2001n, 0x2a00n, 0x2600n, 0x2601n, 0x2c0fn, 0x2c10n, 0x2400n]) {
    for (let i = 0; i < 40; i++) {
      probes.push((top << 112n) | (BigInt(Math.floor(rnd() * 2 ** 48)) << 64n) | BigInt(Math.floor(rnd() * 2 ** 48)));
    }
  }
  let mismatch: string | null = null;
  let hits = 0;
  for (const v of probes) {
    const text = format(6, v);
    const want = reference(text);
    if (want >= 0) hits++;
    const got = m.lookup(text);
    if (got !== want) {
      mismatch = `lookup(${text}) = ${got}, reference ${want}`;
      break;
    }
  }
  t.equal(mismatch, null, `${probes.length} boundary and random probes agree`);
  t.ok(hits > probes.length / 3 && hits < probes.length, `hits and misses both exercised (${hits} hits)`);
});

t.test('most specific entry wins, identical CIDRs go to the first', async (t) => {
  const entries: AllowEntry[] = [
    { cidr: '10.0.0.0/8' },
    { cidr: '10.1.0.0/16' },
    { cidr: '10.1.2.0/24' },
    { cidr: '10.1.2.3/32' },
    { cidr: '10.1.0.0/16' },
    { cidr: '2001:db8::/32' },
    { cidr: '2001:db8:1::/48' },
  ];
  const m = Matcher.compile(entries);
  const rows: Array<[desc: string, address: string, index: number]> = [
    ['only the /8', '10.200.0.1', 0],
    ['the /16 inside the /8', '10.1.255.255', 1],
    ['the /24 inside the /16', '10.1.2.4', 2],
    ['the host route', '10.1.2.3', 3],
    ['just before the /24, back in the /16', '10.1.1.255', 1],
    ['just after the /24, back in the /16', '10.1.3.0', 1],
    ['just outside the /8', '11.0.0.0', -1],
    ['just below the /8', '9.255.255.255', -1],
    ['IPv6 /48 inside /32', '2001:db8:1:ffff::1', 6],
    ['IPv6 /32 outside the /48', '2001:db8:2::', 5],
    ['IPv6 miss', '2001:db9::', -1],
  ];
  for (const [desc, address, index] of rows) {
    t.equal(m.lookup(address), index, desc);
    t.equal(m.match(address), index < 0 ? null : m.entries[index], `${desc}: match gives that entry`);
  }
  t.equal(m.match('10.1.2.3')?.cidr, '10.1.2.3/32', 'match: the entry itself, as given');
  t.equal(m.size, 7, 'size counts every active entry, duplicates included');
});

t.test('families: an IPv4 client is matched only by IPv4 CIDRs', async (t) => {
  // Decision: identity canonicalises ::ffff:a.b.c.d to IPv4, so IPv4 clients are matched only by
  // IPv4 CIDRs and ::/0 does not admit them; allow 0.0.0.0/0 explicitly for that.
  const v4all = Matcher.compile([{ cidr: '0.0.0.0/0' }]);
  const v6all = Matcher.compile([{ cidr: '::/0' }]);
  const rows: Array<[desc: string, address: string, v4: number, v6: number]> = [
    ['lowest IPv4', '0.0.0.0', 0, -1],
    ['highest IPv4', '255.255.255.255', 0, -1],
    ['mapped IPv4', '::ffff:192.0.2.1', 0, -1],
    ['mapped IPv4 in hex', '::ffff:c000:201', 0, -1],
    ['lowest IPv6', '::', -1, 0],
    ['highest IPv6', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', -1, 0],
    ['just below the mapped block', '::fffe:ffff:ffff', -1, 0],
    ['just above the mapped block', '::1:0:0:0', -1, 0],
  ];
  for (const [desc, address, v4, v6] of rows) {
    t.equal(v4all.lookup(address), v4, `0.0.0.0/0, ${desc}`);
    t.equal(v6all.lookup(address), v6, `::/0, ${desc}`);
  }
  t.equal(v4all.lookupV4(0xffffffff), 0, 'lookupV4 at the top of the range');
});

t.test('invalid input never matches and never throws', async (t) => {
  const m = Matcher.compile([{ cidr: '0.0.0.0/0' }, { cidr: '::/0' }]);
  const rows: Array<[desc: string, address: unknown]> = [
    ['empty', ''],
    ['name', 'localhost'],
    ['leading zero', '010.0.0.1'],
    ['short form', '10.1'],
    ['octet 256', '1.2.3.256'],
    ['zone id', 'fe80::1%eth0'],
    ['whitespace', ' 1.2.3.4'],
    ['CIDR', '10.0.0.0/8'],
    ['two ::', '1::2::3'],
    ['deprecated ::a.b.c.d', '::1.2.3.4'],
    ['very long', '1'.repeat(10_000)],
    ['not a string', 42],
    ['undefined', undefined],
  ];
  for (const [desc, address] of rows) t.equal(m.lookup(address as string), -1, desc);
  const u32: Array<[desc: string, v: number]> = [
    ['negative', -1],
    ['too large', 2 ** 32],
    ['fraction', 1.5],
    ['NaN', NaN],
    ['Infinity', Infinity],
  ];
  for (const [desc, v] of u32) t.equal(m.lookupV4(v), -1, `lookupV4 ${desc}`);
});

t.test('lookup accepts exactly what parseAddress accepts (random and mutated text, time-boxed)', async (t) => {
  // lookup takes shortcuts of its own (a dotted quad is recognised by its first '.'), so check it
  // end to end, not only the scanners: with both /0s listed, every address parseAddress accepts
  // matches, IPv4 and mapped IPv4 the first entry, and nothing else matches.
  const m = Matcher.compile([{ cidr: '0.0.0.0/0' }, { cidr: '::/0' }]);
  const seed = Date.now() >>> 0;
  const rnd = prng(seed);
  const alphabet = '0123456789abcdefABCDEF:.:.:%/ x';
  const pick = (xs: string): string => xs[Math.floor(rnd() * xs.length)]!;
  const group = (): string => Math.floor(rnd() < 0.5 ? rnd() * 65536 : rnd() * 2 ** (rnd() * 16)).toString(16);
  const octet = (): string => String(Math.floor(rnd() * 256));
  const spell = (): string => {
    const v4 = `${octet()}.${octet()}.${octet()}.${octet()}`;
    const gs = Array.from({ length: 8 }, group);
    switch (Math.floor(rnd() * 6)) {
      case 0:
        return v4;
      case 1:
        return `::ffff:${v4}`;
      case 2:
        return gs.join(':');
      case 3:
        return gs.map((x) => x.padStart(4, '0')).join(':');
      case 4:
        return `${gs.slice(0, 6).join(':')}:${v4}`;
      default: {
        const a = Math.floor(rnd() * 8);
        const b = a + 1 + Math.floor(rnd() * (8 - a));
        return `${gs.slice(0, a).join(':')}::${gs.slice(b).join(':')}`;
      }
    }
  };
  const mutate = (s: string): string => {
    const i = Math.floor(rnd() * (s.length + 1));
    switch (Math.floor(rnd() * 3)) {
      case 0:
        return s.slice(0, i) + pick(alphabet) + s.slice(i);
      case 1:
        return s.slice(0, i) + s.slice(i + 1);
      default:
        return s.slice(0, i) + pick(alphabet) + s.slice(i + 1);
    }
  };
  const deadline = Date.now() + 1000;
  let checked = 0;
  let valid = 0;
  let mismatch: string | null = null;
  while ((checked < 20_000 || Date.now() < deadline) && mismatch === null) {
    for (let k = 0; k < 500 && mismatch === null; k++) {
      let s = spell();
      for (let j = Math.floor(rnd() * 3); j > 0; j--) s = mutate(s);
      const r = parseAddress(s);
      const want = r.ok ? (r.family === 4 ? 0 : 1) : -1;
      if (want >= 0) valid++;
      checked++;
      const got = m.lookup(s);
      if (got !== want) mismatch = `lookup(${JSON.stringify(s)}) = ${got}, want ${want} (seed ${seed})`;
    }
  }
  t.equal(mismatch, null, `${checked} inputs agree`);
  t.ok(valid > checked / 5 && valid < checked, `a mix of valid and invalid inputs (${valid} valid)`);
});

t.test('expiry: expired entries are excluded, nextExpiry names the next one', async (t) => {
  const now = Date.UTC(2030, 0, 1);
  const entries: AllowEntry[] = [
    { cidr: '10.0.0.0/8' },
    { cidr: '10.1.0.0/16', expiresAt: '2029-12-31T23:59:59Z' }, // past
    { cidr: '10.2.0.0/16', expiresAt: '2030-01-01T00:00:00Z' }, // exactly now: expired
    { cidr: '10.3.0.0/16', expiresAt: '2030-01-01T02:00:00+01:00' }, // 01:00Z
    { cidr: '2001:db8::/32', expiresAt: '2030-01-01T00:30:00Z' },
  ];
  const m = Matcher.compile(entries, now);
  const rows: Array<[desc: string, address: string, index: number]> = [
    ['an expired /16 falls back to its /8', '10.1.0.1', 0],
    ['expiresAt equal to now is expired', '10.2.0.1', 0],
    ['an unexpired /16', '10.3.0.1', 3],
    ['an unexpired IPv6 entry', '2001:db8::1', 4],
  ];
  for (const [desc, address, index] of rows) t.equal(m.lookup(address), index, desc);
  t.equal(m.size, 3, 'size counts active entries only');
  t.equal(m.nextExpiry, Date.UTC(2030, 0, 1, 0, 30), 'nextExpiry is the earliest future expiry');
  t.equal(m.entries.length, 5, 'entries keeps expired ones so indices stay stable');

  const later = Matcher.compile(entries, Date.UTC(2030, 0, 1, 0, 30));
  t.equal(later.lookup('2001:db8::1'), -1, 'rebuilt at nextExpiry, the entry is gone');
  t.equal(later.nextExpiry, Date.UTC(2030, 0, 1, 1), 'and the following expiry is next');
  t.equal(Matcher.compile([{ cidr: '10.0.0.0/8' }]).nextExpiry, null, 'nothing expires: null');
});

t.test('EMPTY matches nothing', async (t) => {
  for (const a of ['0.0.0.0', '255.255.255.255', '::', '::1', '::ffff:1.2.3.4']) {
    t.equal(Matcher.EMPTY.lookup(a), -1, a);
  }
  t.equal(Matcher.EMPTY.size, 0, 'size 0');
  t.equal(Matcher.EMPTY.nextExpiry, null, 'nextExpiry null');
});

t.test('a compiled matcher is immutable and detached from its input', async (t) => {
  const input: AllowEntry[] = [{ cidr: '10.0.0.0/8', comment: 'office' }];
  const m = Matcher.compile(input);
  input[0]!.cidr = '11.0.0.0/8';
  input.push({ cidr: '12.0.0.0/8' });
  t.equal(m.lookup('10.0.0.1'), 0, 'mutating the input list changes nothing');
  t.equal(m.entries[0]!.cidr, '10.0.0.0/8', 'entries are copies');
  t.ok(Object.isFrozen(m) && Object.isFrozen(m.entries) && Object.isFrozen(m.entries[0]), 'frozen');
  t.throws(
    () => {
      (m as { size: number }).size = 9;
    },
    TypeError,
    'assignment throws in strict mode',
  );
});

t.test('compile refuses entries that did not pass validation', async (t) => {
  const rows: Array<[desc: string, entry: AllowEntry, field: string, message: RegExp]> = [
    ['host bits', { cidr: '10.0.0.1/8' }, 'cidr', /did you mean 10\.0\.0\.0\/8/],
    ['not an address', { cidr: 'nope' }, 'cidr', /invalid IPv4 address/],
    ['bad expiry', { cidr: '10.0.0.0/8', expiresAt: 'tomorrow' }, 'expiresAt', /RFC 3339/],
  ];
  for (const [desc, entry, field, message] of rows) {
    t.throws(
      () => Matcher.compile([{ cidr: '::/0' }, entry]),
      { name: 'AllowlistCompileError', code: 'ERR_ALLOWLIST_INVALID_ENTRY', index: 1, field, message },
      desc,
    );
  }
  t.ok(new AllowlistCompileError(0, 'cidr', 'x') instanceof Error, 'is an Error');
});
