/**
 * Start ipgate for a test: in process (fast, lets tests read listener stats) or as the compiled
 * binary (for signal, exit-code and memory tests).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type pino from 'pino';
import type { Test } from 'tap';
import YAML from 'yaml';
import { startApp, type App } from '../../src/app';
import { buildConfig } from '../../src/config/load';
import { createLogger } from '../../src/log';

import { MAIN, ROOT } from './root';

export { MAIN, ROOT };

/** The compiled CLI run to its end (`ipgate import ...`, `ipgate check-config ...`), as an operator runs it. */
export function runIpgate(args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', input, timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Log lines captured from an in-process app, parsed. */
export class LogCapture extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _enc: string, cb: () => void): void {
    for (const line of chunk.toString().split('\n')) if (line) this.lines.push(JSON.parse(line) as Record<string, unknown>);
    cb();
  }
  find(pred: (l: Record<string, unknown>) => boolean): Record<string, unknown> | undefined {
    return this.lines.find(pred);
  }
}

export interface Started {
  app: App;
  logs: LogCapture;
  /** Port of the listener with that name (or the first). */
  port(name?: string): number;
}

/** Build a config (defaults applied, validated) and start it in this process with captured logs. */
export async function startIpgate(raw: Record<string, unknown>, level: pino.Level = 'debug'): Promise<Started> {
  const config = buildConfig({ store: { type: 'memory' }, admin: { listen: null }, ...raw });
  const logs = new LogCapture();
  // The process logger as main.ts builds it (level labels, ISO time), so the tests see the lines
  // operators see, including the access log's text-built lines (src/log.ts rawLineTarget).
  const logger = createLogger({ level, format: 'json' }, logs);
  const app = await startApp(config, { logger });
  return {
    app,
    logs,
    port: (name?: string) => {
      const l = name === undefined ? app.listeners[0] : app.listeners.find((x) => x.name === name);
      if (!l?.address) throw new Error(`no listener ${name ?? ''}`);
      return l.address.port;
    },
  };
}

/**
 * ipgate in this process with one HTTP listener, `web` on 127.0.0.1:0 behind the allowlist `main`
 * (127.0.0.0/8 unless `opts.allowlists` says otherwise), `listener`'s fields added over those; shut
 * down when `t` ends.
 */
export async function startHttpGate(
  t: Test,
  listener: Record<string, unknown>,
  opts: { allowlists?: Record<string, unknown>; level?: pino.Level } = {},
): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: opts.allowlists ?? { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', ...listener }],
    },
    opts.level,
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

export function tmpDir(prefix = 'ipgate-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** Run the compiled binary with a config object written to a temp file. */
export function spawnIpgate(args: string[], config?: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Spawned {
  const argv = [MAIN, ...args];
  if (config) {
    const file = path.join(tmpDir(), 'config.yaml');
    fs.writeFileSync(file, YAML.stringify(config));
    argv.push('--config', file);
  }
  const child = spawn(process.execPath, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/**
 * The child processes of `pid`, from the kernel's per-thread children lists
 * (/proc/<pid>/task/<tid>/children): cluster workers are forked by a thread of the primary.
 */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out; // the process is gone
  }
  for (const tid of tasks) {
    try {
      for (const c of fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/)) if (c) out.push(Number(c));
    } catch {
      // the thread ended
    }
  }
  return [...new Set(out)];
}

/**
 * Kill `g` and its children (a cluster's workers) when the test ends, unless it already exited:
 * SIGKILL, so a hung drain cannot hold the run up.
 */
export function killAtTeardown(t: { teardown(fn: () => Promise<void>): void }, g: Spawned): void {
  t.teardown(async () => {
    if (g.child.exitCode !== null || g.child.signalCode !== null) return;
    for (const pid of childPids(g.child.pid!))
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    g.child.kill('SIGKILL');
    await g.exited;
  });
}

/** The JSON log lines written to stdout so far (a partial last line is left out). */
export function logLines(text: string): Record<string, unknown>[] {
  const lines = text.split('\n');
  lines.pop();
  return lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}
