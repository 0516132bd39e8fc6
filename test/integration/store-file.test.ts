/**
 * The file store with a running ipgate: first start seeds the file from the config; external edits
 * are applied (and revoke); corrupt or invalid content is refused with a clear log line while the
 * last good list stays in force; a corrupt file at boot stops the start and is left untouched.
 */
import fs from 'node:fs';
import type net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createTcpEcho } from '../../src/echo/echo-server';
import { DOCUMENT_FORMAT, parseDocument } from '../../src/store/document';
import { StoreLoadError } from '../../src/store/store';
import { startAdminGate, type AdminGate } from '../helpers/admin-api';
import { startIpgate, tmpDir } from '../helpers/ipgate';
import { closed, connect, readLine, waitFor } from '../helpers/net';

async function gate(t: Test, allow: unknown[], dir?: string, more: Record<string, unknown> = {}): Promise<AdminGate> {
  const server = createTcpEcho();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const echo = (server.address() as net.AddressInfo).port;
  return startAdminGate(
    t,
    {
      allowlists: { main: allow },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${echo}`],
          outboundProxyProtocol: 'v1',
        },
      ],
      ...more,
    },
    { ...(dir ? { dir } : {}), store: { pollIntervalMs: 200 } },
  );
}

const doc = (lists: Record<string, { revision: number; entries: unknown[] }>): string =>
  `${JSON.stringify({ format: DOCUMENT_FORMAT, lists }, null, 2)}\n`;

/** Replace the file as an editor does (write elsewhere, rename over). */
function editFile(file: string, text: string): void {
  const tmp = `${file}.edit`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

async function admitted(g: AdminGate, from: string): Promise<boolean> {
  const s = await connect({ port: g.port(), localAddress: from });
  try {
    await readLine(s, 3000);
    s.destroy();
    return true;
  } catch {
    return false;
  }
}

t.test("first start writes the config's lists to the file", async (t) => {
  const g = await gate(t, ['127.0.0.3/32', { cidr: '2001:db8::/32', comment: 'v6' }]);
  const parsed = parseDocument(fs.readFileSync(g.file, 'utf8'));
  t.ok(parsed.ok);
  if (!parsed.ok) return;
  t.same(parsed.lists.get('main')!.entries, [{ cidr: '127.0.0.3/32' }, { cidr: '2001:db8::/32', comment: 'v6' }]);
  t.equal(parsed.lists.get('main')!.version, g.app.lists.get('main').version, "the file's version is the applied one");
  t.same(fs.readdirSync(g.dir).sort(), ['allowlists.json', 'token'], 'no temp file left behind');
});

t.test('the file, once it exists, wins over the config; a list missing from it is added', async (t) => {
  const dir = tmpDir('ipgate-store-');
  const file = path.join(dir, 'allowlists.json');
  fs.writeFileSync(file, doc({ main: { revision: 4, entries: [{ cidr: '127.0.0.9/32' }] } }));
  const g = await gate(t, ['127.0.0.3/32'], dir, { allowlists: { main: ['127.0.0.3/32'], extra: ['10.0.0.0/8'] } });
  t.same(g.app.lists.entries('main'), [{ cidr: '127.0.0.9/32' }], 'main from the file');
  t.match(g.app.lists.get('main').version, /^4-/);
  t.same(g.app.lists.entries('extra'), [{ cidr: '10.0.0.0/8' }], 'extra seeded from the config');
  const parsed = parseDocument(fs.readFileSync(file, 'utf8'));
  t.ok(parsed.ok && parsed.lists.has('extra'), 'and written to the file');
  t.ok(await admitted(g, '127.0.0.9'));
  t.notOk(await admitted(g, '127.0.0.3'));
});

t.test('an external edit is applied, audited, and revokes what it removes', async (t) => {
  const g = await gate(t, ['127.0.0.3/32']);
  const s = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  await readLine(s);
  const before = g.app.lists.get('main').version;
  const sClosed = closed(s, 5000);
  const t0 = Date.now();
  // A hand edit that does not bump the revision still changes the version (content hash).
  editFile(g.file, doc({ main: { revision: 1, entries: [{ cidr: '127.0.0.4/32', comment: 'hand edit' }] } }));
  await waitFor(() => g.app.lists.get('main').version !== before, 5000, 'external edit applied');
  const ms = Date.now() - t0;
  t.pass(`applied ${ms} ms after the edit`);
  t.not(g.app.lists.get('main').version, before);
  await sClosed;
  t.pass("the removed client's stream was cut");
  t.ok(await admitted(g, '127.0.0.4'), 'the added client is admitted');
  const audit = await g.api('GET', '/v1/audit');
  t.match(audit.json.records[0], {
    who: 'file edit',
    action: 'external',
    added: [{ cidr: '127.0.0.4/32' }],
    removed: [{ cidr: '127.0.0.3/32' }],
  });
  const stale = await g.api('PUT', '/v1/allowlists/main', { headers: { 'if-match': `"${before}"` }, body: { entries: [] } });
  t.equal(stale.status, 412, 'the ETag read before the hand edit is stale');
  // An in-place write (truncate + write, no rename) is seen too.
  const v2 = g.app.lists.get('main').version;
  fs.writeFileSync(g.file, doc({ main: { revision: 9, entries: [{ cidr: '127.0.0.5/32' }] } }));
  await waitFor(() => g.app.lists.get('main').version !== v2, 5000, 'in-place edit applied');
  t.match(g.app.lists.get('main').version, /^9-/);
});

t.test('corrupt or invalid content is refused with a clear log line; the last good list stays', async (t) => {
  const g = await gate(t, ['127.0.0.3/32']);
  const good = g.app.lists.get('main').version;
  const s = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  await readLine(s);
  let cut = false;
  s.once('close', () => (cut = true));
  const cases: Array<[string, string, RegExp]> = [
    ['truncated JSON', '{"format": "ipgate.allowlists/v1", "lists": {"main": {"revi', /not valid JSON/],
    ['empty file', '', /not valid JSON/],
    ['host bits set', doc({ main: { revision: 2, entries: [{ cidr: '127.0.0.3/8' }] } }), /lists\.main\.entries\[0\]\.cidr/],
    ['unknown field', doc({ main: { revision: 2, entries: [{ cidr: '127.0.0.3/32', expires: 'soon' }] } }), /unknown field "expires"/],
    ['wrong format', JSON.stringify({ format: 'v0', lists: {} }), /format must be/],
    ['list dropped', doc({}), /main missing/],
  ];
  for (const [what, text, reason] of cases) {
    const n = g.logs.lines.length;
    editFile(g.file, text);
    await waitFor(
      () => g.logs.lines.slice(n).some((l) => l.msg === 'allowlist store file refused; the last good lists stay in force'),
      5000,
      `${what} refused`,
    );
    const line = g.logs.lines.slice(n).find((l) => l.msg === 'allowlist store file refused; the last good lists stay in force')!;
    t.match(line, { level: 'error', reason, path: g.file }, `${what}: one error line with the reason`);
    t.equal(g.app.lists.get('main').version, good, `${what}: the last good list stays in force`);
    t.ok((await admitted(g, '127.0.0.8')) === false && (await admitted(g, '127.0.0.3')), `${what}: decisions unchanged`);
  }
  t.equal(cut, false, 'the open stream was never disturbed');
  const ready = await g.api('GET', '/readyz', { token: null });
  t.equal(ready.status, 200, 'still ready: the last good list is in force');
  t.match(ready.json.checks[1], { name: 'store', status: 'warn', message: /refused/ });
  // Repeated polls of the same bad content do not repeat the log line.
  const count = g.logs.lines.filter((l) => l.msg === 'allowlist store file refused; the last good lists stay in force').length;
  await new Promise((r) => setTimeout(r, 500));
  t.equal(
    g.logs.lines.filter((l) => l.msg === 'allowlist store file refused; the last good lists stay in force').length,
    count,
    'logged once per distinct content',
  );
  // A valid edit after that is applied again.
  editFile(g.file, doc({ main: { revision: 5, entries: [{ cidr: '127.0.0.3/32' }, { cidr: '127.0.0.8/32' }] } }));
  await waitFor(() => g.app.lists.get('main').version !== good, 5000, 'valid edit applied');
  t.ok(await admitted(g, '127.0.0.8'));
  t.equal((await g.api('GET', '/readyz', { token: null })).json.checks[1].status, 'ok');
  s.destroy();
});

t.test('a write through the API replaces a refused file with the last good list plus the change', async (t) => {
  const g = await gate(t, ['127.0.0.3/32']);
  const v = g.app.lists.get('main').version;
  editFile(g.file, 'garbage');
  await waitFor(() => g.app.service.store.lastRefusal() !== null, 5000, 'refused');
  const r = await g.api('POST', '/v1/allowlists/main/entries', { body: { entries: [{ cidr: '127.0.0.4/32' }] } });
  t.equal(r.status, 200);
  t.not(r.json.version, v);
  const parsed = parseDocument(fs.readFileSync(g.file, 'utf8'));
  t.ok(parsed.ok && parsed.lists.get('main')!.version === r.json.version, 'the file is good again');
});

t.test('a corrupt file at boot stops the start and is never overwritten', async (t) => {
  const dir = tmpDir('ipgate-store-');
  const file = path.join(dir, 'allowlists.json');
  fs.writeFileSync(file, '{"format": "ipgate.allowlists/v1", "lists": {');
  fs.writeFileSync(path.join(dir, '.allowlists.json.tmp-123-1'), 'half a write');
  const err = await startIpgate({
    store: { type: 'file', path: file },
    allowlists: { main: ['127.0.0.3/32'] },
    listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  }).then(
    () => null,
    (e: unknown) => e,
  );
  t.type(err, StoreLoadError);
  t.match((err as Error).message, /allowlists\.json is refused: not valid JSON.*never overwrites it/);
  t.equal(fs.readFileSync(file, 'utf8'), '{"format": "ipgate.allowlists/v1", "lists": {', 'left untouched');
  t.same(fs.readdirSync(dir), ['allowlists.json'], 'the stale temp file of an interrupted write was removed');
});
