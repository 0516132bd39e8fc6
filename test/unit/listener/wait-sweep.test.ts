/**
 * The listener's sweep of keep-alive and header waits (src/connection/wait-sweep.ts): a
 * wait runs out at its deadline, one that is not waiting never does, and a waiter may leave while
 * the sweep runs.
 */
import t from 'tap';
import { WaitSweep, type Waiter } from '../../../src/connection/wait-sweep';

/** A waiter with one deadline, as RelayConn.check keeps its wait between requests (0: not waiting). */
function waiter(deadline: number, onExpire: (w: Waiter) => void = () => undefined): Waiter & { expired: number } {
  const w = {
    linkSet: null,
    linkPrev: null,
    linkNext: null,
    waitDeadline: deadline,
    expired: 0,
    check(now: number): void {
      if (w.waitDeadline === 0 || now < w.waitDeadline) return;
      w.expired++;
      w.waitDeadline = 0;
      onExpire(w);
    },
  };
  return w;
}

t.test('the interval is a quarter of the shorter timeout, between 50 ms and 1 s', async (t) => {
  t.equal(new WaitSweep(300).intervalMs, 75);
  t.equal(new WaitSweep(100).intervalMs, 50);
  t.equal(new WaitSweep(60_000).intervalMs, 1000);
});

t.test('only waits whose deadline has passed expire, once', async (t) => {
  const s = new WaitSweep(1000);
  const due = waiter(100);
  const later = waiter(500);
  const idle = waiter(0);
  for (const w of [due, later, idle]) s.add(w);
  t.teardown(() =>
    [due, later, idle].forEach((w) => {
      s.delete(w);
    }),
  );
  s.run(200);
  t.same([due.expired, later.expired, idle.expired], [1, 0, 0], 'at 200: the one due at 100');
  s.run(600);
  t.same([due.expired, later.expired, idle.expired], [1, 1, 0], 'at 600: the one due at 500; none twice; never a waiter not waiting');
});

t.test('a waiter that leaves (its connection closes) during the sweep does not stop it', async (t) => {
  const s = new WaitSweep(1000);
  const b = waiter(10);
  const a = waiter(10, (w) => {
    s.delete(w);
    s.delete(b);
  });
  const c = waiter(10);
  for (const w of [a, b, c]) s.add(w);
  t.teardown(() => s.delete(c));
  s.run(20);
  t.equal(a.expired, 1);
  t.equal(b.expired, 0, 'removed before its turn');
  t.equal(c.expired, 1, 'the sweep went on');
});

t.test('the sweep timer runs while waiters exist and fires on its own', async (t) => {
  const s = new WaitSweep(200); // 50 ms interval
  // The sweep's interval is unref'd (listeners keep a real process alive): hold this one open.
  const hold = setTimeout(() => undefined, 5000);
  t.teardown(() => clearTimeout(hold));
  const fired = new Promise<void>((resolve) =>
    s.add(
      waiter(performance.now() + 60, (w) => {
        s.delete(w);
        resolve();
      }),
    ),
  );
  await fired;
  t.pass('expired by the interval, not by a test call');
});

t.test('the timer outlives its last waiter by one interval, then stops; a new waiter restarts it', async (t) => {
  const s = new WaitSweep(200); // 50 ms interval
  const hold = setTimeout(() => undefined, 5000);
  t.teardown(() => clearTimeout(hold));
  const w = waiter(0);
  s.add(w);
  s.delete(w);
  t.equal(s.running, true, 'still running right after the last waiter left (no clearInterval per connection)');
  s.tick();
  t.equal(s.running, false, 'the first sweep with no waiter stops it');
  const fired = new Promise<void>((resolve) =>
    s.add(
      waiter(performance.now() + 60, (x) => {
        s.delete(x);
        resolve();
      }),
    ),
  );
  t.equal(s.running, true, 'a new waiter starts it again');
  await fired;
  t.pass('and it expires waits again');
});
