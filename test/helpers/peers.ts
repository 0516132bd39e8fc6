/**
 * Real protocol peers from Debian packages (HAProxy, nginx), started with a generated config in a
 * temp dir, in the foreground, and stopped at teardown. Tests using them fail (not skip) in CI when
 * the binary is missing: .ci/run installs them.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tmpDir } from './ipgate';
import { waitForListen } from './net';

export interface Peer {
  child: ChildProcess;
  dir: string;
  output: () => string;
  stop: () => Promise<void>;
}

export function which(bin: string): string | null {
  for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/sbin', '/usr/local/bin']) {
    const p = path.join(dir, bin);
    if (fs.existsSync(p)) return p;
  }
  const r = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Skip reason when a peer is missing locally; in CI a missing peer is a failure, not a skip. */
export function missing(bin: string): string | false {
  if (which(bin) !== null) return false;
  if (process.env.CI) throw new Error(`${bin} is not installed: .ci/run must install it`);
  return `${bin} is not installed (apt-get install ${bin === 'nginx' ? 'nginx-light libnginx-mod-stream' : bin})`;
}

async function startPeer(cmd: string, args: string[], dir: string, ports: number[]): Promise<Peer> {
  const child = spawn(cmd, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    await Promise.race([
      Promise.all(ports.map((p) => waitForListen(p))),
      exited.then(() => {
        throw new Error(`${cmd} exited: ${out}`);
      }),
    ]);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return {
    child,
    dir,
    output: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}

/** HAProxy in the foreground (-db) with `config` (global/defaults are prepended). */
export async function startHaproxy(config: string, ports: number[]): Promise<Peer> {
  const dir = tmpDir('ipgate-haproxy-');
  const file = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(
    file,
    `global
  maxconn 4096
defaults
  timeout connect 5s
  timeout client 30s
  timeout server 30s
${config}
`,
  );
  return startPeer(which('haproxy') ?? 'haproxy', ['-db', '-f', file], dir, ports);
}

/** nginx in the foreground with its own prefix, pid and logs in a temp dir. */
export async function startNginx(body: string, ports: number[], opts: { stream?: boolean } = {}): Promise<Peer> {
  const dir = tmpDir('ipgate-nginx-');
  for (const d of ['logs', 'tmp']) fs.mkdirSync(path.join(dir, d));
  const file = path.join(dir, 'nginx.conf');
  const streamModule = '/usr/lib/nginx/modules/ngx_stream_module.so';
  fs.writeFileSync(
    file,
    `${opts.stream ? `load_module ${streamModule};\n` : ''}daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 1024; }
${body}
`,
  );
  return startPeer(which('nginx') ?? 'nginx', ['-p', dir, '-c', file, '-e', `${dir}/logs/error.log`], dir, ports);
}

/** Common http{} preamble for nginx: temp paths inside the prefix, no access to /var. */
export function nginxHttpPreamble(dir = '$prefix'): string {
  void dir;
  return `client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fcgi;
  uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi; access_log off;`;
}
