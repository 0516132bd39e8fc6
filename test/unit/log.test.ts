import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { BlockWriter, isoTime } from '../../src/log';

t.test('isoTime writes what pino.stdTimeFunctions.isoTime would, across minute, day and year edges', async (t) => {
  const now = Date.now;
  t.teardown(() => { Date.now = now; });
  const rows: [string, number][] = [
    ['the epoch', 0],
    ['the last millisecond of a minute', 1_764_433_859_999],
    ['the first millisecond of the next minute', 1_764_433_860_000],
    ['the same millisecond twice (cached)', 1_764_433_860_000],
    ['single-digit seconds and milliseconds', 1_764_433_861_007],
    ['a leap day', 951_782_400_000],
    ['the last millisecond of a year', 1_798_761_599_999],
  ];
  for (const [what, ms] of rows) {
    Date.now = () => ms;
    t.equal(isoTime(), `,"time":"${new Date(ms).toISOString()}"`, what);
  }
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
