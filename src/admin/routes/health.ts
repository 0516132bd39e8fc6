/** `/healthz` (the process answers) and `/readyz` (listeners bound, store loaded): no token. */
import type { FastifyPluginAsync } from 'fastify';

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

export const healthRoutes: FastifyPluginAsync<{ readiness: () => Readiness | Promise<Readiness> }> = async (app, opts) => {
  app.get('/healthz', {
    config: { public: true },
    schema: { tags: ['health'], summary: 'The process is alive', security: [] },
  }, async () => ({ status: 'ok' }));

  app.get('/readyz', {
    config: { public: true },
    schema: { tags: ['health'], summary: 'Listeners bound and the allowlist store loaded (503 when not)', security: [] },
  }, async (_req, reply) => {
    const r = await opts.readiness();
    return reply.code(r.ready ? 200 : 503).send({ status: r.ready ? 'ready' : 'not ready', checks: r.checks, lists: r.lists, store: r.store ?? null });
  });
};
