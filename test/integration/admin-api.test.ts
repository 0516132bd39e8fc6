/**
 * The admin API over real HTTP: every route, and every 4xx path leaving the store file
 * byte-identical (and the enforced list unchanged).
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startAdminGate, TOKEN, type RequestOptions } from '../helpers/admin-api';
import { tmpDir } from '../helpers/ipgate';

const listener = (allowlist = 'main') => ({ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist, upstreams: ['127.0.0.1:9'] });

t.test("health and readiness answer without a token; readiness reports each list's applied version", async (t) => {
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8'] }, listeners: [listener()] });
  const h = await g.api('GET', '/healthz', { token: null });
  t.equal(h.status, 200);
  t.same(h.json, { status: 'ok' });
  const r = await g.api('GET', '/readyz', { token: null });
  t.equal(r.status, 200);
  t.equal(r.json.status, 'ready');
  t.match(r.json.checks, [
    { name: 'listeners', status: 'ok' },
    { name: 'store', status: 'ok' },
  ]);
  t.equal(r.json.lists.main.appliedVersion, r.json.lists.main.version, 'applied = stored');
  t.equal(r.json.lists.main.entries, 1);
  const spec = await g.api('GET', '/openapi.json', { token: null });
  t.equal(spec.status, 200);
  t.equal(spec.json.openapi, '3.0.3');
  for (const p of [
    '/v1/allowlists',
    '/v1/allowlists/{name}',
    '/v1/allowlists/{name}/entries',
    '/v1/allowlists/{name}/entries/{cidr}',
    '/v1/allowlists/{name}/check',
    '/v1/audit',
    '/readyz',
  ]) {
    t.ok(spec.json.paths[p], `OpenAPI documents ${p}`);
  }
});

t.test('read, replace, add, remove, check: each write is in the file, enforced and audited', async (t) => {
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8'], other: [] }, listeners: [listener()] });
  const ls = await g.api('GET', '/v1/allowlists');
  t.equal(ls.status, 200);
  t.same(
    ls.json.allowlists.map((l: { name: string }) => l.name),
    ['main', 'other'],
  );

  const get = await g.api('GET', '/v1/allowlists/main');
  t.equal(get.status, 200);
  t.same(get.json.entries, [{ cidr: '10.0.0.0/8' }]);
  t.equal(get.headers.etag, `"${get.json.version}"`, 'ETag is the version');

  const put = await g.api('PUT', '/v1/allowlists/main', {
    headers: { 'if-match': get.headers.etag! },
    body: { entries: [{ cidr: '192.0.2.0/24', comment: 'docs' }, { cidr: '2001:DB8::/32' }, { cidr: '198.51.100.7' }] },
  });
  t.equal(put.status, 200, put.text);
  t.same(
    put.json.entries,
    [{ cidr: '192.0.2.0/24', comment: 'docs' }, { cidr: '2001:db8::/32' }, { cidr: '198.51.100.7/32' }],
    'canonical CIDRs',
  );
  t.not(put.json.version, get.json.version);
  t.equal(put.headers.etag, `"${put.json.version}"`);
  const doc = JSON.parse(fs.readFileSync(g.file, 'utf8'));
  t.same(doc.lists.main.entries, put.json.entries, 'the file holds the acknowledged list');
  t.equal(g.app.lists.get('main').version, put.json.version, 'the new matcher is in force');

  // A CIDR already listed is replaced only on request (?replace=true; without: 409 entry_exists, admin-lists.test.ts).
  const add = await g.api('POST', '/v1/allowlists/main/entries?replace=true', {
    body: {
      entries: [
        { cidr: '203.0.113.0/24', expiresAt: '2999-01-01T00:00:00Z' },
        { cidr: '192.0.2.0/24', comment: 'docs v2' },
      ],
    },
  });
  t.equal(add.status, 200, add.text);
  t.same(
    add.json.entries.map((e: { cidr: string }) => e.cidr),
    ['192.0.2.0/24', '2001:db8::/32', '198.51.100.7/32', '203.0.113.0/24'],
  );
  t.equal(add.json.entries[0].comment, 'docs v2', 'an entry with a listed CIDR replaces it');

  const chk = await g.api('GET', '/v1/allowlists/main/check?ip=192.0.2.55');
  t.same(chk.json, {
    list: 'main',
    ip: '192.0.2.55',
    allowed: true,
    version: add.json.version,
    index: 0,
    entry: { cidr: '192.0.2.0/24', comment: 'docs v2' },
    reason: null,
  });
  const mapped = await g.api('GET', `/v1/allowlists/main/check?ip=${encodeURIComponent('::ffff:198.51.100.7')}`);
  t.equal(mapped.json.ip, '198.51.100.7', 'mapped address checked as IPv4');
  t.equal(mapped.json.allowed, true);
  const no = await g.api('GET', '/v1/allowlists/main/check?ip=10.1.2.3');
  t.same(no.json, {
    list: 'main',
    ip: '10.1.2.3',
    allowed: false,
    version: add.json.version,
    index: -1,
    entry: null,
    reason: 'not_allowlisted',
  });

  const del = await g.api('DELETE', `/v1/allowlists/main/entries/${encodeURIComponent('2001:db8::/32')}`);
  t.equal(del.status, 200, del.text);
  const del4 = await g.api('DELETE', '/v1/allowlists/main/entries/198.51.100.7%2F32', { headers: { 'if-match': del.headers.etag! } });
  t.equal(del4.status, 200, del4.text);
  t.same(
    del4.json.entries.map((e: { cidr: string }) => e.cidr),
    ['192.0.2.0/24', '203.0.113.0/24'],
  );

  const audit = await g.api('GET', '/v1/audit');
  t.equal(audit.status, 200);
  const recs = audit.json.records;
  t.same(
    recs.map((r: { action: string }) => r.action),
    ['remove', 'remove', 'add', 'replace'],
    'newest first',
  );
  t.match(recs[3], {
    who: 'admin',
    list: 'main',
    fromVersion: get.json.version,
    version: put.json.version,
    added: [{ cidr: '192.0.2.0/24' }, { cidr: '2001:db8::/32' }, { cidr: '198.51.100.7/32' }],
    removed: [{ cidr: '10.0.0.0/8' }],
  });
  t.match(recs[2], { added: [{ cidr: '203.0.113.0/24' }], changed: [{ before: { comment: 'docs' }, after: { comment: 'docs v2' } }] });
  t.same(recs[0].removed, [{ cidr: '198.51.100.7/32' }]);
  t.equal((await g.api('GET', '/v1/audit?list=other')).json.records.length, 0);
  t.equal((await g.api('GET', '/v1/audit?limit=1')).json.records.length, 1);
  const line = g.logs.find((l) => l.msg === 'allowlist changed' && l.action === 'replace');
  t.match(
    line,
    { who: 'admin', list: 'main', version: put.json.version, fromVersion: get.json.version },
    'one structured audit log line per change',
  );

  // PUT with If-Match: * overwrites whatever version is there.
  const star = await g.api('PUT', '/v1/allowlists/main', { headers: { 'if-match': '*' }, body: { entries: [] } });
  t.equal(star.status, 200);
  t.same(star.json.entries, []);
});

t.test('named tokens: the audit "who" is the token\'s name', async (t) => {
  const dir = tmpDir('ipgate-admin-');
  const tokensFile = path.join(dir, 'tokens');
  fs.writeFileSync(tokensFile, '# operators\nalice:alice-token-0123456789\nci-bot:ci-token-0123456789abc\n');
  const g = await startAdminGate(t, { allowlists: { main: [] }, listeners: [listener()] }, { dir });
  await g.app.shutdown(0);
  const g2 = await startAdminGate(
    t,
    { allowlists: { main: [] }, listeners: [listener()], admin: { listen: '127.0.0.1:0', tokenFile: path.join(dir, 'token'), tokensFile } },
    { dir },
  );
  const r = await g2.api('POST', '/v1/allowlists/main/entries', {
    token: 'alice-token-0123456789',
    body: { entries: [{ cidr: '10.0.0.0/8' }] },
  });
  t.equal(r.status, 200);
  const r2 = await g2.api('POST', '/v1/allowlists/main/entries', {
    token: 'ci-token-0123456789abc',
    body: { entries: [{ cidr: '10.1.0.0/16' }] },
  });
  t.equal(r2.status, 200);
  const a = await g2.api('GET', '/v1/audit');
  t.same(
    a.json.records.map((x: { who: string }) => x.who),
    ['ci-bot', 'alice'],
  );
  t.equal((await g2.api('GET', '/v1/allowlists')).status, 200, 'the single token (named admin) still works');
});

t.test('every 4xx leaves the store file byte-identical and the enforced list unchanged', async (t) => {
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8', '2001:db8::/32'] }, listeners: [listener()] });
  const first = await g.api('GET', '/v1/allowlists/main');
  // Make the version move once so a stale ETag exists.
  const stale = first.headers.etag!;
  const cur = await g.api('PUT', '/v1/allowlists/main', {
    headers: { 'if-match': stale },
    body: { entries: [{ cidr: '10.0.0.0/8' }, { cidr: '2001:db8::/32' }] },
  });
  t.equal(cur.status, 200);
  const etag = cur.headers.etag!;
  const big = {
    entries: Array.from({ length: 40_000 }, (_, i) => ({ cidr: `10.${(i >> 8) & 255}.${i & 255}.0/24`, comment: 'x'.repeat(10) })),
  };

  const rows: Array<{ what: string; method: string; url: string; opts?: RequestOptions; status: number; error: string; field?: string }> = [
    {
      what: 'missing token',
      method: 'GET',
      url: '/v1/allowlists',
      opts: { token: null },
      status: 401,
      error: 'unauthorized',
      field: 'Authorization',
    },
    {
      what: 'missing token on a write',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { token: null, headers: { 'if-match': etag }, body: { entries: [] } },
      status: 401,
      error: 'unauthorized',
    },
    {
      what: 'not a bearer token',
      method: 'GET',
      url: '/v1/allowlists',
      opts: { headers: { authorization: `Basic ${TOKEN}` } },
      status: 401,
      error: 'unauthorized',
    },
    {
      what: 'wrong token',
      method: 'DELETE',
      url: '/v1/allowlists/main/entries/10.0.0.0%2F8',
      opts: { token: 'wrong-token-0123456789abcdef' },
      status: 403,
      error: 'forbidden',
    },
    {
      what: 'wrong token, one character off',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { token: `${TOKEN.slice(0, -1)}x`, body: { entries: [{ cidr: '1.2.3.4' }] } },
      status: 403,
      error: 'forbidden',
    },
    { what: 'unknown list (GET)', method: 'GET', url: '/v1/allowlists/nope', status: 404, error: 'unknown_list' },
    {
      what: 'unknown list (PUT)',
      method: 'PUT',
      url: '/v1/allowlists/nope',
      opts: { headers: { 'if-match': '*' }, body: { entries: [] } },
      status: 404,
      error: 'unknown_list',
    },
    {
      what: 'unknown list (POST)',
      method: 'POST',
      url: '/v1/allowlists/nope/entries',
      opts: { body: { entries: [{ cidr: '1.2.3.4' }] } },
      status: 404,
      error: 'unknown_list',
    },
    {
      what: 'unknown list (DELETE)',
      method: 'DELETE',
      url: '/v1/allowlists/nope/entries/10.0.0.0%2F8',
      status: 404,
      error: 'unknown_list',
    },
    { what: 'unknown list (check)', method: 'GET', url: '/v1/allowlists/nope/check?ip=1.2.3.4', status: 404, error: 'unknown_list' },
    {
      what: 'missing If-Match',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { body: { entries: [] } },
      status: 428,
      error: 'precondition_required',
      field: 'If-Match',
    },
    {
      what: 'stale If-Match (PUT)',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': stale }, body: { entries: [] } },
      status: 412,
      error: 'precondition_failed',
    },
    {
      what: 'stale If-Match (POST)',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { headers: { 'if-match': stale }, body: { entries: [{ cidr: '1.2.3.4' }] } },
      status: 412,
      error: 'precondition_failed',
    },
    {
      what: 'stale If-Match (DELETE)',
      method: 'DELETE',
      url: '/v1/allowlists/main/entries/10.0.0.0%2F8',
      opts: { headers: { 'if-match': stale } },
      status: 412,
      error: 'precondition_failed',
    },
    {
      what: 'weak If-Match never matches',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': `W/${etag}` }, body: { entries: [] } },
      status: 412,
      error: 'precondition_failed',
    },
    {
      what: 'bad CIDR',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag }, body: { entries: [{ cidr: '10.0.0.0/8' }, { cidr: '300.1.2.3/8' }] } },
      status: 400,
      error: 'invalid_entry',
      field: 'entries[1].cidr',
    },
    {
      what: 'host bits set',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { body: { entries: [{ cidr: '10.0.0.1/8' }] } },
      status: 400,
      error: 'invalid_entry',
      field: 'entries[0].cidr',
    },
    {
      what: 'prefix out of range',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { body: { entries: [{ cidr: '2001:db8::/129' }] } },
      status: 400,
      error: 'invalid_entry',
      field: 'entries[0].cidr',
    },
    {
      what: 'bad expiresAt',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { body: { entries: [{ cidr: '1.2.3.4', expiresAt: '2030-01-01' }] } },
      status: 400,
      error: 'invalid_entry',
      field: 'entries[0].expiresAt',
    },
    {
      what: 'duplicate CIDR',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag }, body: { entries: [{ cidr: '10.0.0.0/8' }, { cidr: '10.0.0.0/8' }] } },
      status: 400,
      error: 'invalid_entries',
      field: 'entries[1].cidr',
    },
    {
      what: 'bad CIDR in the DELETE path',
      method: 'DELETE',
      url: '/v1/allowlists/main/entries/10.0.0.1%2F8',
      status: 400,
      error: 'invalid_entry',
      field: 'cidr',
    },
    {
      what: 'entry not listed',
      method: 'DELETE',
      url: '/v1/allowlists/main/entries/192.0.2.0%2F24',
      status: 404,
      error: 'entry_not_found',
      field: 'cidr',
    },
    {
      what: 'unknown field in an entry',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { body: { entries: [{ cidr: '1.2.3.4', expires_at: '2030-01-01T00:00:00Z' }] } },
      status: 400,
      error: 'invalid_request',
      field: 'entries[0].expires_at',
    },
    {
      what: 'unknown top-level field',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag }, body: { entries: [], force: true } },
      status: 400,
      error: 'invalid_request',
      field: 'force',
    },
    {
      what: 'wrong type: cidr a number',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag }, body: { entries: [{ cidr: 167772160 }] } },
      status: 400,
      error: 'invalid_request',
      field: 'entries[0].cidr',
    },
    {
      what: 'wrong type: entries an object',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { body: { entries: { cidr: '1.2.3.4' } } },
      status: 400,
      error: 'invalid_request',
      field: 'entries',
    },
    {
      what: 'wrong type: comment a number',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { body: { entries: [{ cidr: '1.2.3.4', comment: 5 }] } },
      status: 400,
      error: 'invalid_request',
      field: 'entries[0].comment',
    },
    {
      what: 'missing entries',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag }, body: {} },
      status: 400,
      error: 'invalid_request',
      field: 'entries',
    },
    {
      what: 'empty entries on POST',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      opts: { body: { entries: [] } },
      status: 400,
      error: 'invalid_request',
      field: 'entries',
    },
    {
      what: 'invalid JSON',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag }, raw: '{"entries": [' },
      status: 400,
      error: 'invalid_json',
      field: 'body',
    },
    {
      what: 'not JSON',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag, 'content-type': 'text/plain' }, raw: '10.0.0.0/8' },
      status: 415,
      error: 'unsupported_media_type',
    },
    {
      what: 'oversized body',
      method: 'PUT',
      url: '/v1/allowlists/main',
      opts: { headers: { 'if-match': etag }, body: big },
      status: 413,
      error: 'body_too_large',
    },
    {
      what: 'bad address to check',
      method: 'GET',
      url: '/v1/allowlists/main/check?ip=10.0.0.256',
      status: 400,
      error: 'invalid_request',
      field: 'ip',
    },
    { what: 'check without ip', method: 'GET', url: '/v1/allowlists/main/check', status: 400, error: 'invalid_request', field: 'ip' },
    {
      what: 'check with an unknown parameter',
      method: 'GET',
      url: '/v1/allowlists/main/check?ip=1.2.3.4&x=1',
      status: 400,
      error: 'invalid_request',
      field: 'x',
    },
    { what: 'audit limit not a number', method: 'GET', url: '/v1/audit?limit=ten', status: 400, error: 'invalid_request', field: 'limit' },
    { what: 'unknown route', method: 'GET', url: '/v1/nothing', status: 404, error: 'not_found' },
  ];
  const before = fs.readFileSync(g.file);
  const version = g.app.lists.get('main').version;
  for (const row of rows) {
    const r = await g.api(row.method, row.url, row.opts);
    t.equal(r.status, row.status, `${row.what}: ${row.status} (${r.text.slice(0, 200)})`);
    t.equal(r.json?.error, row.error, `${row.what}: error ${row.error}`);
    t.type(r.json?.message, 'string', `${row.what}: a message`);
    if (row.field !== undefined) t.equal(r.json?.field, row.field, `${row.what}: field ${row.field}`);
    if (row.status === 401) t.match(r.headers['www-authenticate'], /^Bearer/, `${row.what}: WWW-Authenticate`);
    t.ok(fs.readFileSync(g.file).equals(before), `${row.what}: store file byte-identical`);
    t.equal(g.app.lists.get('main').version, version, `${row.what}: enforced list unchanged`);
  }
  t.equal((await g.api('GET', '/v1/audit')).json.records.length, 1, 'only the one successful write was audited');
});
