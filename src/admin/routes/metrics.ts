/**
 * `GET /metrics`: the Prometheus exposition on the admin address (never a data port), without a
 * token, as the chart's ServiceMonitor expects. Also counts every admin API request (route pattern,
 * method, status class) for `ipgate_admin_requests_total`: the hook is registered on the root
 * context (skip-override), so it sees every route, including 404s (route `unmatched`).
 */
import type { FastifyPluginAsync } from 'fastify';
import { errorResponses, PUBLIC_ERRORS } from '../openapi';

/** What /metrics serves: one process's Metrics, or the primary's cluster-wide view (metrics/cluster.ts). */
export interface MetricsEndpoint {
  readonly contentType: string;
  scrape(): Promise<string>;
  adminRequest(route: string, method: string, status: number): void;
  /** Count a refused authentication (`ipgate_admin_auth_failures_total`); optional for endpoints without it. */
  adminAuthFailure?(reason: 'missing' | 'malformed' | 'invalid'): void;
}

const plugin: FastifyPluginAsync<{ metrics: MetricsEndpoint }> = async (app, opts) => {
  const metrics = opts.metrics;
  app.addHook('onResponse', async (req, reply) => {
    metrics.adminRequest(req.routeOptions.url ?? 'unmatched', req.method, reply.statusCode);
  });
  app.get(
    '/metrics',
    {
      config: { public: true },
      schema: {
        tags: ['health'],
        operationId: 'getMetrics',
        summary: 'Prometheus metrics (text exposition format 0.0.4)',
        security: [],
        response: {
          200: { description: 'The Prometheus text exposition', content: { 'text/plain; version=0.0.4': { schema: { type: 'string' } } } },
          ...errorResponses(PUBLIC_ERRORS),
        },
      },
    },
    async (_req, reply) => {
      const body = await metrics.scrape();
      return reply.header('content-type', metrics.contentType).header('cache-control', 'no-store').send(body);
    },
  );
};

// The counting hook must see every route, not only this plugin's (fastify-plugin's flag, by hand).
export const metricsRoutes = Object.assign(plugin, { [Symbol.for('skip-override')]: true });
