/**
 * Time-boxed property test of readClientHello (~3 s). Seeded: set TLS_FUZZ_SEED to replay (and
 * TLS_FUZZ_MS to change the budget); the seed is printed with every run. Properties, per input:
 *   - never throws; the answer is need_more / done / error; done => consumed 0 and
 *     0 < length <= buf.length; error => a reader-level reason from the catalogue;
 *   - deterministic: the same bytes in a fresh buffer give the same answer;
 *   - never reads past what it was given: an answer decided on n bytes is the answer for every
 *     extension of those n bytes (random bytes appended). A reader that looked at byte n (which
 *     JavaScript would hand it as undefined) would, for some appended byte, answer differently;
 *   - prefix-consistent: every prefix is need_more or already the final answer;
 *   - every valid vector, re-cut into random records and delivered in random TCP reads, parses
 *     to the same name, protocols and versions (split at every byte position for the vectors).
 */
import t from 'tap';
import { TLS_REASONS } from '../../src/tls/codes';
import { readClientHello } from '../../src/tls/client-hello';
import type { ClientHelloResult } from '../../src/tls/client-hello';
import { prng } from '../helpers/prng';
import { alpnExt, ext, handshake, helloBody, INVALID, records, sniExt, VALID, versionsExt } from '../fixtures/tls/client-hello-vectors';

const SEED = Number(process.env.TLS_FUZZ_SEED ?? Date.now() % 0x7fffffff);
const BUDGET_MS = Number(process.env.TLS_FUZZ_MS ?? 3000);
const rand = prng(SEED);
const int = (n: number): number => Math.floor(rand() * n);
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
const LISTENER_ONLY = new Set([
  'tls_truncated',
  'tls_timeout',
  'tls_hrr_sni_changed',
  'tls_hrr_alpn_changed',
  'tls_hrr_hello_changed',
  'tls_hrr_unexpected',
  'tls_bad_server_hello',
]);

function key(r: ClientHelloResult): string {
  if (r.kind === 'done') {
    const { sni, alpn, legacyVersion, supportedVersions, maxVersion, ech } = r;
    return JSON.stringify(['done', sni, alpn, legacyVersion, supportedVersions, maxVersion, ech]);
  }
  return r.kind === 'error' ? `error:${r.reason}` : r.kind;
}

function safeRead(buf: Buffer): ClientHelloResult | string {
  try {
    return readClientHello(buf);
  } catch (err) {
    return `threw ${String(err)}`;
  }
}

/** The first violated property for `input`, or null. */
function check(input: Buffer): string | null {
  const full = safeRead(input);
  if (typeof full === 'string') return full;
  if (full.kind === 'done') {
    if (full.consumed !== 0) return `consumed ${full.consumed}`;
    if (!(full.length > 0 && full.length <= input.length)) return `length ${full.length} outside 1..${input.length}`;
  } else if (full.kind === 'error') {
    if (!(full.reason in TLS_REASONS) || LISTENER_ONLY.has(full.reason)) return `reason ${full.reason} is not a reader-level code`;
  } else if (full.kind !== 'need_more') {
    return `unknown kind ${(full as { kind: string }).kind}`;
  }
  const again = safeRead(Buffer.from(input));
  if (typeof again === 'string' || key(again) !== key(full)) return 'not deterministic';
  const fullKey = key(full);
  if (full.kind !== 'need_more') {
    // Decided on these bytes: whatever follows cannot change it.
    for (let k = 0; k < 3; k++) {
      const tail = Buffer.from(Array.from({ length: 1 + int(64) }, () => int(256)));
      const extended = safeRead(Buffer.concat([input, tail]));
      if (typeof extended === 'string') return extended;
      if (key(extended) !== fullKey) return `answer changed when bytes were appended: ${fullKey} -> ${key(extended)}`;
    }
  }
  // Prefixes: all of them for short inputs, a sample for long ones.
  const cuts =
    input.length <= 128 ? Array.from({ length: input.length }, (_, k) => k) : Array.from({ length: 16 }, () => int(input.length));
  for (const n of cuts) {
    const p = safeRead(input.subarray(0, n));
    if (typeof p === 'string') return `prefix ${n}: ${p}`;
    if (p.kind !== 'need_more' && key(p) !== fullKey) return `prefix ${n} answers ${key(p)}, the whole input ${fullKey}`;
  }
  return null;
}

const NAMES = [
  'example.com',
  'A.B.C',
  'x',
  '_s.example',
  '1.2.3.4',
  'a..b',
  'a.b.',
  'a-.b',
  '\0',
  'ü.example',
  `${'l'.repeat(63)}.x`,
  '::1',
];

/** A random, mostly plausible ClientHello. */
function randomHello(): Buffer {
  const exts: Buffer[] = [];
  if (rand() < 0.8) exts.push(sniExt(pick(NAMES)));
  if (rand() < 0.5) exts.push(alpnExt(...Array.from({ length: 1 + int(4) }, () => pick(['h2', 'http/1.1', 'x', 'acme-tls/1']))));
  if (rand() < 0.5) exts.push(versionsExt(...Array.from({ length: 1 + int(4) }, () => pick([0x0304, 0x0303, 0x0302, 0x1a1a]))));
  if (rand() < 0.3) exts.push(ext(int(65536), Buffer.alloc(int(300), int(256))));
  if (rand() < 0.1) exts.push(ext(21, Buffer.alloc(int(17000))));
  for (let k = exts.length - 1; k > 0; k--) {
    const j = int(k + 1);
    [exts[k], exts[j]] = [exts[j]!, exts[k]!];
  }
  return records(
    handshake(helloBody({ extensions: rand() < 0.05 ? null : exts })),
    randomCuts(rand() < 0.5 ? 0 : 1 + int(8)),
    pick([0x0301, 0x0303]),
  );
}

function randomCuts(count: number): number[] {
  return Array.from({ length: count }, () => 1 + int(300));
}

function mutate(buf: Buffer): Buffer {
  const out = Buffer.from(buf);
  const edits = 1 + int(4);
  for (let k = 0; k < edits && out.length > 0; k++) {
    const at = int(out.length);
    switch (int(6)) {
      case 0:
        out[at] = int(256);
        break;
      case 5:
        out[at] = (out[at]! + (rand() < 0.5 ? 1 : 255)) & 0xff;
        break; // off-by-one in a length
      case 1:
        out[at] = out[at]! ^ (1 << int(8));
        break;
      case 2:
        out[at] = pick([0, 1, 0xff, 0x7f, 0x80, 0x16, 0x03]);
        break;
      case 3:
        return Buffer.concat([out.subarray(0, at), out.subarray(at + 1 + int(8))]);
      default:
        return Buffer.concat([out.subarray(0, at), Buffer.from([int(256)]), out.subarray(at)]);
    }
  }
  return out;
}

function generate(): Buffer {
  switch (int(5)) {
    case 0:
      return randomHello();
    case 1:
      return mutate(randomHello());
    case 2:
      return mutate(pick(VALID).bytes);
    case 3:
      return mutate(pick(INVALID).bytes);
    default:
      return Buffer.concat([Buffer.from([0x16, 0x03, int(5)]), Buffer.from(Array.from({ length: int(80) }, () => int(256)))]);
  }
}

/** Cuts the records of a valid vector differently: same handshake bytes, new record boundaries. */
function reFragment(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let p = 0; p < bytes.length; ) {
    const len = bytes.readUInt16BE(p + 3);
    parts.push(bytes.subarray(p + 5, p + 5 + len));
    p += 5 + len;
  }
  const message = Buffer.concat(parts);
  const cuts: number[] = [];
  let left = message.length;
  for (let k = int(6); k > 0 && left > 1; k--) {
    const size = 1 + int(Math.min(300, left - 1));
    cuts.push(size);
    left -= size;
  }
  return records(message, cuts, bytes.readUInt16BE(1));
}

t.test(`readClientHello properties (seed ${SEED}, ${BUDGET_MS} ms; replay with TLS_FUZZ_SEED=${SEED})`, async (t) => {
  t.comment(`seed ${SEED}`);
  const deadline = Date.now() + BUDGET_MS;
  let runs = 0;
  const kinds: Record<string, number> = {};
  let failure: string | null = null;
  while (Date.now() < deadline && failure === null) {
    const input = generate();
    const problem = check(input);
    const r = readClientHello(input);
    kinds[r.kind === 'error' ? r.reason : r.kind] = (kinds[r.kind === 'error' ? r.reason : r.kind] ?? 0) + 1;
    if (problem !== null) failure = `${problem} (input ${input.toString('hex').slice(0, 400)}, seed ${SEED})`;
    runs++;
  }
  t.equal(failure, null, 'every property held');
  t.ok(runs > 500, `${runs} inputs checked`);
  t.ok(
    (kinds.done ?? 0) > 0 && (kinds.tls_malformed ?? 0) > 0 && (kinds.tls_bad_sni ?? 0) > 0,
    `the generator reaches the interesting answers: ${JSON.stringify(kinds)}`,
  );
});

t.test(`every valid vector split at every byte position, re-cut into records (seed ${SEED})`, async (t) => {
  for (const row of VALID) {
    const expected = key(readClientHello(row.bytes));
    t.match(expected, /^\["done"/, `${row.name}: the vector itself parses`);
    const wrong: string[] = [];
    for (let n = 0; n < row.bytes.length; n++) {
      // Two TCP reads split at n; the listener calls once per read on the concatenation.
      const first = readClientHello(row.bytes.subarray(0, n));
      if (first.kind !== 'need_more') wrong.push(`${n}: ${key(first)}`);
      if (row.bytes.length > 4096 && n > 64) n += 97; // the 16 KiB vector: sample, not every byte
    }
    if (key(readClientHello(Buffer.concat([row.bytes.subarray(0, 7), row.bytes.subarray(7)]))) !== expected) wrong.push('rejoined');
    t.same(wrong, [], `${row.name}: no split decides early or differently`);
    for (let k = 0; k < 5; k++) {
      const recut = reFragment(row.bytes);
      const r = readClientHello(recut);
      t.equal(key(r), expected, `${row.name}: re-cut into ${countRecords(recut)} records, same answer`);
    }
  }
});

function countRecords(bytes: Buffer): number {
  let n = 0;
  for (let p = 0; p + 5 <= bytes.length; p += 5 + bytes.readUInt16BE(p + 3)) n++;
  return n;
}
