/**
 * `GET /v1/routes`: each listener's routes in force (docs/routes-and-sni.md): hosts, paths,
 * upstreams and allowlist per route (what a route leaves out shows the listener's, with
 * `inherited`), and the version of the routes (a hash of the config's routes) with when it was
 * loaded. `?listener=` filters. Read from RoutesInForce, which a reload swaps.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { RoutesInForce } from '../../route/routes-in-force';
import { ApiError } from '../errors';
import { AUTH_ERRORS, errorResponses } from '../openapi';

const route = {
  type: 'object',
  additionalProperties: false,
  properties: {
    name: { type: 'string', description: 'the route name (the `route` label of metrics and the access log)' },
    hosts: { type: 'array', items: { type: 'string' } },
    paths: {
      type: ['array', 'null'],
      description: 'null: every path',
      items: {
        type: 'object',
        additionalProperties: false,
        properties: { path: { type: 'string' }, match: { type: 'string', enum: ['exact', 'prefix'] }, ignoreCase: { type: 'boolean' } },
      },
    },
    upstreams: { type: 'array', items: { type: 'string' } },
    upstreamsInherited: { type: 'boolean', description: "the listener's upstreams (the route names none)" },
    allowlist: { type: 'string' },
    allowlistInherited: { type: 'boolean', description: "the listener's allowlist (the route names none)" },
    http: { type: 'object', additionalProperties: true, description: 'per-route HTTP settings as configured' },
  },
} as const;

const listenerRoutes = {
  type: 'object',
  additionalProperties: false,
  properties: {
    listener: { type: 'string' },
    mode: { type: 'string', enum: ['tcp', 'http'] },
    routed: { type: 'boolean', description: 'false: the listener has no routes (one upstream group, one allowlist)' },
    pathParameters: {
      type: 'string',
      enum: ['refuse', 'servlet'],
      description: 'HTTP listeners: how ";" in a request path is read (http.pathParameters)',
    },
    routes: { type: 'array', items: route },
  },
} as const;

const response = {
  type: 'object',
  additionalProperties: false,
  required: ['version', 'loadedAt', 'listeners'],
  properties: {
    version: { type: 'string', description: 'hash of the routes in force (the same config gives the same hash)' },
    loadedAt: { type: 'string', format: 'date-time' },
    listeners: { type: 'array', items: listenerRoutes },
  },
} as const;

export const routesRoutes: FastifyPluginAsync<{ routes: RoutesInForce }> = async (app, { routes }) => {
  app.get<{ Querystring: { listener?: string } }>(
    '/routes',
    {
      schema: {
        tags: ['diagnostics'],
        operationId: 'listRoutes',
        summary: 'The routes in force per listener, their version and when they were loaded',
        querystring: { type: 'object', additionalProperties: false, properties: { listener: { type: 'string', maxLength: 128 } } },
        response: { 200: { description: 'Routes per listener', ...response }, ...errorResponses(AUTH_ERRORS, [400, 404]) },
      },
    },
    async (req) => {
      const all = routes.all();
      const want = req.query.listener;
      const chosen = want === undefined ? all : all.filter((l) => l.listener === want);
      if (want !== undefined && chosen.length === 0) {
        throw new ApiError(
          404,
          'unknown_listener',
          `no listener named ${JSON.stringify(want)} (have: ${all.map((l) => l.listener).join(', ')})`,
          'listener',
        );
      }
      return {
        version: routes.version.hash,
        loadedAt: new Date(routes.version.loadedAt).toISOString(),
        listeners: chosen.map((l) => ({
          listener: l.listener,
          mode: l.mode,
          routed: l.routes !== null,
          ...(l.mode === 'http' ? { pathParameters: l.pathParameters } : {}),
          routes: (l.routes ?? []).map((r) => ({
            name: r.name,
            hosts: r.hosts,
            paths: r.paths ?? null,
            upstreams: r.upstreams ?? l.upstreams,
            upstreamsInherited: r.upstreams === undefined,
            allowlist: r.allowlist ?? l.allowlist,
            allowlistInherited: r.allowlist === undefined,
            ...(r.http !== undefined ? { http: r.http } : {}),
          })),
        })),
      };
    },
  );
};
