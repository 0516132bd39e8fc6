/** `/healthz` (the process answers) and `/readyz` (listeners bound, store loaded): no token. */
import type { FastifyPluginAsync } from 'fastify';
import { errorResponses, PUBLIC_ERRORS } from '../openapi';

export interface ReadinessCheck {
  name: string;
  status: 'ok' | 'warn' | 'error';
  message: string;
  /** What to do about a warning or error (shown by `ipgate doctor`). */
  fix?: string;
}

export interface Readiness {
  ready: boolean;
  checks: ReadinessCheck[];
  /** Per list: the version in the store and the one this process enforces. */
  lists: Record<string, { version: string; appliedVersion: string | null; entries: number; appliedAt: string | null }>;
  /** The store backend and, where it has one, its status (e.g. the ConfigMap resourceVersion applied). */
  store?: object;
}

const readinessBody = {
  type: 'object',
  required: ['status', 'checks', 'lists'],
  properties: {
    status: { enum: ['ready', 'not ready'] },
    checks: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'status', 'message'],
        additionalProperties: true,
        properties: {
          name: { type: 'string' },
          status: { enum: ['ok', 'warn', 'error'] },
          message: { type: 'string' },
          fix: { type: 'string' },
        },
      },
    },
    lists: { type: 'object', additionalProperties: true },
    store: { type: ['object', 'null'], additionalProperties: true },
  },
} as const;

export const healthRoutes: FastifyPluginAsync<{ readiness: () => Readiness | Promise<Readiness> }> = async (app, opts) => {
  app.get(
    '/healthz',
    {
      config: { public: true },
      schema: {
        tags: ['health'],
        operationId: 'getHealth',
        summary: 'The process is alive',
        security: [],
        response: {
          200: {
            description: 'Alive',
            type: 'object',
            additionalProperties: false,
            required: ['status'],
            properties: { status: { const: 'ok' } },
          },
          ...errorResponses(PUBLIC_ERRORS),
        },
      },
    },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      config: { public: true },
      schema: {
        tags: ['health'],
        operationId: 'getReadiness',
        summary: 'Listeners bound and the allowlist store loaded (503 when not)',
        security: [],
        response: {
          200: { description: 'Ready: every listener bound, the store loaded', ...readinessBody },
          ...errorResponses(PUBLIC_ERRORS),
          503: { description: 'Not ready: the checks say what is missing', ...readinessBody },
        },
      },
    },
    async (_req, reply) => {
      const r = await opts.readiness();
      return reply
        .code(r.ready ? 200 : 503)
        .send({ status: r.ready ? 'ready' : 'not ready', checks: r.checks, lists: r.lists, store: r.store ?? null });
    },
  );
};
