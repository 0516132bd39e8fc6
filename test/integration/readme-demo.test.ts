/**
 * The README's first run, as written: the start command from "Two commands" and every command of
 * "The demo", each run with bash from the repository root, each checked against the output the
 * README shows for it. The commands and the promised outputs are read from README.md itself, so a
 * README edit that breaks the demo (or a code change that breaks the README) fails here.
 *
 * The README's convention: a demo command line is `command   # comment`, and text in backticks in
 * the comment is the output the command prints: `<name>` stands for one varying word (a port, a
 * version), `...` for anything.
 *
 * The demo's ports are fixed (config/demo.yaml). When one of them is taken on this machine (a
 * developer's own demo running), the test runs the same config and the same commands with every
 * demo port moved to a free one, and says so.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { ROOT, tmpDir } from '../helpers/ipgate';
import { closed, connect, freePort, readLine, waitFor } from '../helpers/net';

const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const DEMO_CONFIG = path.join(ROOT, 'config/demo.yaml');

/** The text of the `## heading` section, up to the next `## `. */
function section(heading: string): string {
  const at = README.indexOf(`\n## ${heading}\n`);
  if (at < 0) throw new Error(`README.md has no "## ${heading}" section`);
  const next = README.indexOf('\n## ', at + 1);
  return README.slice(at, next < 0 ? undefined : next);
}

/** The bodies of the ```sh blocks of a section. */
function shBlocks(text: string): string[] {
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

interface Step {
  command: string;
  comment: string;
  /** The promised output (from the comment's backticks) as a pattern, or null. */
  expect: RegExp | null;
}

/** `<word>` is one varying word, `...` anything; the rest is literal. */
function promisePattern(promise: string): RegExp {
  let re = '';
  for (const part of promise.split(/(<[a-z]+>|\.\.\.)/)) {
    if (part === '...') re += '.*';
    else if (/^<[a-z]+>$/.test(part)) re += '[^\\s",]+';
    else re += part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(re);
}

function steps(block: string): Step[] {
  return block
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line) => {
      // A comment starts at a `#` after two or more spaces (a `#` inside the command does not).
      const m = /^(.*?\S)\s{2,}#\s(.*)$/.exec(line);
      const command = (m ? m[1]! : line).trim();
      const comment = m ? m[2]! : '';
      const promise = /`([^`]+)`/.exec(comment);
      return { command, comment, expect: promise ? promisePattern(promise[1]!) : null };
    });
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

function sh(command: string, env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<Ran> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', command], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`"${command}" did not finish within ${timeoutMs} ms; stdout ${JSON.stringify(stdout.slice(0, 300))}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - start });
    });
  });
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

function readyz(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/readyz', timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', () => resolve(0));
    req.once('timeout', () => req.destroy());
  });
}

const hasCurl = spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0;
// The same Node that runs the tests runs the README's `node ...` commands.
const baseEnv: NodeJS.ProcessEnv = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH ?? ''}` };
delete baseEnv.IPGATE_ADMIN_TOKEN;
delete baseEnv.IPGATE_ADMIN_URL;
delete baseEnv.IPGATE_CONFIG;

t.test(
  'README: the demo steps as written',
  { skip: !hasCurl && !process.env.CI && 'curl is not installed (apt-get install curl)' },
  async (t) => {
    // --- The start command: `npm ci && VAR=value npm start`.
    const start = shBlocks(section('Two commands'))
      .find((b) => b.includes('npm start'))
      ?.trim();
    t.ok(start, 'README "Two commands" has the npm start command');
    const m = /^npm ci && ((?:[A-Z_]+=\S+ )*)npm start$/.exec(start ?? '');
    t.ok(m, `the start command is "npm ci && [VAR=value ...] npm start": ${start}`);
    if (!m) return;
    const startEnv = Object.fromEntries(
      m[1]!
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
    const token = startEnv.IPGATE_ADMIN_TOKEN;
    t.ok(token !== undefined && token.length >= 16, `the README's admin token has at least 16 characters (${token})`);
    // `npm ci` is what `npm test` has already done, and `npm start` is `npm run build` (done by
    // pretest) then `node dist/src/main.js`: that command is run here, with the README's variables.
    // Rebuilding dist/ here would rewrite files that the tests running beside this one load.
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    t.equal(pkg.scripts.start, 'npm run build && node dist/src/main.js', 'npm start builds, then runs dist/src/main.js without arguments');

    // --- The demo's ports, and free ones if any is taken.
    const demo = YAML.parse(fs.readFileSync(DEMO_CONFIG, 'utf8')) as {
      listeners: { name: string; listen: string }[];
      echo: { tcp: string; http: string };
      admin?: { listen?: string };
    };
    const adminListen = demo.admin?.listen ?? '127.0.0.1:9901';
    const fixed = [...demo.listeners.map((l) => l.listen), demo.echo.tcp, demo.echo.http, adminListen].map((a) =>
      Number(a.slice(a.lastIndexOf(':') + 1)),
    );
    const portMap = new Map<number, number>();
    if (!(await Promise.all(fixed.map(portFree))).every(Boolean)) {
      for (const p of fixed) portMap.set(p, await freePort());
      t.comment(`a demo port is in use on this machine: running with ${[...portMap].map(([a, b]) => `${a}->${b}`).join(' ')}`);
    }
    const port = (p: number): number => portMap.get(p) ?? p;
    const moved = (text: string): string =>
      text.replace(/127\.0\.0\.1:(\d+)(?!\d)/g, (all, p: string) => (portMap.has(Number(p)) ? `127.0.0.1:${portMap.get(Number(p))}` : all));
    const adminPort = port(Number(adminListen.slice(adminListen.lastIndexOf(':') + 1)));
    const tcpPort = port(Number(demo.listeners.find((l) => l.name === 'tcp-demo')!.listen.split(':')[1]));

    const args = ['dist/src/main.js'];
    const env: NodeJS.ProcessEnv = { ...baseEnv, ...startEnv };
    if (portMap.size > 0) {
      const file = path.join(tmpDir('ipgate-readme-'), 'demo.yaml');
      const moveAll = (v: unknown): unknown =>
        typeof v === 'string'
          ? moved(v)
          : Array.isArray(v)
            ? v.map(moveAll)
            : v !== null && typeof v === 'object'
              ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, moveAll(x)]))
              : v;
      const cfg = moveAll(demo) as Record<string, unknown>;
      cfg.admin = { ...(cfg.admin as object | undefined), listen: `127.0.0.1:${adminPort}` };
      fs.writeFileSync(file, YAML.stringify(cfg));
      args.push('--config', file);
      env.IPGATE_ADMIN_URL = `http://127.0.0.1:${adminPort}`;
    }

    const proxy = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proxy.stdout.on('data', (c: Buffer) => (output += c.toString()));
    proxy.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((resolve) => proxy.once('exit', (code) => resolve(code)));
    let running = true;
    void exited.then(() => (running = false));
    t.teardown(() => {
      if (running) proxy.kill('SIGKILL');
    });
    try {
      await waitFor(async () => !running || (await readyz(adminPort)) === 200, 30_000, 'the demo ready (/readyz 200)');
    } catch (err) {
      throw new Error(`${(err as Error).message}; output:\n${output}`);
    }
    t.ok(running, `the demo is running${running ? '' : `: it exited; output:\n${output}`}`);
    if (!running) return;

    // --- "The demo": the probes, then the allowlist edits.
    const blocks = shBlocks(section('The demo'));
    t.equal(blocks.length, 2, 'the demo has two command blocks: probes, then allowlist edits');
    const all = blocks.flatMap(steps);
    const find = (what: string, pred: (s: Step) => boolean): Step | undefined => {
      const s = all.find(pred);
      t.ok(s, `the demo has ${what}`);
      return s;
    };
    const tcpAllowed = find('an allowed TCP probe', (s) => s.command.includes('telnet://') && !s.command.includes('--interface'));
    const tcpDenied = find('a denied TCP probe', (s) => s.command.includes('telnet://') && s.command.includes('--interface 127.0.0.2'));
    const add = find('an allowlist add of 127.0.0.2', (s) => / allowlist add demo 127\.0\.0\.2\/32/.test(s.command));
    const rm = find('an allowlist rm of 127.0.0.2', (s) => / allowlist rm demo 127\.0\.0\.2\/32/.test(s.command));
    const exported = find('the token exported for the CLI', (s) => s.command.startsWith('export IPGATE_ADMIN_TOKEN='));
    find('a check', (s) => / allowlist check demo 127\.0\.0\.2$/.test(s.command));
    find('an HTTP probe', (s) => /^curl -s http:\/\/127\.0\.0\.1:8080\/$/.test(s.command));
    find('a denied HTTP probe', (s) => s.command.includes('--interface 127.0.0.2 http://') && s.comment.startsWith('denied'));
    find('a metrics scrape', (s) => s.command.includes(':9901/metrics'));
    t.equal(exported?.command, `export IPGATE_ADMIN_TOKEN=${token}`, 'the CLI gets the token the proxy was started with');

    const shellEnv: NodeJS.ProcessEnv = { ...baseEnv, ...(env.IPGATE_ADMIN_URL ? { IPGATE_ADMIN_URL: env.IPGATE_ADMIN_URL } : {}) };
    let held: net.Socket | null = null;
    for (const step of all) {
      const exp = /^export ([A-Z_]+)=(\S+)$/.exec(step.command);
      if (exp) {
        // One bash per command (to see each output): the export is carried over by hand.
        shellEnv[exp[1]!] = exp[2]!;
        continue;
      }
      if (step === rm) {
        // "...'s open connections are cut": a connection from .2, allowed since the add, held open.
        held = await connect({ port: tcpPort, localAddress: '127.0.0.2' });
        t.match(
          await readLine(held),
          /^ipgate-echo client=127\.0\.0\.2:\d+ via=proxy-v2/,
          'after the add, 127.0.0.2 gets through the TCP listener',
        );
      }
      const r = await sh(moved(step.command), shellEnv);
      const label = `${step.command}  # ${step.comment}`;
      if (step === tcpAllowed) {
        // Still open when curl's --max-time ended it (exit 28): allowed connections stay up.
        t.equal(r.code, 28, `${label}: the connection stayed open until --max-time`);
      } else if (step === tcpDenied) {
        t.equal(r.code, 0, `${label}: closed by ipgate (exit 0), not ended by --max-time (28)`);
        t.equal(r.stdout, '', 'nothing read');
        t.match(step.comment, /^denied: .*closes the connection at once/, 'as the README says');
      } else {
        t.equal(r.code, 0, `${label}: exit 0${r.stderr ? ` (stderr ${r.stderr.trim()})` : ''}`);
      }
      if (step.expect) t.match(r.stdout, step.expect, `${label}: prints what the README shows`);
      if (step === add) t.notOk(/ipgate: /.test(r.stderr), 'the token is accepted');
      if (step === rm && held) {
        await t.resolves(closed(held, 5_000), 'the held connection from 127.0.0.2 is cut by the rm');
      }
    }
    t.ok(held, 'the rm step ran with a connection held open');

    proxy.kill('SIGTERM');
    t.equal(await exited, 0, 'SIGTERM: the demo stops with exit 0');
  },
);

t.test('README: the short token the README used to give is refused on one line, exit 1', async (t) => {
  const promise = /A wrong token is refused on one line before anything starts:\n`([^`]+)` \(exit 1\)/.exec(README);
  t.ok(promise, 'the README says what a wrong token prints');
  if (!promise) return;
  const r = await sh('node dist/src/main.js', { ...baseEnv, IPGATE_ADMIN_TOKEN: 'demo' });
  t.equal(r.code, 1, 'exit 1');
  t.equal(r.stderr, `${promise[1]}\n`, 'exactly the line the README shows, and nothing else (no stack)');
  t.equal(r.stdout, '', 'nothing logged: it stopped before starting anything');
});

t.test('README "Running it for real": a bad config is refused with path and value, one line each, exit 1', async (t) => {
  const file = path.join(tmpDir('ipgate-readme-'), 'bad.yaml');
  fs.writeFileSync(
    file,
    'allowlists: { main: [10.0.0.1/33] }\nlisteners: [{ name: a, listen: "127.0.0.1:99999", allowlist: main, upstreams: ["127.0.0.1:7100"] }]\n',
  );
  for (const command of [`node dist/src/main.js check-config ${file}`, `node dist/src/main.js --config ${file}`]) {
    const r = await sh(command, baseEnv);
    t.equal(r.code, 1, `${command}: exit 1`);
    const lines = r.stderr.trimEnd().split('\n');
    t.equal(lines.length, 2, `${command}: one line per problem (${JSON.stringify(r.stderr)})`);
    t.ok(
      lines.every((l) => l.startsWith(`ipgate: invalid config ${file}: `)),
      'each line says which file',
    );
    t.ok(
      lines.some((l) => /: allowlists\.main\[0\][\w.]*: "10\.0\.0\.1\/33": \S/.test(l)),
      'the bad CIDR: its field and value',
    );
    t.ok(
      lines.some((l) => /: listeners\[0\]\.listen: "127\.0\.0\.1:99999": \S/.test(l)),
      'the bad port: its field and value',
    );
    t.equal(r.stdout, '', 'nothing started, nothing logged');
  }
});
