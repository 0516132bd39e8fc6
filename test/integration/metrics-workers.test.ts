/**
 * `workers: 2` with the compiled binary (issue 32 items 2 and 3): the new series are summed over
 * the workers as the primary's /metrics merges them (requests by method and status, size
 * histograms, upstream up), the merged scrape passes `promtool check metrics`; and a refused edit
 * of the config file (`10.20.0.0/33`, the GitOps push that failed to apply) moves
 * ipgate_config_last_reload_successful to 0 (its last success time kept) while the lists in force
 * stay, until a good edit sets it back to 1.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { killAtTeardown, spawnIpgate, tmpDir } from '../helpers/ipgate';
import { connect, freePort, readAll, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startNginx, which } from '../helpers/peers';

const skip = missing('nginx') || missing('promtool');

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** nginx answering 200 "ok" on a free port, stopped at the end of `t`. */
async function okBackend(t: Test): Promise<number> {
  const backendPort = await freePort();
  const nginx = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  server { listen 127.0.0.1:${backendPort}; location / { return 200 "ok\\n"; } }
}`,
    [backendPort],
  );
  t.teardown(() => nginx.stop());
  return backendPort;
}

/** Until the admin API's /readyz answers 200 (both workers up). */
async function ready(adminPort: number): Promise<void> {
  await waitFor(
    async () =>
      (await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
        (r) => r.status,
        () => 0,
      )) === 200,
    30_000,
    'ready with 2 workers',
  );
}

t.test('two workers: HTTP series summed, upstream up, a refused config edit shows in the reload gauge', { skip }, async (t) => {
  const backendPort = await okBackend(t);
  const port = await freePort();
  const adminPort = await freePort();
  const dir = tmpDir('ipgate-metrics-workers-');
  const file = path.join(dir, 'config.yaml');
  const config = (cidr: string): string =>
    YAML.stringify({
      workers: 2,
      logging: { level: 'info', access: false },
      store: { type: 'memory' },
      admin: { listen: `127.0.0.1:${adminPort}` },
      allowlists: { main: { source: 'config', entries: ['127.0.0.0/24', cidr] } },
      listeners: [{ name: 'web', mode: 'http', listen: `127.0.0.1:${port}`, allowlist: 'main', upstreams: [`127.0.0.1:${backendPort}`] }],
    });
  fs.writeFileSync(file, config('10.20.0.0/16'));
  const g = spawnIpgate(['run', '--config', file]);
  killAtTeardown(t, g);
  const metrics = async (): Promise<string> => (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  await ready(adminPort);

  // 20 connections, one request each: the primary spreads them over both workers (SCHED_RR).
  const heads: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 20; i++) {
    const s = await connect({ port, localAddress: '127.0.0.2' });
    const req = `${i % 2 === 0 ? 'GET' : 'HEAD'} /${i} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n`;
    heads.push(req.length);
    s.write(req);
    bytes += (await readAll(s)).length;
  }
  const done = (text: string): boolean => value(text, 'ipgate_http_request_size_bytes_count{listener="web"}') === 20;
  await waitFor(async () => done(await metrics()), 10_000, 'both workers report the 20 requests');
  const text = await metrics();
  const perWorker = [...text.matchAll(/^process_start_time_seconds\{worker="(\d+)"\}/gm)].map((m) => m[1]);
  t.equal(perWorker.length, 2, 'two workers report');
  t.equal(
    value(text, 'ipgate_http_requests_total{listener="web",method="GET",status="200",code_class="2xx",protocol="h1"}'),
    10,
    'summed over the workers',
  );
  t.equal(value(text, 'ipgate_http_requests_total{listener="web",method="HEAD",status="200",code_class="2xx",protocol="h1"}'), 10);
  t.equal(
    value(text, 'ipgate_http_request_size_bytes_sum{listener="web"}'),
    heads.reduce((a, b) => a + b, 0),
  );
  t.equal(value(text, 'ipgate_http_response_size_bytes_sum{listener="web"}'), bytes, 'every byte the clients read');
  t.equal(
    value(text, `ipgate_upstream_up{listener="web",upstream="127.0.0.1:${backendPort}"}`),
    1,
    'up: not 2 (max, not sum, across workers)',
  );
  t.equal(value(text, `ipgate_config_last_reload_successful{kind="file",source="${file}"}`), 1, 'the config as loaded at start');
  const started = value(text, `ipgate_config_last_reload_successful_timestamp_seconds{kind="file",source="${file}"}`)!;
  t.ok(Math.abs(started - Date.now() / 1000) < 120, `the start-up load is the last success (${started})`);
  const r = spawnSync(which('promtool')!, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  t.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  t.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no lint findings');

  // The refused edit: nothing applies, the gauge says so, the last success time stays.
  fs.writeFileSync(file, config('10.20.0.0/33'));
  await waitFor(
    async () => value(await metrics(), `ipgate_config_last_reload_successful{kind="file",source="${file}"}`) === 0,
    10_000,
    'refused edit seen',
  );
  const refused = await metrics();
  t.equal(
    value(refused, `ipgate_config_last_reload_successful_timestamp_seconds{kind="file",source="${file}"}`),
    started,
    'the last success time is the start',
  );
  // Logs are written in blocks (logging.bufferBytes): flushed within logging.flushIntervalMs.
  const refusal =
    /config change refused, the lists in force stay: allowlists\.main\.entries\[1\]: \\"10\.20\.0\.0\/33\\": prefix length 33 out of range for IPv4 in /;
  await waitFor(() => refusal.test(g.stdout()), 5000, 'the refusal logged, naming the value and its line');

  // Fixed: 1 again, a newer success time.
  fs.writeFileSync(file, config('10.21.0.0/16'));
  await waitFor(
    async () => value(await metrics(), `ipgate_config_last_reload_successful{kind="file",source="${file}"}`) === 1,
    10_000,
    'good edit seen',
  );
  t.ok(value(await metrics(), `ipgate_config_last_reload_successful_timestamp_seconds{kind="file",source="${file}"}`)! >= started);
  g.child.kill('SIGTERM');
  t.equal(await g.exited, 0);
});

t.test("two workers with 80 routes: each worker's metrics come in parts and are put back together", { skip }, async (t) => {
  const backendPort = await okBackend(t);
  const port = await freePort();
  const adminPort = await freePort();
  const dir = tmpDir('ipgate-metrics-parts-');
  const file = path.join(dir, 'config.yaml');
  const ROUTES = 80;
  fs.writeFileSync(
    file,
    YAML.stringify({
      workers: 2,
      logging: { level: 'info', access: false },
      store: { type: 'memory' },
      admin: { listen: `127.0.0.1:${adminPort}` },
      allowlists: { main: { source: 'config', entries: ['127.0.0.0/24'] } },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: `127.0.0.1:${port}`,
          allowlist: 'main',
          routes: Array.from({ length: ROUTES }, (_, i) => ({
            name: `r${i}`,
            hosts: [`r${i}.test`],
            upstreams: [`127.0.0.1:${backendPort}`],
          })),
        },
      ],
    }),
  );
  const g = spawnIpgate(['run', '--config', file]);
  killAtTeardown(t, g);
  const metrics = async (): Promise<string> => (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  await ready(adminPort);
  // One connection per route: the primary spreads them over both workers.
  for (let i = 0; i < ROUTES; i++) {
    const s = await connect({ port, localAddress: '127.0.0.2' });
    s.write(`GET /${i} HTTP/1.1\r\nHost: r${i}.test\r\nConnection: close\r\n\r\n`);
    await readAll(s);
  }
  const total = (text: string): number =>
    [...text.matchAll(/^ipgate_http_request_duration_seconds_count\{listener="web",route="r\d+"\} (\d+)$/gm)].reduce(
      (n, m) => n + Number(m[1]),
      0,
    );
  await waitFor(async () => total(await metrics()) === ROUTES, 10_000, `both workers report the ${ROUTES} requests`);
  const text = await metrics();
  const samples = text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
  // Each worker served about half the routes: ~40 routes' series (~45 samples each) and its process
  // metrics, above PART_SAMPLES (1,000; metrics/cluster.ts): its reply came in parts.
  t.ok(samples > 3000, `${samples} samples in the merged scrape`);
  for (let i = 0; i < ROUTES; i++) {
    t.equal(
      value(text, `ipgate_http_requests_total{listener="web",route="r${i}",method="GET",status="200",code_class="2xx",protocol="h1"}`),
      1,
      `r${i}: one request, counted once`,
    );
  }
  const r = spawnSync(which('promtool')!, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  t.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  g.child.kill('SIGTERM');
  t.equal(await g.exited, 0);
});
