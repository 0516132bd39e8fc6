import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { DenialSummary } from '../../../src/access-log/denial-summary';

function capture(): { lines: Record<string, unknown>[]; logger: pino.Logger } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({ write(chunk: Buffer, _e, cb) { lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>); cb(); } });
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
  t.match(lines[0], { msg: '3 denials from 2 addresses in the last 10 s', denials: 3, addresses: 2, addressesCapped: false,
    reasons: { not_allowlisted: 2, pp_untrusted: 1 }, listeners: { edge: 2, web: 1 }, sample: ['192.0.2.1', '192.0.2.2'] });
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
