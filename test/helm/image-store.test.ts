/**
 * The image's default file-store path is writable by the image's user. There is no Docker engine
 * here, so, as image-entrypoint.test.ts does for the entrypoint:
 *
 * 1. The Dockerfile is read: the runtime stage runs as uid 10001, creates /var/lib/ipgate owned by
 *    that uid (and group 0, for OpenShift's arbitrary uids), declares it the VOLUME, and links
 *    /app/data to it, so ipgate's default `store.path` (./data/allowlists.json, from the working
 *    directory /app) lands in the volume. The chart mounts its writable emptyDir at the same path.
 * 2. That layout is rebuilt in a temporary directory (a root-owned /app, a /var/lib/ipgate of uid
 *    10001, the link) and ipgate runs there as uid 10001 with a file store at the default path: it
 *    creates the store in the volume. Without the link the same run fails with EACCES, which is the
 *    bug this layout fixes.
 *
 * Part 2 needs root (to run as uid 10001) and a node binary and checkout that uid 10001 can read;
 * otherwise it skips with the reason.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { configSchema } from '../../src/schema/config';
import { commands, stage } from '../helpers/dockerfile';
import { ROOT, render } from '../helpers/helm';
import { freePort } from '../helpers/net';

const UID = 10001;

const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const runtime = stage(dockerfile, 'runtime');
const runCommands = commands(runtime);
const last = (keyword: string): string => {
  const hits = runtime.filter((i) => i.keyword === keyword);
  if (hits.length === 0) throw new Error(`no ${keyword} in the runtime stage`);
  return hits[hits.length - 1]!.args;
};
const volumes = JSON.parse(last('VOLUME')) as string[];
const workdir = last('WORKDIR');
const defaultStorePath = (configSchema.properties.store.properties.path as { default: string }).default;

t.test('the runtime stage runs as uid 10001 and declares /var/lib/ipgate the volume', async (t) => {
  t.match(last('USER'), new RegExp(`^${UID}(:\\d+)?$`));
  t.same(volumes, ['/var/lib/ipgate']);
});

t.test('/var/lib/ipgate is created and owned by the runtime user, group 0 with the same rights (OpenShift)', async (t) => {
  t.ok(
    runCommands.some((c) => /^mkdir -p\b.*\s\/var\/lib\/ipgate(\s|$)/.test(c)),
    'mkdir -p /var/lib/ipgate',
  );
  const chown = runCommands.find((c) => /^chown\b.*\s\/var\/lib\/ipgate$/.test(c));
  t.ok(chown, 'chowned');
  t.match(chown, new RegExp(`^chown ${UID}:0 /var/lib/ipgate$`), 'to the USER uid, group 0');
  const chmod = runCommands.find((c) => /^chmod\b.*\s\/var\/lib\/ipgate$/.test(c));
  t.match(chmod, /^chmod 0770 \/var\/lib\/ipgate$/, 'owner and group may write, others nothing');
});

t.test('the default store.path, from the working directory, resolves into the volume', async (t) => {
  t.equal(defaultStorePath, './data/allowlists.json', "ipgate's default (src/schema/config.ts)");
  t.equal(workdir, '/app');
  const link = runCommands.map((c) => /^ln -s (\S+) (\S+)$/.exec(c)).find((m) => m !== null);
  t.ok(link, 'a symbolic link is made');
  const [, target, name] = link!;
  const resolved = path.posix.resolve(workdir, defaultStorePath);
  t.equal(path.posix.dirname(resolved), name, `${resolved} is inside the link ${name}`);
  const effective = path.posix.join(target!, path.posix.basename(resolved));
  t.equal(effective, '/var/lib/ipgate/allowlists.json');
  t.ok(
    volumes.some((v) => effective.startsWith(`${v}/`)),
    'inside the VOLUME',
  );
  const linkAt = runtime.findIndex((i) => i.keyword === 'RUN' && i.args.includes(`ln -s ${target} ${name}`));
  const copies = runtime.map((i, n) => [i, n] as const).filter(([i]) => i.keyword === 'COPY' && /\s\.\/data\b|\/app\/data\b/.test(i.args));
  t.ok(linkAt >= 0 && copies.length === 0, 'no COPY writes over /app/data');
});

t.test('the chart mounts its writable emptyDir where the image keeps its data', async (t) => {
  const pod = render({}).podSpec();
  const mount = (pod.containers[0].volumeMounts as { name: string; mountPath: string; readOnly?: boolean }[]).find(
    (m) => m.mountPath === volumes[0],
  );
  t.ok(mount, `a volume is mounted at ${volumes[0]}`);
  t.notOk(mount!.readOnly);
  t.ok((pod.volumes as { name: string; emptyDir?: unknown }[]).find((v) => v.name === mount!.name)?.emptyDir, 'an emptyDir');
});

t.test("the preStop fallback's /bin/sleep comes with the base image (Debian: coreutils is Essential)", async (t) => {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the Dockerfile's own ${ARG} reference, as written in it
  t.equal(runtime[0]!.args, '${RUNTIME_IMAGE} AS runtime', 'the runtime stage starts from RUNTIME_IMAGE');
  const base = /^ARG RUNTIME_IMAGE=(\S+)$/m.exec(dockerfile)?.[1];
  t.match(base, /^debian:(bookworm|trixie)(-slim)?@sha256:[0-9a-f]{64}$/, 'a Debian image');
  t.notOk(
    runCommands.some((c) => /coreutils/.test(c)),
    'coreutils is not removed',
  );
});

// ---- part 2: the layout at work ----------------------------------------------------------------

/** Why uid 10001 cannot run ipgate from this checkout, or null. */
function cannotRunAsImageUser(): string | null {
  if (process.getuid?.() !== 0) return 'needs root to run ipgate as uid 10001';
  const main = path.join(ROOT, 'dist/src/main.js');
  if (!fs.existsSync(main)) return 'dist/src/main.js missing (npm run build)';
  const probe = spawnSync(
    process.execPath,
    [
      '-e',
      'for (const f of process.argv.slice(1)) require("fs").accessSync(f, require("fs").constants.R_OK)',
      main,
      path.join(ROOT, 'node_modules/yaml/package.json'),
    ],
    { uid: UID, gid: UID, encoding: 'utf8' },
  );
  if (probe.status !== 0)
    return `uid ${UID} cannot run ${process.execPath} or read ${ROOT} (a private home directory?): ${(probe.error?.message ?? probe.stderr).split('\n')[0]}`;
  return null;
}

const skip = cannotRunAsImageUser() ?? false;

/** The image's /app and /var/lib/ipgate in a temporary root; `link` makes /app/data the volume. */
function layout(t: Test, link: boolean): { app: string; volume: string; config: string; port: Promise<number> } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-image-store-'));
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.chmodSync(root, 0o755);
  const app = path.join(root, 'app');
  fs.mkdirSync(app);
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(app, 'package.json'));
  fs.cpSync(path.join(ROOT, 'dist/src'), path.join(app, 'dist/src'), { recursive: true });
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(app, 'node_modules'), 'dir');
  fs.chmodSync(app, 0o755); // root-owned: uid 10001 cannot create entries here
  const volume = path.join(root, 'var/lib/ipgate');
  fs.mkdirSync(volume, { recursive: true });
  fs.chownSync(volume, UID, 0);
  fs.chmodSync(volume, 0o770);
  if (link) fs.symlinkSync(volume, path.join(app, 'data'));
  const config = path.join(root, 'config.yaml');
  const port = freePort().then((p) => {
    fs.writeFileSync(
      config,
      YAML.stringify({
        logging: { level: 'info', format: 'json', access: false },
        admin: { listen: null },
        store: { type: 'file' }, // store.path left at its default
        allowlists: { office: ['203.0.113.0/24'] },
        listeners: [{ name: 'web', mode: 'tcp', listen: `127.0.0.1:${p}`, allowlist: 'office', upstreams: ['127.0.0.1:9'] }],
      }),
    );
    fs.chmodSync(config, 0o644);
    return p;
  });
  return { app, volume, config, port };
}

/** Run ipgate as uid 10001 from `app`; resolves with its log lines once it is ready or has exited. */
function runAsImageUser(
  t: Test,
  app: string,
  config: string,
): Promise<{ ready: boolean; code: number | null; output: string; stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, [path.join(app, 'dist/src/main.js'), 'run', '--config', config], {
    cwd: app,
    uid: UID,
    gid: UID,
    env: { PATH: process.env.PATH, NODE_ENV: 'production', HOME: '/nonexistent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`neither ready nor exited within 15 s: ${output}`)), 15_000);
    const onData = (d: Buffer): void => {
      output += d.toString();
      if (/"msg":"ready"/.test(output)) {
        clearTimeout(timer);
        resolve({
          ready: true,
          code: null,
          output,
          stop: () => {
            child.kill('SIGTERM');
            return exited;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d: Buffer) => {
      output += d.toString();
    });
    void exited.then((code) => {
      clearTimeout(timer);
      resolve({ ready: false, code, output, stop: () => exited });
    });
  });
}

t.test('as uid 10001 in the image layout, the default file store is created in the volume', { skip }, async (t) => {
  const l = layout(t, true);
  await l.port;
  const run = await runAsImageUser(t, l.app, l.config);
  t.ok(run.ready, `ipgate is ready (output: ${run.output.slice(0, 2000)})`);
  t.match(run.output, /allowlist store created from the config/);
  const file = path.join(l.volume, 'allowlists.json');
  t.ok(fs.existsSync(file), 'the store file is in the volume');
  t.equal(fs.statSync(file).uid, UID, "written by the image's user");
  t.match(fs.readFileSync(file, 'utf8'), /203\.0\.113\.0\/24/, 'seeded from the config');
  t.equal(await run.stop(), 0, 'SIGTERM: exit 0');
});

t.test('without the /app/data link the same run fails with EACCES (the bug the layout fixes)', { skip }, async (t) => {
  const l = layout(t, false);
  await l.port;
  const run = await runAsImageUser(t, l.app, l.config);
  t.notOk(run.ready, 'ipgate does not become ready');
  t.not(run.code, 0, 'exits non-zero');
  t.match(run.output, /EACCES/);
  t.notOk(fs.existsSync(path.join(l.app, 'data')), 'nothing was created in /app');
});
