/**
 * `source: config` lists kept in a ConfigMap key (`allowlists.<name>.configMap`), as the chart wires
 * its declarative lists, against the loopback Kubernetes API (test/helpers/fake-kube-api.ts) with
 * the compiled binary: an edit made through the API (kubectl edit, helm upgrade) is in force in
 * every worker, and in two ipgate processes, within 2 s; admin API writes are refused with 409
 * naming the ConfigMap; a bad edit is refused with a line per problem and the old list enforced;
 * the watch survives a dropped connection and 410 Gone; a ConfigMap ipgate cannot use stops the
 * start with the reason. The metrics say it too (issue 32 item 2): a refused edit sets
 * ipgate_config_last_reload_successful{kind="configmap"} to 0 until a good one; the API away sets
 * ipgate_configmap_watch_healthy to 0 for the lists' watch and the store's. Clients are real
 * connections from 127.0.0.x.
 */
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { request, TOKEN } from '../helpers/admin-api';
import { FakeKubeApi } from '../helpers/fake-kube-api';
import { killAtTeardown, logLines, spawnIpgate, tmpDir, type Spawned } from '../helpers/ipgate';
import { closed, connect, freePort, readLine, waitFor } from '../helpers/net';
import { tcpEcho } from '../helpers/echo';

const NS = 'edge';
const STORE_CM = 'edge-ipgate-allowlists';
const LISTS_CM = 'edge-ipgate-lists';
const KEY = 'partners.yaml';

async function admitted(port: number, from: string): Promise<boolean> {
  const s = await connect({ port, localAddress: from });
  const ok = await Promise.race([
    readLine(s).then(
      () => true,
      () => false,
    ),
    closed(s).then(() => false),
  ]);
  s.destroy();
  return ok;
}

/** `n` connections (spread over the workers by round robin): how many were admitted. */
async function admittedCount(port: number, from: string, n: number): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) if (await admitted(port, from)) ok++;
  return ok;
}

interface Gate {
  g: Spawned;
  port: number;
  api: (method: string, url: string, body?: unknown, headers?: Record<string, string>) => ReturnType<typeof request>;
  /** Connections per check: enough to reach every worker (round robin). */
  n: number;
}

interface Setup {
  fake: FakeKubeApi;
  dir: string;
  kubeconfig: string;
  echo: number;
}

async function setup(t: Test, entries: string, bookmarkIntervalMs = 500): Promise<Setup> {
  const fake = await new FakeKubeApi({ allowedNames: [STORE_CM, LISTS_CM], bookmarkIntervalMs }).start();
  t.teardown(() => fake.close());
  fake.create(NS, STORE_CM); // the chart creates both
  fake.create(NS, LISTS_CM, { [KEY]: entries, 'other.yaml': '[]\n' });
  const dir = tmpDir('ipgate-lists-cm-');
  fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
  return { fake, dir, kubeconfig: fake.writeKubeconfig(dir), echo: await tcpEcho(t) };
}

/** Start ipgate with `extra` config (workers, admin.separateProcess) and wait until ready. */
async function gate(t: Test, s: Setup, name: string, extra: Record<string, unknown>, n: number): Promise<Gate> {
  const port = await freePort();
  const adminPort = await freePort();
  const file = path.join(s.dir, `${name}.yaml`);
  const { admin, ...rest } = extra as { admin?: Record<string, unknown> };
  fs.writeFileSync(
    file,
    YAML.stringify({
      logging: { level: 'info', access: false },
      store: { type: 'kubernetes', namespace: null, configMap: STORE_CM },
      admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(s.dir, 'token'), ...admin },
      allowlists: { partners: { source: 'config', allowTemporary: true, configMap: { name: LISTS_CM, key: KEY } } },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: `127.0.0.1:${port}`,
          allowlist: 'partners',
          upstreams: [`127.0.0.1:${s.echo}`],
          outboundProxyProtocol: 'v1',
        },
      ],
      ...rest,
    }),
  );
  // POD_NAMESPACE as the chart sets it: configMap.namespace null is the pod's own.
  const g = spawnIpgate(['run', '--config', file], undefined, { KUBECONFIG: s.kubeconfig, POD_NAMESPACE: NS });
  killAtTeardown(t, g);
  await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 30_000, `${name} ready`);
  t.equal(g.child.exitCode, null, g.stderr());
  const base = `http://127.0.0.1:${adminPort}`;
  return {
    g,
    port,
    n,
    api: (m, u, body, headers) => request(base, m, u, { ...(body === undefined ? {} : { body }), ...(headers ? { headers } : {}) }),
  };
}

/** Wait until every gate admits `from` on all `n` connections (or none, `want` false); how long it took. */
async function inForce(gates: readonly Gate[], from: string, want: boolean, ms: number, what: string): Promise<number> {
  const start = Date.now();
  await waitFor(
    async () => {
      for (const x of gates) if ((await admittedCount(x.port, from, x.n)) !== (want ? x.n : 0)) return false;
      return true;
    },
    ms,
    what,
  );
  return Date.now() - start;
}

/** One sample of `/metrics` (undefined: no such series). */
async function metric(x: Gate, series: string): Promise<number | undefined> {
  const line = (await x.api('GET', '/metrics')).text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const CM_RELOAD = `ipgate_config_last_reload_successful{kind="configmap",source="${NS}/${LISTS_CM}"}`;

const refusals = (g: Spawned): Record<string, unknown>[] =>
  logLines(g.stdout()).filter((l) => l.level === 'error' && /config change refused/.test(String(l.msg)));

t.test('a list in a ConfigMap key, workers: 2: an edit in every worker within 2 s, API writes 409, a bad edit refused', async (t) => {
  const s = await setup(t, '- 127.0.0.5/32\n');
  const a = await gate(t, s, 'two-workers', { workers: 2 }, 6);
  t.equal(await admittedCount(a.port, '127.0.0.5', 6), 6, 'the entry read from the ConfigMap at start admits, in every worker');
  t.equal(await admittedCount(a.port, '127.0.0.6', 6), 0, 'others are denied');

  const got = await a.api('GET', '/v1/allowlists/partners');
  t.match(got.json, { name: 'partners', source: 'config', entries: [{ cidr: '127.0.0.5/32' }] });
  t.match(String(got.json.managedIn), `ConfigMap ${NS}/${LISTS_CM} key ${KEY}`, 'managedIn names the ConfigMap and key');
  const put = await a.api('PUT', '/v1/allowlists/partners', got.json, { 'if-match': got.headers.etag! });
  t.equal(put.status, 409, 'a write through the admin API is refused');
  t.equal(put.json.error, 'managed_by_config');
  t.match(put.json.message, `ConfigMap ${NS}/${LISTS_CM} key ${KEY}`, 'the 409 says where the list is managed');

  const edited = Date.now();
  s.fake.setData(NS, LISTS_CM, KEY, '- 127.0.0.6/32\n');
  await inForce([a], '127.0.0.6', true, 2000, 'the edit in force in every worker');
  t.ok(Date.now() - edited < 2000, `in force in every worker ${Date.now() - edited} ms after the API write`);
  t.equal(await admittedCount(a.port, '127.0.0.5', 6), 0, 'the removed entry admits nowhere');
  t.equal(await metric(a, CM_RELOAD), 1, "the ConfigMap's last reload: good");
  const goodAt = await metric(a, `ipgate_config_last_reload_successful_timestamp_seconds{kind="configmap",source="${NS}/${LISTS_CM}"}`);
  // Audited as the ConfigMap key the change came from, in the history and in the log line (the
  // durable record; log lines reach stdout in blocks: wait for it).
  const who = `configmap ${NS}/${LISTS_CM} key ${KEY}`;
  const audit = await a.api('GET', '/v1/audit?list=partners');
  t.match(
    audit.json.records[0],
    { who, action: 'config', added: [{ cidr: '127.0.0.6/32' }], removed: [{ cidr: '127.0.0.5/32' }] },
    'audited',
  );
  const auditLine = (): Record<string, unknown> | undefined =>
    logLines(a.g.stdout()).find((l) => l.audit === true && l.list === 'partners' && l.action === 'config');
  await waitFor(() => auditLine() !== undefined, 5000, 'the audit log line');
  t.match(
    auditLine(),
    { msg: 'allowlist changed', who, added: [{ cidr: '127.0.0.6/32' }], removed: [{ cidr: '127.0.0.5/32' }] },
    'the audit log line says which ConfigMap key changed',
  );

  const cases = [
    {
      description: 'a prefix out of range',
      text: '- 127.0.0.6/32\n- 10.0.0.1/33\n',
      line: /allowlists\.partners\.configMap\(edge\/edge-ipgate-lists:partners\.yaml\)\[1\]: "10\.0\.0\.1\/33"/,
    },
    {
      description: 'not a YAML array',
      text: 'cidr: 127.0.0.7/32\n',
      line: /allowlists\.partners\.configMap\.key: "partners\.yaml": ConfigMap edge\/edge-ipgate-lists key partners\.yaml must hold an array/,
    },
    {
      description: 'the key removed',
      text: null,
      line: /allowlists\.partners\.configMap\.key: "partners\.yaml": ConfigMap edge\/edge-ipgate-lists has no such key \(keys: other\.yaml\)/,
    },
  ];
  for (const c of cases) {
    const before = refusals(a.g).length;
    s.fake.setData(NS, LISTS_CM, KEY, c.text);
    await waitFor(() => refusals(a.g).length > before, 5000, `${c.description}: refusal logged`);
    t.match(String(refusals(a.g).at(-1)!.msg), c.line, `${c.description}: the line names the list, the ConfigMap key and the value`);
    t.equal(await admittedCount(a.port, '127.0.0.6', 6), 6, `${c.description}: the last good list stays in force`);
    t.equal(await admittedCount(a.port, '127.0.0.7', 6), 0, `${c.description}: nothing of the bad edit is applied`);
    const ready = await a.api('GET', '/readyz');
    t.match(
      ready.json.checks.find((x: { name: string }) => x.name === 'config'),
      { status: 'warn', message: c.line },
      `${c.description}: /readyz shows it`,
    );
    t.equal(await metric(a, CM_RELOAD), 0, `${c.description}: ipgate_config_last_reload_successful 0`);
    t.equal(
      await metric(a, `ipgate_config_last_reload_successful_timestamp_seconds{kind="configmap",source="${NS}/${LISTS_CM}"}`),
      goodAt,
      `${c.description}: the last success time kept`,
    );
  }
  s.fake.setData(NS, LISTS_CM, KEY, '- 127.0.0.6/32\n- 127.0.0.7/32\n');
  await inForce([a], '127.0.0.7', true, 2000, 'a good edit after the bad ones');
  t.equal(await metric(a, CM_RELOAD), 1, 'a good edit: 1 again');
  t.notOk(
    (await a.api('GET', '/readyz')).json.checks.some((x: { name: string }) => x.name === 'config'),
    '/readyz clears the refusal',
  );
});

t.test('the watch survives a dropped connection, 410 Gone and the API away (/readyz says so)', async (t) => {
  // No bookmarks during the test: a bookmark would move the resume point past the compaction.
  const s = await setup(t, '- 127.0.0.5/32\n', 600_000);
  const a = await gate(t, s, 'one', {}, 1);
  t.equal(await admittedCount(a.port, '127.0.0.5', 1), 1);
  const watches = (): number =>
    s.fake.requests.filter((r) => r.watch && r.query.get('fieldSelector') === `metadata.name=${LISTS_CM}`).length;
  const before = watches();

  s.fake.dropWatches();
  s.fake.setData(NS, LISTS_CM, KEY, '- 127.0.0.6/32\n');
  await inForce([a], '127.0.0.6', true, 8000, 'applied after a dropped watch');
  t.ok(watches() > before, 'the lists watch was opened again');

  s.fake.pauseWatches();
  s.fake.setData(NS, LISTS_CM, KEY, '- 127.0.0.8/32\n');
  s.fake.compact();
  s.fake.resumeWatches();
  s.fake.dropWatches();
  await inForce([a], '127.0.0.8', true, 8000, 'applied through 410 Gone and a relist');
  t.equal(await admittedCount(a.port, '127.0.0.6', 1), 0, 'the old entry is gone');
  // Log lines reach stdout in blocks (logging.flushIntervalMs): wait for the line, do not sample once.
  const relisted = (): boolean => logLines(a.g.stdout()).some((l) => l.configMap === `${NS}/${LISTS_CM}` && /410 Gone/.test(String(l.msg)));
  await waitFor(relisted, 5000, 'the lists watch logged the relist');
  t.ok(relisted(), 'the lists watch logged the relist');

  // The API away: /readyz says the lists watch is failing, the lists in force stay; back: watched.
  const listsCheck = async (): Promise<{ status: string; message: string } | undefined> =>
    (await a.api('GET', '/readyz')).json.checks.find((c: { name: string }) => c.name === 'config_lists');
  t.match(await listsCheck(), { status: 'ok', message: `ConfigMap ${NS}/${LISTS_CM} watched` });
  const healthy = (cm: string, use: string): string => `ipgate_configmap_watch_healthy{configmap="${NS}/${cm}",use="${use}"}`;
  t.equal(await metric(a, healthy(LISTS_CM, 'lists')), 1, 'the lists watch: healthy');
  // The store's watch was dropped too and reconnects after its own backoff: wait for it.
  await waitFor(async () => (await metric(a, healthy(STORE_CM, 'store'))) === 1, 5000, 'the store watch back');
  t.equal(await metric(a, healthy(STORE_CM, 'store')), 1, 'the store watch: healthy');
  const lastOk = (await metric(a, `ipgate_configmap_watch_last_success_timestamp_seconds{configmap="${NS}/${LISTS_CM}",use="lists"}`))!;
  t.ok(Math.abs(lastOk - Date.now() / 1000) < 60, `the API answered the watch lately (${lastOk})`);
  await s.fake.down();
  // The first failure is the stream's end; the retries then find the port closed.
  await waitFor(async () => /ECONNREFUSED/.test((await listsCheck())?.message ?? ''), 8000, '/readyz warns while the API is away');
  t.match(await listsCheck(), { status: 'warn', message: /ECONNREFUSED.*the lists in force stay/ });
  t.equal(await metric(a, healthy(LISTS_CM, 'lists')), 0, 'the lists watch: failing');
  await waitFor(async () => (await metric(a, healthy(STORE_CM, 'store'))) === 0, 8000, 'the store watch: failing');
  t.equal(await admittedCount(a.port, '127.0.0.8', 1), 1, 'the list in force stays while the API is away');
  await s.fake.up();
  await waitFor(async () => (await listsCheck())?.message === `ConfigMap ${NS}/${LISTS_CM} watched`, 8000, 'watched again');
  t.equal((await listsCheck())!.status, 'ok');
  t.equal(await metric(a, healthy(LISTS_CM, 'lists')), 1, 'the lists watch: healthy again');

  const after = watches();
  s.fake.setData(NS, LISTS_CM, KEY, '- 127.0.0.9/32\n');
  await inForce([a], '127.0.0.9', true, 2000, 'the watch is live again');
  t.equal(watches(), after, 'by the open watch, not a reconnection');
});

t.test('two ipgate processes (one process; primary + worker) sharing the API: an edit in both within 2 s', async (t) => {
  const s = await setup(t, '- 127.0.0.5/32\n');
  const [a, b] = await Promise.all([
    gate(t, s, 'single', { admin: { separateProcess: false } }, 1),
    gate(t, s, 'separate', { admin: { separateProcess: true } }, 2),
  ]);
  t.ok(/running as one process/.test(a.g.stdout()), 'a runs as one process');
  t.ok(/starting workers/.test(b.g.stdout()), 'b runs the admin API in a primary with a worker');
  for (const x of [a, b]) t.equal(await admittedCount(x.port, '127.0.0.5', x.n), x.n, 'read at start');

  const edited = Date.now();
  s.fake.setData(NS, LISTS_CM, KEY, '- 127.0.0.6/32\n');
  await inForce([a, b], '127.0.0.6', true, 2000, 'the edit in force in both processes');
  t.ok(Date.now() - edited < 2000, `in force in both ${Date.now() - edited} ms after the API write`);
  for (const x of [a, b]) t.equal(await admittedCount(x.port, '127.0.0.5', x.n), 0, 'the removed entry no longer admits');
  const lists = s.fake.requests.filter((r) => r.query.get('fieldSelector') === `metadata.name=${LISTS_CM}`);
  t.ok(
    lists.every((r) => r.method === 'GET'),
    'ipgate only reads the lists ConfigMap (get, list, watch)',
  );
});

t.test('a ConfigMap list ipgate cannot use stops the start with the reason', async (t) => {
  const cases: { description: string; data: Record<string, string> | null; allowed: boolean; stderr: RegExp }[] = [
    {
      description: 'a bad entry',
      data: { [KEY]: '- 10.0.0.1/8\n' },
      allowed: true,
      stderr: /invalid config .*allowlists\.partners\.configMap\(edge\/edge-ipgate-lists:partners\.yaml\)\[0\]: "10\.0\.0\.1\/8"/,
    },
    {
      description: 'the key missing',
      data: { 'other.yaml': '[]' },
      allowed: true,
      stderr:
        /allowlists\.partners\.configMap\.key: "partners\.yaml": ConfigMap edge\/edge-ipgate-lists has no such key \(keys: other\.yaml\)/,
    },
    {
      description: 'the ConfigMap missing',
      data: null,
      allowed: true,
      stderr: /allowlists\.partners\.configMap\.name: "edge-ipgate-lists": ConfigMap edge\/edge-ipgate-lists does not exist/,
    },
    {
      description: 'no RBAC on it',
      data: { [KEY]: '[]' },
      allowed: false,
      stderr:
        /cannot read ConfigMap edge\/edge-ipgate-lists: .*403.*the Role needs get, list, watch on configmaps with resourceNames \[edge-ipgate-lists\]/,
    },
  ];
  // All at once: each is a process start that fails fast.
  await Promise.all(
    cases.map(async (c) => {
      const fake = await new FakeKubeApi({ allowedNames: c.allowed ? [STORE_CM, LISTS_CM] : [STORE_CM] }).start();
      t.teardown(() => fake.close());
      fake.create(NS, STORE_CM);
      if (c.data !== null) fake.create(NS, LISTS_CM, c.data);
      const dir = tmpDir('ipgate-lists-cm-bad-');
      const file = path.join(dir, 'config.yaml');
      fs.writeFileSync(
        file,
        YAML.stringify({
          store: { type: 'kubernetes', namespace: null, configMap: STORE_CM },
          admin: { listen: null },
          allowlists: { partners: { source: 'config', configMap: { name: LISTS_CM, key: KEY } } },
          listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'partners', upstreams: ['127.0.0.1:9'] }],
        }),
      );
      const g = spawnIpgate(['run', '--config', file], undefined, { KUBECONFIG: fake.writeKubeconfig(dir), POD_NAMESPACE: NS });
      const code = await g.exited;
      t.equal(code, 1, `${c.description}: exit 1`);
      t.match(g.stderr(), c.stderr, `${c.description}: ${g.stderr().trim()}`);
    }),
  );
});

t.test('check-config: a ConfigMap list is valid as written, and says its entries are checked when ipgate runs', async (t) => {
  const dir = tmpDir('ipgate-lists-cm-check-');
  const file = path.join(dir, 'config.yaml');
  fs.writeFileSync(
    file,
    YAML.stringify({
      allowlists: { partners: { source: 'config', configMap: { name: LISTS_CM, key: KEY } }, office: ['192.0.2.0/24'] },
      listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:7000', allowlist: 'partners', upstreams: ['127.0.0.1:9'] }],
    }),
  );
  const g = spawnIpgate(['check-config', file]);
  t.equal(await g.exited, 0, g.stderr());
  t.match(g.stdout(), /valid \(1 listener\(s\), 2 allowlist\(s\)\)/);
  t.match(g.stdout(), /not checked here: the entries of partners \(read from a ConfigMap when ipgate runs\)/);
});
