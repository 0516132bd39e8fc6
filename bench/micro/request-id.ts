/**
 * Micro-benchmark of the X-Request-ID generator (src/forward/http/request-id.ts): 128 random bits
 * per request, drawn 256 ids per crypto.randomBytes call, against one randomBytes(16) per request
 * and against the process-prefix-plus-counter ids ipgate used before (predictable: replaced).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/micro/request-id.js
 */
import { randomBytes } from 'node:crypto';
import { newRequestId } from '../../src/forward/http/request-id';
import { measure } from './lib/measure';

const PREFIX = randomBytes(8).toString('hex');
let pool = Buffer.alloc(0);
let at = 4096;
let counter = 0;
let sink = '';
const CASES: [string, () => void][] = [
  [
    'newRequestId (256 per randomBytes, hex once)',
    () => {
      sink = newRequestId();
    },
  ],
  [
    'batched bytes, hex per id (16 bytes each)',
    () => {
      if (at >= 4096) {
        pool = randomBytes(4096);
        at = 0;
      }
      sink = pool.toString('hex', at, at + 16);
      at += 16;
    },
  ],
  [
    'randomBytes(16).toString(hex) per id',
    () => {
      sink = randomBytes(16).toString('hex');
    },
  ],
  [
    'prefix + counter (before: predictable)',
    () => {
      sink = PREFIX + (++counter).toString(16).padStart(16, '0');
    },
  ],
];
for (const [name, fn] of CASES) {
  const m = measure(fn, 100_000, 500_000, 7);
  process.stdout.write(
    `${name.padEnd(46)} ${m.median.toFixed(0).padStart(5)} ns/op (${m.min.toFixed(0)}..${m.max.toFixed(0)}), cpu ${m.cpu.toFixed(0)} ns/op\n`,
  );
}
if (sink.length !== 32) throw new Error('an id is 32 characters');
