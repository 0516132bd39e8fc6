/**
 * The admin API's one error shape, `{error, message, field?}`, and the catalogue of codes. Every
 * 4xx/5xx the API sends goes through here, including fastify's own (validation, body limit, bad
 * JSON, unknown route), so a client parses one shape.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, type ServiceErrorCode } from '../store/allowlist-service';

interface ErrorBody {
  /** Stable, snake_case: clients branch on it. */
  error: string;
  /** One sentence for a person. */
  message: string;
  /** The offending field (`entries[2].cidr`, `ip`, `If-Match`), when there is one. */
  field?: string;
}

export const errorBodySchema = {
  type: 'object',
  required: ['error', 'message'],
  additionalProperties: false,
  properties: { error: { type: 'string' }, message: { type: 'string' }, field: { type: 'string' } },
} as const;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

const SERVICE_STATUS: Record<ServiceErrorCode, number> = {
  unknown_list: 404,
  entry_not_found: 404,
  precondition_failed: 412,
  conflict: 409,
  invalid_entries: 400,
  invalid_request: 400,
  store_unavailable: 503,
  entry_exists: 409,
  managed_by_config: 409,
  list_exists: 409,
  list_in_use: 409,
  too_large: 413,
};

export function send(reply: FastifyReply, status: number, body: ErrorBody): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/** `/entries/0/cidr` -> `entries[0].cidr` */
function pointerToField(pointer: string): string {
  let out = '';
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^[0-9]+$/.test(part) ? `[${part}]` : out === '' ? part : `.${part}`;
  }
  return out;
}

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

function validationBody(err: FastifyError): ErrorBody {
  const errors = (err.validation ?? []) as AjvError[];
  const context = (err as FastifyError & { validationContext?: string }).validationContext ?? 'body';
  const described = errors.map((e) => {
    let field = pointerToField(e.instancePath);
    let message = e.message ?? e.keyword;
    if (e.keyword === 'additionalProperties') {
      const extra = String(e.params.additionalProperty);
      field = field ? `${field}.${extra}` : extra;
      message = 'unknown field';
    } else if (e.keyword === 'required') {
      const missing = String(e.params.missingProperty);
      field = field ? `${field}.${missing}` : missing;
      message = 'is required';
    }
    return { field: field || context, message };
  });
  const first = described[0] ?? { field: context, message: err.message };
  return {
    error: 'invalid_request',
    message: described.map((d) => `${d.field}: ${d.message}`).join('; ') || err.message,
    field: first.field,
  };
}

export function errorHandler(err: FastifyError | ApiError | ServiceError, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (err instanceof ApiError)
    return send(reply, err.status, { error: err.code, message: err.message, ...(err.field ? { field: err.field } : {}) });
  if (err instanceof ServiceError) {
    const status = SERVICE_STATUS[err.code];
    if (status >= 500) req.log.error({ err }, 'allowlist store unavailable');
    return send(reply, status, { error: err.code, message: err.message, ...(err.field ? { field: err.field } : {}) });
  }
  const fe = err as FastifyError;
  if (fe.validation) return send(reply, 400, validationBody(fe));
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return send(reply, 413, { error: 'body_too_large', message: fe.message });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return send(reply, 415, { error: 'unsupported_media_type', message: 'send the body as application/json' });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return send(reply, 400, { error: 'invalid_json', message: 'the JSON body is empty', field: 'body' });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return send(reply, 400, { error: 'invalid_json', message: fe.message, field: 'body' });
    default:
      break;
  }
  if (fe instanceof SyntaxError || (fe.statusCode === 400 && /JSON/i.test(fe.message))) {
    return send(reply, 400, { error: 'invalid_json', message: fe.message, field: 'body' });
  }
  const status = fe.statusCode ?? 500;
  if (status >= 500) {
    req.log.error({ err }, 'admin API error');
    return send(reply, 500, { error: 'internal', message: 'internal error (see the ipgate log)' });
  }
  return send(reply, status, { error: (fe.code ?? 'bad_request').toLowerCase(), message: fe.message });
}
