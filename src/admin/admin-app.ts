/**
 * The admin API as a fastify instance, built by a function and never listening here
 * (admin-server.ts listens; tests can use `inject` or a real port).
 *
 * - Strict validation: Ajv without type coercion or silent removal of unknown fields, all errors
 *   reported, so a bad body is a 400 naming the field and the store is not touched.
 * - Host check first (host-check.ts): a Host that is not an IP literal, localhost or a name in
 *   `admin.allowedHosts` is 421 on every route, public ones included (DNS rebinding).
 * - Authentication: an onRequest hook; routes that must answer without a token (health, readiness,
 *   metrics, the OpenAPI document) say so with `config: { public: true }`. Failures are counted by
 *   reason and wrong tokens logged at most once per address per minute (auth-failures.ts).
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import type { Logger } from 'pino';
import type { Listener } from '../listener/listener';
import type { AllowlistService } from '../store/allowlist-service';
import { authenticate, type Tokens } from './auth';
import { AuthFailureLog, type AuthFailureOptions } from './auth-failures';
import { HostAllowlist } from './host-check';
import { errorHandler, send } from './errors';
import { SERVERS } from './openapi';
import { allowlistRoutes } from './routes/allowlists';
import { auditRoutes } from './routes/audit';
import { connectionsRoutes, localConnections, type ConnectionsSource } from './routes/connections';
import { explainRoutes, type ExplainTarget } from './routes/explain';
import { healthRoutes, type Readiness } from './routes/health';
import { metricsRoutes, type MetricsEndpoint } from './routes/metrics';
import { logLevelRoutes, type LogLevelControl } from './routes/log-level';
import { routesRoutes } from './routes/routes';
import type { RoutesInForce } from '../route/routes-in-force';
import { setLogLevel } from '../log';

declare module 'fastify' {
  interface FastifyRequest {
    /** Name of the token that authenticated the request ('' on public routes). */
    who: string;
  }
  interface FastifyContextConfig {
    /** Served without a token. */
    public?: boolean;
  }
}

interface AdminDeps {
  service: AllowlistService;
  tokens: Tokens;
  logger: Logger;
  /** Largest request body, bytes (413 beyond). */
  bodyLimit: number;
  /** `/readyz`; a cluster primary asks its workers for their self-checks, hence the promise. */
  readiness: () => Readiness | Promise<Readiness>;
  version: string;
  /** `/metrics` and the admin request counter (null: no /metrics). */
  metrics?: MetricsEndpoint | null;
  /** The data listeners, for `/v1/explain` and `/v1/connections` (none: those routes see no listener). */
  listeners?: readonly Listener[];
  /**
   * A cluster primary has no listeners: `/v1/explain` uses these (config + the primary's lists)
   * and `/v1/connections` asks the workers. Each takes precedence over `listeners`.
   */
  explainTargets?: readonly ExplainTarget[];
  connections?: ConnectionsSource;
  /** `admin.allowedHosts`: Host names (besides IP literals and localhost) the API answers. Default none. */
  allowedHosts?: readonly string[];
  /** `PUT /v1/log-level` (default: this process's logger family; a cluster primary also tells its workers). */
  logLevel?: LogLevelControl;
  /** The listeners' routes in force: `GET /v1/routes` and explain's host/path (none: no listener routes). */
  routes?: RoutesInForce;
  /** Rate limit of the wrong-token log lines (tests shorten the interval). */
  authFailureLog?: AuthFailureOptions;
}

export async function buildAdminApp(deps: AdminDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger.child({ component: 'admin' }) as FastifyBaseLogger,
    // Per-request lines off (the admin API counts its requests in metrics); the top-level
    // disableRequestLogging option is deprecated since fastify 5.12 and warns at every start.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.bodyLimit,
    return503OnClosing: true,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true, useDefaults: false, strict: true } },
  });
  // JSON only: fastify also parses text/plain by default, which would turn a pasted CIDR into a
  // confusing "must be object" instead of 415.
  app.removeContentTypeParser('text/plain');
  app.decorateRequest('who', '');
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler((req, reply) =>
    send(reply, 404, { error: 'not_found', message: `no route ${req.method} ${req.url.split('?')[0]}` }),
  );

  const hosts = new HostAllowlist(deps.allowedHosts ?? []);
  const failures = new AuthFailureLog(app.log, deps.authFailureLog);
  app.addHook('onClose', async () => failures.close());
  const authFailed = (reason: 'missing' | 'malformed' | 'invalid', req: { ip: string; method: string; url: string }): void => {
    failures.record(reason, req.ip, req.method, req.url);
    deps.metrics?.adminAuthFailure?.(reason);
  };

  app.addHook('onRequest', async (req, reply) => {
    const verdict = hosts.check(req.headers.host);
    if (!verdict.ok) return send(reply, 421, { error: 'host_not_allowed', message: verdict.message, field: 'Host' });
    if (req.routeOptions.config?.public === true) return;
    const header = req.headers.authorization;
    if (header === undefined || header === '') {
      authFailed('missing', req);
      reply.header('www-authenticate', 'Bearer realm="ipgate-admin"');
      return send(reply, 401, {
        error: 'unauthorized',
        message: 'missing bearer token (Authorization: Bearer <token>)',
        field: 'Authorization',
      });
    }
    const m = /^Bearer +([^\s]+) *$/i.exec(header);
    if (m === null) {
      authFailed('malformed', req);
      reply.header('www-authenticate', 'Bearer realm="ipgate-admin", error="invalid_request"');
      return send(reply, 401, {
        error: 'unauthorized',
        message: 'the Authorization header must be "Bearer <token>"',
        field: 'Authorization',
      });
    }
    if (deps.tokens.entries.length === 0) {
      return send(reply, 403, {
        error: 'forbidden',
        message: 'no admin token is configured (admin.tokenFile, admin.tokensFile or the admin.tokenEnv variable)',
      });
    }
    const who = authenticate(deps.tokens, m[1]!);
    if (who === null) {
      authFailed('invalid', req);
      return send(reply, 403, { error: 'forbidden', message: 'the token is not valid' });
    }
    req.who = who;
  });
  app.addHook('onResponse', async (req, reply) => {
    req.log.debug(
      { method: req.method, url: req.url, status: reply.statusCode, who: req.who || undefined, ms: Math.round(reply.elapsedTime) },
      'admin request',
    );
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'ipgate admin API',
        version: deps.version,
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
        description:
          'Allowlists, their audit history, health and readiness. Every route except /healthz, /readyz, /metrics and /openapi.json needs `Authorization: Bearer <token>`.',
      },
      servers: [...SERVERS],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
  });
  if (deps.metrics) await app.register(metricsRoutes, { metrics: deps.metrics });
  await app.register(healthRoutes, { readiness: deps.readiness });
  await app.register(allowlistRoutes, { service: deps.service, prefix: '/v1' });
  await app.register(auditRoutes, { service: deps.service, prefix: '/v1' });
  await app.register(logLevelRoutes, {
    prefix: '/v1',
    audit: deps.service.audit,
    control: deps.logLevel ?? { get: () => deps.logger.level, set: (level) => setLogLevel(deps.logger, level) },
  });
  await app.register(explainRoutes, { listeners: deps.explainTargets ?? deps.listeners ?? [], routes: deps.routes ?? null, prefix: '/v1' });
  if (deps.routes !== undefined) await app.register(routesRoutes, { routes: deps.routes, prefix: '/v1' });
  await app.register(connectionsRoutes, { source: deps.connections ?? localConnections(deps.listeners ?? []), prefix: '/v1' });
  app.get('/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger());
  await app.ready();
  return app;
}
