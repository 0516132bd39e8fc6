/**
 * Accepts that fail, counted and reported: `ipgate_accept_errors_total{listener,code}` and at most
 * one warn line per listener per interval with the count since the last line.
 *
 * Why a guard and not only a count: when accept(2) fails with EMFILE, libuv does not report it. It
 * closes a reserved descriptor, accepts every pending connection and closes it, then reserves the
 * descriptor again (libuv's uv__emfile_trick), so the clients are reset and
 * the process sees nothing: no callback, no error event. The only place left to count is before
 * that point. A new descriptor is always the lowest free number (POSIX open/accept), so an accepted
 * socket whose fd is within `reserve` of the open-file limit proves the table is that full: the
 * connection is closed and counted (`EMFILE`), which also keeps descriptors free for the upstream
 * socket of the connections already admitted, the admin API and the store's writes. The check is
 * an integer compare on the handle's fd: nothing allocated on the accepted path.
 *
 * Errors that do reach the accept callback (the libuv trick itself failing, ENFILE, ENOBUFS, ...)
 * are counted under their code: EMFILE, ENFILE or other (bounded labels).
 */
import fs from 'node:fs';
import type { Logger } from 'pino';
import type { ListenerStats } from '../metrics/listener-stats';

/** libuv error numbers on Linux (negated errno), as the accept callback receives them. */
const UV_EMFILE = -24;
const UV_ENFILE = -23;

type AcceptErrorCode = 'EMFILE' | 'ENFILE' | 'other';

/** The soft RLIMIT_NOFILE of this process, from /proc/self/limits (Linux); null where unknown. */
export function openFileLimit(text?: string): number | null {
  let limits = text;
  if (limits === undefined) {
    try {
      limits = fs.readFileSync('/proc/self/limits', 'latin1');
    } catch {
      return null;
    }
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(limits);
  if (m === null || m[1] === 'unlimited') return null;
  return Number(m[1]);
}

/** Descriptors kept free below the limit: 1/32 of it, at least 16 (an upstream socket, a log write, a store write). */
export function fdReserve(limit: number): number {
  return Math.max(16, Math.floor(limit / 32));
}

export class AcceptErrors {
  /** The first fd number refused; Infinity when the limit is unknown (no guard). */
  readonly maxFd: number;
  /** Failures since the last line, by code. */
  private readonly pending: Record<AcceptErrorCode, number> = { EMFILE: 0, ENFILE: 0, other: 0 };
  private lastLineAt = -Infinity;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly stats: ListenerStats,
    private readonly log: Logger,
    readonly fdLimit: number | null = openFileLimit(),
    private readonly intervalMs = 60_000,
  ) {
    this.maxFd = fdLimit === null ? Infinity : fdLimit - fdReserve(fdLimit);
  }

  /** Whether a socket accepted on descriptor `fd` may be used (false: close it, it was counted). */
  admit(fd: number): boolean {
    if (fd < this.maxFd) return true;
    this.count('EMFILE');
    return false;
  }

  /** A non-zero status from the accept callback (a libuv error number). */
  failed(status: number): void {
    this.count(status === UV_EMFILE ? 'EMFILE' : status === UV_ENFILE ? 'ENFILE' : 'other');
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private count(code: AcceptErrorCode): void {
    const s = this.stats;
    if (code === 'EMFILE') s.acceptErrorsEmfile++;
    else if (code === 'ENFILE') s.acceptErrorsEnfile++;
    else s.acceptErrorsOther++;
    this.pending[code]++;
    if (Date.now() - this.lastLineAt >= this.intervalMs) this.flush();
    else if (this.timer === null) {
      // The failures after the line still get theirs, at the end of the interval, even if none follow.
      this.timer = setTimeout(() => this.flush(), this.intervalMs - (Date.now() - this.lastLineAt));
      this.timer.unref();
    }
  }

  private flush(): void {
    this.timer = null;
    const p = this.pending;
    const count = p.EMFILE + p.ENFILE + p.other;
    if (count === 0) return;
    const s = this.stats;
    const why =
      p.EMFILE > 0
        ? 'at the open-file limit: raise ulimit -n (LimitNOFILE), or take fewer connections per process'
        : p.ENFILE > 0
          ? 'at the system-wide open-file limit (fs.file-max)'
          : 'accept(2) failed';
    this.log.warn(
      {
        count,
        codes: { ...p },
        intervalMs: this.intervalMs,
        fdLimit: this.fdLimit,
        maxFd: Number.isFinite(this.maxFd) ? this.maxFd : null,
        total: { EMFILE: s.acceptErrorsEmfile, ENFILE: s.acceptErrorsEnfile, other: s.acceptErrorsOther },
      },
      `accept failed: ${count} connection(s) closed unserved since the last line (${why})`,
    );
    p.EMFILE = 0;
    p.ENFILE = 0;
    p.other = 0;
    this.lastLineAt = Date.now();
  }
}
