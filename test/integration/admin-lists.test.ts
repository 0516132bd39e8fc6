/**
 * Lists as the admin API manages them, over real sockets: deny entries decide (check, explain,
 * the TCP and HTTP data paths, the access log and ipgate_denied_total say which entry); adding a
 * CIDR that is already listed is refused unless ?replace=true; lists are created and deleted live
 * (deletion refused while a listener uses the list); lists named as trustedSources /
 * trustedProxies change who is trusted without a restart.
 */
import fs from 'node:fs';
import t from 'tap';
import { startAdminGate } from '../helpers/admin-api';
import { countingBackend } from '../helpers/http';
import { closed, connect, readAll, readLine, waitFor } from '../helpers/net';
import { tcpEcho } from '../helpers/echo';

async function httpStatus(port: number, from: string, headers = ''): Promise<number> {
  const s = await connect({ port, localAddress: from });
  s.write(`GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n${headers}\r\n`);
  const text = (await readAll(s)).toString();
  return Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1] ?? 0);
}

/** Whether a TCP client from `from` gets through (the echo line) or is closed without a byte. */
async function tcpAdmitted(port: number, from: string, first?: string): Promise<boolean> {
  const s = await connect({ port, localAddress: from });
  if (first !== undefined) s.write(first);
  const got = await Promise.race([
    readLine(s).then(
      () => true,
      () => false,
    ),
    closed(s).then(() => false),
  ]);
  s.destroy();
  return got;
}

t.test('deny entries: check, explain, TCP and HTTP decisions, access log and the denied_total reason', async (t) => {
  const echo = await tcpEcho(t);
  const web = await countingBackend();
  t.teardown(() => web.close());
  const g = await startAdminGate(t, {
    logging: { denialSummaryIntervalMs: 60_000 },
    allowlists: { main: ['127.0.0.0/8', { cidr: '127.0.0.66/32', action: 'deny', comment: 'compromised' }] },
    listeners: [
      { name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${echo}`], outboundProxyProtocol: 'v1' },
      { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${web.port}`] },
    ],
  });
  const got = await g.api('GET', '/v1/allowlists/main');
  t.same(
    got.json.entries,
    [{ cidr: '127.0.0.0/8' }, { cidr: '127.0.0.66/32', action: 'deny', comment: 'compromised' }],
    'the deny entry as stored (allow stays implicit)',
  );
  t.equal(got.json.source, 'store');

  const denied = await g.api('GET', '/v1/allowlists/main/check?ip=127.0.0.66');
  t.match(
    denied.json,
    { allowed: false, reason: 'denied_by_entry', entry: { cidr: '127.0.0.66/32', action: 'deny' }, index: 1 },
    'check names the deny entry',
  );
  const allowed = await g.api('GET', '/v1/allowlists/main/check?ip=127.0.0.65');
  t.match(allowed.json, { allowed: true, reason: null, entry: { cidr: '127.0.0.0/8' } });
  const outside = await g.api('GET', '/v1/allowlists/main/check?ip=192.0.2.1');
  t.match(outside.json, { allowed: false, reason: 'not_allowlisted', entry: null, index: -1 });
  const ex = await g.api('POST', '/v1/explain', { body: { listener: 'tcp', peer: '127.0.0.66' } });
  t.match(
    ex.json,
    { decision: 'deny', reason: 'denied_by_entry', entry: { cidr: '127.0.0.66/32', action: 'deny', comment: 'compromised' } },
    'explain names the deny entry',
  );
  const exOk = await g.api('POST', '/v1/explain', { body: { listener: 'tcp', peer: '127.0.0.65' } });
  t.match(exOk.json, { decision: 'allow', entry: { cidr: '127.0.0.0/8', action: 'allow' } });

  t.equal(await tcpAdmitted(g.port('tcp'), '127.0.0.65'), true, 'TCP: allowed by the /8');
  t.equal(await tcpAdmitted(g.port('tcp'), '127.0.0.66'), false, 'TCP: refused by the deny /32');
  t.equal(await httpStatus(g.port('web'), '127.0.0.65'), 200, 'HTTP: 200 from the /8');
  t.equal(await httpStatus(g.port('web'), '127.0.0.66'), 403, 'HTTP: 403 for the deny /32');

  const tcp = g.app.listeners.find((l) => l.name === 'tcp')!;
  const webL = g.app.listeners.find((l) => l.name === 'web')!;
  await waitFor(() => tcp.stats.denied.get('denied_by_entry') === 1, 5000, 'TCP denial counted');
  t.equal(tcp.stats.denied.get('denied_by_entry'), 1, 'ipgate_denied_total{reason="denied_by_entry"} on the TCP listener');
  t.equal(tcp.stats.denied.get('not_allowlisted') ?? 0, 0, 'not counted as not_allowlisted');
  t.equal(webL.stats.denied.get('denied_by_entry'), 1, 'and on the HTTP listener');
  await waitFor(() => g.logs.lines.filter((l) => l.msg === 'access' && l.reason === 'denied_by_entry').length >= 2, 5000, 'access lines');
  const lines = g.logs.lines.filter((l) => l.msg === 'access' && l.reason === 'denied_by_entry');
  t.match(
    lines.find((l) => l.kind === 'tcp'),
    { decision: 'deny', client: '127.0.0.66', entry: '127.0.0.66/32' },
    'TCP access line names the deny entry',
  );
  t.match(
    lines.find((l) => l.kind === 'http'),
    { decision: 'deny', client: '127.0.0.66', entry: '127.0.0.66/32', status: 403 },
    'HTTP access line names it',
  );
  // With the access log on, each denial is its own line at info, up to logging.deniedLinesPerSecond
  // (docs/architecture.md, the access log), and no summary line repeats them.
  t.same(
    lines.map((l) => l.level),
    ['info', 'info'],
    'both denial lines at info',
  );
  t.equal(
    g.logs.lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('denied 127.0.0.66')).length,
    0,
    'no summary line beside them',
  );
  const metrics = await g.api('GET', '/metrics');
  t.match(metrics.text, /ipgate_denied_total\{[^}]*reason="denied_by_entry"[^}]*\} 1/, '/metrics carries the reason');
});

t.test('the same CIDR with two actions is refused, quoting it', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: ['10.0.0.0/8'] },
    listeners: [{ name: 'l', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const r = await g.api('PUT', '/v1/allowlists/main', {
    headers: { 'if-match': '*' },
    body: { entries: [{ cidr: '10.0.0.0/8' }, { cidr: '10.0.0.0/8', action: 'deny' }] },
  });
  t.equal(r.status, 400);
  t.match(r.json, { error: 'invalid_entries', field: 'entries[1].cidr', message: /"10\.0\.0\.0\/8" is listed twice/ });
  const bad = await g.api('POST', '/v1/allowlists/main/entries', { body: { entries: [{ cidr: '10.0.0.1/33' }] } });
  t.equal(bad.status, 400);
  t.match(bad.json, { field: 'entries[0].cidr', message: /"10\.0\.0\.1\/33"/ }, 'a CIDR refusal quotes the value');
  const act = await g.api('POST', '/v1/allowlists/main/entries', { body: { entries: [{ cidr: '10.1.0.0/16', action: 'block' }] } });
  t.equal(act.status, 400);
  t.match(act.json, { field: 'entries[0].action' });
});

t.test('POST of a CIDR already listed: 409 entry_exists quoting both, unless ?replace=true', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: [{ cidr: '10.0.0.0/8', comment: 'office', expiresAt: '2099-01-01T00:00:00Z' }] },
    listeners: [{ name: 'l', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const before = fs.readFileSync(g.file, 'utf8');
  const r = await g.api('POST', '/v1/allowlists/main/entries', { body: { entries: [{ cidr: '10.0.0.0/8', comment: 'new' }] } });
  t.equal(r.status, 409);
  t.equal(r.json.error, 'entry_exists');
  t.equal(r.json.field, 'entries[0].cidr');
  t.match(
    r.json.message,
    /"10\.0\.0\.0\/8" is already in allowlist "main" as \{"cidr":"10\.0\.0\.0\/8","comment":"office","expiresAt":"2099-01-01T00:00:00Z"\}/,
  );
  t.equal(fs.readFileSync(g.file, 'utf8'), before, 'the store is unchanged');
  const ok = await g.api('POST', '/v1/allowlists/main/entries?replace=true', {
    body: { entries: [{ cidr: '10.0.0.0/8', comment: 'new', action: 'deny' }] },
  });
  t.equal(ok.status, 200);
  t.same(ok.json.entries, [{ cidr: '10.0.0.0/8', action: 'deny', comment: 'new' }], 'replaced on request');
  const badQ = await g.api('POST', '/v1/allowlists/main/entries?replace=yes', { body: { entries: [{ cidr: '10.2.0.0/16' }] } });
  t.equal(badQ.status, 400, 'replace takes true or false');

  // A GET answer goes back to PUT as is (read-only fields ignored); a different name is refused.
  const cur = await g.api('GET', '/v1/allowlists/main');
  const back = await g.api('PUT', '/v1/allowlists/main', { headers: { 'if-match': cur.headers.etag! }, body: cur.json });
  t.equal(back.status, 200, back.text);
  t.same(back.json.entries, cur.json.entries, 'same entries');
  const renamed = await g.api('PUT', '/v1/allowlists/main', { headers: { 'if-match': '*' }, body: { ...cur.json, name: 'other' } });
  t.equal(renamed.status, 400);
  t.match(renamed.json, { field: 'name', message: /"other"/ });
});

t.test('lists created and deleted live; deletion refused while a listener uses the list', async (t) => {
  const web = await countingBackend();
  t.teardown(() => web.close());
  const g = await startAdminGate(t, {
    allowlists: { main: ['127.0.0.9/32'], proxies: [] },
    listeners: [
      {
        name: 'web',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [`127.0.0.1:${web.port}`],
        http: { trustedProxies: 'proxies' },
      },
    ],
  });
  const c = await g.api('POST', '/v1/allowlists', { body: { name: 'extra', entries: [{ cidr: '192.0.2.0/24', action: 'deny' }] } });
  t.equal(c.status, 201);
  t.match(c.json, { name: 'extra', source: 'store', entries: [{ cidr: '192.0.2.0/24', action: 'deny' }] });
  t.equal(c.headers.location, '/v1/allowlists/extra');
  t.equal(g.app.lists.get('extra').version, c.json.version, 'in force');
  const dup = await g.api('POST', '/v1/allowlists', { body: { name: 'extra' } });
  t.equal(dup.status, 409);
  t.equal(dup.json.error, 'list_exists');
  const bad = await g.api('POST', '/v1/allowlists', { body: { name: 'no/slash' } });
  t.equal(bad.status, 400);
  t.match(bad.json, { field: 'name', message: /"no\/slash"/ }, 'the bad name quoted');
  const cfg = await g.api('POST', '/v1/allowlists', { body: { name: 'x', source: 'config' } });
  t.equal(cfg.status, 400, 'a config list is not created through the API');

  for (const [name, field] of [
    ['main', 'listeners[0] (web).allowlist'],
    ['proxies', 'listeners[0] (web).http.trustedProxies'],
  ] as const) {
    const d = await g.api('DELETE', `/v1/allowlists/${name}`);
    t.equal(d.status, 409, `${name} is in use`);
    t.equal(d.json.error, 'list_in_use');
    t.ok(d.json.message.includes(field), `the message names ${field}: ${d.json.message}`);
  }
  const del = await g.api('DELETE', '/v1/allowlists/extra');
  t.equal(del.status, 204);
  t.equal((await g.api('GET', '/v1/allowlists/extra')).status, 404);
  t.notOk(JSON.parse(fs.readFileSync(g.file, 'utf8')).lists.extra, 'gone from the store');
  const audit = await g.api('GET', '/v1/audit?limit=10');
  t.ok(
    audit.json.records.some((r: { action: string; list: string }) => r.action === 'create' && r.list === 'extra') &&
      audit.json.records.some((r: { action: string; list: string }) => r.action === 'delete' && r.list === 'extra'),
    'create and delete audited',
  );

  // trustedProxies named a list: 127.0.0.2 speaks for 127.0.0.9 only once it is in that list.
  const xff = 'X-Forwarded-For: 127.0.0.9\r\n';
  t.equal(await httpStatus(g.port('web'), '127.0.0.2', xff), 403, 'not yet a trusted proxy: the peer itself is the client');
  const add = await g.api('POST', '/v1/allowlists/proxies/entries', { body: { entries: [{ cidr: '127.0.0.2' }] } });
  t.equal(add.status, 200);
  t.equal(await httpStatus(g.port('web'), '127.0.0.2', xff), 200, 'trusted now, without a restart: X-Forwarded-For names the client');
});

t.test('trustedSources naming a list: a PROXY header is believed once the peer is in it', async (t) => {
  const echo = await tcpEcho(t);
  const g = await startAdminGate(t, {
    allowlists: { main: ['192.0.2.7/32'], balancers: [] },
    listeners: [
      {
        name: 'tcp',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [`127.0.0.1:${echo}`],
        outboundProxyProtocol: 'v1',
        proxyProtocol: { mode: 'required', trustedSources: 'balancers' },
      },
    ],
  });
  const header = 'PROXY TCP4 192.0.2.7 127.0.0.1 5555 80\r\n';
  t.equal(await tcpAdmitted(g.port('tcp'), '127.0.0.3', header), false, 'untrusted peer: closed');
  const add = await g.api('POST', '/v1/allowlists/balancers/entries', { body: { entries: [{ cidr: '127.0.0.3' }] } });
  t.equal(add.status, 200);
  t.equal(await tcpAdmitted(g.port('tcp'), '127.0.0.3', header), true, "trusted now: the header's client 192.0.2.7 is admitted");
  const ex = await g.api('POST', '/v1/explain', { body: { listener: 'tcp', peer: '127.0.0.3', proxyHeader: header } });
  t.match(ex.json, { peerTrusted: true, client: '192.0.2.7', decision: 'allow' }, 'explain reads the same live list');
});
