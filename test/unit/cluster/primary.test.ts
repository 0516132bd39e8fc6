import t from 'tap';
import { processModel, schedulingFor, workerCount } from '../../../src/cluster/process-model';
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

t.test('processModel: the admin API gets its own process unless it is off or separateProcess is false', async (t) => {
  const admin = (listen: string | null, separateProcess: boolean) => ({
    listen,
    separateProcess,
    tokenFile: null,
    tokenEnv: 'T',
    tokensFile: null,
    auditHistory: 1,
    bodyLimit: 1024,
    allowedHosts: [],
  });
  for (const [workers, listen, separate, cores, want, why] of [
    [
      1,
      '127.0.0.1:9901',
      true,
      8,
      { kind: 'cluster', workers: 1, reason: 'admin API in its own process' },
      'opted in: primary + one worker',
    ],
    [1, '127.0.0.1:9901', false, 8, { kind: 'single', workers: 1, reason: 'admin.separateProcess: false' }, 'the default: one process'],
    [1, null, true, 8, { kind: 'single', workers: 1, reason: 'no admin API (admin.listen: null)' }, 'no admin API: nothing to separate'],
    [1, null, false, 8, { kind: 'single', workers: 1, reason: 'no admin API (admin.listen: null)' }, 'no admin API, opted out'],
    [3, '127.0.0.1:9901', false, 8, { kind: 'cluster', workers: 3, reason: 'workers: 3' }, 'several workers: always a primary'],
    [2, null, true, 8, { kind: 'cluster', workers: 2, reason: 'workers: 2' }, 'several workers without an admin API'],
    ['auto', '127.0.0.1:9901', true, 4, { kind: 'cluster', workers: 4, reason: 'workers: auto (4 cores)' }, 'auto on 4 cores'],
    [
      'auto',
      '127.0.0.1:9901',
      false,
      1,
      { kind: 'single', workers: 1, reason: 'admin.separateProcess: false' },
      'auto on 1 core, opted out',
    ],
    ['auto', '127.0.0.1:9901', true, 1, { kind: 'cluster', workers: 1, reason: 'admin API in its own process' }, 'auto on 1 core'],
  ] as const) {
    t.same(processModel({ workers, admin: admin(listen, separate) }, cores), want, why);
  }
});

t.test('schedulingFor: SCHED_NONE for one worker (nothing to spread), the measured choice (RR) for more', async (t) => {
  t.equal(schedulingFor(1), 'none');
  t.equal(schedulingFor(2), 'rr');
  t.equal(schedulingFor(16), 'rr');
});

t.test('isIpgateMessage: only our typed messages, never Node cluster internals or junk', async (t) => {
  t.ok(isIpgateMessage({ t: 'ipgate:hello' }));
  t.notOk(isIpgateMessage({ cmd: 'NODE_CLUSTER', act: 'online' }));
  t.notOk(isIpgateMessage({ t: 'other' }));
  t.notOk(isIpgateMessage(null));
  t.notOk(isIpgateMessage('ipgate:hello'));
});
