/**
 * The admin API over real sockets: the Host check (DNS rebinding) on every route, public ones
 * included, and wrong tokens counted by reason in /metrics and logged once per address per interval.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { allowlistMain } from '../../src/cli/allowlist';
import { analyseAdmin } from '../../src/doctor/analyse-admin';
import type { Finding } from '../../src/doctor/finding';
import { request, startAdminGate, TOKEN } from '../helpers/admin-api';
import { childPids, logLines, spawnIpgate, tmpDir } from '../helpers/ipgate';
import { freePort, waitFor } from '../helpers/net';

const listener = { name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] };

/** One raw HTTP exchange (a Host header of our choosing, or none with HTTP/1.0). */
function raw(port: number, head: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => s.write(head));
    let data = '';
    s.setEncoding('latin1');
    s.on('data', (c: string) => (data += c));
    s.on('end', () => resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(data)?.[1] ?? 0), text: data }));
    s.on('error', reject);
  });
}

t.test('a Host that is not an address of the API gets 421 on every route; IPs, localhost and listed names pass', async (t) => {
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8'] }, listeners: [listener] });
  const before = g.app.lists.get('main').version;
  for (const [method, url] of [
    ['GET', '/readyz'],
    ['GET', '/healthz'],
    ['GET', '/metrics'],
    ['GET', '/openapi.json'],
    ['GET', '/v1/allowlists'],
    ['POST', '/v1/allowlists/main/entries'],
    ['GET', '/nope'],
  ] as const) {
    const r = await g.api(method, url, {
      headers: { host: 'evil.example:9901' },
      ...(method === 'POST' ? { body: { entries: [{ cidr: '192.0.2.1' }] } } : {}),
    });
    t.equal(r.status, 421, `${method} ${url}`);
    t.same(r.json, {
      error: 'host_not_allowed',
      field: 'Host',
      message:
        'Host "evil.example:9901" is not an address of this admin API: use an IP address or localhost, or add the name to admin.allowedHosts',
    });
  }
  t.equal(g.app.lists.get('main').version, before, 'the refused POST changed nothing');
  const port = g.app.admin!.address.port;
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'LocalHost', `[::1]:${port}`, '10.9.8.7']) {
    const r = await g.api('GET', '/readyz', { token: null, headers: { host } });
    t.equal(r.status, 200, `Host ${host}`);
  }
  const http10 = await raw(port, 'GET /healthz HTTP/1.0\r\n\r\n');
  t.equal(http10.status, 200, 'HTTP/1.0 without Host is served (no browser sends that)');
  const http11 = await raw(port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
  t.equal(http11.status, 400, 'HTTP/1.1 without Host is a 400 (RFC 9112 3.2) before any route');
  const rebound = await raw(port, 'GET /readyz HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n');
  t.equal(rebound.status, 421);
  t.match(rebound.text, /"Host \\"attacker\.example\\" is not an address/);
  const doctor: Finding[] = [];
  analyseAdmin(
    {
      url: 'http://attacker.example:9901/readyz',
      status: rebound.status,
      body: JSON.parse(rebound.text.slice(rebound.text.indexOf('\r\n\r\n') + 4)),
    },
    doctor,
  );
  t.match(
    doctor,
    [{ id: 'ipgate.admin-host-refused', severity: 'warn', statement: /HTTP 421.*Host "attacker\.example"/, fix: /admin\.allowedHosts/ }],
    'ipgate doctor says what to do about the 421',
  );
  const m = await g.api('GET', '/metrics', { token: null });
  t.match(
    m.text,
    /ipgate_admin_requests_total\{route="\/readyz",method="GET",code_class="4xx"\} [1-9]/,
    'the 421s are counted as admin requests',
  );
});

/** startAdminGate with admin options of our own (its own admin block would replace them). */
async function gateWith(t: Test, admin: Record<string, unknown>) {
  const dir = tmpDir('ipgate-admin-host-');
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, `${TOKEN}\n`);
  return startAdminGate(
    t,
    { allowlists: { main: [] }, listeners: [listener], admin: { listen: '127.0.0.1:0', tokenFile, ...admin } },
    { dir },
  );
}

t.test('admin.allowedHosts: the listed names are served, case-insensitively and with any port; others still 421', async (t) => {
  const g = await gateWith(t, { allowedHosts: ['ipgate-admin.ipgate.svc', 'IPGATE-ADMIN.ipgate.svc.cluster.local'] });
  for (const host of ['ipgate-admin.ipgate.svc:9901', 'IPGATE-admin.ipgate.svc', 'ipgate-admin.ipgate.svc.cluster.local.:80']) {
    t.equal((await g.api('GET', '/v1/allowlists', { headers: { host } })).status, 200, `Host ${host}`);
  }
  t.equal((await g.api('GET', '/v1/allowlists', { headers: { host: 'ipgate-admin.other.svc' } })).status, 421);
});

t.test('wrong tokens: every one counted by reason in /metrics, one warn line per address per interval', async (t) => {
  const g = await gateWith(t, {});
  const n = 200;
  const replies = await Promise.all(Array.from({ length: n }, () => g.api('GET', '/v1/allowlists', { token: 'wrong-token-0123456789' })));
  t.same(new Set(replies.map((r) => r.status)), new Set([403]));
  t.equal((await g.api('GET', '/v1/allowlists', { token: null })).status, 401);
  t.equal((await g.api('GET', '/v1/allowlists', { headers: { authorization: 'Basic Zm9vOmJhcg==' } })).status, 401);
  t.equal((await g.api('GET', '/v1/allowlists')).status, 200, 'the right token still works');
  const warns = g.logs.lines.filter((l) => l.msg === 'admin API: wrong token' || String(l.msg).startsWith('admin API: wrong token ('));
  t.equal(warns.length, 1, `one line for ${n} wrong tokens from 127.0.0.1`);
  t.match(warns[0], { level: 'warn', remote: '127.0.0.1', suppressed: 0, intervalMs: 60_000 });
  const m = await g.api('GET', '/metrics', { token: null });
  t.match(m.text, /# TYPE ipgate_admin_auth_failures_total counter/);
  t.match(m.text, new RegExp(`ipgate_admin_auth_failures_total\\{reason="invalid"\\} ${n}\\n`));
  t.match(m.text, /ipgate_admin_auth_failures_total\{reason="missing"\} 1\n/);
  t.match(m.text, /ipgate_admin_auth_failures_total\{reason="malformed"\} 1\n/);
});

t.test('the allowlist CLI reaches the API by IP and by localhost (both pass the Host check)', async (t) => {
  const g = await gateWith(t, {});
  const port = g.app.admin!.address.port;
  for (const admin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
    let out = '';
    let err = '';
    const code = await allowlistMain(['ls', '--admin', admin], {
      out: (x) => (out += x),
      err: (x) => (err += x),
      env: { IPGATE_ADMIN_TOKEN: TOKEN },
      now: Date.now,
    });
    t.equal(code, 0, `${admin}: ${err}`);
    t.match(out, /^NAME +VERSION/);
  }
});

t.test(
  'in the default process model (the admin API in a cluster primary): allowedHosts applies and auth failures reach /metrics',
  async (t) => {
    const dir = tmpDir('ipgate-admin-host-bin-');
    fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
    const adminPort = await freePort();
    const g = spawnIpgate(['run'], {
      logging: { level: 'info', bufferBytes: 0 },
      store: { type: 'memory' },
      admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token'), allowedHosts: ['ipgate-admin.ipgate.svc'] },
      allowlists: { main: [] },
      listeners: [{ ...listener, listen: `127.0.0.1:${await freePort()}` }],
    });
    t.teardown(async () => {
      if (g.child.exitCode !== null) return;
      for (const c of childPids(g.child.pid!))
        try {
          process.kill(c, 'SIGKILL');
        } catch {
          /* gone */
        }
      g.child.kill('SIGKILL');
      await g.exited;
    });
    await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 20_000, 'ready');
    t.equal(g.child.exitCode, null, g.stderr());
    t.match(
      g.stdout(),
      /"reason":"admin.separateProcess: false"[^\n]*"msg":"running as one process"/,
      'the default process model: one process',
    );
    const base = `http://127.0.0.1:${adminPort}`;
    t.equal(
      (await request(base, 'GET', '/readyz', { token: null, headers: { host: 'ipgate-admin.ipgate.svc:9901' } })).status,
      200,
      'a listed name',
    );
    t.equal((await request(base, 'GET', '/readyz', { token: null, headers: { host: 'evil.example' } })).status, 421, 'any other name');
    for (let i = 0; i < 3; i++) t.equal((await request(base, 'GET', '/v1/allowlists', { token: 'wrong-token-0123456789' })).status, 403);
    const m = await request(base, 'GET', '/metrics', { token: null });
    t.match(m.text, /^ipgate_admin_auth_failures_total\{reason="invalid"\} 3$/m, 'counted once, by the primary');
    t.equal(logLines(g.stdout()).filter((l) => String(l.msg).startsWith('admin API: wrong token')).length, 1, 'one line for three');
  },
);
