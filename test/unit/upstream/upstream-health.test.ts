/**
 * The health state of one target (src/upstream/upstream-health.ts): passive windows, active rise /
 * fall, and the two together (a passive failure run takes the target down until `rise` good
 * checks, HAProxy's on-error mark-down).
 */
import t from 'tap';
import { GroupHealth } from '../../../src/upstream/upstream-health';

const passive = { maxFails: 2, failTimeoutMs: 1000, statuses: [503] };
const active = { type: 'tcp' as const, expectStatuses: [], intervalMs: 100, timeoutMs: 50, rise: 2, fall: 3 };

t.test('passive only: maxFails in a window take the target out for the window, then it is tried again', async (t) => {
  const h = new GroupHealth(2, passive, null).targets[0]!;
  h.failed(0);
  t.ok(h.up(1), 'one failure: still up');
  h.failed(10);
  t.notOk(h.up(11), 'two in a row: out');
  t.ok(h.up(1010), 'the window passed: tried again');
  const late = new GroupHealth(2, passive, null).targets[0]!;
  late.failed(0);
  late.failed(2000);
  t.ok(late.up(2001), 'two failures further apart than the window do not add up');
  t.equal(h.checked(false), false, 'no active rules: a check changes nothing');
});

t.test('active only: fall failed checks in a row take it down, rise good ones bring it back', async (t) => {
  const h = new GroupHealth(1, null, active).targets[0]!;
  const steps: Array<[boolean, boolean]> = [
    [false, true],
    [false, true],
    [true, true], // a good check breaks the run
    [false, true],
    [false, true],
    [false, false], // third in a row: down
    [true, false],
    [false, false], // a failed check breaks the rise
    [true, false],
    [true, true], // second good in a row: up
  ];
  steps.forEach(([ok, up], i) => {
    h.checked(ok);
    t.equal(h.up(0), up, `check ${i + 1} (${ok ? 'good' : 'failed'}): ${up ? 'up' : 'down'}`);
  });
  t.ok(new GroupHealth(1, passive, active).targets[0]!.active !== null, 'a group of one target is checked too');
});

t.test('passive and active: a passive failure run takes it down, only checks bring it back', async (t) => {
  const h = new GroupHealth(2, passive, active).targets[0]!;
  h.failed(0);
  h.answered(503, 1);
  t.notOk(h.up(2), 'two failures (a 503 named in statuses): down');
  t.notOk(h.up(1_000_000), 'not back when a window would have passed');
  h.answered(200, 3);
  t.notOk(h.up(4), 'nor by a response (a request that raced the change)');
  h.checked(true);
  t.notOk(h.up(5), 'one good check of two');
  h.checked(true);
  t.ok(h.up(6), 'rise: back');
});
