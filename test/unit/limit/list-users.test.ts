/**
 * An allowlist a limit exempts is in use (src/store/list-ref.ts listUsers): the admin API's
 * DELETE refuses it while a listener's or a route's `limits.*.exempt` names it, as for any other
 * field that names a list.
 */
import t from 'tap';
import { listUsers } from '../../../src/store/list-ref';

t.test("a limit's exempt list is a user of the list", async (t) => {
  const listeners = [
    {
      name: 'web',
      mode: 'http',
      allowlist: 'main',
      proxyProtocol: { trustedSources: [] as string[] },
      http: { trustedProxies: [] as string[] },
      limits: { requests: { exempt: ['ops'] }, concurrent: null, connectionRate: null },
      routes: [
        { name: 'api', limits: { concurrent: { exempt: ['monitoring', 'ops'] } } },
        { name: 'plain', allowlist: 'ops' },
      ],
    },
  ];
  t.same(listUsers(listeners, 'ops'), [
    'listeners[0] (web).limits.requests.exempt',
    'listeners[0] (web).routes[0] (api).limits.concurrent.exempt',
    'listeners[0] (web).routes[1] (plain).allowlist',
  ]);
  t.same(listUsers(listeners, 'monitoring'), ['listeners[0] (web).routes[0] (api).limits.concurrent.exempt']);
  t.same(listUsers(listeners, 'other'), []);
});
