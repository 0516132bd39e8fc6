import t from 'tap';
import { FixedHistogram } from '../../../src/metrics/fixed-histogram';
import { ListenerStats } from '../../../src/metrics/listener-stats';
import { Metrics } from '../../../src/metrics/metrics';

t.test('observations land in the first bucket whose bound is >= the value (Prometheus `le`)', async (t) => {
  const rows: [string, number, number][] = [
    ['below the first bound', 0.0001, 0],
    ['exactly on a bound counts in it', 0.01, 1],
    ['between bounds', 0.05, 2],
    ['above the last bound: +Inf only', 7, 3],
  ];
  for (const [what, value, slot] of rows) {
    const h = new FixedHistogram([0.001, 0.01, 0.1]);
    h.observe(value);
    t.equal(h.counts[slot], 1, what);
    t.equal(h.count, 1);
    t.equal(h.sum, value);
  }
});

t.test('cumulative() is what Prometheus expects: non-decreasing, +Inf = count', async (t) => {
  const h = new FixedHistogram([1, 2, 3]);
  for (const v of [0.5, 1.5, 1.5, 2.5, 9]) h.observe(v);
  t.same(h.cumulative(), [1, 3, 4, 5]);
});

t.test('bounds must ascend', async (t) => {
  t.throws(() => new FixedHistogram([1, 1]), /ascend/);
});

t.test('published as a Prometheus histogram: _bucket with le, _sum, _count', async (t) => {
  const m = new Metrics({ processMetrics: false });
  const s = new ListenerStats('web');
  s.httpDuration.observe(0.003);
  m.addListener(s, 'http');
  const text = await m.scrape();
  t.match(text, /^# TYPE ipgate_http_request_duration_seconds histogram$/m);
  t.match(text, /^ipgate_http_request_duration_seconds_bucket\{listener="web",le="0\.0025"\} 0$/m);
  t.match(text, /^ipgate_http_request_duration_seconds_bucket\{listener="web",le="0\.005"\} 1$/m);
  t.match(text, /^ipgate_http_request_duration_seconds_bucket\{listener="web",le="\+Inf"\} 1$/m);
  t.match(text, /^ipgate_http_request_duration_seconds_sum\{listener="web"\} 0\.003$/m);
  t.match(text, /^ipgate_http_request_duration_seconds_count\{listener="web"\} 1$/m);
  t.notMatch(text, /ipgate_http_request_duration_seconds_bucket\{listener="tcp/, 'TCP listeners have no HTTP histogram');
});
