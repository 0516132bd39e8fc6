/**
 * Micro-benchmark of the ClientHello reader (src/tls/client-hello.ts): it runs once per TCP
 * connection on an SNI-routing listener, on every read until the hello is complete. Plain node:
 *
 *   npx tsc -p tsconfig.json && node dist/bench/micro/client-hello.js
 *
 * Same method as pp-decode.ts: warm-up, then RUNS runs of ITERATIONS calls, median ns/op with the
 * min..max spread; results folded into a printed checksum so the calls cannot be optimised away.
 * The "typical" hello is shaped like the one curl 7.88 / OpenSSL 3.0 sends (517 bytes: SNI, ALPN
 * h2 + http/1.1, supported_versions, key share, padding to 512), built from the test fixtures.
 */
import { readClientHello } from '../../src/tls/client-hello';
import { alpnExt, ext, handshake, helloBody, records, sniExt, versionsExt } from '../../test/fixtures/tls/client-hello-vectors';
import { measure as measureLoop, type Measured } from './lib/measure';

const WARMUP = 100_000;
const ITERATIONS = 300_000;
const RUNS = 7;

function typicalBody(): Buffer {
  const exts = [
    sniExt('api.example.com'),
    ext(11, Buffer.from([3, 0, 1, 2])), // ec_point_formats
    ext(10, Buffer.from('000a001d0017001e00190018', 'hex')), // supported_groups
    ext(35, Buffer.alloc(0)), // session_ticket
    alpnExt('h2', 'http/1.1'),
    ext(22, Buffer.alloc(0)), // encrypt_then_mac
    ext(23, Buffer.alloc(0)), // extended_master_secret
    ext(13, Buffer.alloc(48, 4)), // signature_algorithms
    versionsExt(0x0304, 0x0303),
    ext(45, Buffer.from([1, 1])), // psk_key_exchange_modes
    ext(51, Buffer.concat([Buffer.from('0024001d0020', 'hex'), Buffer.alloc(32, 9)])), // key_share x25519
  ];
  const body = helloBody({ suites: Array.from({ length: 31 }, (_, k) => 0xc000 + k), extensions: exts });
  // padding (RFC 7685) to a 512-byte handshake message, as OpenSSL does
  const pad = 512 - 4 - body.length - 4;
  return helloBody({
    suites: Array.from({ length: 31 }, (_, k) => 0xc000 + k),
    extensions: [...exts, ext(21, Buffer.alloc(Math.max(0, pad)))],
  });
}

const typical = records(handshake(typicalBody()));
const split3 = records(handshake(typicalBody()), [100, 200]);
const half = typical.subarray(0, 250);
const plain = Buffer.from('GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n');

for (const [name, buf, kind] of [
  ['typical', typical, 'done'],
  ['split', split3, 'done'],
  ['half', half, 'need_more'],
  ['plain', plain, 'error'],
] as const) {
  const r = readClientHello(buf);
  if (r.kind !== kind || (kind === 'done' && r.kind === 'done' && r.sni !== 'api.example.com'))
    throw new Error(`bench input ${name} does not read as ${kind}`);
}

let sink = 0;
const CASES: [string, () => void][] = [
  [
    `typical hello, one record (${typical.length} bytes)`,
    () => {
      const r = readClientHello(typical);
      sink += r.kind === 'done' ? r.length : -1;
    },
  ],
  [
    `the same hello in 3 records (${split3.length} bytes)`,
    () => {
      const r = readClientHello(split3);
      sink += r.kind === 'done' ? r.length : -1;
    },
  ],
  [
    'first 250 bytes of it (need_more)',
    () => {
      sink += readClientHello(half).kind.length;
    },
  ],
  [
    'plain HTTP (tls_not_handshake)',
    () => {
      sink += readClientHello(plain).kind.length;
    },
  ],
];

function measure(fn: () => void): Measured {
  return measureLoop(fn, WARMUP, ITERATIONS, RUNS);
}

console.log(`node ${process.version}, ${process.arch}; ${WARMUP} warmup, ${RUNS} runs x ${ITERATIONS} ops; median ns/op`);
console.log('| case | ns/op median (CPU) | min..max |');
console.log('|---|---:|---:|');
for (const [name, fn] of CASES) {
  const { median, min, max, cpu } = measure(fn);
  console.log(`| ${name} | ${median.toFixed(0)} (${cpu.toFixed(0)}) | ${min.toFixed(0)}..${max.toFixed(0)} |`);
}
console.log(`(checksum ${sink})`);
