/**
 * The limit tables (src/limit/rate-table.ts) against nginx limit_req's arithmetic
 * (ngx_http_limit_req_lookup): burst + 1 at once, then one per 1/rate; a refusal leaves the
 * bucket as it was; another worker's accepts added without the burst check; a full table forgets
 * its least recently used client (idle or active); the concurrency counts with the other
 * workers'; nginx's rate form parsed; the delay nginx gives within the burst.
 */
import t from 'tap';
import { ConcurrencyTable, RateTable } from '../../../src/limit/rate-table';
import { LimitZones, parseRate, REFUSED } from '../../../src/limit/limit-zones';

t.test('nginx rate form', async (t) => {
  t.equal(parseRate('10r/s'), 10);
  t.equal(parseRate('1r/s'), 1);
  t.equal(parseRate('30r/m'), 0.5);
  t.equal(parseRate('0.5r/s'), 0.5);
  t.equal(parseRate('6000r/m'), 100);
});

t.test('burst + 1 at once, then one per 1/rate; a refusal changes nothing', async (t) => {
  const rt = new RateTable(10, 3, 100); // 10r/s burst=3
  const at = 1000;
  const got = Array.from({ length: 6 }, () => rt.take('a', at));
  t.same(got, [true, true, true, true, false, false], 'four at once, then refused');
  t.equal(rt.excessNow, 3, 'the fourth had excess 3 (= burst)');
  t.notOk(rt.take('a', at + 99), 'just under 1/rate later: still refused');
  t.ok(rt.take('a', at + 100), '1/rate after the last accept: one more');
  t.notOk(rt.take('a', at + 101), 'and none right after');
  t.ok(rt.take('b', at), 'another client has its own bucket');
  t.ok(rt.holds('a', at + 150), 'a is not drained yet');
  t.notOk(rt.holds('a', at + 500), 'drained after (excess + 1) / rate');
});

t.test("another worker's accepts count against the bucket, past the burst if they came at once", async (t) => {
  const rt = new RateTable(10, 2, 100);
  rt.add('a', 0, 3); // the other worker accepted 3 at once: excess 2
  t.notOk(rt.take('a', 0), 'this worker refuses the next');
  rt.add('a', 0, 2); // two more there (it saw the bucket before ours): excess 4, past the burst
  t.notOk(rt.take('a', 250), 'still refused 250 ms later (excess 4 - 2.5 + 1 > 2)');
  t.ok(rt.take('a', 300), 'accepted once the excess drained back under the burst');
});

t.test('a full table forgets its least recently used client', async (t) => {
  const rt = new RateTable(1, 0, 3);
  t.ok(rt.take('a', 0));
  t.ok(rt.take('b', 0));
  t.ok(rt.take('c', 0));
  t.notOk(rt.take('a', 10), 'a refused (and now the most recent)');
  t.ok(rt.take('d', 10), "a fourth client takes b's slot (the least recent)");
  t.equal(rt.size, 3);
  t.equal(rt.evictedActive, 1, 'b had not drained: its excess is lost');
  t.notOk(rt.take('a', 20), 'a is still held');
  t.ok(rt.take('e', 5000), 'later: c (drained) goes');
  t.equal(rt.evictedIdle, 1);
  t.ok(rt.take('b', 5000), 'b is a new client again');
  const big = new RateTable(1, 0, 1000);
  for (let i = 0; i < 10_000; i++) big.take(`k${i}`, i);
  t.equal(big.size, 1000, 'never more than capacity');
});

t.test("concurrency: this worker's and the others' count; a full table lets a new client through uncounted", async (t) => {
  const ct = new ConcurrencyTable(2);
  t.equal(ct.acquire('a', 2), 1);
  ct.addOthers('a', 1);
  t.equal(ct.acquire('a', 2), 0, 'one here and one in another worker: at the limit');
  ct.addOthers('a', -1);
  t.equal(ct.acquire('a', 2), 1);
  t.equal(ct.acquire('b', 2), 1);
  t.equal(ct.acquire('c', 2), -1, 'a third client in a table of 2: uncounted');
  t.equal(ct.overflow, 1);
  ct.release('a');
  ct.release('a');
  t.equal(ct.count('a'), 0);
  t.equal(ct.acquire('c', 2), 1, 'room again');
});

t.test('the zone: nginx delay within the burst; nodelay; the same zone again after a reload', async (t) => {
  const zones = new LimitZones();
  const c = { rate: '10r/s', burst: 4, delay: 0, nodelay: false, status: 429 as const, exempt: [], maxClients: 100 };
  const z = zones.rate('web/api/requests', 'requests', c);
  const delays = Array.from({ length: 6 }, () => z.take('x', 1));
  t.equal(delays[0], 0, 'the first at once');
  // excess 1..4 at 10r/s past delay=1: (e - 1) / 10 s (a few microseconds drain between takes).
  t.same(
    delays.slice(1, 5).map((d) => Math.round(d / 100)),
    [0, 1, 2, 3],
    'then (excess - delay) / rate',
  );
  t.equal(delays[5], REFUSED, 'past the burst');
  t.equal(z.take('y', Number.POSITIVE_INFINITY), 0, 'nodelay: at once');
  t.equal(
    zones.rate('web/api/requests', 'requests', { ...c, delay: 3 }),
    z,
    'the same place and bucket shape: the same zone (buckets kept)',
  );
  t.not(zones.rate('web/api/requests', 'requests', { ...c, burst: 5 }), z, 'another burst: a new zone');
});

t.test('a worker tells the others what it accepted, once per event-loop turn', async (t) => {
  const a = new LimitZones();
  const b = new LimitZones();
  const sent: (string | number)[][] = [];
  a.connect((ops) => {
    sent.push(ops);
    b.applyRemote(ops);
  });
  const c = { rate: '1r/s', burst: 2, delay: 0, nodelay: true, status: 429 as const, exempt: [], maxClients: 100 };
  const za = a.rate('web//requests', 'requests', c);
  const zb = b.rate('web//requests', 'requests', c);
  t.equal(za.take('x', Number.POSITIVE_INFINITY), 0);
  t.equal(za.take('x', Number.POSITIVE_INFINITY), 0);
  t.equal(sent.length, 0, 'nothing sent within the turn');
  await new Promise((r) => setImmediate(r));
  t.same(sent, [[za.key, 'x', 2]], 'one message: two accepts of x');
  t.equal(zb.take('x', Number.POSITIVE_INFINITY), 0, 'b takes the third (burst 2 + 1)');
  t.equal(zb.take('x', Number.POSITIVE_INFINITY), REFUSED, "and refuses the fourth: it counted a's two");
  const ca = a.concurrency('web//concurrent', { perClient: 1, status: 429, exempt: [], maxClients: 10 });
  const cb = b.concurrency('web//concurrent', { perClient: 1, status: 429, exempt: [], maxClients: 10 });
  t.equal(ca.acquire('x'), 1);
  await new Promise((r) => setImmediate(r));
  t.equal(cb.acquire('x'), 0, "b sees a's request in progress");
  ca.release('x');
  await new Promise((r) => setImmediate(r));
  t.equal(cb.acquire('x'), 1, 'and its end');
});
