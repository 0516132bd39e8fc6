import pino, { type Logger } from 'pino';
import type { LoggingConfig } from './config/schema';

/**
 * The process logger. JSON to stdout by default (one object per line, for the cluster's log
 * pipeline); `pretty` for a terminal. Built once; components take child loggers built once too.
 */
export function createLogger(config: Pick<LoggingConfig, 'level' | 'format'>, destination?: pino.DestinationStream): Logger {
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
  return pino(options, pino.destination({ dest: 1, sync: false }));
}
