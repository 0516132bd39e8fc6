import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { DenialSummary } from '../../../src/access-log/denial-summary';

function capture(): { lines: Record<string, unknown>[]; logger: pino.Logger } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: pino({ level: 'info' }, sink) };
}

t.test('one line per interval with counts by reason and listener; nothing when quiet', async (t) => {
  const { lines, logger } = capture();
  const s = new DenialSummary(logger, { intervalMs: 10_000, maxAddresses: 100 });
  s.flush();
  s.add('edge', '192.0.2.1', 'not_allowlisted');
  s.add('edge', '192.0.2.1', 'not_allowlisted');
  s.add('web', '192.0.2.2', 'pp_untrusted');
  s.flush();
  s.flush();
  await new Promise((r) => setImmediate(r));
  t.equal(lines.length, 1);
  t.match(lines[0], {
    msg: '3 denials from 2 addresses in the last 10 s',
    denials: 3,
    addresses: 2,
    addressesCapped: false,
    reasons: { not_allowlisted: 2, pp_untrusted: 1 },
    listeners: { edge: 2, web: 1 },
    sample: ['192.0.2.1', '192.0.2.2'],
  });
});

t.test('a scan from many addresses keeps at most maxAddresses and says so', async (t) => {
  const { lines, logger } = capture();
  const s = new DenialSummary(logger, { intervalMs: 1000, maxAddresses: 1000, sampleSize: 3 });
  for (let i = 0; i < 70_000; i++) s.add('edge', `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, 'not_allowlisted');
  s.flush();
  await new Promise((r) => setImmediate(r));
  t.match(lines[0], { msg: '70000 denials from 1000+ addresses in the last 1 s', addresses: 1000, addressesCapped: true });
  t.equal((lines[0]!.sample as string[]).length, 3);
});

t.test('singular wording', async (t) => {
  const { lines, logger } = capture();
  const s = new DenialSummary(logger, { intervalMs: 10_000, maxAddresses: 10 });
  s.add('edge', '192.0.2.1', 'revoked');
  s.stop();
  await new Promise((r) => setImmediate(r));
  t.equal(lines[0]!.msg, '1 denial from 1 address in the last 10 s');
});

t.test('per address: the first denial of each address per interval at info, capped per interval, counted past the cap', async (t) => {
  const { lines, logger } = capture();
  const s = new DenialSummary(logger, { intervalMs: 10_000, maxAddresses: 100, linesPerInterval: 2 });
  s.add('edge', '192.0.2.1', 'denied_by_entry', '192.0.2.0/24');
  s.add('edge', '192.0.2.1', 'denied_by_entry', '192.0.2.0/24');
  s.add('web', '192.0.2.2', 'not_allowlisted');
  s.add('web', '192.0.2.3', 'not_allowlisted');
  await new Promise((r) => setImmediate(r));
  t.equal(lines.length, 2, 'two addresses logged at once, the second denial of the first and the third address not');
  t.match(lines[0], {
    level: 30,
    listener: 'edge',
    client: '192.0.2.1',
    reason: 'denied_by_entry',
    entry: '192.0.2.0/24',
    msg: /^denied 192\.0\.2\.1 \(denied_by_entry 192\.0\.2\.0\/24\)/,
  });
  t.match(lines[1], { client: '192.0.2.2', reason: 'not_allowlisted' });
  t.notOk('entry' in lines[1]!, 'no entry when none decided');
  s.flush();
  await new Promise((r) => setImmediate(r));
  t.match(lines[2], { denials: 4, addresses: 3, addressLinesSuppressed: 1 }, 'the summary says how many address lines the cap held back');
  s.add('edge', '192.0.2.1', 'denied_by_entry', '192.0.2.0/24');
  await new Promise((r) => setImmediate(r));
  t.match(lines[3], { client: '192.0.2.1' }, 'a new interval logs the address again');
});

t.test('per address: addresses past maxAddresses get no line (memory stays bounded); 0 lines turns it off', async (t) => {
  const { lines, logger } = capture();
  const s = new DenialSummary(logger, { intervalMs: 10_000, maxAddresses: 3, linesPerInterval: 100 });
  for (let i = 1; i <= 10; i++) s.add('edge', `192.0.2.${i}`, 'not_allowlisted');
  await new Promise((r) => setImmediate(r));
  t.equal(lines.length, 3, 'only the remembered addresses');
  const off = capture();
  const quiet = new DenialSummary(off.logger, { intervalMs: 10_000, maxAddresses: 3, linesPerInterval: 0 });
  quiet.add('edge', '192.0.2.1', 'not_allowlisted');
  await new Promise((r) => setImmediate(r));
  t.equal(off.lines.length, 0);
});
