import pino, { type Logger } from 'pino';
import type { LoggingConfig } from './config/schema';

/**
 * The process logger. JSON to stdout by default (one object per line, for the cluster's log
 * pipeline); `pretty` for a terminal. Built once; components take child loggers built once too.
 */
export function createLogger(config: Pick<LoggingConfig, 'level' | 'format'> & Partial<Pick<LoggingConfig, 'bufferBytes' | 'flushIntervalMs'>>,
  destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level: config.level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
  if (destination) return pino(options, destination);
  if (config.format === 'pretty') {
    return pino({ ...options, transport: { target: 'pino-pretty', options: { colorize: process.stdout.isTTY, translateTime: 'SYS:HH:MM:ss.l' } } });
  }
  // Buffered like nginx's `access_log ... buffer= flush=`: without a buffer every line is its own
  // asynchronous write(2) through the libuv thread pool, which cost 15-30% more CPU per connection
  // with the access log on (bench/README.md "Metrics and access logs"); with it, lines are written in blocks of
  // `bufferBytes`, and at least every `flushIntervalMs`.
  const bufferBytes = config.bufferBytes ?? 0;
  const dest = pino.destination({ dest: 1, sync: false, minLength: bufferBytes });
  if (bufferBytes > 0) {
    const timer = setInterval(() => {
      // flush() throws once the stream is destroyed (process exit): nothing left to write then.
      try { dest.flush(); } catch { clearInterval(timer); }
    }, config.flushIntervalMs ?? 1000);
    timer.unref();
  }
  return pino(options, dest);
}
