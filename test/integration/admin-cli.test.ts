/**
 * `ipgate allowlist ...` (the compiled binary) against a running ipgate: every command, the token
 * from the environment or a file, clear errors and exit codes.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { allowlistMain } from '../../src/cli/allowlist';
import { startAdminGate, TOKEN } from '../helpers/admin-api';
import { MAIN } from '../helpers/ipgate';
import { refusingPort } from '../helpers/net';

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** The same command in this process (the binary's startup costs seconds on a busy machine). */
async function inProcess(args: string[], env: NodeJS.ProcessEnv = { IPGATE_ADMIN_TOKEN: TOKEN }): Promise<Run> {
  let out = '';
  let err = '';
  const code = await allowlistMain(args, { out: (x) => (out += x), err: (x) => (err += x), env, now: Date.now });
  return { code, out, err };
}

function cli(args: string[], env: NodeJS.ProcessEnv = { IPGATE_ADMIN_TOKEN: TOKEN }): Promise<Run> {
  const base = { ...process.env };
  delete base.IPGATE_ADMIN_TOKEN;
  delete base.IPGATE_ADMIN_URL;
  const child = spawn(process.execPath, [MAIN, 'allowlist', ...args], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out, err })));
}

t.test('ls, get, add, rm, check against a running instance', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: [{ cidr: '10.0.0.0/8', comment: 'office' }], other: [] },
    listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const admin = ['--admin-url', g.base];

  const ls = await cli(['ls', ...admin]);
  t.equal(ls.code, 0, ls.err);
  t.match(
    ls.out,
    /^NAME +VERSION +APPLIED +ENTRIES +SOURCE\nmain +1-[0-9a-f]+ +1-[0-9a-f]+ +1 +store\nother +1-[0-9a-f]+ +1-[0-9a-f]+ +0 +store\n$/,
    'each list with who owns it',
  );

  const add = await cli(['add', 'main', '192.0.2.0/24', '--comment', 'partner', '--expires', '2h', ...admin]);
  t.equal(add.code, 0, add.err);
  t.match(add.out, /^added 192\.0\.2\.0\/24 to main: version 2-[0-9a-f]+, 2 entries\n$/);
  const stored = g.app.service.get('main').entries[1]!;
  t.equal(stored.comment, 'partner');
  const ms = Date.parse(stored.expiresAt!) - Date.now();
  t.ok(ms > 7_100_000 && ms <= 7_200_000, '--expires 2h is two hours from now');
  t.match(g.app.service.audit.history()[0], { who: 'admin', action: 'add' }, "audited as the token's name");

  const get = await cli(['get', 'main', ...admin]);
  t.equal(get.code, 0);
  t.match(
    get.out,
    /^# main version 2-[0-9a-f]+, 2 entries, source store\nCIDR +ACTION +EXPIRES +COMMENT\n10\.0\.0\.0\/8 +allow +- +office\n192\.0\.2\.0\/24 +allow +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +partner\n$/,
  );

  const json = await inProcess(['get', 'main', '--json', ...admin]);
  const doc = JSON.parse(json.out);
  t.equal(doc.entries.length, 2, '--json prints the API answer');
  const asJson = await inProcess(['get', 'main', '-o', 'json', ...admin]);
  t.same(JSON.parse(asJson.out), doc, '-o json is --json');
  const yaml = await inProcess(['get', 'main', '--output=yaml', ...admin]);
  t.same(YAML.parse(yaml.out), doc, '--output=yaml prints the same document as YAML');

  const yes = await cli(['check', 'main', '192.0.2.9', ...admin]);
  t.equal(yes.code, 0);
  t.match(yes.out, /^192\.0\.2\.9 is allowed by main entry 192\.0\.2\.0\/24 \(partner\), until /);
  const no = await cli(['check', 'main', '203.0.113.1', ...admin]);
  t.equal(no.code, 1, 'exit 1: not allowed');
  t.match(no.out, /^203\.0\.113\.1 is not allowed by main/);

  const tokenFile = path.join(g.dir, 'token');
  const rm = await cli(['rm', 'main', '192.0.2.0/24', '--token-file', tokenFile, ...admin], {});
  t.equal(rm.code, 0, `token from --token-file: ${rm.err}`);
  t.match(rm.out, /^removed 192\.0\.2\.0\/24 from main: version 3-/);
  t.same(g.app.service.get('main').entries, [{ cidr: '10.0.0.0/8', comment: 'office' }]);
});

t.test('clear errors and exit codes (the binary for one, the same function in process for the rest)', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: ['10.0.0.0/8'] },
    listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const admin = ['--admin-url', g.base];
  const before = fs.readFileSync(g.file);
  const rows: Array<[string, string[], NodeJS.ProcessEnv | undefined, number, RegExp]> = [
    [
      'bad CIDR',
      ['add', 'main', '10.0.0.1/8', ...admin],
      undefined,
      3,
      /HTTP 400: invalid_entry: "10\.0\.0\.1\/8": host bits set: did you mean 10\.0\.0\.0\/8\? \(field entries\[0\]\.cidr\)/,
    ],
    ['unknown list', ['get', 'nope', ...admin], undefined, 3, /HTTP 404: unknown_list: no allowlist "nope"/],
    ['entry not listed', ['rm', 'main', '192.0.2.0/24', ...admin], undefined, 3, /HTTP 404: entry_not_found/],
    [
      'bad address',
      ['check', 'main', 'ten', ...admin],
      undefined,
      3,
      /HTTP 400: invalid_request: "ten": invalid IPv4 address: unexpected character "t" \(field ip\)/,
    ],
    ['wrong token', ['ls', ...admin], { IPGATE_ADMIN_TOKEN: 'not-the-token-0123456789' }, 3, /HTTP 403: forbidden/],
    ['no token', ['ls', ...admin], {}, 2, /no admin token: pass --token-file FILE or set IPGATE_ADMIN_TOKEN/],
    ['unknown command', ['list', ...admin], undefined, 2, /unknown command "list"/],
    ['missing argument', ['add', 'main', ...admin], undefined, 2, /add takes 2 argument\(s\) \(NAME CIDR\), got 1/],
    ['unknown option', ['ls', '--verbose', ...admin], undefined, 2, /unknown option --verbose/],
    ['an option of another command', ['ls', '--comment', 'x', ...admin], undefined, 2, /ls takes no --comment/],
    ['an option without its value', ['add', 'main', '192.0.2.0/24', ...admin, '--comment'], undefined, 2, /--comment needs a value/],
    ['a value given to a switch', ['add', 'main', '192.0.2.0/24', '--replace=yes', ...admin], undefined, 2, /--replace takes no value/],
    ['bad --output', ['ls', '--output', 'xml', ...admin], undefined, 2, /--output "xml": expected table, json or yaml/],
    ['replace without -f', ['replace', 'main', ...admin], undefined, 2, /replace needs --file/],
    ['explain without --listener', ['explain', '10.1.2.3', ...admin], undefined, 2, /explain needs --listener/],
    [
      'replace -f of a missing file',
      ['replace', 'main', '-f', '/nonexistent/list.txt', ...admin],
      undefined,
      2,
      /cannot read -f "\/nonexistent\/list\.txt"/,
    ],
    ['bad --expires', ['add', 'main', '192.0.2.0/24', '--expires', 'tomorrow', ...admin], undefined, 3, /field entries\[0\]\.expiresAt/],
  ];
  const viaBinary = await cli(rows[0]![1]);
  t.equal(viaBinary.code, 3, 'the binary exits 3 when the API refuses');
  t.match(viaBinary.err, rows[0]![4]);
  for (const [what, args, env, code, message] of rows) {
    const r = await inProcess(args, env);
    t.equal(r.code, code, `${what}: exit ${code}`);
    t.match(r.err, message, `${what}: ${r.err.split('\n')[0]}`);
  }
  t.ok(fs.readFileSync(g.file).equals(before), 'the store is unchanged');
  const down = await cli(['ls', '--admin', `http://127.0.0.1:${refusingPort(t)}`]);
  t.equal(down.code, 4, 'admin API unreachable: exit 4');
  t.match(down.err, /cannot reach the admin API at http:\/\/127\.0\.0\.1:\d+\/: ECONNREFUSED/);
  const help = await inProcess(['--help']);
  t.equal(help.code, 0);
  t.match(help.out, /Usage: ipgate allowlist COMMAND/);
});

t.test('add refuses a CIDR already listed; --replace replaces it and says so', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: [{ cidr: '10.0.0.0/8', comment: 'office', expiresAt: '2099-01-01T00:00:00Z' }] },
    listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const admin = [`--admin-url=${g.base}`];
  const before = fs.readFileSync(g.file);
  const version = g.app.service.get('main').version;

  // The same CIDR, written differently (the API stores the canonical form): still refused.
  for (const cidr of ['10.0.0.0/8', '10.0.0.0/08'.replace('/08', '/8')]) {
    const again = await inProcess(['add', 'main', cidr, '--comment=vpn', ...admin]);
    t.equal(again.code, 3, 'refused: exit 3');
    t.equal(again.out, '', 'nothing printed on stdout (no "added")');
    t.match(
      again.err,
      /main already has 10\.0\.0\.0\/8 allow "office" until 2099-01-01T00:00:00Z \(version 1-[0-9a-f]+\); nothing changed\. Pass --replace/,
    );
  }
  const deny = await inProcess(['deny', 'main', '10.0.0.0/8', ...admin]);
  t.equal(deny.code, 3, 'deny of a CIDR already allowed is refused too');
  t.ok(fs.readFileSync(g.file).equals(before), 'the store is unchanged');
  t.equal(g.app.service.get('main').version, version);
  t.same(
    g.app.service.get('main').entries,
    [{ cidr: '10.0.0.0/8', comment: 'office', expiresAt: '2099-01-01T00:00:00Z' }],
    'comment and expiry kept',
  );

  const replaced = await cli(['add', 'main', '10.0.0.0/8', '--comment', 'vpn', '--replace', ...admin]);
  t.equal(replaced.code, 0, replaced.err);
  t.match(
    replaced.out,
    /^replaced 10\.0\.0\.0\/8 allow "office" until 2099-01-01T00:00:00Z in main with 10\.0\.0\.0\/8 allow "vpn": version 2-[0-9a-f]+, 1 entries\n$/,
  );
  t.notMatch(replaced.out, /added/, 'never "added" for a replace');
  t.same(g.app.service.get('main').entries, [{ cidr: '10.0.0.0/8', comment: 'vpn' }]);

  const fresh = await inProcess(['add', 'main', '192.0.2.1', '--replace', ...admin]);
  t.equal(fresh.code, 0, fresh.err);
  t.match(
    fresh.out,
    /^added 192\.0\.2\.1\/32 to main: version 3-[0-9a-f]+, 2 entries\n$/,
    '--replace of a CIDR not listed adds it, and says "added"',
  );
});

t.test('replace -f: a file of CIDRs or the JSON that get prints; the diff; --dry-run; If-Match', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: [{ cidr: '10.0.0.0/8', comment: 'office' }, { cidr: '172.16.0.0/12', comment: 'old vpn' }, '192.0.2.0/24'] },
    listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const admin = ['--admin-url', g.base];
  const file = path.join(g.dir, 'main.txt');
  fs.writeFileSync(
    file,
    ['# the office and partners', '10.0.0.0/8            # office', '', 'allow 192.0.2.0/24    # partner', '198.51.100.7'].join('\n'),
  );
  const before = fs.readFileSync(g.file);
  const v1 = g.app.service.get('main').version;

  const dry = await inProcess(['replace', 'main', '-f', file, '--dry-run', ...admin]);
  t.equal(dry.code, 0, dry.err);
  t.equal(
    dry.out,
    [
      '+ 198.51.100.7/32 allow',
      '- 172.16.0.0/12 allow "old vpn"',
      '~ 192.0.2.0/24: comment - -> "partner"',
      `dry run: main version ${v1} not changed; ${file} would make 3 entries (1 added, 1 removed, 1 changed)`,
      '',
    ].join('\n'),
  );
  t.ok(fs.readFileSync(g.file).equals(before), '--dry-run writes nothing');

  const real = await cli(['replace', 'main', `--file=${file}`, ...admin]);
  t.equal(real.code, 0, real.err);
  t.match(
    real.out,
    /^\+ 198\.51\.100\.7\/32 allow\n- 172\.16\.0\.0\/12 allow "old vpn"\n~ 192\.0\.2\.0\/24: comment - -> "partner"\nreplaced main from .*main\.txt: version 1-[0-9a-f]+ -> 2-[0-9a-f]+, 3 entries \(1 added, 1 removed, 1 changed\)\n$/,
  );
  t.same(g.app.service.get('main').entries, [
    { cidr: '10.0.0.0/8', comment: 'office' },
    { cidr: '192.0.2.0/24', comment: 'partner' },
    { cidr: '198.51.100.7/32' },
  ]);
  t.match(g.app.service.audit.history()[0], { action: 'replace' }, 'one PUT');

  // What get -o json prints goes back as is: nothing to change, nothing sent.
  const json = await inProcess(['get', 'main', '-o', 'json', ...admin]);
  const jsonFile = path.join(g.dir, 'main.json');
  fs.writeFileSync(jsonFile, json.out);
  const v2 = g.app.service.get('main').version;
  const same = await inProcess(['replace', 'main', '-f', jsonFile, ...admin]);
  t.equal(same.code, 0, same.err);
  t.equal(same.out, `main already matches ${jsonFile}: version ${v2}, 3 entries; nothing sent\n`);
  t.equal(g.app.service.get('main').version, v2, 'no write when nothing changes');
  // ... and, edited, it is applied (JSON output of the diff).
  const edited = JSON.parse(json.out);
  edited.entries.pop();
  fs.writeFileSync(jsonFile, JSON.stringify(edited));
  const applied = await inProcess(['replace', 'main', '-f', jsonFile, '-o', 'json', ...admin]);
  t.equal(applied.code, 0, applied.err);
  t.match(JSON.parse(applied.out), {
    name: 'main',
    fromVersion: v2,
    written: true,
    added: [],
    removed: [{ cidr: '198.51.100.7/32' }],
    changed: [],
    list: { entries: edited.entries },
  });

  // A bad file is refused before anything is sent: the line and the value are named.
  const before2 = fs.readFileSync(g.file);
  const rows: Array<[string, string, RegExp]> = [
    ['a bad CIDR', '10.0.0.0/8\n10.0.0.1/33 # typo\n', /main-bad\.txt line 2: "10\.0\.0\.1\/33": prefix length 33 out of range for IPv4/],
    ['a line that is not an entry', '10.0.0.0/8 office\n', /line 1: "10\.0\.0\.0\/8 office": expected "CIDR", "allow CIDR" or "deny CIDR"/],
    ['a CIDR twice', '10.0.0.0/8\n10.0.0.0/8 # again\n', /line 2: 10\.0\.0\.0\/8 is listed twice \(also at line 1\)/],
    ['JSON with a misspelt field', '{"entries":[{"cidr":"10.0.0.0/8","expires_at":"x"}]}', /entries\[0\]: unknown field "expires_at"/],
  ];
  for (const [what, text, message] of rows) {
    const bad = path.join(g.dir, 'main-bad.txt');
    fs.writeFileSync(bad, text);
    const r = await inProcess(['replace', 'main', '-f', bad, ...admin]);
    t.equal(r.code, 2, `${what}: exit 2`);
    t.match(r.err, message, what);
  }
  t.ok(fs.readFileSync(g.file).equals(before2), 'the store is unchanged');
});

t.test('explain IP --listener L [--xff]: the derivation and the decision, exit 1 when not admitted', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: [{ cidr: '10.0.0.0/8', comment: 'office' }] },
    listeners: [
      { name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] },
      {
        name: 'web',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: ['127.0.0.1:9'],
        http: { trustedProxies: ['127.0.0.1/32'] },
      },
    ],
  });
  const admin = ['--admin-url', g.base];
  const yes = await cli(['explain', '10.1.2.3', '--listener', 'tcp', ...admin]);
  t.equal(yes.code, 0, yes.err);
  t.match(
    yes.out,
    /^listener +tcp \(tcp\)\npeer +10\.1\.2\.3\n.*client +10\.1\.2\.3 via socket\n.*allowlist +main version 1-[0-9a-f]+\nentry +10\.0\.0\.0\/8 allow "office"\ndecision +allow\n$/s,
  );
  const no = await inProcess(['explain', '203.0.113.9', '--listener=tcp', ...admin]);
  t.equal(no.code, 1, 'not admitted: exit 1');
  t.match(no.out, /entry +-\ndecision +deny \(not_allowlisted\)\n$/);
  const xff = await inProcess(['explain', '127.0.0.1', '--listener', 'web', '--xff', '203.0.113.9, 10.9.9.9', '-o', 'json', ...admin]);
  t.equal(xff.code, 0, xff.err);
  t.match(JSON.parse(xff.out), { client: '10.9.9.9', via: 'xff', trustedProxy: true, decision: 'allow', entry: { cidr: '10.0.0.0/8' } });
  const unknown = await inProcess(['explain', '10.1.2.3', '--listener', 'nope', ...admin]);
  t.equal(unknown.code, 3);
  t.match(unknown.err, /HTTP 404: unknown_listener: no listener named "nope" \(have: tcp, web\)/);
});

/** Does the server in this tree have `what` in its OpenAPI document? (the server side of issue 20 lands separately). */
async function serverHas(base: string, method: string, route: string, param?: string): Promise<boolean> {
  const doc = JSON.parse(
    await new Promise<string>((resolve, reject) => {
      http
        .get(`${base}/openapi.json`, (res) => {
          let b = '';
          res.on('data', (c) => (b += c));
          res.on('end', () => resolve(b));
        })
        .on('error', reject);
    }),
  ) as { paths: Record<string, Record<string, { parameters?: Array<{ name: string }> }>> };
  const op = doc.paths[route]?.[method];
  return op !== undefined && (param === undefined || (op.parameters ?? []).some((p) => p.name === param));
}

t.test('deny, create, delete and the 409 entry_exists of the server side of issue 20, end to end', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: ['10.0.0.0/8'] },
    listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  const admin = ['--admin-url', g.base];
  t.ok(await serverHas(g.base, 'post', '/v1/allowlists'), 'the server documents POST /v1/allowlists');
  t.test('create and delete', async (t) => {
    const created = await inProcess(['create', 'extra', ...admin]);
    t.equal(created.code, 0, created.err);
    t.match(created.out, /^created extra: version \S+, 0 entries\n$/);
    t.ok(g.app.service.names().includes('extra'));
    const inUse = await inProcess(['delete', 'main', ...admin]);
    t.equal(inUse.code, 3, 'a list in use is not deleted');
    t.match(inUse.err, /HTTP 409: .*tcp/);
    const deleted = await inProcess(['delete', 'extra', ...admin]);
    t.equal(deleted.code, 0, deleted.err);
    t.equal(deleted.out, 'deleted extra\n');
    t.notOk(g.app.service.names().includes('extra'));
  });
  t.ok(await serverHas(g.base, 'post', '/v1/allowlists/{name}/entries', 'replace'), 'the server documents ?replace on POST entries');
  t.test('deny entries', async (t) => {
    const deny = await inProcess(['deny', 'main', '10.6.6.0/24', '--comment', 'bad subnet', ...admin]);
    t.equal(deny.code, 0, deny.err);
    t.match(deny.out, /^added deny 10\.6\.6\.0\/24 to main: version \S+, 2 entries\n$/);
    const check = await inProcess(['check', 'main', '10.6.6.1', ...admin]);
    t.equal(check.code, 1);
    t.match(check.out, /^10\.6\.6\.1 is denied by main entry 10\.6\.6\.0\/24 \(deny\) \(bad subnet\)\n$/);
    const get = await inProcess(['get', 'main', ...admin]);
    t.match(get.out, /\n10\.6\.6\.0\/24 +deny +- +bad subnet\n/);
  });
});

t.test('explain on listeners with routes: --host, --path, --header, --sni pick the route (issue 32 item 4)', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: ['10.0.0.0/8'], partners: [{ cidr: '203.0.113.0/24', comment: 'acme' }] },
    listeners: [
      {
        name: 'web',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: ['127.0.0.1:9'],
        routes: [
          {
            name: 'api',
            hosts: ['api.example.com'],
            paths: [{ path: '/v1', match: 'prefix' }],
            upstreams: ['127.0.0.1:10'],
            allowlist: 'partners',
          },
          { name: 'site', hosts: ['*'] },
        ],
      },
      {
        name: 'tls',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: ['127.0.0.1:9'],
        routes: [{ name: 'db', hosts: ['db.example.com'], upstreams: ['127.0.0.1:11'], allowlist: 'partners' }],
      },
    ],
  });
  const admin = ['--admin-url', g.base];

  // The binary: --host and --path choose the route whose list decides.
  const api = await cli(['explain', '203.0.113.7', '--listener', 'web', '--host', 'api.example.com', '--path', '/v1/users', ...admin]);
  t.equal(api.code, 0, api.err);
  t.match(
    api.out,
    /^route +api \(host api\.example\.com, exact; path \/v1, prefix\) -> 127\.0\.0\.1:10\n/m,
    'the route, its host and path entries and upstreams',
  );
  t.match(api.out, /^allowlist +partners version /m, "the route's list decides");
  t.match(api.out, /^entry +203\.0\.113\.0\/24 allow "acme"\ndecision +allow\n$/m);

  // The same client on the other route: the listener's list, which does not admit it.
  const site = await inProcess(['explain', '203.0.113.7', '--listener', 'web', '--header', 'Host: www.example.com', ...admin]);
  t.equal(site.code, 1, site.err);
  t.match(
    site.out,
    /^route +site \(host \*, default\) -> 127\.0\.0\.1:9\n/m,
    'a Host --header picks the route as --host does; path / by default',
  );
  t.match(site.out, /decision +deny \(not_allowlisted\)\n$/);

  // No route: the status the client would get.
  const miss = await inProcess([
    'explain',
    '203.0.113.7',
    '--listener',
    'web',
    '--host',
    'api.example.com',
    '--path',
    '/v2',
    '-o',
    'json',
    ...admin,
  ]);
  t.equal(miss.code, 1);
  t.match(JSON.parse(miss.out), { decision: 'no_route', reason: 'route_no_path', status: 404, route: null });

  // --header several times and --xff together reach the API as headers.
  const both = await inProcess([
    'explain',
    '127.0.0.1',
    '--listener',
    'web',
    '--host',
    'api.example.com',
    '--path',
    '/v1',
    '--header',
    'X-Forwarded-For: 198.51.100.1',
    '--xff',
    '203.0.113.8',
    '-o',
    'json',
    ...admin,
  ]);
  t.match(
    JSON.parse(both.out),
    { trustedProxy: false, client: '127.0.0.1' },
    'headers sent (not believed: 127.0.0.1 is no trusted proxy here)',
  );

  // Without --host on a routed listener: the API's refusal, and the flag that answers it.
  const noHost = await inProcess(['explain', '203.0.113.7', '--listener', 'web', ...admin]);
  t.equal(noHost.code, 3);
  t.match(noHost.err, /HTTP 400: missing_host: .*\ngive --host NAME \(or --header "Host: NAME"\)\n$/);

  // --sni on a TCP listener with routes; no --sni: a ClientHello without one.
  const db = await cli(['explain', '203.0.113.7', '--listener', 'tls', '--sni', 'DB.example.com.', ...admin]);
  t.equal(db.code, 0, db.err);
  t.match(db.out, /^sni +db\.example\.com\nroute +db \(host db\.example\.com, exact\) -> 127\.0\.0\.1:11\n/m);
  const noSni = await inProcess(['explain', '203.0.113.7', '--listener', 'tls', '-o', 'json', ...admin]);
  t.match(JSON.parse(noSni.out), { decision: 'close', reason: 'route_no_host', sni: null });

  // Usage errors, before anything is sent.
  const badHeader = await inProcess(['explain', '203.0.113.7', '--listener', 'web', '--header', 'no colon', ...admin]);
  t.equal(badHeader.code, 2);
  t.match(badHeader.err, /--header "no colon": expected "Name: value"/);
  const wrongCommand = await inProcess(['check', 'main', '10.0.0.1', '--host', 'x', ...admin]);
  t.equal(wrongCommand.code, 2);
  t.match(wrongCommand.err, /check takes no --host/);
});
