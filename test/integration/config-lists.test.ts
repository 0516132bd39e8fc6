/**
 * `source: config` lists over real sockets with the compiled binary and two workers: the config
 * file is the truth; an edit is in force in every worker within 2 s, without a restart; a bad edit
 * is refused with a line naming the field and the value and the lists stay; admin API writes are
 * refused with 409 naming the file; temporary entries (allowTemporary) must carry expiresAt, are
 * shown apart and stop matching on time. A `source: store` list whose seed differs from the store
 * is reported once at start-up and in /readyz.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { request, startAdminGate, TOKEN } from '../helpers/admin-api';
import { FakeKubeApi } from '../helpers/fake-kube-api';
import { killAtTeardown, logLines, spawnIpgate, tmpDir } from '../helpers/ipgate';
import { closed, connect, freePort, readLine, waitFor } from '../helpers/net';
import { tcpEcho } from '../helpers/echo';

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
async function admittedCount(port: number, from: string, n = 6): Promise<number> {
  let ok = 0;
  for (let i = 0; i < n; i++) if (await admitted(port, from)) ok++;
  return ok;
}

t.test('a source: config list follows its file in every worker within 2 s; API writes refused; temporaries expire', async (t) => {
  const echo = await tcpEcho(t);
  const port = await freePort();
  const adminPort = await freePort();
  const dir = tmpDir('ipgate-config-lists-');
  fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
  const file = path.join(dir, 'config.yaml');
  const config = (entries: unknown[]): string =>
    YAML.stringify({
      workers: 2,
      logging: { level: 'info', access: false },
      store: { type: 'file', path: path.join(dir, 'allowlists.json') },
      admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token') },
      allowlists: { partners: { source: 'config', allowTemporary: true, entries } },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: `127.0.0.1:${port}`,
          allowlist: 'partners',
          upstreams: [`127.0.0.1:${echo}`],
          outboundProxyProtocol: 'v1',
        },
      ],
    });
  fs.writeFileSync(file, config(['127.0.0.5/32']));
  const g = spawnIpgate(['run', '--config', file]);
  killAtTeardown(t, g);
  await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 30_000, 'primary ready');
  t.equal(g.child.exitCode, null, g.stderr());
  const base = `http://127.0.0.1:${adminPort}`;
  const api = (m: string, u: string, body?: unknown, headers?: Record<string, string>): ReturnType<typeof request> =>
    request(base, m, u, { ...(body === undefined ? {} : { body }), ...(headers ? { headers } : {}) });

  const got = await api('GET', '/v1/allowlists/partners');
  t.match(got.json, { name: 'partners', source: 'config', entries: [{ cidr: '127.0.0.5/32' }], temporary: [], allowTemporary: true });
  t.ok(String(got.json.managedIn).includes(file), 'managedIn names the config file');
  t.equal(await admittedCount(port, '127.0.0.5'), 6, 'the declared entry admits, in every worker');

  const put = await api('PUT', '/v1/allowlists/partners', got.json, { 'if-match': got.headers.etag! });
  t.equal(put.status, 409, 'a GET answer PUT back: refused, the list is managed in the file');
  t.equal(put.json.error, 'managed_by_config');
  t.ok(put.json.message.includes(file), `the 409 names the file: ${put.json.message}`);
  const perm = await api('POST', '/v1/allowlists/partners/entries', { entries: [{ cidr: '127.0.0.7' }] });
  t.equal(perm.status, 400, 'a temporary entry needs expiresAt');
  t.equal(perm.json.field, 'entries[0].expiresAt');
  const decl = await api('DELETE', `/v1/allowlists/partners/entries/${encodeURIComponent('127.0.0.5/32')}`);
  t.equal(decl.status, 409, 'a declared entry cannot be removed through the API');
  const expiresAt = new Date(Date.now() + 4000).toISOString();
  const temp = await api('POST', '/v1/allowlists/partners/entries', {
    entries: [{ cidr: '127.0.0.7', expiresAt, comment: 'incident 42' }],
  });
  t.equal(temp.status, 200, temp.text);
  t.same(temp.json.temporary, [{ cidr: '127.0.0.7/32', comment: 'incident 42', expiresAt }], 'shown apart from the declared entries');
  t.same(temp.json.entries, [{ cidr: '127.0.0.5/32' }]);
  t.equal(await admittedCount(port, '127.0.0.7'), 6, 'the temporary entry admits, in every worker (acknowledged after all applied)');

  // Edit the file: 127.0.0.5 out, 127.0.0.6 in. Every worker within 2 s.
  const edited = Date.now();
  fs.writeFileSync(file, config(['127.0.0.6/32']));
  await waitFor(async () => (await admittedCount(port, '127.0.0.6')) === 6, 2000, 'the edit in force in every worker');
  const took = Date.now() - edited;
  t.ok(took < 2000, `in force in every worker ${took} ms after the write`);
  t.equal(await admittedCount(port, '127.0.0.5'), 0, 'the removed entry no longer admits anywhere');
  t.equal(await admittedCount(port, '127.0.0.7'), 6, 'the temporary entry survives the config edit');
  const after = await api('GET', '/v1/allowlists/partners');
  t.same(after.json.entries, [{ cidr: '127.0.0.6/32' }]);
  const audit = await api('GET', '/v1/audit?list=partners');
  t.match(
    audit.json.records[0],
    { who: 'config file', action: 'config', added: [{ cidr: '127.0.0.6/32' }], removed: [{ cidr: '127.0.0.5/32' }] },
    'audited',
  );

  // A bad edit: refused, named, and the lists in force stay.
  fs.writeFileSync(file, config(['127.0.0.6/32', '10.0.0.1/33']));
  await waitFor(
    () => logLines(g.stdout()).some((l) => l.level === 'error' && /config change refused/.test(String(l.msg))),
    5000,
    'refusal logged',
  );
  const refusal = logLines(g.stdout()).find((l) => l.level === 'error' && /config change refused/.test(String(l.msg)))!;
  t.match(String(refusal.msg), /allowlists\.partners\.entries\[1\]: "10\.0\.0\.1\/33"/, 'the line names the field and quotes the value');
  t.equal(await admittedCount(port, '127.0.0.6'), 6, 'the last good list stays in force');
  const ready = await api('GET', '/readyz');
  t.match(
    ready.json.checks.find((c: { name: string }) => c.name === 'config'),
    { status: 'warn', message: /allowlists\.partners\.entries\[1\]: "10\.0\.0\.1\/33"/ },
    '/readyz shows the refusal',
  );

  // The log level at runtime reaches the workers: a denial's debug line appears without a restart.
  const lvl = await api('PUT', '/v1/log-level', { level: 'debug' });
  t.same(lvl.json, { level: 'debug', previous: 'info' });
  await waitFor(
    async () => {
      await admitted(port, '127.0.0.9');
      return logLines(g.stdout()).some(
        (l) => l.level === 'debug' && l.msg === 'denied' && l.client === '127.0.0.9' && typeof l.worker === 'number',
      );
    },
    5000,
    'a worker logs at debug',
  );
  t.pass("a worker's debug denial line after PUT /v1/log-level");

  // The temporary entry stops matching at expiresAt, in every worker.
  await waitFor(async () => (await admittedCount(port, '127.0.0.7')) === 0, 10_000, 'temporary entry expired everywhere');
  t.pass('the temporary entry expired on time');
});

t.test('a source: store seed that differs from the store: one warning at start-up and in /readyz', async (t) => {
  const dir = tmpDir('ipgate-seed-');
  fs.writeFileSync(
    path.join(dir, 'allowlists.json'),
    JSON.stringify({ format: 'ipgate.allowlists/v1', lists: { main: { revision: 3, entries: [{ cidr: '192.0.2.0/24' }] } } }),
  );
  const g = await startAdminGate(
    t,
    {
      allowlists: { main: ['10.0.0.0/8'], same: [] },
      listeners: [{ name: 'l', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
    },
    { dir },
  );
  const warnings = g.logs.lines.filter((l) => l.level === 'warn' && /allowlists\.main in the config/.test(String(l.msg)));
  t.equal(warnings.length, 1, 'logged once');
  t.match(String(warnings[0]!.msg), /1 only in the config, 1 only in the store/);
  const ready = await g.api('GET', '/readyz');
  t.equal(ready.status, 200, 'a warning, not unready');
  t.match(
    ready.json.checks.find((c: { name: string }) => c.name === 'allowlist_seed'),
    { status: 'warn', message: /allowlists\.main in the config/ },
  );
  t.same((await g.api('GET', '/v1/allowlists/main')).json.entries, [{ cidr: '192.0.2.0/24' }], 'the store stays the truth');
});

t.test('PUT /v1/log-level: the level changes at runtime, audited, token required', async (t) => {
  const g = await startAdminGate(t, {
    logging: { level: 'info' },
    allowlists: { main: [] },
    listeners: [{ name: 'l', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const noToken = await g.api('PUT', '/v1/log-level', { body: { level: 'debug' }, token: null });
  t.equal(noToken.status, 401);
  const bad = await g.api('PUT', '/v1/log-level', { body: { level: 'verbose' } });
  t.equal(bad.status, 400);
  t.match(bad.json, { field: 'level' });
  const listener = g.app.listeners[0]!;
  const childLog = (listener as unknown as { log: { level: string } }).log;
  const set = await g.api('PUT', '/v1/log-level', { body: { level: 'warn' } });
  t.same(set.json, { level: 'warn', previous: 'debug' }, 'startIpgate starts at debug');
  t.equal(childLog.level, 'warn', 'a child logger built at start-up follows');
  t.equal((await g.api('GET', '/v1/log-level')).json.level, 'warn');
  const audit = await g.api('GET', '/v1/audit');
  t.match(audit.json.records[0], { action: 'log-level', who: 'admin', fromVersion: 'debug', version: 'warn' });
  t.ok(
    g.logs.lines.some((l) => l.audit === true && l.action === 'log-level' && l.to === 'warn'),
    'the audit line is written even at warn',
  );
});

t.test(
  'two ipgate processes sharing a ConfigMap store and one config file: an edit reaches both within 2 s, temporaries cross over',
  async (t) => {
    const NS = 'edge';
    const CM = 'edge-ipgate-allowlists';
    const fake = await new FakeKubeApi({ allowedNames: [CM], bookmarkIntervalMs: 500 }).start();
    t.teardown(() => fake.close());
    fake.create(NS, CM);
    const echo = await tcpEcho(t);
    const dir = tmpDir('ipgate-config-lists-kube-');
    fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
    const kubeconfig = fake.writeKubeconfig(dir);
    fs.mkdirSync(path.join(dir, 'lists'));
    // The declarative list in its own file, as the chart mounts it (lists/<name>.yaml).
    const listFile = path.join(dir, 'lists', 'partners.yaml');
    fs.writeFileSync(listFile, YAML.stringify(['127.0.0.5/32']));
    const ports = [await freePort(), await freePort()];
    const adminPorts = [await freePort(), await freePort()];
    const procs = ports.map((port, i) => {
      const own = path.join(dir, `config-${i}.yaml`);
      fs.writeFileSync(
        own,
        YAML.stringify({
          logging: { level: 'info', access: false },
          store: { type: 'kubernetes', namespace: NS, configMap: CM },
          admin: { listen: `127.0.0.1:${adminPorts[i]}`, tokenFile: path.join(dir, 'token') },
          allowlists: { partners: { source: 'config', allowTemporary: true, file: 'lists/partners.yaml' } },
          listeners: [
            {
              name: 'tcp',
              mode: 'tcp',
              listen: `127.0.0.1:${port}`,
              allowlist: 'partners',
              upstreams: [`127.0.0.1:${echo}`],
              outboundProxyProtocol: 'v1',
            },
          ],
        }),
      );
      const g = spawnIpgate(['run', '--config', own], undefined, { KUBECONFIG: kubeconfig });
      killAtTeardown(t, g);
      return g;
    });
    for (const g of procs) {
      await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 30_000, 'ready');
      t.equal(g.child.exitCode, null, g.stderr());
    }
    for (const port of ports) t.equal(await admittedCount(port, '127.0.0.5', 2), 2, 'the declared entry admits in each process');

    const a = `http://127.0.0.1:${adminPorts[0]}`;
    const temp = await request(a, 'POST', '/v1/allowlists/partners/entries', {
      body: { entries: [{ cidr: '127.0.0.7', expiresAt: new Date(Date.now() + 600_000).toISOString() }] },
    });
    t.equal(temp.status, 200, temp.text);
    await waitFor(
      async () => (await admittedCount(ports[1]!, '127.0.0.7', 2)) === 2,
      5000,
      'the other process applies the temporary entry from the ConfigMap',
    );
    t.pass('a temporary entry written through one process is in force in the other');

    const edited = Date.now();
    fs.writeFileSync(listFile, YAML.stringify(['127.0.0.6/32']));
    await waitFor(
      async () => {
        for (const port of ports) if ((await admittedCount(port, '127.0.0.6', 2)) !== 2) return false;
        return true;
      },
      2000,
      'the list file edit in force in both processes',
    );
    t.ok(Date.now() - edited < 2000, `in force in both ${Date.now() - edited} ms after the write`);
    for (const port of ports) t.equal(await admittedCount(port, '127.0.0.5', 2), 0, 'the removed entry no longer admits');
    const b = await request(`http://127.0.0.1:${adminPorts[1]}`, 'GET', '/v1/allowlists/partners');
    t.match(b.json, { source: 'config', entries: [{ cidr: '127.0.0.6/32' }], temporary: [{ cidr: '127.0.0.7/32' }] });
    const audit = await request(a, 'GET', '/v1/audit?list=partners');
    t.match(
      audit.json.records.find((r: { action: string }) => r.action === 'config'),
      { who: `file ${listFile}`, added: [{ cidr: '127.0.0.6/32' }], removed: [{ cidr: '127.0.0.5/32' }] },
      'the list file edit is audited as coming from that file',
    );
  },
);
