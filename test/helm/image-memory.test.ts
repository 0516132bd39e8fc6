/**
 * The image's memory settings (issue 31; bench/README.md "Memory after a mixed run"): the runtime
 * stage preloads jemalloc in place of glibc's malloc (LD_PRELOAD, Debian's libjemalloc2 linked at
 * one path), caps glibc's malloc arenas for a pod that clears LD_PRELOAD (MALLOC_ARENA_MAX) and V8's
 * young generation (NODE_OPTIONS=--max-semi-space-size), and each takes effect in the image's Node
 * major.
 *
 * There is no Docker engine here, so the image's Node binary (scripts/install-node-image-major.sh,
 * the one CI runs the suite on) runs a script with exactly the runtime stage's environment; the
 * script keeps the libuv thread pool and V8's helper threads busy (each thread's first malloc gets
 * an arena of its own, up to the limit) and makes short-lived objects that survive a scavenge (the
 * young generation grows to its maximum), then reports its thread arenas (read from
 * /proc/self/maps: glibc reserves each as a 64 MiB-aligned, 64 MiB mapping), whether jemalloc is
 * mapped, and V8's new space. The preloaded library is the one the stage's own `ln -s` command
 * links, run here into a temporary directory (this machine's libjemalloc2, as in the image). The
 * same script without the image's environment is the control: it shows more arenas, no jemalloc
 * and a larger new space, so the assertions can fail.
 *
 * The chart leaves both to the image (a NODE_OPTIONS in the pod would replace the image's whole
 * value) and keeps a memory limit: Node sizes V8's heap from it (docs/kubernetes.md "Memory").
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import os from 'node:os';
import { commands, stage } from '../helpers/dockerfile';
import { BASE_VALUES, ROOT, render } from '../helpers/helm';

const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');

/** The runtime stage's ENV instructions, KEY=VALUE pairs (values may be double-quoted). */
function runtimeEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const i of stage(dockerfile, 'runtime').filter((x) => x.keyword === 'ENV')) {
    for (const m of i.args.matchAll(/(\w+)=("((?:[^"\\]|\\.)*)"|\S*)/g)) env[m[1]!] = m[3] ?? m[2]!;
  }
  return env;
}

const PROBE = `
const crypto = require('node:crypto');
const zlib = require('node:zlib');
const fs = require('node:fs');
const v8 = require('node:v8');
let pending = 0;
for (let i = 0; i < 8; i++) { pending++; crypto.pbkdf2('p', 's', 20000, 64, 'sha256', () => pending--); }
for (let i = 0; i < 8; i++) { pending++; zlib.gzip(crypto.randomBytes(1 << 20), () => pending--); }
const ring = new Array(300000);
for (let i = 0; i < 6e6; i++) ring[i % ring.length] = { i, s: 'x' + i };
const done = () => {
  if (pending > 0) return setTimeout(done, 10);
  const newSpace = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
  const maps = fs.readFileSync('/proc/self/maps', 'utf8').trim().split('\\n').map((l) => {
    const f = l.trim().split(/\\s+/);
    const [a, b] = f[0].split('-').map((x) => BigInt('0x' + x));
    return { a, b, perms: f[1], anon: f.length < 6 };
  });
  const M = 64n << 20n;
  let arenas = 0;
  for (let i = 0; i + 1 < maps.length; i++) {
    const m = maps[i], n = maps[i + 1];
    if (m.anon && m.perms.startsWith('rw') && m.a % M === 0n && n.a === m.b && n.perms.startsWith('---') && n.b - m.a === M) arenas++;
  }
  const jemalloc = fs.readFileSync('/proc/self/maps', 'utf8').includes('libjemalloc');
  console.log(JSON.stringify({ newSpaceMiB: newSpace / 1048576, threadArenas: arenas, jemalloc }));
};
done();
`;

/** The runtime stage's command that links Debian's jemalloc at the path LD_PRELOAD names. */
function jemallocLink(): string {
  const ln = commands(stage(dockerfile, 'runtime')).filter((c) => /^ln -s .*libjemalloc/.test(c));
  if (ln.length !== 1) throw new Error(`expected one ln -s of libjemalloc in the runtime stage, found ${ln.length}`);
  return ln[0]!;
}

t.test("the runtime stage's ENV: jemalloc preloaded, glibc's arenas and V8's young generation capped", async (t) => {
  const env = runtimeEnv();
  t.equal(env.NODE_ENV, 'production');
  t.equal(env.LD_PRELOAD, '/usr/local/lib/libjemalloc.so.2', "LD_PRELOAD: jemalloc, at the path the stage's ln -s makes");
  const install = commands(stage(dockerfile, 'runtime')).find((c) => c.startsWith('apt-get install'));
  t.match(install, /(^| )libjemalloc2( |$)/, 'the runtime stage installs libjemalloc2');
  t.match(jemallocLink(), / \/usr\/local\/lib\/libjemalloc\.so\.2$/, 'and links it at that path');
  t.equal(env.MALLOC_ARENA_MAX, '2', 'MALLOC_ARENA_MAX=2: the main arena and one more for every other thread');
  t.match(env.NODE_OPTIONS, /(^| )--max-semi-space-size=8( |$)/, 'NODE_OPTIONS caps each semi-space at 8 MiB');
});

t.test(
  "the image's Node major with the image's environment: jemalloc, no glibc thread arena, a new space of at most two semi-spaces; one arena without LD_PRELOAD",
  { skip: process.platform !== 'linux' ? '/proc/self/maps, glibc: Linux only' : false },
  async (t) => {
    const r = spawnSync('bash', [path.join(ROOT, 'scripts/install-node-image-major.sh')], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`install-node-image-major.sh failed: ${r.stderr}`);
    const node = r.stdout.trim().split('\n').pop()!;
    const run = (env: Record<string, string>): { newSpaceMiB: number; threadArenas: number; jemalloc: boolean } => {
      const p = spawnSync(node, ['-e', PROBE], { encoding: 'utf8', env: { PATH: process.env.PATH, ...env }, timeout: 60_000 });
      t.equal(p.status, 0, `node ran (${p.stderr.trim()})`);
      t.equal(p.stderr, '', 'nothing on stderr (ld.so says there when it cannot preload)');
      return JSON.parse(p.stdout) as { newSpaceMiB: number; threadArenas: number; jemalloc: boolean };
    };
    // The stage's own ln -s, into a temporary directory: this machine's libjemalloc2 (a Debian
    // package, as in the image; .ci/run installs it).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-jemalloc-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    const lib = path.join(dir, 'libjemalloc.so.2');
    const ln = spawnSync('bash', ['-c', jemallocLink().replace(/ \/usr\/local\/lib\/libjemalloc\.so\.2$/, ` ${lib}`)], {
      encoding: 'utf8',
    });
    t.equal(ln.status, 0, `the stage's ln -s ran here (${ln.stderr.trim()})`);
    if (!fs.existsSync(lib)) throw new Error(`no jemalloc at ${lib}: install the Debian package libjemalloc2`);
    const image = runtimeEnv();
    const semi = Number(/--max-semi-space-size=(\d+)/.exec(image.NODE_OPTIONS ?? '')?.[1]);
    const bare = run({});
    const withJemalloc = run({ ...image, LD_PRELOAD: lib });
    const { LD_PRELOAD: _cleared, ...glibcOnly } = image;
    const capped = run(glibcOnly);
    t.ok(bare.threadArenas > 1, `control: glibc's default made ${bare.threadArenas} thread arenas`);
    t.notOk(bare.jemalloc, 'control: no jemalloc mapped');
    t.ok(bare.newSpaceMiB > 2 * semi, `control: V8's default new space grew to ${bare.newSpaceMiB} MiB`);
    t.ok(withJemalloc.jemalloc, "with the image's ENV: jemalloc mapped");
    t.equal(withJemalloc.threadArenas, 0, "with the image's ENV: no glibc thread arena (jemalloc serves every thread)");
    t.ok(withJemalloc.newSpaceMiB <= 2 * semi, `with the image's ENV: new space ${withJemalloc.newSpaceMiB} MiB <= 2 x ${semi} MiB`);
    t.equal(capped.threadArenas, Number(image.MALLOC_ARENA_MAX) - 1, `LD_PRELOAD cleared: ${capped.threadArenas} thread arena(s)`);
    t.ok(capped.newSpaceMiB <= 2 * semi, `LD_PRELOAD cleared: new space ${capped.newSpaceMiB} MiB <= 2 x ${semi} MiB`);
  },
);

t.test("the chart's pod: the image's memory settings apply, under a memory limit", async (t) => {
  const c = render(BASE_VALUES).podSpec().containers[0];
  const names = (c.env as { name: string }[]).map((e) => e.name);
  t.notOk(names.includes('NODE_OPTIONS'), "no NODE_OPTIONS in the pod: it would replace the image's");
  t.notOk(names.includes('MALLOC_ARENA_MAX'), "MALLOC_ARENA_MAX: the image's");
  t.notOk(names.includes('LD_PRELOAD'), "LD_PRELOAD: the image's");
  t.equal(c.resources.limits.memory, '512Mi', "a memory limit by default: Node sizes V8's heap from it (old generation 256 MiB)");
});
