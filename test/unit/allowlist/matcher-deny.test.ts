/**
 * Allow and deny entries side by side: the most specific entry covering an address decides; at the
 * same prefix a deny entry wins. Table rows for the cases an operator writes, then random lists
 * against a slow reference, in both families and across the indexed (>= 256 ranges) layout.
 */
import t from 'tap';
import ipaddr from 'ipaddr.js';
import { denialReason, Matcher } from '../../../src/allowlist/matcher';
import type { AllowEntry } from '../../../src/allowlist/entry';
import { prng } from '../../helpers/prng';

const allow = (cidr: string): AllowEntry => ({ cidr });
const deny = (cidr: string): AllowEntry => ({ cidr, action: 'deny' });

t.test('allow + deny combinations: decision, deciding entry and reason', async (t) => {
  const rows: Array<
    [desc: string, entries: AllowEntry[], ip: string, allowed: boolean, decidingCidr: string | null, reason: string | null]
  > = [
    [
      'deny inside allow: the deny /24 refuses',
      [allow('10.0.0.0/8'), deny('10.6.6.0/24')],
      '10.6.6.7',
      false,
      '10.6.6.0/24',
      'denied_by_entry',
    ],
    ['deny inside allow: the rest of the /8 is allowed', [allow('10.0.0.0/8'), deny('10.6.6.0/24')], '10.6.7.1', true, '10.0.0.0/8', null],
    [
      'deny inside allow: the address just before the /24',
      [allow('10.0.0.0/8'), deny('10.6.6.0/24')],
      '10.6.5.255',
      true,
      '10.0.0.0/8',
      null,
    ],
    ['deny inside allow: the address just after the /24', [allow('10.0.0.0/8'), deny('10.6.6.0/24')], '10.6.7.0', true, '10.0.0.0/8', null],
    [
      'order does not matter (deny listed first)',
      [deny('10.6.6.0/24'), allow('10.0.0.0/8')],
      '10.6.6.7',
      false,
      '10.6.6.0/24',
      'denied_by_entry',
    ],
    ['allow inside deny: the more specific allow wins', [deny('10.0.0.0/8'), allow('10.1.2.3/32')], '10.1.2.3', true, '10.1.2.3/32', null],
    [
      'allow inside deny: the rest is denied by the entry',
      [deny('10.0.0.0/8'), allow('10.1.2.3/32')],
      '10.1.2.4',
      false,
      '10.0.0.0/8',
      'denied_by_entry',
    ],
    [
      'three levels: allow /8, deny /16, allow /24',
      [allow('10.0.0.0/8'), deny('10.1.0.0/16'), allow('10.1.2.0/24')],
      '10.1.2.9',
      true,
      '10.1.2.0/24',
      null,
    ],
    [
      'three levels: the /16 around the /24',
      [allow('10.0.0.0/8'), deny('10.1.0.0/16'), allow('10.1.2.0/24')],
      '10.1.3.9',
      false,
      '10.1.0.0/16',
      'denied_by_entry',
    ],
    [
      'same CIDR twice: deny wins over allow',
      [allow('192.0.2.0/24'), deny('192.0.2.0/24')],
      '192.0.2.1',
      false,
      '192.0.2.0/24',
      'denied_by_entry',
    ],
    [
      'same CIDR twice, deny first: deny wins',
      [deny('192.0.2.0/24'), allow('192.0.2.0/24')],
      '192.0.2.1',
      false,
      '192.0.2.0/24',
      'denied_by_entry',
    ],
    ['no entry covers it: not_allowlisted', [allow('10.0.0.0/8'), deny('10.6.6.0/24')], '192.0.2.1', false, null, 'not_allowlisted'],
    ['a deny-only list refuses everyone, by entry or not', [deny('0.0.0.0/0')], '203.0.113.9', false, '0.0.0.0/0', 'denied_by_entry'],
    [
      'IPv6: deny /64 inside allow /32',
      [allow('2001:db8::/32'), deny('2001:db8:6:6::/64')],
      '2001:db8:6:6::1',
      false,
      '2001:db8:6:6::/64',
      'denied_by_entry',
    ],
    [
      'IPv6: allowed beside the deny /64',
      [allow('2001:db8::/32'), deny('2001:db8:6:6::/64')],
      '2001:db8:6:7::1',
      true,
      '2001:db8::/32',
      null,
    ],
    [
      'IPv4-mapped IPv6 client is matched as IPv4',
      [allow('10.0.0.0/8'), deny('10.6.6.0/24')],
      '::ffff:10.6.6.1',
      false,
      '10.6.6.0/24',
      'denied_by_entry',
    ],
    [
      'an expired deny entry no longer decides',
      [allow('10.0.0.0/8'), { ...deny('10.6.6.0/24'), expiresAt: '2000-01-01T00:00:00Z' }],
      '10.6.6.7',
      true,
      '10.0.0.0/8',
      null,
    ],
  ];
  for (const [desc, entries, ip, allowed, cidr, reason] of rows) {
    const m = Matcher.compile(entries);
    const d = m.decide(ip);
    t.equal(d.allowed, allowed, `${desc}: allowed`);
    t.equal(d.entry?.cidr ?? null, cidr, `${desc}: deciding entry`);
    t.equal(d.reason, reason, `${desc}: reason`);
    t.equal(m.admits(ip), allowed, `${desc}: lookup's sign agrees`);
    t.equal(m.match(ip)?.cidr ?? null, allowed ? cidr : null, `${desc}: match is the admitting entry only`);
    if (!allowed) t.equal(denialReason(m, ip), reason, `${desc}: denialReason`);
  }
});

/** Most specific covering entry; same prefix: deny over allow, else the first. -1 none. */
function reference(entries: readonly AllowEntry[]): (address: string) => { index: number; deny: boolean } {
  const nets = entries.map((e) => ipaddr.parseCIDR(e.cidr));
  return (address) => {
    const addr = ipaddr.process(address);
    let best = -1;
    let bestPrefix = -1;
    nets.forEach(([net, prefix], i) => {
      if (net.kind() !== addr.kind() || !addr.match(net, prefix)) return;
      if (prefix > bestPrefix || (prefix === bestPrefix && entries[i]!.action === 'deny' && entries[best]!.action !== 'deny')) {
        best = i;
        bestPrefix = prefix;
      }
    });
    return { index: best, deny: best >= 0 && entries[best]!.action === 'deny' };
  };
}

t.test('random allow/deny lists agree with the reference (both families, small and indexed)', async (t) => {
  const rnd = prng(2026_12_02);
  const v4 = (w: number): string => `${w >>> 24}.${(w >>> 16) & 255}.${(w >>> 8) & 255}.${w & 255}`;
  for (const size of [8, 60, 600]) {
    const entries: AllowEntry[] = [];
    const base = Math.floor(rnd() * 2 ** 32) & 0xff000000;
    for (let i = 0; i < size; i++) {
      // Clustered under one /8 so entries nest; some IPv6 under one /32.
      if (rnd() < 0.7) {
        const prefix = 8 + Math.floor(rnd() * 25);
        const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
        const start = ((base | Math.floor(rnd() * 2 ** 24)) & mask) >>> 0;
        entries.push({ cidr: `${v4(start)}/${prefix}`, ...(rnd() < 0.4 ? { action: 'deny' as const } : {}) });
      } else {
        const prefix = 32 + Math.floor(rnd() * 33);
        const words = [0x2001, 0xdb8, Math.floor(rnd() * 4), Math.floor(rnd() * 4)];
        const addr = new ipaddr.IPv6(words.concat([0, 0, 0, 0]));
        const net = ipaddr.IPv6.networkAddressFromCIDR(`${addr.toString()}/${prefix}`);
        entries.push({ cidr: `${net.toString()}/${prefix}`, ...(rnd() < 0.4 ? { action: 'deny' as const } : {}) });
      }
    }
    const m = Matcher.compile(entries);
    const ref = reference(entries);
    let wrong = 0;
    let denied = 0;
    let byEntry = 0;
    for (let i = 0; i < 3000; i++) {
      const ip =
        rnd() < 0.7
          ? v4((base | Math.floor(rnd() * 2 ** 24)) >>> 0)
          : new ipaddr.IPv6([
              0x2001,
              0xdb8,
              Math.floor(rnd() * 4),
              Math.floor(rnd() * 4),
              Math.floor(rnd() * 65536),
              0,
              0,
              Math.floor(rnd() * 65536),
            ]).toString();
      const want = ref(ip);
      const got = m.lookup(ip);
      const expect = want.index < 0 ? -1 : want.deny ? -2 - want.index : want.index;
      if (got !== expect && m.entries[got < -1 ? -2 - got : got]?.cidr !== entries[want.index]?.cidr) wrong++;
      if (got < 0) denied++;
      if (got < -1) byEntry++;
    }
    t.equal(wrong, 0, `${size} entries: every lookup agrees with the reference`);
    t.ok(
      denied > 0 && byEntry > 0 && byEntry < 3000,
      `${size} entries: the sample covers allows, deny entries and gaps (${denied} denied, ${byEntry} by entry)`,
    );
  }
});
