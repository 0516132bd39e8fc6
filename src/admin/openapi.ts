/**
 * What the OpenAPI document says about responses: one description per status the admin API sends,
 * and the sets each kind of route shares, so a route lists exactly the statuses it can return
 * (checked against the wire by test/integration/admin-openapi.test.ts). fastify also serialises an
 * error through the schema given for its status, which is the one error shape (errors.ts).
 */
import { errorBodySchema } from './errors';

const DESCRIPTIONS = {
  400: 'Invalid request: a field fails validation (`field` names it) or the body is not JSON',
  401: 'No `Authorization: Bearer <token>` header, or one of another form',
  403: 'The token is not valid, or no admin token is configured',
  404: 'No such allowlist, entry or listener',
  409: 'Conflict, `error` says which: `entry_exists` (the CIDR is already listed: the message quotes the entry there; add ?replace=true to replace it), `managed_by_config` (a source: config list: the message names the config file), `list_exists`, `list_in_use` (the message names the listeners using it), or `conflict` (the list kept changing outside this process through every retry; send the request again)',
  412: 'If-Match names a version the list is no longer at (or no strong ETag)',
  413: "The body is larger than admin.bodyLimit, or the store cannot hold the result (`too_large`: the Kubernetes store's 1 MiB ConfigMap limit, with how many entries fit)",
  415: 'The body is not application/json',
  421: 'The Host header is not an address of this admin API (an IP address, localhost or a name in admin.allowedHosts): DNS rebinding protection',
  428: 'PUT without If-Match: a whole-list replace must say which version it replaces',
  500: 'Internal error (see the ipgate log)',
  503: 'The allowlist store cannot be written now; nothing changed',
} as const;

type DocumentedStatus = keyof typeof DESCRIPTIONS;

/** Every route: the Host check. */
export const PUBLIC_ERRORS: readonly DocumentedStatus[] = [421];
/** Every route behind the token. */
export const AUTH_ERRORS: readonly DocumentedStatus[] = [401, 403, 421];

/** `response` entries for these error statuses, each the error body with its description. */
export function errorResponses(...sets: readonly (readonly DocumentedStatus[])[]): Record<string, object> {
  const out: Record<string, object> = {};
  for (const status of [...new Set(sets.flat())].sort((a, b) => a - b)) {
    out[String(status)] = { description: DESCRIPTIONS[status], ...errorBodySchema };
  }
  return out;
}

/** `servers` of the document: where the admin API listens by default, and how else it is reached. */
export const SERVERS = [
  {
    url: 'http://127.0.0.1:9901',
    description:
      'The default admin.listen (loopback). In Kubernetes: the admin Service, e.g. http://ipgate-admin.<namespace>.svc:9901, whose names must be in admin.allowedHosts',
  },
] as const;
