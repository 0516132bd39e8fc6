/**
 * `ipgate allowlist` against the admin API contract of issue 20 (deny entries, `source` and
 * `temporary`, `?replace=true` and 409 `entry_exists`, POST / DELETE of whole lists), served by a
 * small loopback server that records what the CLI sends. The real server's side of these lands
 * separately; admin-cli.test.ts runs the same commands against a real ipgate once it has them.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { allowlistMain, type Entry } from '../../src/cli/allowlist';
import { tmpDir } from '../helpers/ipgate';

const TOKEN = 'contract-token-0123456789';

interface Seen {
  method: string;
  url: string;
  ifMatch: string | undefined;
  body: unknown;
}
interface List {
  version: number;
  entries: Entry[];
  source: 'config' | 'store';
  temporary: Entry[];
}

/** The contract, in memory: enough to answer each CLI command the way the server is specified to. */
async function fakeAdmin(t: Test, lists: Record<string, List>, inUse: Record<string, string[]> = {}) {
  const seen: Seen[] = [];
  const send = (res: http.ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const view = (name: string, l: List) => ({
    name,
    version: `${l.version}-v`,
    entries: l.entries,
    source: l.source,
    temporary: l.temporary,
  });
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : undefined;
      const ifMatch = req.headers['if-match'];
      seen.push({ method: req.method!, url: req.url!, ifMatch, body });
      if (req.headers.authorization !== `Bearer ${TOKEN}`) return send(res, 401, { error: 'unauthorized', message: 'no token' });
      const url = new URL(req.url!, 'http://x');
      const m = /^\/v1\/allowlists(?:\/([^/]+))?(\/entries)?$/.exec(url.pathname);
      if (m === null) return send(res, 404, { error: 'not_found', message: 'no route' });
      const name = m[1] === undefined ? undefined : decodeURIComponent(m[1]);
      if (name === undefined && req.method === 'GET') {
        return send(res, 200, {
          allowlists: Object.entries(lists).map(([n, l]) => ({
            name: n,
            version: `${l.version}-v`,
            appliedVersion: `${l.version}-v`,
            entries: l.entries.length,
            source: l.source,
          })),
        });
      }
      if (name === undefined && req.method === 'POST') {
        const b = body as { name: string; entries?: Entry[] };
        if (lists[b.name])
          return send(res, 409, { error: 'list_exists', message: `allowlist ${JSON.stringify(b.name)} exists`, field: 'name' });
        lists[b.name] = { version: 1, entries: b.entries ?? [], source: 'store', temporary: [] };
        return send(res, 201, view(b.name, lists[b.name]!));
      }
      const l = lists[name!];
      if (l === undefined) return send(res, 404, { error: 'unknown_list', message: `no allowlist ${JSON.stringify(name)}` });
      if (ifMatch !== undefined && ifMatch !== `"${l.version}-v"`)
        return send(res, 412, { error: 'precondition_failed', message: `version is ${l.version}-v` });
      if (req.method === 'GET') return send(res, 200, view(name!, l));
      if (req.method === 'DELETE' && !m[2]) {
        const users = inUse[name!];
        if (users)
          return send(res, 409, { error: 'list_in_use', message: `allowlist ${JSON.stringify(name)} is used by ${users.join(', ')}` });
        delete lists[name!];
        res.writeHead(204).end();
        return undefined;
      }
      if (req.method === 'PUT') {
        l.entries = (body as { entries: Entry[] }).entries;
        l.version++;
        return send(res, 200, view(name!, l));
      }
      // POST entries
      for (const e of (body as { entries: Entry[] }).entries) {
        const at = l.entries.findIndex((x) => x.cidr === e.cidr);
        if (at >= 0 && url.searchParams.get('replace') !== 'true') {
          return send(res, 409, {
            error: 'entry_exists',
            message: `"${e.cidr}" is already in ${name}; add ?replace=true to replace it`,
            field: 'entries[0].cidr',
          });
        }
        if (at >= 0) l.entries[at] = e;
        else l.entries.push(e);
      }
      l.version++;
      return send(res, 200, view(name!, l));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

async function run(args: string[]) {
  let out = '';
  let err = '';
  const code = await allowlistMain(args, {
    out: (x) => (out += x),
    err: (x) => (err += x),
    env: { IPGATE_ADMIN_TOKEN: TOKEN },
    now: Date.now,
  });
  return { code, out, err };
}

t.test('deny, --replace and a 409 entry_exists: what is sent and what is printed', async (t) => {
  const lists: Record<string, List> = {
    main: { version: 1, entries: [{ cidr: '10.0.0.0/8', comment: 'office' }], source: 'store', temporary: [] },
  };
  const api = await fakeAdmin(t, lists);
  const admin = ['--admin-url', api.base];

  const deny = await run(['deny', 'main', '10.6.6.0/24', '--comment', 'bad subnet', ...admin]);
  t.equal(deny.code, 0, deny.err);
  t.equal(deny.out, 'added deny 10.6.6.0/24 to main: version 2-v, 2 entries\n');
  t.same(
    api.seen.at(-1),
    {
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      ifMatch: '"1-v"',
      body: { entries: [{ cidr: '10.6.6.0/24', action: 'deny', comment: 'bad subnet' }] },
    },
    'a deny entry, If-Match the version read, no ?replace',
  );

  const turned = await run(['add', 'main', '10.6.6.0/24', '--replace', ...admin]);
  t.equal(turned.code, 0, turned.err);
  t.equal(turned.out, 'replaced 10.6.6.0/24 deny "bad subnet" in main with 10.6.6.0/24 allow: version 3-v, 2 entries\n');
  t.same(api.seen.at(-1), {
    method: 'POST',
    url: '/v1/allowlists/main/entries?replace=true',
    ifMatch: '"2-v"',
    body: { entries: [{ cidr: '10.6.6.0/24' }] },
  });

  // The entry appears between the CLI's read and its write (another operator): the server's 409 is
  // printed as is, exit 3, and nothing says "added".
  const racyLists = { main: { version: 7, entries: [] as Entry[], source: 'store' as const, temporary: [] as Entry[] } };
  const race = await fakeAdmin(t, racyLists);
  const r = run(['add', 'main', '192.0.2.0/24', '--admin-url', race.base]);
  // The GET is answered from the empty list; the POST then finds the entry (added meanwhile).
  await new Promise<void>((resolve) => {
    const wait = (): void => {
      if (race.seen.length >= 1) resolve();
      else setImmediate(wait);
    };
    wait();
  });
  racyLists.main.entries.push({ cidr: '192.0.2.0/24', comment: 'someone else' });
  const raced = await r;
  t.equal(raced.code, 3);
  t.equal(raced.out, '');
  t.match(raced.err, /HTTP 409: entry_exists: "192\.0\.2\.0\/24" is already in main/);
});

t.test('a stale version: 412 and a hint to run again', async (t) => {
  const lists: Record<string, List> = { main: { version: 1, entries: [], source: 'store', temporary: [] } };
  const api = await fakeAdmin(t, lists);
  const r = run(['add', 'main', '192.0.2.0/24', '--admin-url', api.base]);
  await new Promise<void>((resolve) => {
    const wait = (): void => {
      if (api.seen.length >= 1) resolve();
      else setImmediate(wait);
    };
    wait();
  });
  lists.main!.version = 2; // a write by someone else between the CLI's read and its write
  const stale = await r;
  t.equal(stale.code, 3);
  t.match(
    stale.err,
    /HTTP 412: precondition_failed: .*\nthe list changed while this command ran; nothing was written by it: run it again\n/,
  );
  t.same(lists.main!.entries, []);
});

t.test('get and ls show source and temporary entries; replace keeps deny lines; create and delete', async (t) => {
  const lists: Record<string, List> = {
    edge: {
      version: 4,
      entries: [{ cidr: '10.0.0.0/8' }, { cidr: '10.6.6.0/24', action: 'deny', comment: 'lab' }],
      source: 'config',
      temporary: [{ cidr: '198.51.100.1/32', comment: 'incident 42', expiresAt: '2099-01-01T00:00:00Z' }],
    },
  };
  const api = await fakeAdmin(t, lists, { edge: ['listener web'] });
  const admin = ['--admin-url', api.base];

  const ls = await run(['ls', ...admin]);
  t.match(ls.out, /^NAME +VERSION +APPLIED +ENTRIES +SOURCE\nedge +4-v +4-v +2 +config\n$/);
  const get = await run(['get', 'edge', ...admin]);
  t.equal(get.code, 0, get.err);
  t.match(
    get.out,
    /^# edge version 4-v, 2 entries, source config\nCIDR +ACTION +EXPIRES +COMMENT\n10\.0\.0\.0\/8 +allow +-\n10\.6\.6\.0\/24 +deny +- +lab\n# temporary entries \(through the API, until they expire\): 1\nCIDR +ACTION +EXPIRES +COMMENT\n198\.51\.100\.1\/32 +allow +2099-01-01T00:00:00Z +incident 42\n$/,
  );
  const dup = await run(['add', 'edge', '198.51.100.1', ...admin]);
  t.equal(dup.code, 3, 'a temporary entry counts as listed');

  const dir = tmpDir();
  const file = path.join(dir, 'edge.txt');
  fs.writeFileSync(file, '10.0.0.0/8\ndeny 10.6.6.0/24 # lab\ndeny 10.7.0.0/16\n');
  const replaced = await run(['replace', 'edge', '-f', file, ...admin]);
  t.equal(replaced.code, 0, replaced.err);
  t.equal(replaced.out, `+ 10.7.0.0/16 deny\nreplaced edge from ${file}: version 4-v -> 5-v, 3 entries (1 added, 0 removed, 0 changed)\n`);
  t.same(
    api.seen.at(-1),
    {
      method: 'PUT',
      url: '/v1/allowlists/edge',
      ifMatch: '"4-v"',
      body: {
        entries: [{ cidr: '10.0.0.0/8' }, { cidr: '10.6.6.0/24', action: 'deny', comment: 'lab' }, { cidr: '10.7.0.0/16', action: 'deny' }],
      },
    },
    'the whole list in one PUT, If-Match the version read, temporary entries not sent',
  );

  const created = await run(['create', 'partners', '-f', file, ...admin]);
  t.equal(created.code, 0, created.err);
  t.equal(created.out, 'created partners: version 1-v, 3 entries\n');
  t.same(api.seen.at(-1)!.body, {
    name: 'partners',
    entries: [{ cidr: '10.0.0.0/8' }, { cidr: '10.6.6.0/24', action: 'deny', comment: 'lab' }, { cidr: '10.7.0.0/16', action: 'deny' }],
  });
  const exists = await run(['create', 'partners', ...admin]);
  t.equal(exists.code, 3);
  t.match(exists.err, /HTTP 409: list_exists: allowlist "partners" exists \(field name\)/);

  const inUse = await run(['delete', 'edge', ...admin]);
  t.equal(inUse.code, 3);
  t.match(inUse.err, /HTTP 409: list_in_use: allowlist "edge" is used by listener web/);
  t.ok(lists.edge, 'still there');
  const deleted = await run(['delete', 'partners', '-o', 'json', ...admin]);
  t.equal(deleted.code, 0, deleted.err);
  t.equal(deleted.out, '{}\n', 'a 204 is an empty document');
  t.notOk(lists.partners);
});
