/** Wrong-token log lines: one per address per interval with the suppressed count, bounded memory. */
import t from 'tap';
import type { FastifyBaseLogger } from 'fastify';
import { AuthFailureLog } from '../../../src/admin/auth-failures';

interface Line {
  level: 'warn' | 'debug';
  obj: Record<string, unknown>;
  msg: string;
}

function setup(o: { intervalMs?: number; maxAddresses?: number; maxLinesPerInterval?: number } = {}) {
  const lines: Line[] = [];
  let now = 1_000_000;
  const log = {
    warn: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'warn', obj, msg }),
    debug: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'debug', obj, msg }),
  } as unknown as FastifyBaseLogger;
  const f = new AuthFailureLog(log, { intervalMs: 60_000, ...o, now: () => now });
  return {
    f,
    lines,
    warns: () => lines.filter((l) => l.level === 'warn'),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

t.test('a loop of wrong tokens from one address: one line per interval, carrying the count suppressed', async (t) => {
  const { f, warns, advance } = setup();
  for (let i = 0; i < 2402; i++) f.record('invalid', '127.0.0.1', 'GET', '/v1/allowlists');
  t.equal(warns().length, 1, 'one line for 2402 failures');
  t.match(warns()[0]!.obj, { remote: '127.0.0.1', suppressed: 0, intervalMs: 60_000 });
  advance(59_999);
  f.record('invalid', '127.0.0.1', 'GET', '/v1/allowlists');
  t.equal(warns().length, 1, 'still within the interval');
  advance(1);
  f.record('invalid', '127.0.0.1', 'GET', '/v1/allowlists');
  t.equal(warns().length, 2, 'the next interval gets its line');
  t.match(warns()[1]!, { obj: { suppressed: 2402 }, msg: 'admin API: wrong token (2402 more from this address since its last line)' });
  t.equal(f.counts.invalid, 2404, 'every failure counted');
});

t.test('each address has its own interval', async (t) => {
  const { f, warns } = setup();
  f.record('invalid', '127.0.0.1', 'GET', '/');
  f.record('invalid', '127.0.0.2', 'GET', '/');
  f.record('invalid', '127.0.0.1', 'GET', '/');
  t.same(
    warns().map((l) => l.obj.remote),
    ['127.0.0.1', '127.0.0.2'],
  );
});

t.test('missing and malformed headers are counted and logged at debug only', async (t) => {
  const { f, lines } = setup();
  f.record('missing', '127.0.0.1', 'GET', '/');
  f.record('malformed', '127.0.0.1', 'GET', '/');
  t.same(
    lines.map((l) => l.level),
    ['debug', 'debug'],
  );
  t.same(f.counts, { missing: 1, malformed: 1, invalid: 0 });
});

t.test('memory is bounded: at most maxAddresses remembered, the oldest forgotten first', async (t) => {
  const { f, warns } = setup({ maxAddresses: 4, maxLinesPerInterval: 1000 });
  for (let i = 1; i <= 10; i++) f.record('invalid', `127.0.0.${i}`, 'GET', '/');
  t.equal(f.tracked, 4);
  f.record('invalid', '127.0.0.10', 'GET', '/');
  t.equal(warns().length, 10, 'a remembered address stays quiet');
  f.record('invalid', '127.0.0.1', 'GET', '/');
  t.equal(warns().length, 11, 'a forgotten address logs again');
  t.equal(f.tracked, 4);
});

t.test('a scan from many addresses: at most maxLinesPerInterval lines, the rest reported in the next line', async (t) => {
  const { f, warns, advance } = setup({ maxLinesPerInterval: 3 });
  for (let i = 1; i <= 100; i++) f.record('invalid', `127.0.${i >> 8}.${i & 255}`, 'GET', '/');
  t.equal(warns().length, 3);
  advance(60_000);
  f.record('invalid', '127.1.0.1', 'GET', '/');
  t.equal(warns().length, 4);
  t.match(warns()[3]!.obj, { remote: '127.1.0.1', suppressedOthers: 97 });
  t.equal(f.counts.invalid, 101);
});

t.test('failures that stop inside an interval still get their line at its end', async (t) => {
  const { f, warns, advance } = setup();
  for (let i = 0; i < 30; i++) f.record('invalid', '127.0.0.1', 'GET', '/');
  f.record('invalid', '127.0.0.2', 'GET', '/');
  t.equal(warns().length, 2);
  advance(30_000);
  f.flush();
  t.equal(warns().length, 2, 'not before the interval is over');
  advance(30_000);
  f.flush();
  t.equal(warns().length, 3, 'one line for the address with suppressed failures, none for the other');
  t.match(warns()[2]!, {
    obj: { remote: '127.0.0.1', suppressed: 29 },
    msg: 'admin API: wrong token (29 more from this address since its last line)',
  });
  f.flush();
  t.equal(warns().length, 3, 'nothing left to say');
  f.close();
});

t.test('the timer is armed by a suppressed failure and writes the line by itself', async (t) => {
  const lines: string[] = [];
  const log = { warn: (_o: unknown, msg: string) => lines.push(msg), debug: () => undefined } as unknown as FastifyBaseLogger;
  const f = new AuthFailureLog(log, { intervalMs: 50 });
  t.teardown(() => f.close());
  f.record('invalid', '127.0.0.1', 'GET', '/');
  f.record('invalid', '127.0.0.1', 'GET', '/');
  f.record('invalid', '127.0.0.1', 'GET', '/');
  t.equal(lines.length, 1);
  const deadline = Date.now() + 5000;
  while (lines.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  t.same(lines, ['admin API: wrong token', 'admin API: wrong token (2 more from this address since its last line)']);
});
