/**
 * What a refused config says (issue 32 item 6), as `nginx -t` would: every problem names the path,
 * the value (summarised when large) and the file and line of the YAML; an unknown key names the key
 * probably meant; a port out of range says so; a number where an address goes says how to write
 * it; a union (an allowlist's two forms, `workers`) is one sentence. Also the one rule for paths
 * (relative to the config file) with its compatibility warning. Through `ipgate check-config` too.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError } from '../../../src/config/errors';
import { formatValue } from '../../../src/schema/problem';
import { configWarnings, loadConfigFile, parseConfig } from '../../../src/config/load';
import { editDistance, nearestKey } from '../../../src/config/suggest';
import { MAIN } from '../../helpers/ipgate';

const VALID = `allowlists:
  office: [10.0.0.0/8]
listeners:
  - name: web
    listen: "127.0.0.1:7000"
    allowlist: office
    upstreams: ["127.0.0.1:7100"]
`;

function problems(text: string, file = 'ipgate.yaml'): string[] {
  try {
    parseConfig(text, file);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

const CASES: Array<{ desc: string; text: string; want: string }> = [
  {
    desc: 'a port out of range says out of range, not "not a number"',
    text: VALID.replace('"127.0.0.1:7000"', '"127.0.0.1:221810"'),
    want: 'listeners[0].listen: "127.0.0.1:221810": port 221810 out of range (0-65535) in ipgate.yaml:5',
  },
  {
    desc: 'a number where an address goes: what to write instead',
    text: VALID.replace('"127.0.0.1:7000"', '22023'),
    want: 'listeners[0].listen: 22023: must be a string, not a number: write the address as "host:port" text, e.g. "0.0.0.0:22023" or "[::]:22023" in ipgate.yaml:5',
  },
  {
    desc: 'an unknown key names the one meant (a typo)',
    text: `${VALID}    proxyProtocl: {mode: optional}\n`,
    want: 'listeners[0].proxyProtocl: {"mode":"optional"}: unknown key; did you mean "proxyProtocol"? in ipgate.yaml:8',
  },
  {
    desc: 'an unknown key that is an option one section down',
    text: `${VALID}    trustedProxies: [10.1.0.0/16]\n`,
    want: 'listeners[0].trustedProxies: ["10.1.0.0/16"]: unknown key; did you mean http.trustedProxies? (an option of the http section) in ipgate.yaml:8',
  },
  {
    desc: 'a mistyped top-level allowlist: is summarised, not dumped',
    text: `allowlist:\n  office: [${Array.from({ length: 40 }, (_, i) => `10.${i}.0.0/16`).join(', ')}]\n${VALID}`,
    want: 'allowlist: {office: [40 items]}: unknown key; did you mean "allowlists"? in ipgate.yaml:1',
  },
  {
    desc: 'a list where a listener names one: what the field is',
    text: VALID.replace('allowlist: office', `allowlist: [${Array.from({ length: 12 }, (_, i) => `10.${i}.0.0/16`).join(', ')}]`),
    want: 'listeners[0].allowlist: ["10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16", ... (12 items)]: must be a string, not a list: the name of a list under "allowlists"',
  },
  {
    desc: 'an allowlist mapping with a typo: its key, not also "must be array"',
    text: VALID.replace('office: [10.0.0.0/8]', 'office: {source: config, entires: [10.0.0.0/8]}'),
    want: 'allowlists.office.entires: ["10.0.0.0/8"]: unknown key; did you mean "entries"? in ipgate.yaml:2',
  },
  {
    desc: 'a value no form of a union takes: one sentence naming the forms',
    text: `workers: many\n${VALID}`,
    want: 'workers: "many": must be an integer or "auto" in ipgate.yaml:1',
  },
  {
    desc: 'a semantic problem deep in a list: the line of that entry',
    text: VALID.replace('office: [10.0.0.0/8]', 'office:\n    - 10.0.0.0/8\n    - 10.20.0.0/33'),
    want: 'allowlists.office[1]: "10.20.0.0/33": prefix length 33 out of range for IPv4 in ipgate.yaml:4',
  },
  {
    desc: 'a required key that is missing: the line of the mapping it is missing from',
    text: VALID.replace('    listen: "127.0.0.1:7000"\n', ''),
    want: 'listeners[0].listen: (missing): required in ipgate.yaml:4',
  },
];

t.test('each problem names the path, the value and the line', async (t) => {
  for (const c of CASES) {
    const got = problems(c.text);
    t.ok(
      got.some((p) => p.startsWith(c.want)),
      `${c.desc}: ${JSON.stringify(got)}`,
    );
  }
});

t.test('an allowlist mapping with a typo is not also told it must be an array', async (t) => {
  const got = problems(VALID.replace('office: [10.0.0.0/8]', 'office: {source: config, entires: [10.0.0.0/8]}'));
  t.equal(got.length, 1, JSON.stringify(got));
  t.notMatch(got.join('\n'), /must be (array|a list)/);
});

t.test('problems come in the order of the file', async (t) => {
  const got = problems(`workers: many\n${VALID.replace('"127.0.0.1:7000"', '22023')}    upstream: x\n`);
  const lines = got.map((p) => Number(/:(\d+)$/.exec(p)?.[1]));
  t.same(
    lines,
    [...lines].sort((a, b) => a - b),
    JSON.stringify(got),
  );
  t.equal(got.length, 3);
});

t.test("a list file's bad entry names the list file and its line", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-errors-'));
  fs.writeFileSync(path.join(dir, 'partners.yaml'), '# partners\n- 203.0.113.0/24\n- 198.51.100.0/33\n');
  fs.writeFileSync(path.join(dir, 'ipgate.yaml'), VALID.replace('office: [10.0.0.0/8]', 'office: {source: config, file: partners.yaml}'));
  try {
    loadConfigFile(path.join(dir, 'ipgate.yaml'));
    t.fail('refused');
  } catch (err) {
    t.match((err as ConfigError).problems, [
      `allowlists.office.file(partners.yaml)[1]: "198.51.100.0/33": prefix length 33 out of range for IPv4 in ${path.join(dir, 'partners.yaml')}:3`,
    ]);
  }
});

t.test('values: short ones as JSON, large ones summarised', async (t) => {
  t.equal(formatValue(22023), '22023');
  t.equal(formatValue({ mode: 'off' }), '{"mode":"off"}');
  t.equal(formatValue(undefined), '(missing)');
  t.equal(formatValue('x'.repeat(200)), `"${'x'.repeat(60)}"... (200 characters)`);
  t.equal(
    formatValue({ office: Array(100).fill('10.0.0.0/8'), partners: { source: 'config' } }),
    '{office: [100 items], partners: {1 key}}',
  );
  t.ok(formatValue(Array.from({ length: 1000 }, (_, i) => `10.${i % 256}.0.0/16`)).length < 120, 'a thousand entries stay one short line');
});

t.test('did you mean: near keys only', async (t) => {
  t.equal(editDistance('proxyProtocl', 'proxyProtocol'), 1);
  t.equal(editDistance('porxyProtocol', 'proxyProtocol'), 1, 'an adjacent swap is one edit');
  t.equal(nearestKey('upstream', ['upstreams', 'listen']), 'upstreams');
  t.equal(nearestKey('ProxyProtocol', ['proxyProtocol']), 'proxyProtocol', 'case');
  t.equal(nearestKey('foo', ['listen', 'mode']), null, 'nothing far');
  t.equal(nearestKey('tls', ['http']), null, 'short keys: one edit at most');
});

t.test('paths: relative to the config file, store and token files too; the old place is warned about', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-paths-'));
  const confDir = path.join(dir, 'etc');
  const cwd = path.join(dir, 'work');
  fs.mkdirSync(confDir);
  fs.mkdirSync(path.join(cwd, 'data'), { recursive: true });
  fs.writeFileSync(path.join(cwd, 'data', 'lists.json'), '{}');
  const file = path.join(confDir, 'ipgate.yaml');
  fs.writeFileSync(file, `store: {type: file, path: data/lists.json}\nadmin: {tokenFile: token}\n${VALID}`);
  const before = process.cwd();
  process.chdir(cwd);
  t.teardown(() => process.chdir(before));
  const c = loadConfigFile(file);
  t.equal(c.store.path, path.join(confDir, 'data/lists.json'), "store.path from the config file's directory");
  t.equal(c.admin.tokenFile, path.join(confDir, 'token'), 'admin.tokenFile too');
  t.match(configWarnings(c), [
    `store.path: "data/lists.json": now resolves to ${path.join(confDir, 'data/lists.json')} (relative to the config file), where nothing is; it used to resolve to ${path.join(cwd, 'data/lists.json')}, which exists`,
  ]);
  // Left out, the store stays under the working directory (the image's /app/data link).
  fs.writeFileSync(file, `store: {type: file}\n${VALID}`);
  t.equal(loadConfigFile(file).store.path, path.join(cwd, 'data/allowlists.json'));
  t.same(configWarnings(loadConfigFile(file)), []);
});

t.test(
  'ipgate check-config: file and line on each refused value',
  { skip: fs.existsSync(MAIN) ? false : 'dist/src/main.js missing (npm run build:all)' },
  async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-check-'));
    const file = path.join(dir, 'ipgate.yaml');
    fs.writeFileSync(
      file,
      `${VALID.replace('"127.0.0.1:7000"', '"127.0.0.1:221810"')}  - name: ssh\n    listen: 22023\n    allowlist: office\n    upstreams: ["127.0.0.1:22"]\n`,
    );
    const r = spawnSync(process.execPath, [MAIN, 'check-config', file], { encoding: 'utf8' });
    t.equal(r.status, 1);
    t.equal(
      r.stderr,
      `ipgate: invalid config ${file}: listeners[1].listen: 22023: must be a string, not a number: write the address as "host:port" text, ` +
        `e.g. "0.0.0.0:22023" or "[::]:22023" in ${file}:9\n`,
      'the schema problem first (semantic checks run on a config the schema takes)',
    );
    fs.writeFileSync(file, VALID.replace('"127.0.0.1:7000"', '"127.0.0.1:221810"'));
    const r2 = spawnSync(process.execPath, [MAIN, 'check-config', file], { encoding: 'utf8' });
    t.equal(
      r2.stderr,
      `ipgate: invalid config ${file}: listeners[0].listen: "127.0.0.1:221810": port 221810 out of range (0-65535) in ${file}:5\n`,
    );
  },
);
