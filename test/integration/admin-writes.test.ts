/**
 * Concurrent writes through the admin API over a real socket: edits that sent no If-Match never
 * fail because another edit of this process won the race (they asked for no precondition); edits
 * that did send one still get 412 when it is stale; a writer outside the process that keeps winning
 * ends in a 409 that says so, after bounded retries.
 */
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import t from 'tap';
import { buildAdminApp } from '../../src/admin/admin-app';
import { startAdminServer } from '../../src/admin/admin-server';
import { loadTokens } from '../../src/admin/auth';
import type { AllowEntry } from '../../src/allowlist/entry';
import { AuditLog } from '../../src/audit/audit-log';
import { AllowlistService } from '../../src/store/allowlist-service';
import { LiveLists } from '../../src/store/live-lists';
import { MemoryStore } from '../../src/store/memory-store';
import type { StoredList } from '../../src/store/store';
import { request, startAdminGate, TOKEN } from '../helpers/admin-api';
import { childPids, spawnIpgate, tmpDir } from '../helpers/ipgate';
import { freePort, waitFor } from '../helpers/net';

const listener = { name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] };

t.test('20 concurrent POSTs without If-Match all succeed and every entry is in the file and in force', async (t) => {
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8'] }, listeners: [listener] });
  const n = 20;
  const cidrs = Array.from({ length: n }, (_, i) => `192.0.2.${i + 1}/32`);
  const replies = await Promise.all(cidrs.map((cidr) => g.api('POST', '/v1/allowlists/main/entries', { body: { entries: [{ cidr }] } })));
  t.same(
    replies.map((r) => r.status),
    cidrs.map(() => 200),
    replies
      .filter((r) => r.status !== 200)
      .map((r) => r.text)
      .join('\n'),
  );
  const versions = new Set(replies.map((r) => r.json.version as string));
  t.equal(versions.size, n, 'each write made its own version');
  const got = await g.api('GET', '/v1/allowlists/main');
  t.same(new Set(got.json.entries.map((e: AllowEntry) => e.cidr)), new Set(['10.0.0.0/8', ...cidrs]), 'every entry present');
  const doc = JSON.parse(fs.readFileSync(g.file, 'utf8')) as { lists: Record<string, { entries: AllowEntry[] }> };
  t.equal(doc.lists.main!.entries.length, n + 1, 'the store file holds all of them');
  t.equal(g.app.lists.get('main').version, got.json.version, 'the last version is in force');
  const audit = await g.api('GET', '/v1/audit?limit=100');
  t.equal(audit.json.records.filter((r: { action: string }) => r.action === 'add').length, n, 'one audit record per write');
});

t.test('concurrent DELETEs without If-Match all succeed; with a stale If-Match a write is still 412', async (t) => {
  const cidrs = Array.from({ length: 12 }, (_, i) => `198.51.100.${i}/32`);
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8', ...cidrs] }, listeners: [listener] });
  const first = await g.api('GET', '/v1/allowlists/main');
  const replies = await Promise.all(cidrs.map((c) => g.api('DELETE', `/v1/allowlists/main/entries/${encodeURIComponent(c)}`)));
  t.same(
    replies.map((r) => r.status),
    cidrs.map(() => 200),
    replies
      .filter((r) => r.status !== 200)
      .map((r) => r.text)
      .join('\n'),
  );
  const got = await g.api('GET', '/v1/allowlists/main');
  t.same(got.json.entries, [{ cidr: '10.0.0.0/8' }]);
  const before = fs.readFileSync(g.file);
  const stale = await g.api('POST', '/v1/allowlists/main/entries', {
    headers: { 'if-match': first.headers.etag! },
    body: { entries: [{ cidr: '203.0.113.1' }] },
  });
  t.equal(stale.status, 412, 'the precondition the client sent is honoured');
  t.equal(stale.json.error, 'precondition_failed');
  t.same(fs.readFileSync(g.file), before, 'the 412 changed nothing');
});

/** A store another writer always beats: every write finds the list moved on. */
class AlwaysBeaten extends MemoryStore {
  writes = 0;
  override async write(name: string, entries: readonly AllowEntry[], expectedVersion: string): Promise<StoredList> {
    this.writes++;
    await this.replaceExternally(name, [...(this.current().lists.get(name)?.entries ?? [])], 'replica');
    return super.write(name, entries, expectedVersion);
  }
}

t.test('a writer outside the process that wins every race: 409 after bounded retries, nothing written', async (t) => {
  const logger = pino({ level: 'silent' });
  const store = new AlwaysBeaten();
  const service = new AllowlistService(store, new LiveLists(), new AuditLog(logger), logger);
  await service.start(new Map([['main', [{ cidr: '10.0.0.0/8' }]]]));
  const tokens = loadTokens({ tokenFile: null, tokensFile: null, tokenEnv: 'T' }, { T: TOKEN });
  const app = await buildAdminApp({
    service,
    tokens,
    logger,
    bodyLimit: 1 << 20,
    version: 'test',
    readiness: () => ({ ready: true, checks: [], lists: {} }),
  });
  const server = await startAdminServer(app, '127.0.0.1:0');
  t.teardown(() => server.close());
  const r = await request(`http://127.0.0.1:${server.address.port}`, 'POST', '/v1/allowlists/main/entries', {
    body: { entries: [{ cidr: '192.0.2.1' }] },
  });
  t.equal(r.status, 409, r.text);
  t.equal(r.json.error, 'conflict');
  t.match(r.json.message, /kept changing outside this process .*6 attempts.*retry/);
  t.equal(store.writes, 6, 'one attempt and five retries');
  t.same(service.get('main').entries, [{ cidr: '10.0.0.0/8' }], 'the edit was never written');
});

t.test('the same through the compiled binary in its default process model (the admin API in a primary, a file store)', async (t) => {
  const dir = tmpDir('ipgate-admin-writes-');
  fs.writeFileSync(path.join(dir, 'token'), `${TOKEN}\n`);
  const adminPort = await freePort();
  const g = spawnIpgate(['run'], {
    logging: { level: 'info', bufferBytes: 0 },
    store: { type: 'file', path: path.join(dir, 'allowlists.json') },
    admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token') },
    allowlists: { main: ['10.0.0.0/8'] },
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
  const base = `http://127.0.0.1:${adminPort}`;
  const cidrs = Array.from({ length: 12 }, (_, i) => `192.0.2.${i + 1}/32`);
  const replies = await Promise.all(
    cidrs.map((cidr) => request(base, 'POST', '/v1/allowlists/main/entries', { body: { entries: [{ cidr }] } })),
  );
  t.same(
    replies.map((r) => r.status),
    cidrs.map(() => 200),
    replies
      .filter((r) => r.status !== 200)
      .map((r) => r.text)
      .join('\n'),
  );
  const got = await request(base, 'GET', '/v1/allowlists/main');
  t.equal(got.json.entries.length, 13, 'all 12 entries added');
});
