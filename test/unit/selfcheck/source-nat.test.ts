/** Source NAT suspicion and PROXY trust counts: the window, the thresholds, the log policy. */
import t from 'tap';
import pino from 'pino';
import { buildConfig } from '../../../src/config/load';
import { ListenerStats } from '../../../src/metrics/listener-stats';
import { SelfChecks } from '../../../src/selfcheck/self-checks';
import { isPublicBind } from '../../../src/selfcheck/source-nat-check';
import { LogCapture } from '../../helpers/ipgate';

function setup(listeners: Array<Record<string, unknown>>, clusterNetworks = ['10.244.0.0/16', '192.0.2.0/24']) {
  const config = buildConfig({
    store: { type: 'memory' },
    admin: { listen: null },
    allowlists: { a: [] },
    clusterNetworks,
    listeners: listeners.map((l) => ({ mode: 'tcp', allowlist: 'a', upstreams: ['127.0.0.1:9'], ...l })),
  });
  const logs = new LogCapture();
  const sc = new SelfChecks(config.clusterNetworks, pino({ level: 'debug' }, logs), {
    windowConnections: 100,
    minConnections: 20,
    threshold: 0.5,
    evaluateMs: 1000,
    logIntervalMs: 60_000,
    trustWindowMs: 60_000,
  });
  const stats = config.listeners.map((l) => new ListenerStats(l.name));
  const checks = config.listeners.map((l, i) => sc.add(l, stats[i]!));
  return { sc, checks, stats, logs };
}

t.test('which listeners are public', async (t) => {
  for (const [listen, want] of [
    ['0.0.0.0:80', true],
    ['[::]:80', true],
    ['10.0.0.5:80', true],
    ['127.0.0.1:80', false],
    ['127.1.2.3:80', false],
    ['[::1]:80', false],
    ['localhost:80', false],
  ] as const) {
    t.equal(isPublicBind(listen), want, listen);
  }
});

t.test('the verdict over the sliding window', async (t) => {
  const rows: Array<[string, Array<[string, number]>, boolean]> = [
    ['no verdict below 20 connections, even all from cluster networks', [['10.244.1.1', 19]], false],
    ['20 connections all from a node: suspected', [['192.0.2.11', 20]], true],
    [
      'exactly half: suspected (>= 50%)',
      [
        ['203.0.113.1', 10],
        ['10.244.1.1', 10],
      ],
      true,
    ],
    [
      'a minority of in-cluster callers: not suspected',
      [
        ['203.0.113.1', 60],
        ['10.244.3.3', 40],
      ],
      false,
    ],
    [
      'old SNAT traffic slides out of the window',
      [
        ['192.0.2.11', 100],
        ['203.0.113.1', 51],
      ],
      false,
    ],
    [
      'a change to SNAT shows within the window',
      [
        ['203.0.113.1', 500],
        ['192.0.2.12', 50],
      ],
      true,
    ],
    ['a mapped IPv6 peer was canonicalised by the listener; IPv6 clients count as public', [['2001:db8::1', 30]], false],
  ];
  for (const [name, seq, want] of rows) {
    const { checks } = setup([{ name: 'l', listen: '0.0.0.0:1' }]);
    for (const [peer, n] of seq) for (let i = 0; i < n; i++) checks[0]!.observe(peer);
    t.equal(checks[0]!.suspected, want, name);
  }
});

t.test('not counted: loopback listeners, no clusterNetworks, trusted PROXY sources and HTTP proxies', async (t) => {
  const { checks } = setup([
    { name: 'local', listen: '127.0.0.1:1' },
    { name: 'lb', listen: '0.0.0.0:2', proxyProtocol: { mode: 'required', trustedSources: ['10.244.0.0/16'] } },
    { name: 'web', mode: 'http', listen: '0.0.0.0:3', http: { trustedProxies: ['10.244.5.0/24'] } },
  ]);
  for (const c of checks) for (let i = 0; i < 50; i++) c.observe(i % 2 === 0 ? '10.244.5.5' : '10.244.5.6');
  t.notOk(checks[0]!.state().public);
  t.equal(checks[0]!.state().connectionsTotal, 0);
  t.notOk(checks[1]!.suspected);
  t.equal(checks[1]!.state().trustedClusterPeersTotal, 50);
  t.notOk(checks[2]!.suspected);
  const none = setup([{ name: 'l', listen: '0.0.0.0:1' }], []);
  for (let i = 0; i < 50; i++) none.checks[0]!.observe('10.244.1.1');
  t.notOk(none.checks[0]!.state().public, 'without clusterNetworks the check is off');
});

t.test('logged once when it starts, again once per interval, and when it clears', async (t) => {
  const { sc, checks, logs } = setup([{ name: 'l', listen: '0.0.0.0:1' }]);
  for (let i = 0; i < 30; i++) checks[0]!.observe('192.0.2.11');
  const snat = (): Record<string, unknown>[] => logs.lines.filter((l) => l.selfCheck === 'source_nat');
  sc.evaluate(1_000);
  sc.evaluate(2_000);
  sc.evaluate(30_000);
  t.equal(snat().length, 1, 'one line, not one per tick or connection');
  t.match(snat()[0], { level: 40, listener: 'l', windowConnections: 30, fromClusterNetworks: 30, share: 1, lastClusterPeer: '192.0.2.11' });
  sc.evaluate(61_000);
  t.equal(snat().length, 2, 'again after the interval');
  for (let i = 0; i < 100; i++) checks[0]!.observe('203.0.113.9');
  sc.evaluate(62_000);
  t.equal(snat().length, 3);
  t.match(snat()[2], { level: 30, msg: 'source NAT no longer suspected on listener l' });
  const st = sc.state().listeners.l!;
  t.match(st.sourceNat, {
    public: true,
    suspected: false,
    windowConnections: 100,
    windowFromClusterNetworks: 0,
    connectionsTotal: 130,
    fromClusterNetworksTotal: 30,
  });
});

t.test('/readyz checks: source NAT and PROXY trust, warnings from the recent window', async (t) => {
  const { sc, checks, stats } = setup([
    { name: 'lb', listen: '0.0.0.0:1', proxyProtocol: { mode: 'required', trustedSources: ['198.51.100.10/32'] } },
  ]);
  t.same(
    sc.readinessChecks().map((c) => [c.name, c.status]),
    [['source_nat.lb', 'ok']],
    'nothing refused yet: only the source NAT check',
  );
  for (let i = 0; i < 25; i++) {
    checks[0]!.observe('192.0.2.11');
    ListenerStats.bump(stats[0]!.proxyHeader, 'none/pp_untrusted');
  }
  let out = sc.readinessChecks();
  t.match(
    out.find((c) => c.name === 'source_nat.lb'),
    { status: 'warn', message: /^source NAT suspected: 100% of the last 25 connections/, fix: /externalTrafficPolicy: Local/ },
  );
  t.match(
    out.find((c) => c.name === 'proxy_untrusted.lb'),
    { status: 'warn', message: /25 connection\(s\) from peers outside proxyProtocol\.trustedSources refused, 0 PROXY header/ },
  );
  // Scanners refused while the balancer's headers are accepted: counted, not a warning.
  for (let i = 0; i < 30; i++) ListenerStats.bump(stats[0]!.proxyHeader, 'v2/ok');
  out = sc.readinessChecks();
  t.equal(out.find((c) => c.name === 'proxy_untrusted.lb')?.status, 'ok');
  ListenerStats.bump(stats[0]!.proxyHeader, 'none/pp_missing');
  t.equal(sc.readinessChecks().find((c) => c.name === 'proxy_missing.lb')?.status, 'ok', 'one missing header among many good ones');
  // The window forgets: 61 ticks later only new events count.
  for (let s = 1; s <= 61; s++) sc.evaluate(s * 1000);
  ListenerStats.bump(stats[0]!.proxyHeader, 'v1/pp_untrusted');
  t.match(
    sc.readinessChecks().find((c) => c.name === 'proxy_untrusted.lb'),
    { status: 'warn', message: /in the last 60 s 1 connection/ },
  );
  t.match(sc.state().listeners.lb!.proxyHeader, { refusedUntrustedV1: 1, closedUntrusted: 25, trustedMissing: 1, accepted: 30 });
});
