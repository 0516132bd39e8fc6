/**
 * `GET /v1/log-level` and `PUT /v1/log-level {"level":"debug"}`: the log level at runtime, so a
 * denial's debug line (or less noise) is one request away instead of a restart. Token-protected
 * like every /v1 route; each change is an audit record (`action: log-level`, from -> to). In a
 * cluster the primary applies it and sends it to every worker (and to workers started later).
 * Not persisted: a restart is back at `logging.level`.
 */
import type { FastifyPluginAsync } from 'fastify';
import { LOG_LEVELS, type LogLevel } from '../../log';
import type { AuditLog } from '../../audit/audit-log';
import { AUTH_ERRORS, errorResponses } from '../openapi';

export interface LogLevelControl {
  get(): string;
  /** Apply everywhere (this process, its workers); resolves with the level before. */
  set(level: LogLevel): string | Promise<string>;
}

const body = {
  type: 'object',
  additionalProperties: false,
  required: ['level'],
  properties: { level: { type: 'string', enum: [...LOG_LEVELS], description: 'pino level' } },
} as const;

export const logLevelRoutes: FastifyPluginAsync<{ control: LogLevelControl; audit: AuditLog }> = async (app, { control, audit }) => {
  app.get(
    '/log-level',
    {
      schema: {
        tags: ['diagnostics'],
        operationId: 'getLogLevel',
        summary: 'The log level in force',
        response: { 200: { description: 'The level', ...body }, ...errorResponses(AUTH_ERRORS) },
      },
    },
    async () => ({ level: control.get() }),
  );

  app.put<{ Body: { level: LogLevel } }>(
    '/log-level',
    {
      schema: {
        tags: ['diagnostics'],
        operationId: 'setLogLevel',
        summary: 'Change the log level at runtime (every worker; audited; not persisted)',
        body,
        response: {
          200: {
            description: 'The level now in force',
            type: 'object',
            additionalProperties: false,
            required: ['level', 'previous'],
            properties: { level: { type: 'string' }, previous: { type: 'string' } },
          },
          ...errorResponses(AUTH_ERRORS, [400, 413, 415]),
        },
      },
    },
    async (req) => {
      const previous = await control.set(req.body.level);
      audit.recordSetting(req.who, 'log-level', previous, req.body.level);
      return { level: req.body.level, previous };
    },
  );
};
