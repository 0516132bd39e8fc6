/**
 * What a cluster primary reports about its workers' listeners: self-checks merged worst-first,
 * connection pages merged oldest-first, explain targets built from the config and the lists.
 */
import t from 'tap';
import { mergeConnectionPages, type ConnectionView } from '../../../src/admin/routes/connections';
import { explainTargets, mergeSelfChecks } from '../../../src/cluster/diagnostics';
import { buildConfig } from '../../../src/config/load';
import type { SelfCheckReadiness } from '../../../src/selfcheck/self-checks';
import { LiveLists } from '../../../src/store/live-lists';

const check = (name: string, status: SelfCheckReadiness['status'], message = `${name} ${status}`): SelfCheckReadiness => ({
  name,
  status,
  message,
});

t.test('mergeSelfChecks: one worker passes through; several: the worst status per check, naming the worker', async (t) => {
  const one = [check('source_nat.a', 'warn', 'exact text'), check('proxy_untrusted.a', 'ok')];
  t.same(mergeSelfChecks([{ worker: 3, reply: one }]), one, 'one worker: unchanged');
  t.same(mergeSelfChecks([]), [], 'no worker answered: nothing');
  const merged = mergeSelfChecks([
    { worker: 1, reply: [check('source_nat.a', 'ok'), check('proxy_untrusted.a', 'warn')] },
    { worker: 2, reply: [check('source_nat.a', 'warn'), check('proxy_untrusted.a', 'ok'), check('proxy_missing.a', 'ok')] },
  ]);
  t.same(
    merged.map((c) => [c.name, c.status]),
    [
      ['source_nat.a', 'warn'],
      ['proxy_untrusted.a', 'warn'],
      ['proxy_missing.a', 'ok'],
    ],
    'worst wins, first-seen order',
  );
  t.equal(merged[0]!.message, 'source_nat.a warn (worker 2, the worst of 2 workers reporting it)');
  t.equal(
    merged[1]!.message,
    'proxy_untrusted.a warn (worker 1, the worst of 2 workers reporting it)',
    'a later ok does not replace an earlier warn',
  );
  t.equal(merged[2]!.message, 'proxy_missing.a ok (worker 2, the worst of 1 workers reporting it)');
  t.equal(
    mergeSelfChecks([
      { worker: 1, reply: [check('x', 'warn')] },
      { worker: 2, reply: [check('x', 'error')] },
    ])[0]!.status,
    'error',
    'error beats warn',
  );
});

t.test('mergeConnectionPages: totals added, the oldest first over all workers, each naming its worker, cut at the limit', async (t) => {
  const conn = (id: number, ageMs: number): ConnectionView => ({
    id,
    listener: 'l',
    peer: 'p',
    client: 'c',
    via: 'socket',
    admitted: true,
    upstream: null,
    ageMs,
  });
  const merged = mergeConnectionPages(
    [
      { worker: 1, page: { total: 5, connections: [conn(1, 900), conn(2, 100)] } },
      { worker: 2, page: { total: 3, connections: [conn(1, 500), conn(2, 50)] } },
    ],
    3,
  );
  t.equal(merged.total, 8, 'totals before the limit, added');
  t.same(
    merged.connections.map((c) => [c.worker, c.id, c.ageMs]),
    [
      [1, 1, 900],
      [2, 1, 500],
      [1, 2, 100],
    ],
    'oldest first, limited to 3',
  );
  t.same(mergeConnectionPages([], 10), { total: 0, connections: [] });
});

t.test('explainTargets: each listener with its config and the live list it enforces', async (t) => {
  const config = buildConfig({
    allowlists: { a: ['10.0.0.0/8'], b: [] },
    listeners: [
      { name: 'one', listen: '127.0.0.1:7000', allowlist: 'a', upstreams: ['127.0.0.1:7100'] },
      { name: 'two', listen: '127.0.0.1:7001', allowlist: 'b', upstreams: ['127.0.0.1:7100'] },
    ],
  });
  const lists = new LiveLists();
  lists.apply('a', [{ cidr: '10.0.0.0/8' }], 'v1');
  const targets = explainTargets(config, lists);
  t.same(
    targets.map((x) => [x.name, x.config.allowlist]),
    [
      ['one', 'a'],
      ['two', 'b'],
    ],
  );
  t.equal(targets[0]!.list, lists.get('a'), 'the live list itself, so later writes are seen');
  lists.apply('a', [{ cidr: '192.0.2.0/24' }], 'v2');
  t.equal(targets[0]!.list.version, 'v2');
  lists.close();
});
