/** `GET /v1/audit`: the recent allowlist changes on this replica, newest first. */
import type { FastifyPluginAsync } from 'fastify';
import type { AllowlistService } from '../../store/allowlist-service';
import { AUTH_ERRORS, errorResponses } from '../openapi';
import { entrySchema } from './allowlists';

const entries = { type: 'array', items: entrySchema } as const;

export const auditRoutes: FastifyPluginAsync<{ service: AllowlistService }> = async (app, { service }) => {
  app.get<{ Querystring: { list?: string; limit?: string } }>(
    '/audit',
    {
      schema: {
        tags: ['audit'],
        operationId: 'listAuditRecords',
        summary: 'Recent changes (who, what, when, resulting version), newest first; kept in memory',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { list: { type: 'string', maxLength: 128 }, limit: { type: 'string', pattern: '^[1-9][0-9]{0,6}$' } },
        },
        response: {
          200: {
            description: 'The audit records kept in memory, newest first',
            type: 'object',
            additionalProperties: false,
            required: ['records'],
            properties: {
              records: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    seq: { type: 'integer' },
                    time: { type: 'string' },
                    who: { type: 'string' },
                    action: { type: 'string' },
                    list: { type: 'string' },
                    added: entries,
                    removed: entries,
                    changed: {
                      type: 'array',
                      items: { type: 'object', additionalProperties: false, properties: { before: entrySchema, after: entrySchema } },
                    },
                    fromVersion: { type: 'string' },
                    version: { type: 'string' },
                  },
                },
              },
            },
          },
          ...errorResponses(AUTH_ERRORS, [400]),
        },
      },
    },
    async (req) => ({
      records: service.audit.history({
        ...(req.query.list !== undefined ? { list: req.query.list } : {}),
        limit: req.query.limit !== undefined ? Number(req.query.limit) : 100,
      }),
    }),
  );
};
