/**
 * `GET /v1/connections`: the live connections, with the client address ipgate derived for each
 * (never the socket peer alone), how it was derived, the listener and the upstream. Bounded by
 * `limit` (default 100, at most 10000), oldest first; `listener` filters. Reading walks the
 * listeners' connection sets on the admin request, never on the data path.
 *
 * In one process the route reads the listeners directly (`liveConnections`). In a cluster primary,
 * which has no listeners, each worker runs `liveConnections` on request over IPC and the primary
 * merges the pages (`mergeConnectionPages`); every connection then names its `worker`.
 */
import type { FastifyPluginAsync } from 'fastify';
import { formatHostPort } from '../../identity/address';
import type { Listener } from '../../listener/listener';
import { ApiError } from '../errors';
import { AUTH_ERRORS, errorResponses } from '../openapi';

const connection = {
  type: 'object',
  additionalProperties: false,
  properties: {
    id: { type: 'integer', description: 'connection number (per worker process in cluster mode)' },
    worker: { type: 'integer', description: 'cluster worker id (absent in one process)' },
    listener: { type: 'string' },
    peer: { type: 'string', description: 'socket peer host:port' },
    client: { type: 'string', description: 'derived client host:port' },
    via: { type: 'string', description: 'socket | proxy-v1 | proxy-v2 | xff' },
    admitted: { type: 'boolean', description: 'past the allowlist (HTTP: decided per request)' },
    upstream: { type: ['string', 'null'] },
    route: { type: 'string', description: 'TCP listeners with routes: the route that took the connection (absent: none yet)' },
    sni: { type: 'string', description: "TCP listeners with routes: the ClientHello's SNI (absent: none sent, or not read yet)" },
    ageMs: { type: 'integer' },
  },
} as const;

export interface ConnectionView {
  id: number;
  worker?: number;
  listener: string;
  peer: string;
  client: string;
  via: string;
  admitted: boolean;
  upstream: string | null;
  route?: string;
  sni?: string;
  ageMs: number;
}

/** One answer: the matching connections before the limit (`total`), the oldest `limit` of them. */
export interface ConnectionsPage {
  total: number;
  connections: ConnectionView[];
}

/** Where the route reads connections: the listener names, and a page for a filter and a limit. */
export interface ConnectionsSource {
  names: readonly string[];
  page: (listener: string | undefined, limit: number) => Promise<ConnectionsPage>;
}

/** The page for `listener` (all when undefined) from listeners in this process, oldest first. */
export function liveConnections(
  listeners: readonly Listener[],
  listener: string | undefined,
  limit: number,
  now = Date.now(),
): ConnectionsPage {
  const chosen = listener === undefined ? listeners : listeners.filter((l) => l.name === listener);
  let total = 0;
  const out: ConnectionView[] = [];
  for (const l of chosen) {
    // Sets iterate in insertion order: each listener's oldest first.
    for (const c of l.connections) {
      total++;
      if (out.length >= limit) continue;
      out.push({
        id: c.id,
        listener: c.listener,
        peer: formatHostPort(c.peerAddress, c.peerPort),
        client: formatHostPort(c.clientAddress, c.clientPort),
        via: c.via,
        admitted: c.entry !== null || c.decidedPerRequest,
        upstream: c.upstream,
        ...(c.route !== null ? { route: c.route.name } : {}),
        ...(c.sni !== null ? { sni: c.sni } : {}),
        ageMs: Math.max(0, now - c.startedAt),
      });
    }
  }
  return { total, connections: out };
}

/** Several workers' pages as one: totals added, the oldest `limit` connections over all of them. */
export function mergeConnectionPages(pages: ReadonlyArray<{ worker: number; page: ConnectionsPage }>, limit: number): ConnectionsPage {
  let total = 0;
  const all: ConnectionView[] = [];
  for (const { worker, page } of pages) {
    total += page.total;
    for (const c of page.connections) all.push({ ...c, worker });
  }
  // Stable sort: ties keep each worker's own order.
  all.sort((a, b) => b.ageMs - a.ageMs);
  return { total, connections: all.slice(0, limit) };
}

/** The source for listeners in this process. */
export function localConnections(listeners: readonly Listener[]): ConnectionsSource {
  return { names: listeners.map((l) => l.name), page: async (listener, limit) => liveConnections(listeners, listener, limit) };
}

export const connectionsRoutes: FastifyPluginAsync<{ source: ConnectionsSource }> = async (app, { source }) => {
  app.get<{ Querystring: { listener?: string; limit?: string } }>(
    '/connections',
    {
      schema: {
        tags: ['diagnostics'],
        operationId: 'listConnections',
        summary: 'Live connections with their real client address, oldest first',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { listener: { type: 'string', maxLength: 128 }, limit: { type: 'string', pattern: '^[1-9][0-9]{0,4}$' } },
        },
        response: {
          200: {
            description: 'Live connections, oldest first, up to the limit',
            type: 'object',
            additionalProperties: false,
            required: ['total', 'connections'],
            properties: {
              total: { type: 'integer', description: 'live connections matching, before the limit' },
              connections: { type: 'array', items: connection },
            },
          },
          ...errorResponses(AUTH_ERRORS, [400, 404]),
        },
      },
    },
    async (req) => {
      const { listener } = req.query;
      const limit = Math.min(req.query.limit !== undefined ? Number(req.query.limit) : 100, 10_000);
      const known = listener === undefined ? source.names.length > 0 : source.names.includes(listener);
      if (!known) throw new ApiError(404, 'unknown_listener', `no listener named ${JSON.stringify(listener)}`, 'listener');
      return source.page(listener, limit);
    },
  );
};
