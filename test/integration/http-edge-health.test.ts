/**
 * Passive upstream health (docs/edge-rules.md "Upstream health"; nginx max_fails / fail_timeout),
 * in process over real sockets with nginx as the target that stays up and a backend that dies and
 * comes back on the same port: while it is down no GET fails (the first connect to it is refused
 * and retried on nginx, then it is skipped: no more connects to it within the window), the gauge
 * shows it out, and it takes requests again once it is back and the window has passed; a group
 * whose targets are all out answers 503 without a connect; 5xx statuses named in `statuses` count
 * as failures; a reload that adds the rule takes effect.
 */
import t from 'tap';
import { startIpgate } from '../helpers/ipgate';
import { waitFor } from '../helpers/net';
import { deadPort, request } from '../helpers/http';
import { missing } from '../helpers/peers';
import { threeBackends } from '../helpers/routes';
import { restartable } from '../helpers/restartable';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import type { Config } from '../../src/schema/config';

const skip = missing('nginx');

type Routes = NonNullable<Config['listeners'][number]['routes']>;

t.test('passive health: a target that dies is skipped, taken back after it recovers; none up: 503', { skip }, async (t) => {
  const nginx = await threeBackends(t);
  const A = `127.0.0.1:${nginx.a}`;
  const b = await restartable(t, 'B');
  const B = `127.0.0.1:${b.port}`;
  const sick = await restartable(t, 'S', 503);
  const S = `127.0.0.1:${sick.port}`;
  const [d1, d2, d3] = [await deadPort(), await deadPort(), await deadPort()];
  const routes = (laterHealth: boolean): Routes =>
    [
      { name: 'pair', hosts: ['pair.example'], upstreams: [A, B] },
      { name: 'dead', hosts: ['dead.example'], upstreams: [`127.0.0.1:${d1}`, `127.0.0.1:${d2}`] },
      {
        name: 'sick',
        hosts: ['sick.example'],
        upstreams: [S, A],
        upstreamHealth: { passive: { maxFails: 2, failTimeoutMs: 60_000, statuses: [503] } },
      },
      {
        name: 'later',
        hosts: ['later.example'],
        upstreams: [A, `127.0.0.1:${d3}`],
        upstreamHealth: { passive: laterHealth ? { maxFails: 1, failTimeoutMs: 60_000, statuses: [] } : null },
      },
    ] as unknown[] as Routes;
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [A],
          upstreamHealth: { passive: { maxFails: 1, failTimeoutMs: 1500, statuses: [] } },
          routes: routes(false),
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  const stats = g.app.listeners[0]!.stats;
  const get = (host: string): Promise<{ status: number; body: string }> =>
    request({ port, localAddress: '127.0.0.3', path: '/h', headers: { host } }).then((r) => ({
      status: r.status,
      body: r.body.split('|')[0]!,
    }));
  const failures = (target: string): number => [...(stats.upstreams.get(target)?.failures.values() ?? [])].reduce((x, y) => x + y, 0);
  const gauge = async (route: string, target: string): Promise<string | undefined> =>
    new RegExp(`ipgate_upstream_target_up\\{listener="web",route="${route}",upstream="${target.replace(/\./g, '\\.')}"\\} (\\d)`).exec(
      await g.app.metrics.scrape(),
    )?.[1];

  t.test('a target that dies and comes back', async (t) => {
    const before = new Set<string>();
    for (let i = 0; i < 4; i++) before.add((await get('pair.example')).body);
    t.same([...before].sort(), ['A', 'B'], 'both targets answer while up (round robin)');
    t.equal(await gauge('pair', B), '1', 'gauge: B up');

    await b.stop();
    const during: number[] = [];
    for (let i = 0; i < 10; i++) during.push((await get('pair.example')).status);
    t.same(during, Array(10).fill(200), 'no GET failed while B was down (the first was retried on nginx)');
    t.equal(failures(B), 1, 'one refused connect took B out: it was not dialled again within its window');
    t.equal(await gauge('pair', B), '0', 'gauge: B out');

    await b.start();
    const hitsBefore = b.hits();
    const back = performance.now();
    await waitFor(async () => (await get('pair.example')).body === 'B', 10_000, 'B takes requests again');
    t.ok(b.hits() > hitsBefore, 'B answered again after it recovered');
    t.ok(performance.now() - back < 5000, 'within its window (1.5 s) and a little');
    t.equal(await gauge('pair', B), '1', 'gauge: B up again');
  });

  t.test('every target out: 503 without a connect', async (t) => {
    t.equal((await get('dead.example')).status, 502, 'the first request tries both (refused): 502');
    const f = failures(`127.0.0.1:${d1}`) + failures(`127.0.0.1:${d2}`);
    t.equal(f, 2, 'each refused once');
    const r = await get('dead.example');
    t.equal(r.status, 503, 'then: 503, no target up');
    t.equal(failures(`127.0.0.1:${d1}`) + failures(`127.0.0.1:${d2}`), 2, 'and nothing was dialled');
    t.equal(stats.edge.get('dead\0upstream_none_up'), 1, 'counted as upstream_none_up');
  });

  t.test('statuses named as failures take a target out after maxFails in a row', async (t) => {
    const seen: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await get('sick.example');
      seen.push(`${r.status}`);
    }
    t.equal(seen.filter((s) => s === '503').length, 2, 'the 503 backend answered twice, then was skipped');
    t.same(seen.slice(4), ['200', '200', '200', '200'], 'only nginx after that');
    t.equal(sick.hits(), 2);
  });

  t.test('a reload that adds the rule', async (t) => {
    const d = `127.0.0.1:${d3}`;
    for (let i = 0; i < 6; i++) t.equal((await get('later.example')).status, 200);
    t.equal(failures(d), 3, 'without health rules every other GET dials the dead target (then nginx)');
    const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(true) }] };
    t.same(g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners))).problems, []);
    for (let i = 0; i < 6; i++) t.equal((await get('later.example')).status, 200);
    t.ok(failures(d) <= 4, `with them, at most one more dial (${failures(d)})`);
  });
});
