/**
 * Network namespace labs for e2e tests: namespaces, veth pairs created directly between them (never
 * in the host's namespace), processes started inside them, and a teardown that removes everything
 * even after a failure. Names carry a prefix with the test's pid (`iglab<pid>-<role>`), so a later
 * run can recognise and remove what a crashed run left behind.
 *
 * All lab traffic stays inside the namespaces: the host's interfaces, routes and firewall are
 * never touched (`ip -n NS ...` and `ip netns exec NS ...` only).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { which } from './peers';
import { waitFor } from './net';

export const LAB_PREFIX = 'iglab';

/** Why the lab cannot run here, or false when it can. In CI a missing prerequisite is a failure. */
export function labUnavailable(): string | false {
  const reason = ((): string | false => {
    if (process.platform !== 'linux') return 'network namespaces need Linux';
    if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'needs root (ip netns, iptables)';
    if (which('ip') === null) return 'ip (iproute2) is not installed';
    if (which('iptables') === null) return 'iptables is not installed';
    const probe = `${LAB_PREFIX}${process.pid}-probe`;
    const r = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' });
    if (r.status !== 0) return `ip netns add failed: ${(r.stderr || r.error?.message || '').trim()}`;
    spawnSync('ip', ['netns', 'del', probe]);
    return false;
  })();
  if (reason !== false && process.env.CI)
    throw new Error(`e2e lab cannot run: ${reason} (.ci/run runs as root with iproute2 and iptables)`);
  return reason;
}

/** Run a command, throw with its stderr when it fails. */
export function run(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}: ${(r.stderr || r.error?.message || '').trim()}`);
  return r.stdout;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function listNamespaces(): string[] {
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return r.status === 0
    ? r.stdout
        .split('\n')
        .map((l) => l.split(' ')[0]!)
        .filter(Boolean)
    : [];
}

/** Kill whatever runs in a namespace, then delete it. */
function deleteNamespace(ns: string): void {
  const pids = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' });
  for (const p of (pids.stdout ?? '')
    .split('\n')
    .map(Number)
    .filter((n) => n > 0)) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  spawnSync('ip', ['netns', 'del', ns]);
}

/** Remove namespaces left by lab runs whose process no longer exists. */
export function removeStaleLabs(): string[] {
  const removed: string[] = [];
  for (const ns of listNamespaces()) {
    const m = new RegExp(`^${LAB_PREFIX}(\\d+)-`).exec(ns);
    if (m === null || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue;
    deleteNamespace(ns);
    removed.push(ns);
  }
  return removed;
}

export interface NsProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  /** Wait until the output contains `needle` (or the process exits: then reject). */
  waitOutput(needle: string | RegExp, ms?: number): Promise<void>;
  stop(): Promise<void>;
}

export class Lab {
  readonly prefix = `${LAB_PREFIX}${process.pid}`;
  private readonly namespaces: string[] = [];
  private readonly processes: NsProcess[] = [];

  /** Full name of a role's namespace. */
  ns(role: string): string {
    return `${this.prefix}-${role}`;
  }

  addNamespace(role: string): string {
    const ns = this.ns(role);
    run('ip', ['netns', 'add', ns]);
    this.namespaces.push(ns);
    run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  }

  /** `ip -n <role's ns> ...args` */
  ip(role: string, ...args: string[]): string {
    return run('ip', ['-n', this.ns(role), ...args]);
  }

  /** Run a command inside a role's namespace and return its stdout. */
  exec(role: string, cmd: string, args: string[], input?: string): string {
    return run('ip', ['netns', 'exec', this.ns(role), cmd, ...args], input);
  }

  /** Set a per-namespace sysctl through /proc/sys (no procps needed). */
  sysctl(role: string, key: string, value: string): void {
    const file = `/proc/sys/${key.replace(/\./g, '/')}`;
    this.exec(role, 'sh', ['-c', 'echo "$1" > "$2"', 'sh', value, file]);
  }

  /** A veth pair from `a`'s namespace to `b`'s, created in place, both ends up. */
  veth(a: string, ifA: string, b: string, ifB: string): void {
    this.ip(a, 'link', 'add', ifA, 'type', 'veth', 'peer', 'name', ifB, 'netns', this.ns(b));
    this.ip(a, 'link', 'set', ifA, 'up');
    this.ip(b, 'link', 'set', ifB, 'up');
  }

  /** Replace the iptables tables named in `rules` (iptables-restore format) inside a namespace. */
  iptablesRestore(role: string, rules: string): void {
    this.exec(role, 'iptables-restore', [], rules);
  }

  /** Start a long-running process inside a namespace (exec'd: its pid is the process's own). */
  spawn(role: string, cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): NsProcess {
    const child = spawn('ip', ['netns', 'exec', this.ns(role), cmd, ...args], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    const waiters = new Set<() => void>();
    const onData = (c: Buffer): void => {
      out += c.toString();
      for (const w of waiters) w();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => {
        for (const w of waiters) w();
        resolve(code);
      }),
    );
    const p: NsProcess = {
      child,
      output: () => out,
      exited,
      waitOutput: (needle, ms = 15_000) =>
        new Promise<void>((resolve, reject) => {
          const check = (): void => {
            const hit = typeof needle === 'string' ? out.includes(needle) : needle.test(out);
            if (hit) done(null);
            else if (child.exitCode !== null || child.signalCode !== null)
              done(
                new Error(`${cmd} exited (${child.exitCode ?? child.signalCode}) before printing ${String(needle)}:\n${out.slice(-2000)}`),
              );
          };
          const timer = setTimeout(() => done(new Error(`${cmd}: no ${String(needle)} within ${ms} ms:\n${out.slice(-2000)}`)), ms);
          const done = (err: Error | null): void => {
            clearTimeout(timer);
            waiters.delete(check);
            if (err) reject(err);
            else resolve();
          };
          waiters.add(check);
          check();
        }),
      stop: async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          const t = setTimeout(() => child.kill('SIGKILL'), 3000);
          await exited;
          clearTimeout(t);
        }
      },
    };
    this.processes.push(p);
    return p;
  }

  /** Wait until a process in the lab LISTENs on a TCP port (read from its namespace's /proc/<pid>/net/tcp). */
  async waitListen(p: NsProcess, port: number, ms = 15_000): Promise<void> {
    const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
    await waitFor(
      () => {
        if (p.child.exitCode !== null || p.child.signalCode !== null)
          throw new Error(`process exited before listening on ${port}:\n${p.output().slice(-2000)}`);
        return ['tcp', 'tcp6'].some((f) => {
          let text = '';
          try {
            text = fs.readFileSync(`/proc/${p.child.pid}/net/${f}`, 'utf8');
          } catch {
            return false;
          }
          return text.split('\n').some((line) => {
            const cols = line.trim().split(/\s+/);
            return cols[1]?.endsWith(hex) === true && cols[3] === '0A';
          });
        });
      },
      ms,
      `a listener on port ${port}`,
    );
  }

  /** Stop every process, then delete every namespace (safe to call twice, and after a failed setup). */
  async teardown(): Promise<void> {
    await Promise.all(this.processes.splice(0).map((p) => p.stop().catch(() => undefined)));
    for (const ns of this.namespaces.splice(0).reverse()) deleteNamespace(ns);
  }
}
