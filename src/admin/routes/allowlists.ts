/**
 * `/v1/allowlists`: list, create (POST) and delete (DELETE) lists; read, replace (PUT, If-Match
 * required), add entries (POST; an existing CIDR is 409 `entry_exists` unless `?replace=true`),
 * delete an entry (DELETE by CIDR), and check an address. A `source: config` list refuses writes
 * with 409 `managed_by_config` naming the config file, except temporary entries (allowTemporary).
 * A GET answer can be PUT back as is: PUT ignores the read-only fields (version, source, temporary,
 * allowTemporary, managedIn) and checks that `name`, when present, is the list's. Writes answer only after the store has the change durably
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
import type { AllowlistService, ListView, Precondition } from '../../store/allowlist-service';
import { quoteCidr } from '../../allowlist/entry';
import { ApiError } from '../errors';
import { AUTH_ERRORS, errorResponses } from '../openapi';

export const entrySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['cidr'],
  properties: {
    cidr: { type: 'string', maxLength: 128, description: 'IPv4 or IPv6 CIDR; a bare address is a host route' },
    action: {
      type: 'string',
      enum: ['allow', 'deny'],
      description: 'allow (the default, stored without the field) or deny; the most specific entry decides, deny wins at the same prefix',
    },
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

/** Fields of a GET answer that PUT accepts and ignores (or, for name, checks). */
const readOnly = {
  name: { type: 'string', maxLength: 128 },
  version: { type: 'string', maxLength: 128, description: 'read-only (send it as If-Match)' },
  source: { type: 'string', enum: ['config', 'store'], description: 'read-only: who owns the list (config allowlists.NAME.source)' },
  temporary: { type: 'array', items: entrySchema, description: "read-only: a config list's temporary API entries" },
  allowTemporary: { type: 'boolean', description: 'read-only' },
  managedIn: { type: 'string', description: 'read-only: where a config list is edited' },
} as const;

const listBody = {
  type: 'object',
  required: ['name', 'version', 'source', 'entries'],
  additionalProperties: false,
  properties: { ...readOnly, entries: { type: 'array', items: entrySchema } },
} as const;

const putBody = {
  type: 'object',
  additionalProperties: false,
  required: ['entries'],
  properties: { ...readOnly, entries: { type: 'array', maxItems: MAX_ENTRIES, items: entrySchema } },
} as const;

const createBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', maxLength: 128, description: 'letters, digits, "_", "-", "."; at most 63 characters' },
    source: {
      type: 'string',
      enum: ['store'],
      description: 'only store lists are created here (a config list is written in the config file)',
    },
    entries: { type: 'array', maxItems: MAX_ENTRIES, items: entrySchema },
  },
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

interface NameParams {
  name: string;
}

/** Validate entries beyond the schema (CIDR semantics, RFC 3339): 400 naming `entries[i].field`. */
function validEntries(raw: readonly unknown[]): AllowEntry[] {
  return raw.map((e, i) => {
    const r = validateEntry(e);
    if (!r.ok)
      throw new ApiError(
        400,
        'invalid_entry',
        r.field === 'cidr' && isRecord(e) && typeof e.cidr === 'string' ? quoteCidr(e.cidr, r.message) : r.message,
        `entries[${i}]${r.field ? `.${r.field}` : ''}`,
      );
    return r.entry;
  });
}

/** If-Match: null (absent), `*`, or the strong ETags listed. Weak ETags never match (RFC 9110 13.1.1). */
function parseIfMatch(header: string | undefined): Precondition {
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

function sendList(reply: FastifyReply, list: ListView): FastifyReply {
  return reply.header('etag', `"${list.version}"`).header('cache-control', 'no-store').send(list);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export const allowlistRoutes: FastifyPluginAsync<{ service: AllowlistService }> = async (app, { service }) => {
  app.get(
    '/allowlists',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'listAllowlists',
        summary: 'All allowlists: store version, applied version, entry count',
        response: {
          200: {
            description: 'Every list with its store and applied versions',
            type: 'object',
            additionalProperties: false,
            required: ['allowlists'],
            properties: {
              allowlists: {
                type: 'array',
                items: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['name', 'version', 'entries'],
                  properties: {
                    name: { type: 'string' },
                    version: { type: 'string' },
                    source: { type: 'string', enum: ['config', 'store'] },
                    appliedVersion: { type: ['string', 'null'] },
                    entries: { type: 'integer' },
                    temporary: { type: 'integer' },
                  },
                },
              },
            },
          },
          ...errorResponses(AUTH_ERRORS),
        },
      },
    },
    async () => ({
      allowlists: service.names().map((name) => {
        const l = service.get(name);
        return {
          name,
          version: l.version,
          source: l.source,
          appliedVersion: service.appliedVersion(name),
          entries: l.entries.length,
          ...(l.temporary ? { temporary: l.temporary.length } : {}),
        };
      }),
    }),
  );

  app.post<{ Body: { name: string; source?: 'store'; entries?: unknown[] } }>(
    '/allowlists',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'createAllowlist',
        summary: 'Create a store list (201); 409 list_exists when the name is taken',
        body: createBody,
        response: {
          201: { description: 'The new list, in force', ...listBody },
          ...errorResponses(AUTH_ERRORS, [400, 409, 413, 415, 503]),
        },
      },
    },
    async (req, reply) => {
      const { list } = await service.create(req.body.name, validEntries(req.body.entries ?? []), req.who);
      reply.code(201).header('location', `/v1/allowlists/${encodeURIComponent(list.name)}`);
      return sendList(reply, list);
    },
  );

  app.delete<{ Params: NameParams }>(
    '/allowlists/:name',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'deleteAllowlist',
        summary:
          'Delete a store list no listener uses (409 list_in_use naming the fields that use it; 409 managed_by_config for a config list); If-Match optional',
        params: nameParams,
        response: { 204: { description: 'Deleted', type: 'null' }, ...errorResponses(AUTH_ERRORS, [400, 404, 409, 412, 503]) },
      },
    },
    async (req, reply) => {
      await service.deleteList(req.params.name, parseIfMatch(header(req, 'if-match')), req.who);
      return reply.code(204).send();
    },
  );

  app.get<{ Params: NameParams }>(
    '/allowlists/:name',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'getAllowlist',
        summary: 'One allowlist; the ETag header is its version',
        params: nameParams,
        response: { 200: { description: 'The list; the ETag header is its version', ...listBody }, ...readErrors },
      },
    },
    async (req, reply) => sendList(reply, service.get(req.params.name)),
  );

  app.put<{ Params: NameParams; Body: { entries: unknown[]; name?: string } }>(
    '/allowlists/:name',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'replaceAllowlist',
        summary:
          'Replace the entries (If-Match: the ETag read; 428 without, 412 when stale). A GET answer is accepted as is (read-only fields ignored)',
        params: nameParams,
        body: putBody,
        response: {
          200: { description: 'The list as stored and in force', ...listBody },
          ...errorResponses(AUTH_ERRORS, bodyErrors, [409, 428]),
        },
      },
    },
    async (req, reply) => {
      service.get(req.params.name); // 404 before 428: the list must exist to have a version
      if (req.body.name !== undefined && req.body.name !== req.params.name) {
        throw new ApiError(
          400,
          'invalid_request',
          `name ${JSON.stringify(req.body.name)} in the body is not the list in the URL (${JSON.stringify(req.params.name)})`,
          'name',
        );
      }
      const ifMatch = parseIfMatch(header(req, 'if-match'));
      if (ifMatch === null) {
        throw new ApiError(
          428,
          'precondition_required',
          'PUT replaces the whole list: send If-Match with the ETag you read (or * to overwrite any version)',
          'If-Match',
        );
      }
      const { list } = await service.replace(req.params.name, validEntries(req.body.entries), ifMatch, req.who);
      return sendList(reply, list);
    },
  );

  app.post<{ Params: NameParams; Body: { entries: unknown[] }; Querystring: { replace?: string } }>(
    '/allowlists/:name/entries',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'addAllowlistEntries',
        summary: 'Add entries: a CIDR already listed is 409 entry_exists (quoting the entry there) unless ?replace=true; If-Match optional',
        params: nameParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            replace: { type: 'string', enum: ['true', 'false'], description: 'true: an entry with a CIDR already listed replaces it' },
          },
        },
        body: { ...entriesBody, properties: { entries: { ...entriesBody.properties.entries, minItems: 1 } } },
        response: {
          200: { description: 'The list as stored and in force', ...listBody },
          ...errorResponses(AUTH_ERRORS, bodyErrors, [409]),
        },
      },
    },
    async (req, reply) => {
      service.get(req.params.name);
      const { list } = await service.add(
        req.params.name,
        validEntries(req.body.entries),
        parseIfMatch(header(req, 'if-match')),
        req.who,
        req.query.replace === 'true',
      );
      return sendList(reply, list);
    },
  );

  app.delete<{ Params: NameParams & { cidr: string } }>(
    '/allowlists/:name/entries/:cidr',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'removeAllowlistEntry',
        summary: 'Remove the entry with this CIDR (URL-encoded: 10.0.0.0%2F8); If-Match optional',
        params: {
          type: 'object',
          required: ['name', 'cidr'],
          additionalProperties: false,
          properties: { name: { type: 'string', maxLength: 128 }, cidr: { type: 'string', maxLength: 128 } },
        },
        response: {
          200: { description: 'The list as stored and in force', ...listBody },
          ...errorResponses(AUTH_ERRORS, [400, 404, 409, 412, 503]),
        },
      },
    },
    async (req, reply) => {
      service.get(req.params.name);
      const parsed = parseCidr(req.params.cidr);
      if (!parsed.ok) throw new ApiError(400, 'invalid_entry', quoteCidr(req.params.cidr, parsed.message), 'cidr');
      const { list } = await service.remove(req.params.name, parsed.cidr.text, parseIfMatch(header(req, 'if-match')), req.who);
      return sendList(reply, list);
    },
  );

  app.get<{ Params: NameParams; Querystring: { ip: string } }>(
    '/allowlists/:name/check',
    {
      schema: {
        tags: ['allowlists'],
        operationId: 'checkAllowlistAddress',
        summary: 'Would this address be admitted now, and by which entry',
        params: nameParams,
        querystring: {
          type: 'object',
          required: ['ip'],
          additionalProperties: false,
          properties: { ip: { type: 'string', maxLength: 128 } },
        },
        response: {
          200: {
            description: 'The decision for this address under the list in force',
            type: 'object',
            additionalProperties: false,
            required: ['list', 'ip', 'allowed', 'version'],
            properties: {
              list: { type: 'string' },
              ip: { type: 'string' },
              allowed: { type: 'boolean' },
              version: { type: 'string' },
              index: { type: 'integer', description: 'the deciding entry (-1: none covers the address)' },
              entry: { anyOf: [entrySchema, { type: 'null' }], description: 'the deciding entry: an allow entry, a deny entry, or null' },
              reason: {
                type: ['string', 'null'],
                enum: ['denied_by_entry', 'not_allowlisted', null],
                description: 'why refused (the ipgate_denied_total reason); null when allowed',
              },
            },
          },
          ...readErrors,
        },
      },
    },
    async (req) => {
      const r = service.check(req.params.name, req.query.ip);
      return { list: req.params.name, ip: r.ip, allowed: r.allowed, version: r.version, index: r.index, entry: r.entry, reason: r.reason };
    },
  );
};

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}
