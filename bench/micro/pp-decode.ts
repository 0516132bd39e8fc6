/**
 * Micro-benchmark of the PROXY protocol decoder and encoder: both run once per TCP connection on
 * the data path. Plain node, no dependencies:
 *
 *   npx tsc -p tsconfig.json && node dist/bench/micro/pp-decode.js
 *
 * Each case is warmed up (so V8 has optimised it), then timed over RUNS runs of ITERATIONS calls;
 * the table shows the median ns/op and the min..max spread across runs. Results are folded into
 * a checksum that is printed, so the calls cannot be optimised away.
 */
import { decodeProxyHeader } from '../../src/proxy-protocol/decoder';
import { encodeProxyV1, encodeProxyV2 } from '../../src/proxy-protocol/encoder';

const WARMUP = 200_000;
const ITERATIONS = 500_000;
const RUNS = 7;

const V4_SRC = { address: '203.0.113.195', port: 56324 };
const V4_DST = { address: '192.0.2.10', port: 443 };
const V6_SRC = { address: '2001:db8:85a3::8a2e:370:7334', port: 56324 };
const V6_DST = { address: '2001:db8::10', port: 443 };
const TLVS = [
  { type: 0x01, value: Buffer.from('h2') },
  { type: 0x02, value: Buffer.from('api.example.com') },
  { type: 0x05, value: Buffer.from('0123456789abcdef0123456789abcdef') },
];

const payload = Buffer.from('GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n');
const v1Tcp4 = Buffer.concat([encodeProxyV1(V4_SRC, V4_DST), payload]);
const v1Tcp6 = Buffer.concat([encodeProxyV1(V6_SRC, V6_DST), payload]);
const v2Ipv4 = Buffer.concat([encodeProxyV2(V4_SRC, V4_DST), payload]);
const v2Ipv6Tlvs = Buffer.concat([encodeProxyV2(V6_SRC, V6_DST, TLVS), payload]);

let sink = 0;

function length(r: ReturnType<typeof decodeProxyHeader>): number {
  return r.kind === 'done' ? r.length : -1;
}

const CASES: [string, () => void][] = [
  [
    'decode v1 TCP4',
    () => {
      sink += length(decodeProxyHeader(v1Tcp4));
    },
  ],
  [
    'decode v1 TCP6',
    () => {
      sink += length(decodeProxyHeader(v1Tcp6));
    },
  ],
  [
    'decode v2 IPv4',
    () => {
      sink += length(decodeProxyHeader(v2Ipv4));
    },
  ],
  [
    'decode v2 IPv6 + 3 TLVs',
    () => {
      sink += length(decodeProxyHeader(v2Ipv6Tlvs));
    },
  ],
  [
    'decode plain HTTP (none)',
    () => {
      sink += decodeProxyHeader(payload).kind.length;
    },
  ],
  [
    'encode v1 TCP4',
    () => {
      sink += encodeProxyV1(V4_SRC, V4_DST).length;
    },
  ],
  [
    'encode v2 IPv4',
    () => {
      sink += encodeProxyV2(V4_SRC, V4_DST).length;
    },
  ],
  [
    'encode v2 IPv6 + 3 TLVs',
    () => {
      sink += encodeProxyV2(V6_SRC, V6_DST, TLVS).length;
    },
  ],
];

function measure(fn: () => void): { median: number; min: number; max: number } {
  for (let k = 0; k < WARMUP; k++) fn();
  const perOp: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const start = process.hrtime.bigint();
    for (let k = 0; k < ITERATIONS; k++) fn();
    perOp.push(Number(process.hrtime.bigint() - start) / ITERATIONS);
  }
  perOp.sort((a, b) => a - b);
  return { median: perOp[Math.floor(RUNS / 2)]!, min: perOp[0]!, max: perOp[RUNS - 1]! };
}

// Sanity: every decode case must be the outcome it claims to measure.
for (const [name, buf] of [
  ['v1 TCP4', v1Tcp4],
  ['v1 TCP6', v1Tcp6],
  ['v2 IPv4', v2Ipv4],
  ['v2 IPv6', v2Ipv6Tlvs],
] as const) {
  if (decodeProxyHeader(buf).kind !== 'done') throw new Error(`bench input ${name} does not decode`);
}

console.log(`node ${process.version}, ${process.arch}; ${WARMUP} warmup, ${RUNS} runs x ${ITERATIONS} ops; median ns/op`);
console.log('| case | ns/op (median) | min..max |');
console.log('|---|---:|---:|');
for (const [name, fn] of CASES) {
  const { median, min, max } = measure(fn);
  console.log(`| ${name} | ${median.toFixed(0)} | ${min.toFixed(0)}..${max.toFixed(0)} |`);
}
console.log(`(checksum ${sink})`);
