/**
 * Micro-benchmark of the allowlist matcher (the per-connection hot path) against the naive
 * ipaddr.js loop, plus compile time. Results and how to read them: bench/README.md "Allowlist matcher".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/micro/matcher.js
 *
 * Each figure is the median of RUNS timed runs after a warm-up run. Lookups take the address as
 * a string (as the listener has it from the socket), so parsing is included. The naive loop gets
 * its CIDRs pre-parsed (ipaddr.parseCIDR once), which flatters it.
 */
import os from 'node:os';
import ipaddr from 'ipaddr.js';
import { Matcher } from '../../src/allowlist/matcher';
import type { AllowEntry } from '../../src/allowlist/entry';
import { prng } from '../../test/helpers/prng';

const RUNS = 11;
const PROBES = 1024; // pre-generated addresses per kind, cycled

const rnd = prng(20240601);
const u32 = (): number => Math.floor(rnd() * 2 ** 32);
const v4Text = (w: number): string => `${w >>> 24}.${(w >>> 16) & 255}.${(w >>> 8) & 255}.${w & 255}`;

interface Family {
  entries: AllowEntry[];
  hit: string[];
  miss: string[];
}

/** Random IPv4 CIDRs, /16 to /32 (some nest by chance); hits drawn inside random entries. */
function v4List(n: number): Family {
  const entries: AllowEntry[] = [];
  const nets: Array<[number, number]> = [];
  for (let i = 0; i < n; i++) {
    const prefix = 16 + Math.floor(rnd() * 17);
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    const start = (u32() & mask) >>> 0;
    entries.push({ cidr: `${v4Text(start)}/${prefix}` });
    nets.push([start, prefix]);
  }
  const hit: string[] = [];
  for (let i = 0; i < PROBES; i++) {
    const [start, prefix] = nets[Math.floor(rnd() * nets.length)]!;
    const host = prefix === 32 ? 0 : Math.floor(rnd() * 2 ** (32 - prefix));
    hit.push(v4Text(start + host));
  }
  return { entries, hit, miss: misses(entries, () => v4Text(u32())) };
}

/** Random IPv6 CIDRs /32 to /128 under a handful of /16s; hits inside random entries. */
function v6List(n: number): Family {
  const roots = [0x2001, 0x2a00, 0x2600, 0x2c0f].map((r) => BigInt(r) << 112n);
  const rand128 = (): bigint => (BigInt(u32()) << 96n) | (BigInt(u32()) << 64n) | (BigInt(u32()) << 32n) | BigInt(u32());
  const text = (v: bigint): string => {
    const parts: number[] = [];
    for (let i = 7; i >= 0; i--) parts.push(Number((v >> BigInt(i * 16)) & 0xffffn));
    return new ipaddr.IPv6(parts).toString();
  };
  const entries: AllowEntry[] = [];
  const nets: Array<[bigint, number]> = [];
  for (let i = 0; i < n; i++) {
    const prefix = [32, 48, 56, 64, 128][Math.floor(rnd() * 5)]!;
    const host = BigInt(128 - prefix);
    const v = roots[Math.floor(rnd() * roots.length)]! | (rand128() & ((1n << 112n) - 1n));
    const start = (v >> host) << host;
    entries.push({ cidr: `${text(start)}/${prefix}` });
    nets.push([start, prefix]);
  }
  const hit: string[] = [];
  for (let i = 0; i < PROBES; i++) {
    const [start, prefix] = nets[Math.floor(rnd() * nets.length)]!;
    hit.push(text(start | (rand128() & ((1n << BigInt(128 - prefix)) - 1n))));
  }
  return { entries, hit, miss: misses(entries, () => text(rand128())) };
}

function misses(entries: AllowEntry[], gen: () => string): string[] {
  const m = Matcher.compile(entries);
  const out: string[] = [];
  while (out.length < PROBES) {
    const a = gen();
    if (m.lookup(a) === -1) out.push(a);
  }
  return out;
}

function naive(entries: readonly AllowEntry[]): (address: string) => number {
  const nets = entries.map((e) => ipaddr.parseCIDR(e.cidr));
  return (address) => {
    const addr = ipaddr.process(address);
    let best = -1;
    let bestPrefix = -1;
    for (let i = 0; i < nets.length; i++) {
      const [net, prefix] = nets[i]!;
      if (net.kind() === addr.kind() && addr.match(net, prefix) && prefix > bestPrefix) {
        best = i;
        bestPrefix = prefix;
      }
    }
    return best;
  };
}

let sink = 0;

/**
 * Ns per lookup over RUNS runs of `iterations` lookups cycling through `addresses`: the median
 * and the best run (wall clock). On this shared VM, code that touches memory varies by up to 1.5x
 * from run to run with nothing else running (bench/README.md); the best run is the code's cost,
 * the median what a neighbour-disturbed machine gets.
 *
 * `loop` runs the lookups itself so that each kind has its own call site: the listener calls
 * `matcher.lookup` from one monomorphic site, and a shared `fn(address)` site turned megamorphic
 * by the naive and floor functions would add a non-inlined call to every matcher lookup.
 * Each loop sums into a local int: summing into the module-level `sink` outgrew a small integer
 * and boxed a heap number per lookup, which the first version of this bench measured too.
 */
function timeLookups(loop: (addresses: string[], iterations: number) => number, addresses: string[], iterations: number): Timing {
  const wall: number[] = [];
  for (let run = 0; run <= RUNS; run++) {
    const t0 = process.hrtime.bigint();
    sink ^= loop(addresses, iterations);
    const ns = Number(process.hrtime.bigint() - t0) / iterations;
    if (run > 0) wall.push(ns); // run 0 is the warm-up
  }
  return { median: median(wall), best: Math.min(...wall) };
}

/** The matcher's loop: `Matcher#lookup` called directly, as the listener does. */
const matcherLoop =
  (m: Matcher) =>
  (addresses: string[], iterations: number): number => {
    let acc = 0;
    for (let i = 0; i < iterations; i++) acc = (acc + m.lookup(addresses[i & (PROBES - 1)]!)) | 0;
    return acc;
  };

/** The same loop around any function (naive matcher, floor). */
const fnLoop =
  (fn: (a: string) => number) =>
  (addresses: string[], iterations: number): number => {
    let acc = 0;
    for (let i = 0; i < iterations; i++) acc = (acc + fn(addresses[i & (PROBES - 1)]!)) | 0;
    return acc;
  };

interface Timing {
  median: number;
  best: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

function compileMs(entries: AllowEntry[], runs: number): { wall: number; cpu: number } {
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let run = 0; run <= runs; run++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    sink += Matcher.compile(entries).size;
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    const c = process.cpuUsage(c0);
    if (run > 0) {
      wall.push(ms);
      cpu.push((c.user + c.system) / 1000);
    }
  }
  return { wall: median(wall), cpu: median(cpu) };
}

const fmt = (ns: number): string => (ns >= 10_000 ? `${(ns / 1000).toFixed(0)} µs` : `${ns.toFixed(0)} ns`);
const perSec = (ns: number): string => `${(1e9 / ns / 1e6).toFixed(2)} M/s`;

console.log(
  `node ${process.version}, ${process.platform}/${process.arch}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model}), load average ${os.loadavg()[0]!.toFixed(1)}, ${RUNS} runs after a warm-up\n`,
);
console.log('ns per lookup, wall clock: median of the runs (best run in brackets)\n');
console.log('| set | CIDRs | matcher hit | matcher miss | lookups/s (hit, median) | naive ipaddr.js hit | naive miss |');
console.log('|---|---:|---:|---:|---:|---:|---:|');
const both = (t: Timing): string => `${fmt(t.median)} (${fmt(t.best)})`;
for (const [name, make] of [
  ['IPv4', v4List],
  ['IPv6', v6List],
] as const) {
  for (const n of [1, 1_000, 100_000]) {
    const set = make(n);
    const m = Matcher.compile(set.entries);
    const hit = timeLookups(matcherLoop(m), set.hit, 2_000_000);
    const miss = timeLookups(matcherLoop(m), set.miss, 2_000_000);
    const slow = naive(set.entries);
    const naiveIters = n === 1 ? 200_000 : n === 1_000 ? 2_000 : 20;
    const nHit = timeLookups(fnLoop(slow), set.hit, naiveIters);
    const nMiss = timeLookups(fnLoop(slow), set.miss, naiveIters);
    console.log(
      `| ${name} | ${n.toLocaleString('en')} | ${both(hit)} | ${both(miss)} | ${perSec(hit.median)} | ${both(nHit)} | ${both(nMiss)} |`,
    );
  }
}

// Floor: just reading every char of the address string, no parsing. On a busy machine this
// shows how much of a lookup is the machine, not the matcher.
const charLoop = (a: string): number => {
  let h = 0;
  for (let i = 0; i < a.length; i++) h = (h * 31 + a.charCodeAt(i)) | 0;
  return h;
};
console.log('\n| floor: charCodeAt loop over the address | ns |');
console.log('|---|---:|');
for (const [name, make] of [
  ['IPv4', v4List],
  ['IPv6', v6List],
] as const) {
  console.log(`| ${name} hit addresses | ${both(timeLookups(fnLoop(charLoop), make(1_000).hit, 2_000_000))} |`);
}

console.log('\n| compile | CIDRs | wall | CPU |');
console.log('|---|---:|---:|---:|');
for (const [name, make] of [
  ['IPv4', v4List],
  ['IPv6', v6List],
] as const) {
  const set = make(100_000);
  const c = compileMs(set.entries, 5);
  console.log(`| ${name} | 100,000 | ${c.wall.toFixed(0)} ms | ${c.cpu.toFixed(0)} ms |`);
}
if (sink === 0.5) console.log(sink); // keep results observable so nothing is optimised away
