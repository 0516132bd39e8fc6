import t from 'tap';
import { workerCount } from '../../../src/cluster/primary';
import { isIpgateMessage } from '../../../src/cluster/protocol';

t.test('workerCount: a number is taken as is, auto is one per core (at least one)', async (t) => {
  for (const [workers, cores, want, why] of [
    [3, 2, 3, 'explicit count, more than cores'],
    [1, 8, 1, 'one worker'],
    ['auto', 2, 2, 'auto on 2 cores'],
    ['auto', 0, 1, 'auto never yields zero'],
  ] as const) {
    t.equal(workerCount(workers, cores), want, why);
  }
});

t.test('isIpgateMessage: only our typed messages, never Node cluster internals or junk', async (t) => {
  t.ok(isIpgateMessage({ t: 'ipgate:hello' }));
  t.notOk(isIpgateMessage({ cmd: 'NODE_CLUSTER', act: 'online' }));
  t.notOk(isIpgateMessage({ t: 'other' }));
  t.notOk(isIpgateMessage(null));
  t.notOk(isIpgateMessage('ipgate:hello'));
});
