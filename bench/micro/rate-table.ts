/**
 * Micro-benchmark of the rate limit's table (src/limit/rate-table.ts): one `take` per request on
 * a route with `limits.requests` (one per connection for `limits.connectionRate`). Plain node:
 *
 *   npx tsc -p tsconfig.json && node dist/bench/micro/rate-table.js
 *
 * Tables holding 1,000, 100,000 and 1,000,000 distinct clients (IPv4 addresses as the identity
 * stage gives them: canonical strings), then `take` over 1,024 pre-generated clients already
 * held, cycled ("held"); over clients not held, each one evicting the least recently used
 * ("new, full table": the cost under a flood of distinct addresses); and 16 hot clients of the
 * largest table (a small working set: the gap to "held" is cache misses, not the algorithm). The
 * client string is decoded from bytes on every op (`latin1Slice`), as the PROXY decoder and the
 * X-Forwarded-For walk hand over fresh strings whose hash V8 has not computed yet: the "floor" row
 * is that decoding alone. Method as pp-decode.ts: warm-up, RUNS runs, median wall ns/op
 * (min..max) and process CPU ns/op; checksum printed.
 */
import { RateTable } from '../../src/limit/rate-table';
import { measure } from './lib/measure';

const WARMUP = 100_000;
const ITERATIONS = 500_000;
const RUNS = 7;
const INPUTS = 1024;

const addr = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const latin1 = (b: Buffer): string => (b as Buffer & { latin1Slice(start: number, end: number): string }).latin1Slice(0, b.length);

let sink = 0;
const rows: string[] = [];
function row(name: string, size: string, fn: () => void): void {
  const m = measure(fn, WARMUP, ITERATIONS, RUNS);
  rows.push(`| ${name} | ${size} | ${m.median.toFixed(0)} (${m.min.toFixed(0)}..${m.max.toFixed(0)}) | ${m.cpu.toFixed(0)} |`);
}

let now = 0;
for (const size of [1_000, 100_000, 1_000_000]) {
  const label = size.toLocaleString('en');
  // 100r/s, burst 1e9: every take accepted (the accept path writes the bucket; a refusal writes less).
  const table = new RateTable(100, 1e9, size);
  for (let i = 0; i < size; i++) table.take(addr(i), now++);
  const held = Array.from({ length: INPUTS }, (_, k) => Buffer.from(addr(Math.floor((k * 7919 * size) / INPUTS) % size), 'latin1'));
  let k = 0;
  row('floor: decode the address only', label, () => {
    sink += latin1(held[k++ & (INPUTS - 1)]!).length;
  });
  row('take, held', label, () => {
    if (table.take(latin1(held[k++ & (INPUTS - 1)]!), now)) sink++;
    now += 0.001;
  });
  // Clients not held: size + 65,536 distinct addresses in one buffer, cycled: each one comes back
  // only after more than `size` others, so it was evicted meanwhile (a flood keeps evicting).
  const pool = size + 65_536;
  const text = Buffer.from(Array.from({ length: pool }, (_, i) => addr(size + i)).join(''), 'latin1');
  const ends = new Int32Array(pool);
  for (let i = 0, at = 0; i < pool; i++) ends[i] = at += addr(size + i).length;
  const slice = text as Buffer & { latin1Slice(start: number, end: number): string };
  let j = 0;
  row('take, new, full table (evicts)', label, () => {
    const e = ends[j]!;
    const s0 = j === 0 ? 0 : ends[j - 1]!;
    j = j + 1 === pool ? 0 : j + 1;
    if (table.take(slice.latin1Slice(s0, e), now)) sink++;
    now += 0.001;
  });
  if (size === 1_000_000) {
    const hot = held.slice(0, 16);
    row('take, 16 hot clients', label, () => {
      if (table.take(latin1(hot[k++ & 15]!), now)) sink++;
      now += 0.001;
    });
  }
  if (table.size !== size) throw new Error(`table holds ${table.size}, not ${size}`);
}
process.stdout.write(
  `rate table, node ${process.version}\n| case | clients held | wall ns/op (min..max) | CPU ns/op |\n|---|---:|---:|---:|\n${rows.join('\n')}\nchecksum ${sink}\n`,
);
