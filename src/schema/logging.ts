/** Logs: level, format, the access log and how denials are summarised. */
import { Enum, Section, Type, type Static } from './kit';

export const LoggingSchema = Section(
  {
    /** pino level. */
    level: Enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], { default: 'info' }),
    /** `json`, or `pretty` (human-readable, for a terminal). */
    format: Enum(['json', 'pretty'], { default: 'json' }),
    /**
     * Write an access log line per TCP connection / HTTP request, at info, denied and rejected ones
     * included (with the route, the list, the deny entry and the reason), as nginx writes every 403.
     * false: no lines; denials are summarised (`denialSummaryIntervalMs`).
     */
    access: Type.Boolean({ default: true }),
    /**
     * With the access log on: the lines of denied and rejected connections and requests written per
     * second per process; past it they are counted, and one line a second says how many were not
     * written (src/access-log/denial-lines.ts). Bounds what a scan costs in log volume.
     */
    deniedLinesPerSecond: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 100 }),
    /**
     * With the access log off (`access: false`): denials are logged one by one at debug, and at
     * info summarised every this many ms ("N denials from M addresses in the last 10 s";
     * src/access-log/denial-summary.ts). 0 = no summary.
     */
    denialSummaryIntervalMs: Type.Integer({ minimum: 0, maximum: 86_400_000, default: 10_000 }),
    /** Distinct addresses a summary interval remembers (memory bound under a scan). */
    denialSummaryMaxAddresses: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 4096 }),
    /**
     * With the access log off: the first denial of each client address per summary interval is
     * logged at info at once (listener, client, reason, list, route, the deny entry), at most this
     * many lines per interval; later denials and addresses past the cap are only counted in the
     * summary line. 0 = none.
     */
    denialLinesPerInterval: Type.Integer({ minimum: 0, maximum: 100_000, default: 100 }),
    /**
     * JSON logs to stdout are written in blocks of this many bytes (0 = each line at once), so the
     * access log does not cost a write(2) per connection; 64 KiB like nginx's usual `buffer=64k`: 4 KiB
     * blocks still cost ~4-9 us of CPU per line in writes (bench/README.md "Metrics and access logs").
     */
    bufferBytes: Type.Integer({ minimum: 0, maximum: 16_777_216, default: 65_536 }),
    /** Buffered lines are written at least this often, ms. */
    flushIntervalMs: Type.Integer({ minimum: 10, maximum: 60_000, default: 1000 }),
  },
  { default: {} },
);

export type LoggingConfig = Static<typeof LoggingSchema>;
