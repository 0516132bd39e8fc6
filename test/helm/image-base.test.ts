/**
 * The image's bases (issue 32 item 11): pinned by digest, refreshed by a script, and a runtime
 * stage with the node binary only, no npm, npx, corepack or yarn. There is no Docker engine (and
 * no registry) here, so:
 *
 * 1. The Dockerfile is read as Docker reads it (test/helpers/dockerfile.ts): every FROM is a
 *    digest-pinned base or an earlier stage; the runtime stage starts from Debian's slim image of
 *    the release the node image is built on and copies exactly the node binary from the node image.
 * 2. The official linux-x64 binary of the image's Node major (the one CI runs the suite on,
 *    scripts/install-node-image-major.sh) links nothing but glibc, libstdc++ and libgcc_s, which
 *    Debian's slim image has (apt itself needs libstdc++6).
 * 3. scripts/refresh-base-images.sh runs against a copy of the Dockerfile with a `crane` on PATH
 *    that answers from a table: the registry itself is out of reach, so what is tested is the
 *    script's own work (read each pin, ask for its tag's digest, rewrite or report).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { commands, instructions, stage } from '../helpers/dockerfile';
import { ROOT } from '../helpers/helm';

const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const all = instructions(dockerfile);
const args = new Map(
  all
    .filter((i) => i.keyword === 'ARG' && i.args.includes('='))
    .map((i) => {
      const at = i.args.indexOf('=');
      return [i.args.slice(0, at), i.args.slice(at + 1)] as const;
    }),
);
const DIGEST = /^(?<name>[a-z0-9./-]+):(?<tag>[A-Za-z0-9._-]+)@sha256:[0-9a-f]{64}$/;
const PACKAGE_MANAGERS = /\b(npm|npx|corepack|yarn|yarnpkg|pnpm)\b/;

t.test('every FROM is a digest-pinned base image or an earlier stage', async (t) => {
  const stages: string[] = [];
  for (const from of all.filter((i) => i.keyword === 'FROM')) {
    const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(from.args)!;
    const image = m[1]!;
    const ref = /^\$\{(\w+)\}$/.exec(image);
    if (ref !== null) {
      t.match(args.get(ref[1]!), DIGEST, `FROM ${image}: ARG ${ref[1]} is name:tag@sha256:<digest>`);
    } else {
      t.ok(stages.includes(image), `FROM ${image}: an earlier stage`);
    }
    if (m[2] !== undefined) stages.push(m[2]);
  }
  t.same(stages, ['build', 'deps', 'node', 'runtime']);
  t.match(args.get('NODE_IMAGE'), /^node:\d+-bookworm-slim@/, 'the node image: a major, on Debian bookworm');
  t.match(args.get('RUNTIME_IMAGE'), /^debian:bookworm-slim@/, 'the runtime: the Debian release the node image is built on');
  // .ci/run and scripts/install-node-image-major.sh read the image's Node major from this line.
  t.equal(/^ARG NODE_IMAGE=node:([0-9]*)-.*/m.exec(dockerfile)?.[1], '24', 'the major is still where CI reads it');
});

t.test('the runtime stage: the node binary from the node image and nothing of its package managers', async (t) => {
  const runtime = stage(dockerfile, 'runtime');
  t.equal(
    runtime[0]!.args,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the Dockerfile's own ${ARG} reference, as written in it
    '${RUNTIME_IMAGE} AS runtime',
    "not the node image: its npm, corepack and yarn are never in the runtime's layers",
  );
  const fromNode = runtime.filter((i) => i.keyword === 'COPY' && /--from=node\b/.test(i.args));
  t.same(
    fromNode.map((i) => i.args),
    ['--from=node /usr/local/bin/node /usr/local/bin/node'],
    'exactly the binary',
  );
  for (const copy of runtime.filter((i) => i.keyword === 'COPY')) {
    t.notMatch(
      copy.args,
      /\/usr\/local\/lib\/node_modules|\/opt\/yarn|\/usr\/local\/bin\/(npm|npx|corepack|yarn)/,
      `COPY ${copy.args}: no package manager`,
    );
  }
  t.notOk(
    commands(runtime).some((c) => PACKAGE_MANAGERS.test(c)),
    'no RUN of a package manager in the runtime stage',
  );
  t.same(
    stage(dockerfile, 'node').map((i) => i.keyword),
    ['FROM'],
    'the node stage only names the node image',
  );
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the Dockerfile's own ${ARG} reference, as written in it
  t.equal(stage(dockerfile, 'node')[0]!.args, '${NODE_IMAGE} AS node');
  const entry = runtime.find((i) => i.keyword === 'ENTRYPOINT')!;
  t.same(JSON.parse(entry.args), ['/usr/bin/tini', '--', 'node', '/app/dist/src/main.js'], 'node on PATH (/usr/local/bin), as before');
  // The build stages still use npm: it must not leak into the runtime through a COPY of their tree.
  t.match(commands(stage(dockerfile, 'deps')).join('\n'), /npm ci --omit=dev/);
  const fromDeps = runtime.filter((i) => i.keyword === 'COPY' && /--from=deps\b/.test(i.args)).map((i) => i.args);
  t.same(fromDeps, ['--from=deps /src/node_modules ./node_modules'], "from deps: the application's production dependencies only");
});

t.test(
  "the image's Node binary links only libraries Debian's slim image has",
  { skip: process.platform !== 'linux' ? 'ldd: Linux only' : false },
  async (t) => {
    const r = spawnSync('bash', [path.join(ROOT, 'scripts/install-node-image-major.sh')], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`install-node-image-major.sh failed: ${r.stderr}`);
    const node = r.stdout.trim().split('\n').pop()!;
    const ldd = spawnSync('ldd', [node], { encoding: 'utf8' });
    t.equal(ldd.status, 0, ldd.stderr);
    const libs = ldd.stdout
      .split('\n')
      .map((l) => l.trim().split(/\s/)[0]!)
      .filter(Boolean)
      .map((l) => path.basename(l));
    t.ok(libs.includes('libstdc++.so.6'), `found the libraries (${libs.join(', ')})`);
    // libc6 (Essential), libstdc++6 and libgcc-s1 (apt depends on them): in every Debian slim image.
    const debianSlim =
      /^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1|lib(c|m|dl|pthread|rt)\.so\.[0-9]+|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$/;
    t.same(
      libs.filter((l) => !debianSlim.test(l)),
      [],
      'nothing else',
    );
  },
);

/** A temp dir with a copy of the Dockerfile and a `crane` that answers digests from `table`. */
function fakeRegistry(table: Record<string, string>): { dir: string; file: string; env: NodeJS.ProcessEnv } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-refresh-'));
  const file = path.join(dir, 'Dockerfile');
  fs.writeFileSync(file, dockerfile);
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin);
  const cases = Object.entries(table)
    .map(([ref, digest]) => `  '${ref}') echo '${digest}' ;;`)
    .join('\n');
  fs.writeFileSync(
    path.join(bin, 'crane'),
    `#!/bin/sh\n[ "$1" = digest ] || exit 3\ncase "$2" in\n${cases}\n  *) echo "no such tag $2" >&2; exit 1 ;;\nesac\n`,
    { mode: 0o755 },
  );
  return { dir, file, env: { ...process.env, PATH: `${bin}:/usr/bin:/bin`, DOCKERFILE: file } };
}

const script = path.join(ROOT, 'scripts/refresh-base-images.sh');
const pinned = (name: string): string => args.get(name)!.split('@')[1]!;
const NEW_NODE = `sha256:${'1'.repeat(64)}`;

t.test('refresh-base-images.sh: --check reports a pin behind its tag; a run rewrites both ARG lines and nothing else', async (t) => {
  const nodeRef = args.get('NODE_IMAGE')!.split('@')[0]!;
  const debianRef = args.get('RUNTIME_IMAGE')!.split('@')[0]!;
  const reg = fakeRegistry({ [nodeRef]: NEW_NODE, [debianRef]: pinned('RUNTIME_IMAGE') });
  t.teardown(() => fs.rmSync(reg.dir, { recursive: true, force: true }));

  const check = spawnSync('bash', [script, '--check'], { env: reg.env, encoding: 'utf8' });
  t.equal(check.status, 1, 'stale: exit 1');
  t.match(check.stdout, new RegExp(`NODE_IMAGE ${nodeRef}: ${pinned('NODE_IMAGE')} -> ${NEW_NODE}`));
  t.match(check.stdout, new RegExp(`RUNTIME_IMAGE ${debianRef}: current`));
  t.equal(fs.readFileSync(reg.file, 'utf8'), dockerfile, '--check changes nothing');

  const run = spawnSync('bash', [script], { env: reg.env, encoding: 'utf8' });
  t.equal(run.status, 0, run.stderr);
  const after = fs.readFileSync(reg.file, 'utf8');
  const changed = after.split('\n').filter((l, i) => l !== dockerfile.split('\n')[i]);
  t.same(changed, [`ARG NODE_IMAGE=${nodeRef}@${NEW_NODE}`], 'one line: the tag kept, the digest replaced');
  const again = spawnSync('bash', [script, '--check'], { env: reg.env, encoding: 'utf8' });
  t.equal(again.status, 0, 'current after the run');
});

t.test('refresh-base-images.sh fails clearly: no tool, a tag the registry does not know, a pin it cannot read', async (t) => {
  const nodeRef = args.get('NODE_IMAGE')!.split('@')[0]!;
  const reg = fakeRegistry({ [nodeRef]: NEW_NODE });
  t.teardown(() => fs.rmSync(reg.dir, { recursive: true, force: true }));
  // A PATH with the shell tools the script uses and neither crane nor docker.
  const tools = path.join(reg.dir, 'tools');
  fs.mkdirSync(tools);
  for (const tool of ['sed', 'bash'])
    fs.symlinkSync(spawnSync('bash', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim(), path.join(tools, tool));
  const noTool = spawnSync(path.join(tools, 'bash'), [script, '--check'], { env: { ...reg.env, PATH: tools }, encoding: 'utf8' });
  t.equal(noTool.status, 2);
  t.match(noTool.stderr, /needs crane or docker buildx to ask the registry for node:24-bookworm-slim's digest/);
  const unknown = spawnSync('bash', [script], { env: reg.env, encoding: 'utf8' });
  t.equal(unknown.status, 2, "the runtime tag is not in the registry's table");
  t.match(unknown.stderr, /no such tag debian:bookworm-slim[\s\S]*could not get the digest of debian:bookworm-slim; nothing changed/);
  t.equal(fs.readFileSync(reg.file, 'utf8'), dockerfile, 'the node pin, already looked up, is not written either');
  fs.writeFileSync(reg.file, dockerfile.replace(/^ARG RUNTIME_IMAGE=.*$/m, 'ARG RUNTIME_IMAGE=debian:bookworm-slim'));
  const unpinned = spawnSync('bash', [script, '--check'], { env: { ...reg.env }, encoding: 'utf8' });
  t.equal(unpinned.status, 2);
  t.match(unpinned.stderr, /ARG RUNTIME_IMAGE in .* is not name:tag@sha256:<digest> \(debian:bookworm-slim\)/);
});
