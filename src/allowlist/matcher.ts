/**
 * The compiled allowlist: which entry, if any, admits a client address.
 *
 * Compile normalises the CIDRs into disjoint sorted ranges, each labelled with the most specific
 * (longest prefix) entry covering it; lookup is then one binary search, so its cost grows with
 * log2(ranges), not with the list (bench/micro/matcher.ts: ~flat from 1 to 100,000 CIDRs).
 * CIDRs either nest or are disjoint, which is what lets a single sorted sweep with a stack build
 * the ranges. IPv4 ranges live in Uint32Arrays; IPv6 as 4 big-endian u32 words per address,
 * compared lexicographically (no BigInt on the lookup path; BigInt is used only to compile).
 *
 * A Matcher is built completely, then never changes: the owner swaps the reference (docs/architecture.md,
 * "built completely, then swapped in one reference assignment"). The typed arrays cannot be
 * frozen, so they are #private; the instance, `entries` and each entry are frozen.
 *
 * Decisions:
 * - An IPv4 client (including one written ::ffff:a.b.c.d) is matched only by IPv4 CIDRs: the
 *   identity stage canonicalises mapped addresses to IPv4, so `::/0` does not match IPv4 clients
 *   and `0.0.0.0/0` does not match IPv6 clients. Allow both families explicitly.
 * - Deny entries (`action: "deny"`): a range whose most specific entry is a deny entry is labelled
 *   `-2 - index`, so `lookup` stays one search and one read (no per-entry check after it) and
 *   every caller that reads "< 0" as "denied" needs no change; `-1` stays "no entry covers it".
 *   `allow 10.0.0.0/8` + `deny 10.6.6.0/24` refuses 10.6.6.x and admits the rest of 10/8.
 * - Identical CIDRs (the store and the config refuse them; a matcher compiled from other input
 *   still decides): a deny entry wins over an allow entry at the same prefix, else the first
 *   entry (lowest index) wins.
 * - An address with a zone id (fe80::1%eth0) never matches: entries cannot name an interface, and
 *   the same link-local address on two interfaces is two different hosts.
 */
import type { AllowlistRefusal } from '../reasons';
import { parseCidr } from './cidr';
import { parseRfc3339, type AllowEntry } from './entry';
import { scanAddress, scanIPv4 } from '../address/scan';
import { scanCidr, wordMask } from './address-scan';

/** Thrown by `compile` for an entry that did not pass `validateEntry`: a caller bug or bad store. */
export class AllowlistCompileError extends Error {
  readonly code = 'ERR_ALLOWLIST_INVALID_ENTRY';
  constructor(
    readonly index: number,
    readonly field: 'cidr' | 'expiresAt',
    message: string,
  ) {
    super(`allowlist entry ${index}: ${field}: ${message}`);
    this.name = 'AllowlistCompileError';
  }
}

/** Scratch for the IPv6 scanner; lookups are synchronous, so one per process is enough. */
const scratch = new Uint32Array(4);
/** Compile's CIDR scratch: 4 words + prefix. */
const cidrScratch = new Uint32Array(5);

/** `label`: the entry's index, or `-2 - index` for a deny entry (see the decisions above). */
interface Item<K> {
  start: K;
  end: K;
  prefix: number;
  index: number;
  label: number;
}

/** The label `lookup` returns for entry `index` (a deny entry's is `-2 - index`). */
function labelOf(e: AllowEntry, index: number): number {
  return e.action === 'deny' ? -2 - index : index;
}

/** Why an address is refused, as the `ipgate_denied_total` reason: which kind of entry decided. */
/** Why the matcher refuses an address (src/reasons.ts has the sentences). */
export type DenialReason = AllowlistRefusal;
interface Ranges<K> {
  starts: K[];
  ends: K[];
  labels: number[];
}

/**
 * From this many ranges on, a 65,537-entry table (256 KiB) maps the top 16 bits of an address
 * to the slice of ranges starting in that /16 (IPv4) or /16 of IPv6 space, so a lookup touches
 * the table plus a few ranges instead of ~17 cache-missing binary-search steps at 100k CIDRs.
 * Below it the arrays sit in cache anyway and the table would only cost memory.
 */
const INDEX_MIN_RANGES = 256;

/**
 * IPv6 lists crowd into a few /16s (2001::/16, 2a00::/16, ...), so the /16 table alone leaves a
 * binary search over most of the list. A /16 bucket holding more than this many ranges gets a
 * second table over the bits right after the prefix all its range starts share (a /32 of
 * customer /48s is split on bits 32-47, a /48 of /64s on bits 48-63), with up to 2^16 slots and
 * about one range per slot. bench/micro/matcher.ts: hit at 100k IPv6 CIDRs 533 -> see README.
 */
const SUB_INDEX_MIN_RANGES = 32;

/** Words per IPv6 range: start and end (4 big-endian u32 each) and label side by side, so the
 * final check reads the cache line the search just loaded. */
const V6_STRIDE = 9;

/**
 * A second table in the pool starts with this header, then its 2^width + 1 slots:
 * [from, width, p0..p3, m0..m3]: the window's first bit and width, and the prefix all the
 * bucket's range starts share (bits 0..from-1, p) with its mask (m), word by word (u32 values
 * kept as int32 bits). An address in the bucket whose prefix differs is before the first start
 * or after the last, so the table needs no compare against those two ranges.
 */
const SUB_HEADER = 10;

export class Matcher {
  /** Matches nothing. */
  static readonly EMPTY: Matcher = Matcher.compile([]);

  /** The entries as given (frozen copies); `lookup` returns indices into this array. */
  readonly entries: readonly AllowEntry[];
  /** Number of active (unexpired) entries. */
  readonly size: number;
  /** Earliest future `expiresAt` (ms epoch): rebuild then. null when nothing will expire. */
  readonly nextExpiry: number | null;

  readonly #v4Starts: Uint32Array;
  readonly #v4Ends: Uint32Array;
  readonly #v4Labels: Int32Array;
  readonly #v4Index: Uint32Array | null;
  /** IPv6 ranges, V6_STRIDE words each: start (4 words), end (4 words), label. */
  readonly #v6: Uint32Array;
  readonly #v6Count: number;
  /**
   * Per /16 bucket h, side by side so one cache line holds both: [2h] the number of ranges
   * starting below h << 112 (the bucket's ranges are [2h] .. [2h + 2] - 1), [2h + 1] the offset
   * of its second table in #v6Pool or -1 (see SUB_INDEX_MIN_RANGES). 65,537 pairs.
   */
  readonly #v6Buckets: Int32Array | null;
  /** Second tables, each SUB_HEADER words then its slots: slot x is the first range in the bucket
   * whose start has window bits >= x. */
  readonly #v6Pool: Int32Array | null;

  private constructor(entries: readonly AllowEntry[], size: number, nextExpiry: number | null, v4: Ranges<number>, v6: Ranges<bigint>) {
    this.entries = entries;
    this.size = size;
    this.nextExpiry = nextExpiry;
    const n4 = v4.labels.length;
    this.#v4Starts = Uint32Array.from(v4.starts);
    this.#v4Ends = Uint32Array.from(v4.ends);
    this.#v4Labels = Int32Array.from(v4.labels); // deny labels are negative (-2 - index)
    this.#v4Index = n4 >= INDEX_MIN_RANGES ? bucketIndex(this.#v4Starts, 1) : null;
    const n6 = v6.labels.length;
    this.#v6 = new Uint32Array(n6 * V6_STRIDE);
    this.#v6Count = n6;
    for (let i = 0; i < n6; i++) {
      writeWords(this.#v6, i * V6_STRIDE, v6.starts[i]!);
      writeWords(this.#v6, i * V6_STRIDE + 4, v6.ends[i]!);
      this.#v6[i * V6_STRIDE + 8] = v6.labels[i]!;
    }
    const tables = n6 >= INDEX_MIN_RANGES ? v6Index(this.#v6, bucketIndex(this.#v6, V6_STRIDE)) : null;
    this.#v6Buckets = tables?.buckets ?? null;
    this.#v6Pool = tables?.pool ?? null;
    Object.freeze(this);
  }

  /**
   * Compile entries (already passed through `validateEntry`). Entries with `expiresAt <= now`
   * are left out but keep their index. Throws AllowlistCompileError for an invalid entry: the
   * caller keeps its last good matcher.
   */
  static compile(entries: readonly AllowEntry[], now: number = Date.now()): Matcher {
    const frozen: AllowEntry[] = new Array<AllowEntry>(entries.length);
    const v4: Array<Item<number>> = [];
    const v6: Array<Item<bigint>> = [];
    let nextExpiry: number | null = null;
    for (let index = 0; index < entries.length; index++) {
      const e = entries[index]!;
      frozen[index] = Object.isFrozen(e) ? e : Object.freeze({ ...e });
      if (e.expiresAt !== undefined) {
        const at = parseRfc3339(e.expiresAt);
        if (Number.isNaN(at)) {
          throw new AllowlistCompileError(index, 'expiresAt', `not an RFC 3339 date-time: ${JSON.stringify(e.expiresAt)}`);
        }
        if (at <= now) continue;
        if (nextExpiry === null || at < nextExpiry) nextExpiry = at;
      }
      // Validated entries take the allocation-free scanner (3-4x faster than parseCidr at 100k
      // CIDRs); anything it refuses goes through parseCidr, which accepts or explains.
      const family = typeof e.cidr === 'string' ? scanCidr(e.cidr, cidrScratch) : 0;
      if (family === 4) {
        const start = cidrScratch[0]!;
        const prefix = cidrScratch[4]!;
        v4.push({ start, end: (start | ~wordMask(prefix, 0)) >>> 0, prefix, index, label: labelOf(e, index) });
      } else if (family === 6) {
        const prefix = cidrScratch[4]!;
        let start = 0n;
        let end = 0n;
        for (let i = 0; i < 4; i++) {
          start = (start << 32n) | BigInt(cidrScratch[i]!);
          end = (end << 32n) | BigInt((cidrScratch[i]! | ~wordMask(prefix, i)) >>> 0);
        }
        v6.push({ start, end, prefix, index, label: labelOf(e, index) });
      } else {
        const parsed = parseCidr(e.cidr);
        if (!parsed.ok) throw new AllowlistCompileError(index, 'cidr', parsed.message);
        const { prefix, start, end } = parsed.cidr;
        const label = labelOf(e, index);
        if (parsed.cidr.family === 4) v4.push({ start: start[0]!, end: end[0]!, prefix, index, label });
        else v6.push({ start: toBig(start), end: toBig(end), prefix, index, label });
      }
    }
    return new Matcher(
      Object.freeze(frozen),
      v4.length + v6.length,
      nextExpiry,
      sweep(
        v4,
        (k) => k + 1,
        (k) => k - 1,
      ),
      sweep(
        v6,
        (k) => k + 1n,
        (k) => k - 1n,
      ),
    );
  }

  /**
   * The most specific unexpired entry covering `address`: its index (>= 0) when it is an allow
   * entry, `-2 - index` when it is a deny entry, -1 when no entry covers the address. So `< 0`
   * is "denied" and `>= 0` "admitted, by entries[result]". Accepts IPv4, IPv6 and IPv4-mapped
   * IPv6 text (matched as IPv4). Invalid text is -1; never throws.
   */
  lookup(address: string): number {
    if (typeof address !== 'string') return -1;
    const n = address.length;
    if (n >= 7 && n <= 15 && (address.charCodeAt(1) === 46 || address.charCodeAt(2) === 46 || address.charCodeAt(3) === 46)) {
      // A dotted quad has its first '.' at index 1-3, where no IPv6 text that parseAddress
      // accepts has one (the earliest is "::1.2.3.4", the deprecated form it rejects).
      const v4 = scanIPv4(address, 0, n);
      return v4 < 0 ? -1 : this.lookupV4(v4);
    }
    const family = scanAddress(address, scratch, n);
    if (family !== 6) return family === 4 ? this.lookupV4(scratch[0]!) : -1;
    const w0 = scratch[0]!,
      w1 = scratch[1]!,
      w2 = scratch[2]!,
      w3 = scratch[3]!;
    if (w0 === 0 && w1 === 0 && w2 === 0xffff) return this.lookupV4(w3);

    // The IPv6 search is written out here: as a function or a private method of its own it was
    // not inlined, and the call cost ~12% of an IPv6 lookup (bench/README.md "Four-digit groups, one /16 table, the search inside `lookup`").
    const s = this.#v6;
    const buckets = this.#v6Buckets;
    const pool = this.#v6Pool;
    let lo = 0;
    let hi = this.#v6Count - 1;
    let found = -1;
    if (buckets !== null) {
      const h = (w0 >>> 16) << 1;
      lo = buckets[h]!;
      hi = buckets[h + 2]! - 1;
      found = lo - 1;
      const off = buckets[h + 1]!;
      if (off >= 0) {
        // The second table covers the addresses sharing the prefix of the bucket's range starts;
        // any other address in the /16 is before the first start or after the last.
        const t = pool!;
        const d0 = (w0 ^ t[off + 2]!) & t[off + 6]!;
        const d1 = (w1 ^ t[off + 3]!) & t[off + 7]!;
        const d2 = (w2 ^ t[off + 4]!) & t[off + 8]!;
        const d3 = (w3 ^ t[off + 5]!) & t[off + 9]!;
        if ((d0 | d1 | d2 | d3) === 0) {
          const at = off + SUB_HEADER + windowBits(w0, w1, w2, w3, t[off]!, t[off + 1]!);
          lo = t[at]!;
          hi = t[at + 1]! - 1;
          found = lo - 1;
        } else {
          // The first differing prefix bit says which side (the prefix words are masked).
          const before =
            d0 !== 0
              ? (w0 & t[off + 6]!) >>> 0 < t[off + 2]! >>> 0
              : d1 !== 0
                ? (w1 & t[off + 7]!) >>> 0 < t[off + 3]! >>> 0
                : d2 !== 0
                  ? (w2 & t[off + 8]!) >>> 0 < t[off + 4]! >>> 0
                  : (w3 & t[off + 9]!) >>> 0 < t[off + 5]! >>> 0;
          if (before) {
            hi = lo - 1; // the range before the bucket, if any
          } else {
            found = hi; // the bucket's last range
            lo = hi + 1;
          }
        }
      }
    }
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const b = mid * V6_STRIDE;
      let startLe: boolean; // range start <= address
      if (s[b] !== w0) startLe = s[b]! < w0;
      else if (s[b + 1] !== w1) startLe = s[b + 1]! < w1;
      else if (s[b + 2] !== w2) startLe = s[b + 2]! < w2;
      else startLe = s[b + 3]! <= w3;
      if (startLe) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (found < 0) return -1;
    const b = found * V6_STRIDE + 4; // the end
    let le: boolean; // address <= range end
    if (s[b] !== w0) le = w0 < s[b]!;
    else if (s[b + 1] !== w1) le = w1 < s[b + 1]!;
    else if (s[b + 2] !== w2) le = w2 < s[b + 2]!;
    else le = w3 <= s[b + 3]!;
    return le ? s[b + 4]! | 0 : -1; // labels are int32 (deny: negative) kept in u32 words
  }

  /** Whether an allow entry is the most specific unexpired entry covering `address` (the data path's decision). */
  admits(address: string): boolean {
    return this.lookup(address) >= 0;
  }

  /** The entry `lookup` finds for `address` (the one that admits it), or null. */
  match(address: string): AllowEntry | null {
    const i = this.lookup(address);
    return i >= 0 ? this.entries[i]! : null;
  }

  /**
   * The decision for `address` and the entry that made it: an allow entry (allowed), a deny entry
   * (refused, `denied_by_entry`) or none (refused, `not_allowlisted`). For explain, check, logs and
   * metrics; the data path needs only `lookup`'s sign.
   */
  decide(address: string): Decision {
    const label = this.lookup(address);
    if (label >= 0) return new Decision(true, label, this.entries[label]!, null);
    if (label === -1) return NOT_ALLOWLISTED;
    const index = -2 - label;
    return new Decision(false, index, this.entries[index]!, 'denied_by_entry');
  }

  /** Same as `lookup` for an IPv4 address given as an unsigned 32-bit integer. */
  lookupV4(u32: number): number {
    if (u32 >>> 0 !== u32) return -1;
    const starts = this.#v4Starts;
    let lo = 0;
    let hi = starts.length - 1;
    let found = -1;
    const index = this.#v4Index;
    if (index !== null) {
      // Only ranges starting in this /16 can start closer to u32 than the last one before it.
      const h = u32 >>> 16;
      lo = index[h]!;
      hi = index[h + 1]! - 1;
      found = lo - 1;
    }
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid]! <= u32) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    return found >= 0 && u32 <= this.#v4Ends[found]! ? this.#v4Labels[found]! : -1;
  }
}

/**
 * What `Matcher.decide` says about an address. A class, so that every decision has one shape: an
 * HTTP connection keeps its refusal and the denial path reads it for each request. Three object
 * literals, with null or a value in `entry` and `reason`, made those reads megamorphic
 * (bench/README.md "One shape for an allowlist decision").
 */
export class Decision {
  constructor(
    readonly allowed: boolean,
    /** The deciding entry's index in `entries`, -1 when no entry covers the address. */
    readonly index: number,
    readonly entry: AllowEntry | null,
    /** null when allowed. */
    readonly reason: DenialReason | null,
  ) {}
}

/** The decision for an address no entry covers: one object, as it says nothing of the address. */
const NOT_ALLOWLISTED = new Decision(false, -1, null, 'not_allowlisted');

/**
 * The denial reason for an address a matcher refused: `denied_by_entry` when a deny entry decided,
 * else `not_allowlisted`. One lookup; called on the denial path only.
 */
export function denialReason(matcher: Matcher, address: string): DenialReason {
  return matcher.lookup(address) < -1 ? 'denied_by_entry' : 'not_allowlisted';
}

function toBig(words: readonly number[]): bigint {
  let v = 0n;
  for (const w of words) v = (v << 32n) | BigInt(w);
  return v;
}

function writeWords(out: Uint32Array, at: number, v: bigint): void {
  out[at] = Number((v >> 96n) & 0xffffffffn);
  out[at + 1] = Number((v >> 64n) & 0xffffffffn);
  out[at + 2] = Number((v >> 32n) & 0xffffffffn);
  out[at + 3] = Number(v & 0xffffffffn);
}

/**
 * index[h] = number of ranges whose start is below h << 16 (first word for IPv6), h = 0..65536.
 * The range holding an address with top bits h is index[h] - 1 or one in [index[h], index[h+1]).
 */
function bucketIndex(starts: Uint32Array, stride: number): Uint32Array {
  const n = starts.length / stride;
  const index = new Uint32Array(65537);
  let j = 0;
  for (let h = 0; h <= 65536; h++) {
    const bound = h * 65536;
    while (j < n && starts[j * stride]! < bound) j++;
    index[h] = j;
  }
  return index;
}

/** Bits [from, from + width) of the 128-bit address w0..w3, 1 <= width <= 16, from + width <= 128. */
function windowBits(w0: number, w1: number, w2: number, w3: number, from: number, width: number): number {
  const q = from >>> 5;
  const o = from & 31;
  const a = q === 0 ? w0 : q === 1 ? w1 : q === 2 ? w2 : w3;
  const top = (a << o) >>> (32 - width);
  if (o + width <= 32) return top;
  const b = q === 0 ? w1 : q === 1 ? w2 : w3; // o + width > 32 means q < 3
  return (top | (b >>> (64 - o - width))) >>> 0;
}

/**
 * The IPv6 /16 table with the second tables of crowded buckets (see SUB_INDEX_MIN_RANGES), from
 * the ranges' starts and `index` (bucketIndex).
 */
function v6Index(starts: Uint32Array, index: Uint32Array): { buckets: Int32Array; pool: Int32Array | null } {
  const stride = V6_STRIDE;
  const buckets = new Int32Array(2 * 65537);
  const pool: number[] = [];
  for (let h = 0; h <= 65536; h++) {
    buckets[2 * h] = index[h]!;
    buckets[2 * h + 1] = -1;
    if (h === 65536) break;
    const a = index[h]!;
    const z = index[h + 1]!;
    const count = z - a;
    if (count <= SUB_INDEX_MIN_RANGES) continue;
    // Bits shared by the first and last start (>= 16: same bucket; < 128: distinct starts).
    const fa = a * stride;
    const la = (z - 1) * stride;
    let from = 0;
    for (let q = 0; q < 4; q++) {
      const x = (starts[fa + q]! ^ starts[la + q]!) >>> 0;
      if (x !== 0) {
        from = 32 * q + Math.clz32(x);
        break;
      }
    }
    const width = Math.min(16, 128 - from, 32 - Math.clz32(count));
    buckets[2 * h + 1] = pool.length;
    pool.push(from, width);
    for (let q = 0; q < 4; q++) pool.push((starts[fa + q]! & wordMask(from, q)) >>> 0);
    for (let q = 0; q < 4; q++) pool.push(wordMask(from, q));
    // Slot x: first range in the bucket whose start's window is >= x.
    let j = a;
    for (let x = 0; x <= 1 << width; x++) {
      while (
        j < z &&
        windowBits(starts[j * stride]!, starts[j * stride + 1]!, starts[j * stride + 2]!, starts[j * stride + 3]!, from, width) < x
      )
        j++;
      pool.push(j);
    }
  }
  return { buckets, pool: pool.length === 0 ? null : Int32Array.from(pool) };
}

/**
 * Disjoint, sorted ranges labelled with the most specific covering entry. Items sorted by start,
 * wider first, then by index; the stack holds the chain of CIDRs containing the current one.
 * Keys are numbers for IPv4 (exact up to 2^53) and BigInt for IPv6 (compile only).
 */
function sweep<K extends number | bigint>(items: Array<Item<K>>, next: (k: K) => K, prev: (k: K) => K): Ranges<K> {
  // Items arrive in index order and Array#sort is stable, so equal (start, prefix) keep it.
  items.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : a.prefix - b.prefix));
  const out: Ranges<K> = { starts: [], ends: [], labels: [] };
  const emit = (from: K, to: K, label: number): void => {
    if (from > to) return;
    out.starts.push(from);
    out.ends.push(to);
    out.labels.push(label);
  };
  const stack: Array<Item<K>> = [];
  let cursor: K | null = null; // first address not yet emitted (null: none yet)
  for (const it of items) {
    while (stack.length > 0 && stack[stack.length - 1]!.end < it.start) {
      const done = stack.pop()!;
      emit(cursor!, done.end, done.label);
      cursor = next(done.end);
    }
    const top = stack[stack.length - 1];
    if (top !== undefined) {
      if (top.start === it.start && top.prefix === it.prefix) {
        // The same CIDR again: a deny entry takes over an allow one, else the first stays. Nothing
        // of `top` was emitted yet (its children sort after this duplicate), so relabel in place.
        if (it.label < -1 && top.label >= 0) top.label = it.label;
        continue;
      }
      emit(cursor!, prev(it.start), top.label); // the parent's part before this child
    }
    cursor = it.start;
    stack.push(it);
  }
  while (stack.length > 0) {
    const done = stack.pop()!;
    emit(cursor!, done.end, done.label);
    cursor = next(done.end);
  }
  return out;
}
