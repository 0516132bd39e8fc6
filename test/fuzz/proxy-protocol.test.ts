/**
 * Time-boxed property test of decodeProxyHeader (~3 s). Seeded: set PP_FUZZ_SEED to replay; the
 * seed is printed with every failure. Properties, for every input:
 *   - never throws; the result is one of the four kinds; done => 0 < length <= buf.length;
 *     error => a catalogued decode-level reason;
 *   - deterministic: the same bytes (in a fresh buffer) give the same answer;
 *   - prefix-consistent: every prefix of input is 'more' or already the final answer, and once a
 *     prefix is decided (none/error/done) every longer prefix gives that same answer -- so the
 *     answer cannot depend on how TCP split the bytes.
 */
import t from 'tap';
import ipaddr from 'ipaddr.js';
import { PP_REASONS } from '../../src/proxy-protocol/codes';
import { decodeProxyHeader } from '../../src/proxy-protocol/decoder';
import type { DecodeResult } from '../../src/proxy-protocol/decoder';
import { encodeProxyV1, encodeProxyV2 } from '../../src/proxy-protocol/encoder';
import { INVALID, NOT_PROXY, VALID } from '../fixtures/proxy-protocol/vectors';

const SEED = Number(process.env.PP_FUZZ_SEED ?? Date.now() % 0x7fffffff);
const BUDGET_MS = Number(process.env.PP_FUZZ_MS ?? 3000);

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = prng(SEED);
const int = (n: number): number => Math.floor(rand() * n);
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;

function key(r: DecodeResult): string {
  if (r.kind === 'done') {
    const h = r.header;
    return JSON.stringify([
      r.length,
      h.version,
      h.command,
      h.family,
      h.source,
      h.destination,
      h.tlvs.map((x) => [x.type, x.value.toString('hex')]),
    ]);
  }
  return r.kind === 'error' ? `error:${r.reason}` : r.kind;
}

const LISTENER_ONLY = new Set(['pp_truncated', 'pp_timeout', 'pp_untrusted', 'pp_missing']);

/** Returns a description of the first violated property, or null. */
function check(input: Buffer): string | null {
  let full: DecodeResult;
  try {
    full = decodeProxyHeader(input);
  } catch (err) {
    return `threw ${String(err)}`;
  }
  switch (full.kind) {
    case 'more':
    case 'none':
      break;
    case 'done':
      if (!(full.length > 0 && full.length <= input.length)) return `length ${full.length} outside 1..${input.length}`;
      break;
    case 'error':
      if (!(full.reason in PP_REASONS) || LISTENER_ONLY.has(full.reason)) return `reason ${full.reason} not a decode reason`;
      if (typeof full.message !== 'string' || full.message.length === 0) return 'error without a message';
      break;
    default:
      return `unknown kind ${JSON.stringify(full)}`;
  }
  const finalKey = key(full);
  if (key(decodeProxyHeader(Buffer.from(input))) !== finalKey) return 'not deterministic';

  // Random split points, delivered in order as the listener would (concatenation = prefix).
  let decided: string | null = null;
  let at = 0;
  while (at < input.length) {
    at = Math.min(input.length, at + 1 + int(rand() < 0.5 ? 4 : 64));
    let r: DecodeResult;
    try {
      r = decodeProxyHeader(input.subarray(0, at));
    } catch (err) {
      return `threw on prefix ${at}: ${String(err)}`;
    }
    const k = key(r);
    if (decided === null) {
      if (k !== 'more') {
        if (k !== finalKey) return `prefix ${at} decided ${k} but the whole input gives ${finalKey}`;
        decided = k;
      }
    } else if (k !== decided) {
      return `prefix ${at} gives ${k} after an earlier prefix decided ${decided}`;
    }
  }
  return null;
}

function mutate(base: Buffer): Buffer {
  let b = Buffer.from(base);
  const steps = 1 + int(4);
  for (let s = 0; s < steps; s++) {
    const pos = b.length === 0 ? 0 : int(b.length);
    switch (int(7)) {
      case 0:
        if (b.length) b[pos] = b[pos]! ^ (1 << int(8));
        break; //          bit flip
      case 1:
        if (b.length) b[pos] = int(256);
        break; //                          byte replace
      case 2:
        b = b.subarray(0, int(b.length + 1));
        break; //                      truncate
      case 3:
        b = Buffer.concat([b.subarray(0, pos), Buffer.from([pick([0x20, 0x0d, 0x0a, 0x3a, 0x2e, 0x30, int(256)])]), b.subarray(pos)]);
        break; // insert
      case 4:
        b = Buffer.concat([b.subarray(0, pos), b.subarray(pos + 1)]);
        break; // delete
      case 5:
        if (b.length > 15) {
          b = Buffer.from(b);
          b[14] = int(256);
          b[15] = int(256);
        }
        break; // v2 len field
      default:
        b = Buffer.concat([b, Buffer.from(b.subarray(pos, pos + int(8)))]); //  duplicate a slice at the end
    }
  }
  return b;
}

function randomAddress(): string {
  if (rand() < 0.5) return `${int(256)}.${int(256)}.${int(256)}.${int(256)}`;
  const groups: string[] = [];
  for (let k = 0; k < 8; k++) groups.push(rand() < 0.4 ? '0' : int(65536).toString(16));
  if (rand() < 0.1) return `::ffff:${int(256)}.${int(256)}.${int(256)}.${int(256)}`;
  return groups.join(':');
}

/** Canonical spelling per ipaddr.js (an independent implementation): RFC 5952, mapped -> IPv4. */
function canonical(address: string): string {
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const six = parsed as ipaddr.IPv6;
  return six.isIPv4MappedAddress() ? six.toIPv4Address().toString() : six.toRFC5952String();
}

function randomBytes(): Buffer {
  const b = Buffer.alloc(int(300));
  for (let k = 0; k < b.length; k++) b[k] = int(256);
  // Most random first bytes are 'none' at once; start half of them like a header.
  if (b.length && rand() < 0.5) b[0] = rand() < 0.5 ? 0x50 : 0x0d;
  return b;
}

const SEEDS = [...VALID, ...INVALID, ...NOT_PROXY].map((v) => v.bytes);

t.test(`decodeProxyHeader properties (PP_FUZZ_SEED=${SEED})`, async (t) => {
  const started = Date.now();
  const counts = { random: 0, mutated: 0, encoded: 0 };
  const kinds: Record<string, number> = {};
  let failure: string | null = null;
  let iteration = 0;
  while (Date.now() - started < BUDGET_MS && failure === null) {
    let input: Buffer;
    const which = iteration++ % 3;
    if (which === 0) {
      input = randomBytes();
      counts.random++;
    } else if (which === 1) {
      input = mutate(pick(SEEDS));
      counts.mutated++;
    } else {
      const src = { address: randomAddress(), port: int(65536) };
      const dst = { address: randomAddress(), port: int(65536) };
      const header =
        rand() < 0.5
          ? encodeProxyV1(src, dst)
          : encodeProxyV2(src, dst, rand() < 0.5 ? [{ type: int(256), value: Buffer.alloc(int(40), int(256)) }] : []);
      const whole = Buffer.concat([header, Buffer.from('payload')]);
      const r = decodeProxyHeader(whole);
      // Encoder output must decode to exactly what was encoded (canonical text, same ports).
      const want = JSON.stringify([
        { address: canonical(src.address), port: src.port },
        { address: canonical(dst.address), port: dst.port },
      ]);
      if (r.kind !== 'done' || r.length !== header.length || JSON.stringify([r.header.source, r.header.destination]) !== want) {
        failure = `encoder round trip failed for ${JSON.stringify([src, dst])}: ${key(r)}`;
        break;
      }
      input = rand() < 0.5 ? whole : mutate(whole);
      counts.encoded++;
    }
    const k = decodeProxyHeader(input).kind;
    kinds[k] = (kinds[k] ?? 0) + 1;
    const problem = check(input);
    if (problem !== null) failure = `${problem}\n  input (hex): ${input.toString('hex')}`;
  }
  t.equal(failure, null, `no property violated (replay with PP_FUZZ_SEED=${SEED})`);
  t.comment(`seed ${SEED}: ${JSON.stringify(counts)} inputs, results ${JSON.stringify(kinds)}`);
  // Guard against a vacuous run: every kind of answer must have been exercised.
  for (const kind of ['more', 'none', 'done', 'error']) t.ok((kinds[kind] ?? 0) > 0, `exercised '${kind}' (seed ${SEED})`);
});
