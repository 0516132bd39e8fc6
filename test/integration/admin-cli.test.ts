/**
 * `ipgate allowlist ...` (the compiled binary) against a running ipgate: every command, the token
 * from the environment or a file, clear errors and exit codes.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { allowlistMain } from '../../src/cli/allowlist';
import { startAdminGate, TOKEN } from '../helpers/admin-api';
import { MAIN } from '../helpers/ipgate';
import { freePort } from '../helpers/net';

interface Run { code: number | null; out: string; err: string }

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
  const admin = ['--admin', g.base];

  const ls = await cli(['ls', ...admin]);
  t.equal(ls.code, 0, ls.err);
  t.match(ls.out, /^NAME +VERSION +APPLIED +ENTRIES\nmain +1-[0-9a-f]+ +1-[0-9a-f]+ +1\nother +1-[0-9a-f]+ +1-[0-9a-f]+ +0\n$/);

  const add = await cli(['add', 'main', '192.0.2.0/24', '--comment', 'partner', '--expires', '2h', ...admin]);
  t.equal(add.code, 0, add.err);
  t.match(add.out, /^added 192\.0\.2\.0\/24 to main: version 2-[0-9a-f]+, 2 entries\n$/);
  const stored = g.app.service.get('main').entries[1]!;
  t.equal(stored.comment, 'partner');
  const ms = Date.parse(stored.expiresAt!) - Date.now();
  t.ok(ms > 7_100_000 && ms <= 7_200_000, '--expires 2h is two hours from now');
  t.match(g.app.service.audit.history()[0], { who: 'admin', action: 'add' }, 'audited as the token\'s name');

  const get = await cli(['get', 'main', ...admin]);
  t.equal(get.code, 0);
  t.match(get.out, /^# main version 2-[0-9a-f]+, 2 entries\nCIDR +EXPIRES +COMMENT\n10\.0\.0\.0\/8 +- +office\n192\.0\.2\.0\/24 +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ +partner\n$/);

  const json = await inProcess(['get', 'main', '--json', ...admin]);
  t.equal(JSON.parse(json.out).entries.length, 2, '--json prints the API answer');

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
  const admin = ['--admin', g.base];
  const before = fs.readFileSync(g.file);
  const rows: Array<[string, string[], NodeJS.ProcessEnv | undefined, number, RegExp]> = [
    ['bad CIDR', ['add', 'main', '10.0.0.1/8', ...admin], undefined, 3, /HTTP 400: invalid_entry: .*host bits.*\(field entries\[0\]\.cidr\)/i],
    ['unknown list', ['get', 'nope', ...admin], undefined, 3, /HTTP 404: unknown_list: no allowlist "nope"/],
    ['entry not listed', ['rm', 'main', '192.0.2.0/24', ...admin], undefined, 3, /HTTP 404: entry_not_found/],
    ['bad address', ['check', 'main', 'ten', ...admin], undefined, 3, /HTTP 400: invalid_request: .*\(field ip\)/],
    ['wrong token', ['ls', ...admin], { IPGATE_ADMIN_TOKEN: 'not-the-token-0123456789' }, 3, /HTTP 403: forbidden/],
    ['no token', ['ls', ...admin], {}, 2, /no admin token: pass --token-file FILE or set IPGATE_ADMIN_TOKEN/],
    ['unknown command', ['list', ...admin], undefined, 2, /unknown command "list"/],
    ['missing argument', ['add', 'main', ...admin], undefined, 2, /add takes 2 argument\(s\), got 1/],
    ['unknown option', ['ls', '--verbose', ...admin], undefined, 2, /unknown option --verbose/],
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
  const down = await cli(['ls', '--admin', `http://127.0.0.1:${await freePort()}`]);
  t.equal(down.code, 4, 'admin API unreachable: exit 4');
  t.match(down.err, /cannot reach the admin API at http:\/\/127\.0\.0\.1:\d+\/: ECONNREFUSED/);
  const help = await inProcess(['--help']);
  t.equal(help.code, 0);
  t.match(help.out, /Usage: ipgate allowlist COMMAND/);
});
