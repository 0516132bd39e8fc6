/**
 * src/transport/io-clock.ts: inside a read callback `ioNow()` is the callback's one reading (the
 * stamps of its timeouts take it, no second clock read), outside one it reads the clock, and a
 * callback that throws does not leave its reading behind (a stale reading would make every later
 * stamp older than it is, and idle timeouts fire early).
 */
import { performance } from 'node:perf_hooks';
import t from 'tap';
import { ioNow, readEnded, readStarted } from '../../../src/transport/io-clock';

const spin = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

t.test('inside a read callback: one reading for every stamp; outside: the clock', async (t) => {
  const before = performance.now();
  const outer = readStarted();
  let first = 0;
  let second = 0;
  try {
    first = ioNow();
    spin(3);
    second = ioNow();
  } finally {
    readEnded(outer);
  }
  t.equal(outer, 0, 'no read callback ran around this one');
  t.equal(second, first, "the callback's stamps share its reading");
  t.ok(first >= before && first <= before + 1, `the reading is the callback's start (${(first - before).toFixed(3)} ms after)`);
  spin(2);
  const after = ioNow();
  t.ok(after >= first + 2, `outside a callback ioNow() reads the clock (${(after - first).toFixed(3)} ms later)`);
});

t.test('a callback that throws leaves no reading behind', async (t) => {
  t.throws(() => {
    const outer = readStarted();
    try {
      throw new Error('boom');
    } finally {
      readEnded(outer);
    }
  });
  const stamp = ioNow();
  spin(2);
  t.ok(ioNow() >= stamp + 2, 'the clock moves again after the throw');
});
