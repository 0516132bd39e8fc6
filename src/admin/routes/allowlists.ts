/**
 * `/v1/allowlists`: read, replace (PUT, If-Match required), add entries (POST), delete an entry
 * (DELETE by CIDR), and check an address. Writes answer only after the store has the change durably
 * and the new matcher is in force (AllowlistService).
 *
 * Preconditions: PUT replaces the whole list, so it must say which version it replaces: no If-Match
 * is 428 (RFC 6585), a stale one 412 (RFC 9110 13.1.1). POST and DELETE are edits that stay correct
 * on any version (add this entry, remove that one), so If-Match is optional for them and honoured
 * when present.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { parseCidr } from '../../allowlist/cidr';
import { validateEntry, type AllowEntry } from '../../allowlist/entry';
import { MAX_ENTRIES } from '../../store/document';
import type { AllowlistService, Precondition } from '../../store/allowlist-service';
import type { StoredList } from '../../store/store';
import { ApiError } from '../errors';
import { AUTH_ERRORS, errorResponses } from '../openapi';

export const entrySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['cidr'],
  properties: {
    cidr: { type: 'string', maxLength: 128, description: 'IPv4 or IPv6 CIDR; a bare address is a host route' },
    comment: { type: 'string', maxLength: 1024 },
    expiresAt: { type: 'string', maxLength: 64, description: 'RFC 3339 date-time with offset; the entry stops matching then' },
  },
} as const;

const entriesBody = {
  type: 'object',
  additionalProperties: false,
  required: ['entries'],
  properties: { entries: { type: 'array', maxItems: MAX_ENTRIES, items: entrySchema } },
} as const;

const listBody = {
  type: 'object',
  required: ['name', 'version', 'entries'],
  additionalProperties: false,
  properties: { name: { type: 'string' }, version: { type: 'string' }, entries: { type: 'array', items: entrySchema } },
} as const;

const nameParams = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: { name: { type: 'string', maxLength: 128 } },
} as const;

/** Statuses beyond the token and Host checks: reads of a named list, then writes (body, precondition, store). */
const readErrors = errorResponses(AUTH_ERRORS, [400, 404]);
const bodyErrors = [400, 404, 412, 413, 415, 503] as const;

interface NameParams { name: string }

/** Validate entries beyond the schema (CIDR semantics, RFC 3339): 400 naming `entries[i].field`. */
function validEntries(raw: readonly unknown[]): AllowEntry[] {
  return raw.map((e, i) => {
    const r = validateEntry(e);
    if (!r.ok) throw new ApiError(400, 'invalid_entry', r.message, `entries[${i}]${r.field ? `.${r.field}` : ''}`);
    return r.entry;
  });
}

/** If-Match: null (absent), `*`, or the strong ETags listed. Weak ETags never match (RFC 9110 13.1.1). */
export function parseIfMatch(header: string | undefined): Precondition {
  if (header === undefined) return null;
  const text = header.trim();
  if (text === '*') return '*';
  const tags: string[] = [];
  for (const part of text.split(',')) {
    const p = part.trim();
    if (p === '' || p.startsWith('W/')) continue;
    tags.push(p.startsWith('"') && p.endsWith('"') && p.length >= 2 ? p.slice(1, -1) : p);
  }
  if (tags.length === 0) throw new ApiError(412, 'precondition_failed', 'If-Match names no strong ETag', 'If-Match');
  return tags;
}

function sendList(reply: FastifyReply, list: StoredList): FastifyReply {
  return reply.header('etag', `"${list.version}"`).header('cache-control', 'no-store')
    .send({ name: list.name, version: list.version, entries: list.entries });
}

export const allowlistRoutes: FastifyPluginAsync<{ service: AllowlistService }> = async (app, { service }) => {
  app.get('/allowlists', {
    schema: {
      tags: ['allowlists'], operationId: 'listAllowlists', summary: 'All allowlists: store version, applied version, entry count',
      response: {
        200: {
          description: 'Every list with its store and applied versions',
          type: 'object', additionalProperties: false, required: ['allowlists'],
          properties: {
            allowlists: {
              type: 'array',
              items: {
                type: 'object', additionalProperties: false, required: ['name', 'version', 'entries'],
                properties: { name: { type: 'string' }, version: { type: 'string' }, appliedVersion: { type: ['string', 'null'] }, entries: { type: 'integer' } },
              },
            },
          },
        },
        ...errorResponses(AUTH_ERRORS),
      },
    },
  }, async () => ({
    allowlists: service.names().map((name) => {
      const l = service.get(name);
      return { name, version: l.version, appliedVersion: service.appliedVersion(name), entries: l.entries.length };
    }),
  }));

  app.get<{ Params: NameParams }>('/allowlists/:name', {
    schema: {
      tags: ['allowlists'], operationId: 'getAllowlist', summary: 'One allowlist; the ETag header is its version', params: nameParams,
      response: { 200: { description: 'The list; the ETag header is its version', ...listBody }, ...readErrors },
    },
  }, async (req, reply) => sendList(reply, service.get(req.params.name)));

  app.put<{ Params: NameParams; Body: { entries: unknown[] } }>('/allowlists/:name', {
    schema: {
      tags: ['allowlists'], operationId: 'replaceAllowlist', summary: 'Replace the entries (If-Match: the ETag read; 428 without, 412 when stale)',
      params: nameParams, body: entriesBody,
      response: { 200: { description: 'The list as stored and in force', ...listBody }, ...errorResponses(AUTH_ERRORS, bodyErrors, [428]) },
    },
  }, async (req, reply) => {
    service.get(req.params.name); // 404 before 428: the list must exist to have a version
    const ifMatch = parseIfMatch(header(req, 'if-match'));
    if (ifMatch === null) {
      throw new ApiError(428, 'precondition_required', 'PUT replaces the whole list: send If-Match with the ETag you read (or * to overwrite any version)', 'If-Match');
    }
    const { list } = await service.replace(req.params.name, validEntries(req.body.entries), ifMatch, req.who);
    return sendList(reply, list);
  });

  app.post<{ Params: NameParams; Body: { entries: unknown[] } }>('/allowlists/:name/entries', {
    schema: {
      tags: ['allowlists'], operationId: 'addAllowlistEntries', summary: 'Add entries (an entry with a CIDR already listed replaces it); If-Match optional',
      params: nameParams,
      body: { ...entriesBody, properties: { entries: { ...entriesBody.properties.entries, minItems: 1 } } },
      response: { 200: { description: 'The list as stored and in force', ...listBody }, ...errorResponses(AUTH_ERRORS, bodyErrors, [409]) },
    },
  }, async (req, reply) => {
    service.get(req.params.name);
    const { list } = await service.add(req.params.name, validEntries(req.body.entries), parseIfMatch(header(req, 'if-match')), req.who);
    return sendList(reply, list);
  });

  app.delete<{ Params: NameParams & { cidr: string } }>('/allowlists/:name/entries/:cidr', {
    schema: {
      tags: ['allowlists'], operationId: 'removeAllowlistEntry', summary: 'Remove the entry with this CIDR (URL-encoded: 10.0.0.0%2F8); If-Match optional',
      params: { type: 'object', required: ['name', 'cidr'], additionalProperties: false,
        properties: { name: { type: 'string', maxLength: 128 }, cidr: { type: 'string', maxLength: 128 } } },
      response: { 200: { description: 'The list as stored and in force', ...listBody }, ...errorResponses(AUTH_ERRORS, [400, 404, 409, 412, 503]) },
    },
  }, async (req, reply) => {
    service.get(req.params.name);
    const parsed = parseCidr(req.params.cidr);
    if (!parsed.ok) throw new ApiError(400, 'invalid_entry', parsed.message, 'cidr');
    const { list } = await service.remove(req.params.name, parsed.cidr.text, parseIfMatch(header(req, 'if-match')), req.who);
    return sendList(reply, list);
  });

  app.get<{ Params: NameParams; Querystring: { ip: string } }>('/allowlists/:name/check', {
    schema: {
      tags: ['allowlists'], operationId: 'checkAllowlistAddress', summary: 'Would this address be admitted now, and by which entry',
      params: nameParams,
      querystring: { type: 'object', required: ['ip'], additionalProperties: false, properties: { ip: { type: 'string', maxLength: 128 } } },
      response: {
        200: {
          description: 'The decision for this address under the list in force',
          type: 'object', additionalProperties: false, required: ['list', 'ip', 'allowed', 'version'],
          properties: {
            list: { type: 'string' }, ip: { type: 'string' }, allowed: { type: 'boolean' }, version: { type: 'string' },
            index: { type: 'integer' }, entry: { anyOf: [entrySchema, { type: 'null' }] },
          },
        },
        ...readErrors,
      },
    },
  }, async (req) => {
    const r = service.check(req.params.name, req.query.ip);
    return { list: req.params.name, ip: r.ip, allowed: r.allowed, version: r.version, index: r.index, entry: r.entry };
  });
};

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}
