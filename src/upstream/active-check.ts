/**
 * Active health checks (`upstreamHealth.active`; docs/edge-rules.md "Upstream health"): each target
 * of a group is probed on its own timer, and each outcome goes to its TargetHealth (rise / fall).
 *
 * - One probe in flight per target: the next is scheduled when the last one ended, `intervalMs`
 *   after the last one started (at once if it took longer), so a slow target is never probed twice
 *   at a time.
 * - The first probe of each target is at a random point within `intervalMs` (HAProxy
 *   `spread-checks`): N groups started by one reload do not probe in phase.
 * - A probe is bounded by `timeoutMs` from its start (connect, and for `http` the status line), so
 *   a blackholed target costs one socket for at most that long.
 * - A probe is not client traffic: its own socket (never a pooled one, never a PROXY header), no
 *   request or upstream counters, no access log line. Its transitions are logged.
 * - Names resolve as the data path resolves them: with the HTTP listener's DnsCache lookup
 *   (upstream-dns.ts) when it has one, else as net.connect does (TCP listeners).
 * - Each worker runs its own checks (its own state, as passive health; HAProxy runs checks per
 *   process with nbproc): N workers probe each target N times per interval.
 */
import { performance } from 'node:perf_hooks';
import net from 'node:net';
import type { Logger } from 'pino';
import type { ActiveHealthConfig } from '../schema/config';
import type { Upstream } from './upstream-group';
import type { TargetHealth } from './upstream-health';

/** Bytes of the response read for its status line at most: a target that sends more without a line end fails the check. */
const MAX_STATUS_LINE = 1024;
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})[ \r]/;

/** net.connect's `lookup` option (upstream-dns.ts DnsCache.lookup). */
export type Lookup = net.LookupFunction;

/** Where a group's checks report (the listener's logger, and the route for the log line). */
export interface CheckContext {
  readonly log: Logger;
  readonly route: string;
  readonly lookup: Lookup | null;
}

/** The probes of one group: start() when the group goes into force, stop() when it leaves it. */
export class ActiveChecker {
  private readonly probes: Probe[];
  private running = false;

  constructor(targets: readonly Upstream[], config: Readonly<ActiveHealthConfig>) {
    this.probes = targets.map((t) => new Probe(t, t.health!, config));
  }

  /** Probes started (idempotent: a group kept by a reload keeps its timers). */
  start(ctx: CheckContext): void {
    if (this.running) return;
    this.running = true;
    for (const p of this.probes) p.start(ctx);
  }

  stop(): void {
    if (!this.running) return;
    this.running = false;
    for (const p of this.probes) p.stop();
  }

  get active(): boolean {
    return this.running;
  }
}

/** One target's checks. */
class Probe {
  private timer: NodeJS.Timeout | null = null;
  private socket: net.Socket | null = null;
  private ctx: CheckContext | null = null;
  private readonly request: Buffer | null;

  constructor(
    private readonly target: Upstream,
    private readonly health: TargetHealth,
    private readonly config: Readonly<ActiveHealthConfig>,
  ) {
    this.request =
      config.type === 'http'
        ? Buffer.from(
            `GET ${config.path ?? '/'} HTTP/1.1\r\nHost: ${config.host ?? target.label}\r\nUser-Agent: ipgate-health-check\r\nConnection: close\r\n\r\n`,
            'latin1',
          )
        : null;
  }

  start(ctx: CheckContext): void {
    this.ctx = ctx;
    this.schedule(Math.floor(Math.random() * this.config.intervalMs));
  }

  stop(): void {
    this.ctx = null;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.socket?.destroy();
    this.socket = null;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => this.run(), ms);
    this.timer.unref();
  }

  private run(): void {
    this.timer = null;
    const ctx = this.ctx;
    if (ctx === null) return;
    const startedAt = performance.now();
    const t = this.target;
    const socket = net.connect(
      ctx.lookup !== null && t.family === 0 ? { host: t.host, port: t.port, lookup: ctx.lookup } : { host: t.host, port: t.port },
    );
    socket.unref();
    this.socket = socket;
    let settled = false;
    let head = '';
    const done = (problem: string | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      socket.destroy();
      if (this.socket !== socket) return; // stopped meanwhile
      this.socket = null;
      this.report(problem);
      this.schedule(Math.max(0, this.config.intervalMs - (performance.now() - startedAt)));
    };
    const deadline = setTimeout(() => done(`no answer within ${this.config.timeoutMs} ms`), this.config.timeoutMs);
    deadline.unref();
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    socket.once('connect', () => {
      if (this.request === null) done(null);
      else socket.write(this.request);
    });
    if (this.request === null) return;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      head += chunk;
      const eol = head.indexOf('\n');
      if (eol === -1) {
        if (head.length > MAX_STATUS_LINE) done('no status line');
        return;
      }
      const m = STATUS_LINE.exec(head.slice(0, eol + 1));
      if (m === null) {
        done('not an HTTP/1.x status line');
        return;
      }
      const status = Number(m[1]);
      done(this.expected(status) ? null : `status ${status}`);
    });
    socket.once('end', () => done('closed before a status line'));
  }

  private expected(status: number): boolean {
    const list = this.config.expectStatuses;
    return list.length === 0 ? status >= 200 && status < 400 : list.includes(status);
  }

  private report(problem: string | null): void {
    if (!this.health.checked(problem === null)) return;
    const ctx = this.ctx;
    if (ctx === null) return;
    const fields = { route: ctx.route === '' ? undefined : ctx.route, upstream: this.target.label, check: this.config.type };
    if (this.health.down) ctx.log.warn({ ...fields, err: problem, fall: this.config.fall }, 'upstream target down (active check)');
    else ctx.log.info({ ...fields, rise: this.config.rise }, 'upstream target up again (active check)');
  }
}
