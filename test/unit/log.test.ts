import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { BlockWriter, isoTime } from '../../src/log';

t.test('isoTime writes what pino.stdTimeFunctions.isoTime would, across minute, day and year edges', async (t) => {
  const now = Date.now;
  t.teardown(() => {
    Date.now = now;
  });
  const rows: [string, number][] = [
    ['the epoch', 0],
    ['the last millisecond of a minute', 1_764_433_859_999],
    ['the first millisecond of the next minute', 1_764_433_860_000],
    ['the same millisecond twice (cached)', 1_764_433_860_000],
    ['single-digit seconds and milliseconds', 1_764_433_861_007],
    ['a leap day', 951_782_400_000],
    ['the last millisecond of a year', 1_798_761_599_999],
  ];
  // And instants spread over 1970-2096 (a fixed sequence: the same rows every run).
  let x = 7;
  for (let k = 0; k < 200; k++) rows.push([`instant ${k}`, Math.floor(((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32) * 4e12)]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-log-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fd = fs.openSync(path.join(dir, 'time.log'), 'w');
  const block = new BlockWriter(fd, 4096, 60_000);
  const expected: string[] = [];
  for (const [what, ms] of rows) {
    Date.now = () => ms;
    const want = `,"time":"${new Date(ms).toISOString()}"`;
    t.equal(isoTime(), want, what);
    // BlockWriter.time writes the same field as digits into its block, one per line here.
    t.ok(block.begin(64), 'room');
    block.time();
    block.fragment('\n');
    block.end();
    expected.push(`${want}\n`);
  }
  await new Promise<void>((resolve) => block.flush(() => resolve()));
  block.flushSync();
  fs.closeSync(fd);
  t.equal(fs.readFileSync(path.join(dir, 'time.log'), 'utf8'), expected.join(''), 'BlockWriter.time: the bytes isoTime returns');
});

t.test('BlockWriter writes every line once, in order, including lines larger than a block', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-log-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'out.log');
  const fd = fs.openSync(file, 'w');
  const w = new BlockWriter(fd, 1024, 60_000);
  const lines: string[] = [];
  for (let i = 0; i < 500; i++) lines.push(`{"n":${i},"pad":"${'é'.repeat(i % 40)}"}\n`);
  lines.splice(250, 0, `{"big":"${'x'.repeat(5000)}"}\n`);
  for (const l of lines) w.write(l);
  await new Promise<void>((resolve) => w.flush(() => resolve()));
  w.flushSync();
  fs.closeSync(fd);
  t.equal(fs.readFileSync(file, 'utf8'), lines.join(''));
});

t.test('BlockWriter.flush calls back at once when nothing is buffered', async (t) => {
  const fd = fs.openSync(os.devNull, 'w');
  const w = new BlockWriter(fd, 4096, 60_000);
  await new Promise<void>((resolve) => w.flush(() => resolve()));
  w.flushSync();
  fs.closeSync(fd);
  t.pass('called back');
});

t.test('BlockWriter direct writing: the bytes write() gives for JSON.stringify of the same values', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-log-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const fdA = fs.openSync(path.join(dir, 'a.log'), 'w');
  const fdB = fs.openSync(path.join(dir, 'b.log'), 'w');
  const direct = new BlockWriter(fdA, 4096, 60_000);
  const text = new BlockWriter(fdB, 4096, 60_000);
  const strings: Array<string | null | undefined> = [
    '',
    'plain',
    'q"uote',
    'back\\slash',
    '\b\f\n\r\t',
    '\u0000\u0001\u001f\u007f',
    'ü é ß',
    '\u0800\uffff',
    '😀 pair',
    'lone \ud800 high',
    'lone \udc00 low',
    'swapped \udc00\ud800',
    'end \ud83d',
    '\u2028\u2029',
    null,
    undefined,
  ];
  // Random strings over the interesting ranges, many lines (several blocks).
  let x = 12345;
  const rnd = (): number => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const pools = [
    [0, 0x20],
    [0x20, 0x80],
    [0x80, 0x800],
    [0x800, 0xd800],
    [0xd800, 0xe000],
    [0xe000, 0x10000],
  ] as const;
  for (let k = 0; k < 300; k++) {
    let s = '';
    for (let i = 0, n = Math.floor(rnd() * 40); i < n; i++) {
      const [lo, hi] = pools[Math.floor(rnd() * pools.length)]!;
      s += String.fromCharCode(lo + Math.floor(rnd() * (hi - lo)));
    }
    strings.push(s);
  }
  const numbers = [0, 7, 10, 99, 100, 1234567890123, -5, 1.5, Number.NaN, Infinity, null, undefined, 2 ** 53];
  for (let k = 0; k < strings.length; k++) {
    const s = strings[k];
    const n = numbers[k % numbers.length];
    t.ok(direct.begin(1024), 'room');
    direct.fragment('{"level":"info","pid":1,"name":"ünï"');
    direct.fragment(',"s":');
    direct.jsonString(s);
    direct.fragment(',"n":');
    direct.number(n);
    direct.fragment('}\n');
    direct.end();
    const sText = s === null || s === undefined ? 'null' : JSON.stringify(s);
    const nText = typeof n === 'number' && Number.isFinite(n) ? `${n}` : 'null';
    text.write(`{"level":"info","pid":1,"name":"ünï","s":${sText},"n":${nText}}\n`);
  }
  t.notOk(direct.begin(5000), 'a line larger than a block is refused (the caller writes a string)');
  for (const w of [direct, text]) {
    await new Promise<void>((resolve) => w.flush(() => resolve()));
    w.flushSync();
  }
  fs.closeSync(fdA);
  fs.closeSync(fdB);
  const a = fs.readFileSync(path.join(dir, 'a.log'));
  const b = fs.readFileSync(path.join(dir, 'b.log'));
  t.equal(a.length, b.length, `same length (${a.length} bytes)`);
  t.ok(a.equals(b), 'byte for byte');
  const parsed = a
    .toString('utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { s: string | null });
  t.equal(parsed.length, strings.length, 'one valid JSON line per write');
  t.equal(parsed[3]!.s, 'back\\slash', 'values survive');
});
