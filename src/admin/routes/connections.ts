/**
 * `GET /v1/connections`: the live connections, with the client address ipgate derived for each
 * (never the socket peer alone), how it was derived, the listener and the upstream. Bounded by
 * `limit` (default 100, at most 10000), oldest first; `listener` filters. Reading walks the
 * listeners' connection sets on the admin request, never on the data path.
 */
import type { FastifyPluginAsync } from 'fastify';
import { formatHostPort } from '../../identity/address';
import type { Listener } from '../../listener/listener';
import { ApiError, errorBodySchema } from '../errors';

const connection = {
  type: 'object',
  additionalProperties: false,
  properties: {
    id: { type: 'integer' },
    listener: { type: 'string' },
    peer: { type: 'string', description: 'socket peer host:port' },
    client: { type: 'string', description: 'derived client host:port' },
    via: { type: 'string', description: 'socket | proxy-v1 | proxy-v2 | xff' },
    admitted: { type: 'boolean', description: 'past the allowlist (HTTP: decided per request)' },
    upstream: { type: ['string', 'null'] },
    ageMs: { type: 'integer' },
  },
} as const;

export const connectionsRoutes: FastifyPluginAsync<{ listeners: readonly Listener[] }> = async (app, { listeners }) => {
  app.get<{ Querystring: { listener?: string; limit?: string } }>('/connections', {
    schema: {
      tags: ['diagnostics'], summary: 'Live connections with their real client address, oldest first',
      querystring: {
        type: 'object', additionalProperties: false,
        properties: { listener: { type: 'string', maxLength: 128 }, limit: { type: 'string', pattern: '^[1-9][0-9]{0,4}$' } },
      },
      response: {
        200: {
          type: 'object', additionalProperties: false, required: ['total', 'connections'],
          properties: { total: { type: 'integer', description: 'live connections matching, before the limit' }, connections: { type: 'array', items: connection } },
        },
        '4xx': errorBodySchema,
      },
    },
  }, async (req) => {
    const { listener } = req.query;
    const limit = Math.min(req.query.limit !== undefined ? Number(req.query.limit) : 100, 10_000);
    const chosen = listener === undefined ? listeners : listeners.filter((l) => l.name === listener);
    if (chosen.length === 0) throw new ApiError(404, 'unknown_listener', `no listener named ${JSON.stringify(listener)}`, 'listener');
    const now = Date.now();
    let total = 0;
    const out: Array<Record<string, unknown>> = [];
    for (const l of chosen) {
      // Sets iterate in insertion order: each listener's oldest first.
      for (const c of l.connections) {
        total++;
        if (out.length >= limit) continue;
        out.push({
          id: c.id, listener: c.listener,
          peer: formatHostPort(c.peerAddress, c.peerPort),
          client: formatHostPort(c.clientAddress, c.clientPort),
          via: c.via,
          admitted: c.entryIndex >= 0 || c.onRevoke !== null,
          upstream: c.upstream,
          ageMs: Math.max(0, now - c.startedAt),
        });
      }
    }
    return { total, connections: out };
  });
};
