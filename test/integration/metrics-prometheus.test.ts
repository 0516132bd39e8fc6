/**
 * /metrics checked by the real tools (Debian package `prometheus`):
 * - `promtool check metrics` on a scrape taken under traffic (naming, types, HELP, units), and on
 *   the merged scrape of a cluster (the primary and two workers, the process metrics per process);
 * - a real Prometheus on loopback (temp TSDB, 1 s scrape interval, its own free port, nothing else
 *   started) scrapes ipgate's admin /metrics while allowed, denied and PROXY clients connect; its
 *   HTTP API (/api/v1/query) must then report the right counts.
 * In CI a missing binary is a failure (.ci/run installs it); locally a skip.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { createTcpEcho } from '../../src/echo/echo-server';
import { encodeProxyV1, encodeProxyV2, encodeProxyV2Local } from '../../src/proxy-protocol/encoder';
import { PROCESS_METRIC_NAMES } from '../../src/metrics/process-metrics';
import { ROOT, spawnIpgate, startIpgate, tmpDir, type Started } from '../helpers/ipgate';
import { closed, connect, freePort, readAll, readUntil, refusingPort, waitFor, waitForListen } from '../helpers/net';
import { missing, which } from '../helpers/peers';

const skip = missing('promtool') || missing('prometheus');

async function backends(t: Test): Promise<{ tcp: number; http: number; dead: number }> {
  const echo = createTcpEcho();
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const web = http.createServer((_req, res) => res.end('ok\n'));
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        web.closeAllConnections();
        web.close(() => echo.close(() => r()));
      }),
  );
  return { tcp: (echo.address() as net.AddressInfo).port, http: (web.address() as net.AddressInfo).port, dead: refusingPort(t) };
}

async function gate(t: Test): Promise<Started & { admin: number }> {
  const b = await backends(t);
  const g = await startIpgate(
    {
      admin: { listen: '127.0.0.1:0' },
      logging: { denialSummaryIntervalMs: 0 },
      allowlists: { main: ['127.0.0.2/32', '10.9.0.0/16'] },
      listeners: [
        {
          name: 'edge',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${b.tcp}`],
          proxyProtocol: { mode: 'optional', trustedSources: ['127.0.0.10/32'] },
        },
        { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${b.http}`] },
        { name: 'dead', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${b.dead}`] },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  return Object.assign(g, { admin: g.app.admin!.address.port });
}

/** The traffic both tests drive; `expected` below is what it must produce. */
async function traffic(g: Started, extra = 0): Promise<void> {
  const edge = g.port('edge');
  const session = async (localAddress: string, header: Buffer | null): Promise<void> => {
    const c = await connect({ port: edge, localAddress });
    c.write(header === null ? 'x' : Buffer.concat([header, Buffer.from('x')]));
    await readUntil(c, 'x');
    c.end();
    await closed(c);
  };
  for (let i = 0; i < 3; i++) await session('127.0.0.2', null); // allowed, plain
  await session('127.0.0.10', encodeProxyV2({ address: '10.9.1.1', port: 5000 }, { address: '192.0.2.1', port: 443 })); // v2/ok
  await session('127.0.0.10', encodeProxyV2({ address: '10.9.1.2', port: 5000 }, { address: '192.0.2.1', port: 443 })); // v2/ok
  await session('127.0.0.10', encodeProxyV1({ address: '10.9.1.3', port: 5000 }, { address: '192.0.2.1', port: 443 })); // v1/ok
  // Denied: not on the list (twice, two addresses).
  for (const a of ['127.0.0.3', '127.0.0.4']) {
    const c = await connect({ port: edge, localAddress: a });
    c.write('x');
    await readAll(c);
  }
  // A v2 LOCAL header from the balancer: its own address is the client, which is not listed.
  {
    const c = await connect({ port: edge, localAddress: '127.0.0.10' });
    c.write(encodeProxyV2Local());
    await readAll(c);
  }
  // PROXY headers from a peer outside trustedSources: closed as pp_untrusted.
  for (const header of [
    encodeProxyV1({ address: '10.9.9.9', port: 1 }, { address: '192.0.2.1', port: 443 }),
    encodeProxyV2({ address: '10.9.9.9', port: 1 }, { address: '192.0.2.1', port: 443 }),
  ]) {
    const c = await connect({ port: edge, localAddress: '127.0.0.5' });
    c.write(header);
    await readAll(c);
  }
  // A malformed v1 line from the trusted balancer.
  {
    const c = await connect({ port: edge, localAddress: '127.0.0.10' });
    c.write('PROXY TCP4 10.9.1.300 192.0.2.1 1 443\r\n');
    await readAll(c);
  }
  // Upstream failure on `dead`; HTTP allowed and denied on `web`.
  await readAll(await connect({ port: g.port('dead'), localAddress: '127.0.0.2' }));
  for (const [a, status] of [
    ['127.0.0.2', 200],
    ['127.0.0.6', 403],
  ] as const) {
    const got = await new Promise<number>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: g.port('web'), path: '/', localAddress: a, agent: false }, (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode ?? 0));
        })
        .once('error', reject);
    });
    if (got !== status) throw new Error(`HTTP from ${a}: ${got}, expected ${status}`);
  }
  // Every connection closed and counted.
  const [e, ...others] = g.app.listeners.map((l) => l.stats);
  await waitFor(() => e!.accepted === 12 + extra && e!.active === 0 && others.every((s) => s.active === 0), 10_000, 'all closed');
}

/** PromQL query -> value; the series expected (by labels) to hold it. */
const expected: [string, number][] = [
  ['ipgate_connections_accepted_total{listener="edge"}', 12],
  ['ipgate_connections_active{listener="edge"}', 0],
  ['ipgate_denied_total{listener="edge",reason="not_allowlisted"}', 3],
  ['ipgate_denied_total{listener="edge",reason="pp_untrusted"}', 2],
  ['ipgate_denied_total{listener="edge",reason="pp_bad_address"}', 1],
  ['ipgate_proxy_header_total{listener="edge",version="v2",result="ok"}', 2],
  ['ipgate_proxy_header_total{listener="edge",version="v1",result="ok"}', 1],
  ['ipgate_proxy_header_total{listener="edge",version="v2",result="local"}', 1],
  ['ipgate_proxy_header_total{listener="edge",version="v1",result="pp_untrusted"}', 1],
  ['ipgate_proxy_header_total{listener="edge",version="v2",result="pp_untrusted"}', 1],
  ['ipgate_proxy_header_total{listener="edge",version="none",result="none"}', 5],
  ['ipgate_connections_closed_total{listener="edge",result="ok"}', 6],
  ['ipgate_connections_closed_total{listener="edge",result="denied"}', 3],
  ['ipgate_upstream_errors_total{listener="dead",reason="upstream_refused"}', 1],
  ['ipgate_http_requests_total{listener="web",code_class="2xx"}', 1],
  ['ipgate_http_requests_total{listener="web",code_class="4xx"}', 1],
  ['ipgate_denied_total{listener="web",reason="not_allowlisted"}', 1],
  ['ipgate_http_request_duration_seconds_count{listener="web"}', 2],
  ['ipgate_http_requests_total{listener="web",method="GET",status="200"}', 1],
  ['ipgate_http_requests_total{listener="web",method="GET",status="403"}', 1],
  ['sum(ipgate_http_requests_total{listener="web",code_class="4xx"})', 1],
  ['ipgate_http_request_size_bytes_count{listener="web"}', 2],
  ['ipgate_http_response_size_bytes_count{listener="web"}', 2],
  ['ipgate_upstream_up{listener="edge"}', 1],
  ['ipgate_upstream_up{listener="web"}', 1],
  ['ipgate_upstream_up{listener="dead"}', 0],
  ['ipgate_upstream_connect_seconds_count{listener="edge"}', 6],
  ['ipgate_allowlist_entries{list="main"}', 2],
  ['count(ipgate_allowlist_version_info{list="main"})', 1],
];

t.test('promtool check metrics passes on a scrape taken under traffic', { skip }, async (t) => {
  const g = await gate(t);
  // Scrape while connections are open (active > 0) and after the traffic.
  const c = await connect({ port: g.port('edge'), localAddress: '127.0.0.2' });
  const running = traffic(g, 1);
  const during = await (await fetch(`http://127.0.0.1:${g.admin}/metrics`)).text();
  c.destroy();
  await running;
  const res = await fetch(`http://127.0.0.1:${g.admin}/metrics`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const after = await res.text();
  for (const [name, text] of [
    ['during traffic', during],
    ['after traffic', after],
  ] as const) {
    const r = spawnSync(which('promtool')!, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    t.equal(r.status, 0, `promtool check metrics ${name}: ${r.stdout}${r.stderr}`);
    t.equal(`${r.stdout}${r.stderr}`.trim(), '', `no lint findings ${name}`);
  }
  // The standard Node.js process metric names, which generic dashboards and alerts query.
  for (const m of [
    'process_cpu_seconds_total',
    'process_resident_memory_bytes',
    'process_start_time_seconds',
    'process_open_fds',
    'process_max_fds',
    'nodejs_eventloop_lag_seconds',
    'nodejs_heap_size_used_bytes',
    'nodejs_gc_duration_seconds',
    'nodejs_version_info',
    'ipgate_build_info',
  ]) {
    t.match(after, new RegExp(`^# TYPE ${m} `, 'm'), `${m} published`);
  }
  t.notMatch(after, /^# TYPE ipgate_(process|nodejs)_/m, 'no ipgate_-prefixed process metrics');
  t.notMatch(after, /^(process|nodejs)_\S*\{[^}]*worker=/m, 'one process: no worker label');
  // The clients above are 127.0.0.2-10 and 10.9.x.x; the upstreams (127.0.0.1) may be labels.
  t.notMatch(after, /127\.0\.0\.(?:[2-9]|10)\b|10\.9\./, 'no client address in any label');
  // Not on the data ports.
  const web = await fetch(`http://127.0.0.1:${g.port('web')}/metrics`).then((r) => r.status);
  t.equal(web, 403, 'the HTTP data port treats /metrics as any other request (denied from 127.0.0.1)');
});

t.test('a cluster (primary + 2 workers): one merged scrape passes promtool, process metrics per process', { skip }, async (t) => {
  const admin = await freePort();
  const p = spawnIpgate([], {
    workers: 2,
    store: { type: 'memory' },
    logging: { format: 'json' },
    admin: { listen: `127.0.0.1:${admin}` },
    allowlists: { main: ['127.0.0.2/32'] },
    listeners: [{ name: 'edge', listen: `127.0.0.1:${await freePort()}`, allowlist: 'main', upstreams: [`127.0.0.1:${await freePort()}`] }],
  });
  t.teardown(() => {
    p.child.kill('SIGKILL');
  });
  // The worker ids the workers log their lines with (the listening line): the same ids must
  // label their metrics.
  const workerIds = (): Set<string> => {
    const ids = new Set<string>();
    for (const line of p.stdout().split('\n')) {
      if (!line.startsWith('{')) continue;
      const l = JSON.parse(line) as { worker?: unknown; msg?: string };
      if (l.worker !== undefined && l.msg === 'listening') ids.add(String(l.worker));
    }
    return ids;
  };
  const ready = async (): Promise<boolean> =>
    (await fetch(`http://127.0.0.1:${admin}/readyz`).then(
      (r) => r.status,
      () => 0,
    )) === 200;
  await waitFor(
    async () => p.child.exitCode === null && (await ready()) && workerIds().size === 2,
    30_000,
    'the cluster ready, both workers logged listening',
  );
  const text = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text();
  const r = spawnSync(which('promtool')!, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  t.equal(r.status, 0, `promtool check metrics: ${r.stdout}${r.stderr}`);
  t.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no lint findings');
  const processes = ['primary', ...workerIds()].sort();
  for (const name of PROCESS_METRIC_NAMES) {
    if (name === 'nodejs_gc_duration_seconds') continue; // only once a process has collected garbage
    const series = [...text.matchAll(new RegExp(`^${name}\\{worker="([^"]+)"[,}]`, 'gm'))].map((m) => m[1]!);
    t.same([...new Set(series)].sort(), processes, `${name}: a series per process`);
  }
  t.notMatch(text, /^(process|nodejs)_[a-z_]+ /m, 'no process series without its worker label');
  const start = [...text.matchAll(/^process_start_time_seconds\{worker="[^"]+"\} (\d+)$/gm)].map((m) => Number(m[1]));
  t.ok(
    start.length === 3 && start.every((s) => Math.abs(s - Date.now() / 1000) < 120),
    `three start times, each this process's (${start.join(', ')})`,
  );
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0, 'SIGTERM: exit 0');
});

interface PromResult {
  status: string;
  data: { result: { metric: Record<string, string>; value: [number, string] }[] };
}

async function startPrometheus(t: Test, target: number): Promise<number> {
  const dir = tmpDir('ipgate-prom-');
  const port = await freePort();
  fs.writeFileSync(
    path.join(dir, 'prometheus.yml'),
    YAML.stringify({
      global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
      scrape_configs: [{ job_name: 'ipgate', static_configs: [{ targets: [`127.0.0.1:${target}`] }] }],
    }),
  );
  // Only this binary, in the foreground, on loopback: no node exporter, no service, no default
  // data directory; the TSDB lives in the temp dir.
  const child = spawn(
    which('prometheus')!,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
      '--log.level=warn',
      `--web.console.templates=${dir}`,
      `--web.console.libraries=${dir}`,
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const k = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(k);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await Promise.race([
    waitForListen(port, 30_000),
    exited.then(() => {
      throw new Error(`prometheus exited: ${out}`);
    }),
  ]);
  await waitFor(
    async () =>
      (await fetch(`http://127.0.0.1:${port}/-/ready`).then(
        (r) => r.status,
        () => 0,
      )) === 200,
    30_000,
    'prometheus ready',
  );
  return port;
}

async function query(prom: number, q: string): Promise<number | null> {
  const res = await fetch(`http://127.0.0.1:${prom}/api/v1/query?query=${encodeURIComponent(q)}`);
  const body = (await res.json()) as PromResult;
  if (body.status !== 'success') throw new Error(`query ${q}: ${JSON.stringify(body)}`);
  const r = body.data.result;
  return r.length === 1 ? Number(r[0]!.value[1]) : null;
}

t.test('a real Prometheus scrapes /metrics and reports the counts of the traffic', { skip }, async (t) => {
  const g = await gate(t);
  const prom = await startPrometheus(t, g.admin);
  // The target is up before the traffic starts, so the counters are seen from zero.
  await waitFor(async () => (await query(prom, 'up{job="ipgate"}')) === 1, 30_000, 'ipgate target up');
  await traffic(g);
  // Wait for a scrape after the traffic (Prometheus holds the last sample), then check every count.
  await waitFor(
    async () => (await query(prom, 'ipgate_connections_accepted_total{listener="edge"}')) === 12,
    30_000,
    'Prometheus sees the traffic',
  );
  await waitFor(
    async () => (await query(prom, 'ipgate_http_request_duration_seconds_count{listener="web"}')) === 2,
    30_000,
    'HTTP scraped',
  );
  for (const [q, want] of expected) t.equal(await query(prom, q), want, q);
  // The standard process metrics as generic dashboards query them: one process, one series.
  for (const q of [
    'rate(process_cpu_seconds_total[1m])',
    'process_resident_memory_bytes',
    'nodejs_eventloop_lag_p99_seconds',
    'time() - process_start_time_seconds',
    'process_open_fds / process_max_fds',
    'nodejs_version_info',
  ]) {
    const v = await query(prom, q);
    t.ok(v !== null && Number.isFinite(v), `${q}: one series (${v})`);
  }
  // Every query of the chart's Grafana dashboard is valid PromQL to this Prometheus, and the
  // process panels (kept to ipgate by a join on ipgate_build_info) find this ipgate.
  const dash = JSON.parse(fs.readFileSync(path.join(ROOT, 'helm/ipgate/files/dashboard.json'), 'utf8')) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  for (const p of dash.panels) {
    for (const target of p.targets ?? []) {
      const q = target.expr.replaceAll('$namespace', '.*').replaceAll('$listener', '.*').replaceAll('$__rate_interval', '1m');
      const res = await fetch(`http://127.0.0.1:${prom}/api/v1/query?query=${encodeURIComponent(q)}`);
      const body = (await res.json()) as PromResult & { error?: string };
      t.equal(body.status, 'success', `${p.title}: ${target.expr}${body.error ? `: ${body.error}` : ''}`);
      if (/\b(?:process|nodejs)_/.test(target.expr)) {
        t.ok(body.data.result.length > 0, `${p.title}: finds this ipgate's process series`);
      }
    }
  }
  // Rates work on what it stored (more than one sample of the counter).
  const samples = await query(prom, 'count_over_time(ipgate_connections_accepted_total{listener="edge"}[1m])');
  t.ok(samples !== null && samples >= 2, `several samples stored (${samples})`);
  t.equal(
    await query(prom, 'sum(ipgate_admin_requests_total{route="/metrics",method="GET",code_class="2xx"}) > 0'),
    await query(prom, 'sum(ipgate_admin_requests_total{route="/metrics",method="GET",code_class="2xx"})'),
    'its scrapes are counted as admin requests',
  );
});
