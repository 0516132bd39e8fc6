/**
 * Two builds of ipgate side by side in one process, in alternating short rounds: the address
 * paths the shared scanner (src/address/) serves. On a shared, loaded VM (bench/README.md: load
 * average 8-16, absolute numbers drift 2x between minutes) separate runs of bench/micro/matcher.ts
 * and pp-decode.ts cannot tell a 10% change from the drift; alternating 100,000-op rounds of
 * both builds in one process, and taking the median of the per-round ratios, can.
 *
 *   npx tsc -p tsconfig.json && cp -r dist /tmp/after
 *   git stash / checkout the base, npx tsc -p tsconfig.json && cp -r dist /tmp/before
 *   node dist/bench/ab/address-paths.js /tmp/before/dist/src /tmp/after/dist/src [rounds=41]
 *
 * Cases: Matcher.lookup at 100,000 random CIDRs (IPv4 /16-/32; IPv6 /64 under four /32s, half of
 * the addresses inside an entry, half random), PROXY v1 decode of a TCP4 and a TCP6 header, the
 * v1 encoder with a new IPv6 source each call (its cache of the last address does not hit), the v2
 * encoder with a new IPv4 source each call.
 */
/* eslint-disable @typescript-eslint/no-require-imports */
import path from 'node:path';

interface Build {
  Matcher: { compile(entries: Array<{ cidr: string }>): { lookup(a: string): number } };
  decode: (b: Buffer) => { kind: string };
  enc1: (s: { address: string; port: number }, d: { address: string; port: number }) => Buffer;
  enc2: (s: { address: string; port: number }, d: { address: string; port: number }) => Buffer;
}

function load(root: string): Build {
  const r = path.resolve(root);
  const enc = require(`${r}/proxy-protocol/encoder.js`) as { encodeProxyV1: Build['enc1']; encodeProxyV2: Build['enc2'] };
  return {
    Matcher: (require(`${r}/allowlist/matcher.js`) as { Matcher: Build['Matcher'] }).Matcher,
    decode: (require(`${r}/proxy-protocol/decoder.js`) as { decodeProxyHeader: Build['decode'] }).decodeProxyHeader,
    enc1: enc.encodeProxyV1,
    enc2: enc.encodeProxyV2,
  };
}

const [baseRoot, newRoot, roundsArg] = process.argv.slice(2);
if (baseRoot === undefined || newRoot === undefined) {
  process.stderr.write('usage: node dist/bench/ab/address-paths.js BASE/dist/src NEW/dist/src [rounds]\n');
  process.exit(2);
}
const builds: Record<'base' | 'new', Build> = { base: load(baseRoot), new: load(newRoot) };

let seed = 0x12345;
const rnd = (): number => {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};
const u32 = (): number => Math.floor(rnd() * 2 ** 32) >>> 0;
const v4 = (w: number): string => `${w >>> 24}.${(w >>> 16) & 255}.${(w >>> 8) & 255}.${w & 255}`;
const v6 = (ws: number[]): string => ws.flatMap((w) => [(w >>> 16).toString(16), (w & 0xffff).toString(16)]).join(':');
const mask = (w: number, p: number): number => (p === 0 ? 0 : (w & ((0xffffffff << (32 - p)) >>> 0)) >>> 0);

const N = 100_000;
const cidr4: Array<{ cidr: string }> = [];
const cidr6: Array<{ cidr: string }> = [];
const nets6: number[][] = [];
for (let i = 0; i < N; i++) {
  const p = 16 + Math.floor(rnd() * 17);
  cidr4.push({ cidr: `${v4(mask(u32(), p))}/${p}` });
  const net = [(0x20010db8 + Math.floor(rnd() * 4) * 0x10000) >>> 0, u32()];
  nets6.push(net);
  cidr6.push({ cidr: `${v6([net[0]!, net[1]!, 0, 0])}/64` });
}
const addrs4 = Array.from({ length: 1024 }, () => v4(u32()));
const addrs6 = Array.from({ length: 1024 }, (_, i) => {
  const net = nets6[Math.floor(rnd() * N)]!;
  return v6(i % 2 ? [net[0]!, net[1]!, u32(), u32()] : [u32(), u32(), u32(), u32()]);
});
const matchers = {
  base: { m4: builds.base.Matcher.compile(cidr4), m6: builds.base.Matcher.compile(cidr6) },
  new: { m4: builds.new.Matcher.compile(cidr4), m6: builds.new.Matcher.compile(cidr6) },
};
const V4_DST = { address: '192.0.2.10', port: 443 };
const V6_SRC = { address: '2001:db8:85a3::8a2e:370:7334', port: 56324 };
const V6_DST = { address: '2001:db8::10', port: 443 };
const h4 = builds.base.enc1({ address: '203.0.113.195', port: 56324 }, V4_DST);
const h6 = builds.base.enc1(V6_SRC, V6_DST);

let sink = 0;
type Which = 'base' | 'new';
const cases: Array<[string, (k: Which, n: number) => void]> = [
  [
    'Matcher.lookup IPv4, 100k CIDRs',
    (k, n) => {
      const m = matchers[k].m4;
      for (let i = 0; i < n; i++) sink += m.lookup(addrs4[i & 1023]!);
    },
  ],
  [
    'Matcher.lookup IPv6, 100k CIDRs',
    (k, n) => {
      const m = matchers[k].m6;
      for (let i = 0; i < n; i++) sink += m.lookup(addrs6[i & 1023]!);
    },
  ],
  [
    'decode v1 TCP4',
    (k, n) => {
      const d = builds[k].decode;
      for (let i = 0; i < n; i++) sink += d(h4).kind.length;
    },
  ],
  [
    'decode v1 TCP6',
    (k, n) => {
      const d = builds[k].decode;
      for (let i = 0; i < n; i++) sink += d(h6).kind.length;
    },
  ],
  [
    'encode v1 TCP6, a new source each',
    (k, n) => {
      const e = builds[k].enc1;
      for (let i = 0; i < n; i++) sink += e(i & 1 ? V6_SRC : { address: addrs6[i & 1023]!, port: 1 }, V6_DST).length;
    },
  ],
  [
    'encode v2 IPv4, a new source each',
    (k, n) => {
      const e = builds[k].enc2;
      for (let i = 0; i < n; i++) sink += e({ address: addrs4[i & 1023]!, port: 1 }, V4_DST).length;
    },
  ],
];

const OPS = 100_000;
const ROUNDS = Number(roundsArg ?? 41);
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
process.stdout.write(`node ${process.version}, ${ROUNDS} alternating rounds x ${OPS} ops per case and build\n\n`);
process.stdout.write('| case | base ns/op (median) | new ns/op (median) | new/base (median of rounds) |\n|---|---:|---:|---:|\n');
for (const [name, fn] of cases) {
  fn('base', OPS);
  fn('new', OPS);
  const times: Record<Which, number[]> = { base: [], new: [] };
  const ratios: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const got: Record<Which, number> = { base: 0, new: 0 };
    for (const k of (r & 1 ? ['new', 'base'] : ['base', 'new']) as Which[]) {
      const start = process.hrtime.bigint();
      fn(k, OPS);
      got[k] = Number(process.hrtime.bigint() - start) / OPS;
      times[k].push(got[k]);
    }
    ratios.push(got.new / got.base);
  }
  process.stdout.write(`| ${name} | ${median(times.base).toFixed(0)} | ${median(times.new).toFixed(0)} | ${median(ratios).toFixed(2)} |\n`);
}
process.stdout.write(`(checksum ${sink % 1000})\n`);
