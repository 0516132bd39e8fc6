/**
 * `POST /v1/explain`: what ipgate would decide for a connection, without making one.
 *
 * Input: the listener, the peer address (who connects to ipgate), optionally the bytes the peer
 * would send first (a PROXY header: v1 text, hex or base64) and, for HTTP listeners, request
 * headers, and for TCP listeners with routes the ClientHello's SNI (`sni`; absent or null: the
 * client sends none). Output: the client address, how it was derived (socket / proxy-v1 /
 * proxy-v2 / xff), the allowlist entry that matched and the decision, or the reason the
 * connection would be closed. On an HTTP listener the request target (`path`) and the Host
 * (`host`, or the Host lines among `headers`) are checked first, as the engine checks them: a
 * target that is neither origin-form nor http(s) absolute-form, or a Host the engine answers 400
 * (missing with an absolute-form path, two lines, invalid, too long), is decision `bad_request`
 * with the reason (bad_request, host_*), `status: 400` and `detail`; an absolute-form path's
 * authority replaces Host, as on the wire. On a listener with routes the route is chosen next,
 * as the data path does (the same route table): by that host and path (`/` when left out), by
 * `sni` on a TCP one (tls_bad_sni for a name the ClientHello reader refuses). The answer names the
 * route (name, host entry and how it matched, path entry, upstreams), the allowlist the route
 * enforces and the entry that decided; no route: HTTP decision `no_route` with the reason and
 * status (route_no_host, route_no_path: 404; route_bad_path, route_path_params: 400), TCP
 * decision `close` (route_no_host).
 *
 * The same functions as the data path decide: derive.ts (PROXY trust and header outcome, shared
 * with the listener), the PROXY decoder, request-target.ts and request-host.ts (the engine's
 * target and Host checks: `headers` become the header lines the engine reads, an array value one
 * line per element), forwarded-for.ts (the HTTP forwarder's X-Forwarded-For walk), the
 * listener's live matcher and its live SNI routes (route/sni-routes.ts: the same table lookup),
 * so the explanation cannot drift from the behaviour.
 */
import type { FastifyPluginAsync } from 'fastify';
import { parseAddress } from '../../allowlist/cidr';
import { addressSet, type AddressLookup } from '../../store/list-ref';
import { afterHeader, beforeHeader, type IdentityOutcome } from '../../identity/derive';
import { clientFromForwardedFor } from '../../identity/forwarded-for';
import type { Listener } from '../../listener/listener';
import { decodeProxyHeader } from '../../proxy-protocol/decoder';
import { asciiLower, hostNameProblem } from '../../route/host-name';
import { RouteTable } from '../../route/route-table';
import { requestHost } from '../../forward/http/request-host';
import { requestTarget } from '../../forward/http/request-target';
import { ApiError } from '../errors';
import type { RoutesInForce } from '../../route/routes-in-force';
import { AUTH_ERRORS, errorResponses } from '../openapi';

const MAX_HEADER_TEXT = 16_384;

const bodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['listener', 'peer'],
  properties: {
    listener: { type: 'string', maxLength: 128, description: 'listener name' },
    peer: { type: 'string', maxLength: 64, description: 'the address that connects to ipgate (the socket peer)' },
    proxyHeader: {
      type: 'string',
      maxLength: MAX_HEADER_TEXT,
      description: 'the first bytes the peer sends: PROXY v1 text ("PROXY TCP4 ..."), hex or base64',
    },
    sni: {
      type: ['string', 'null'],
      maxLength: 300,
      description: 'TCP listeners with routes: the SNI of the ClientHello (absent or null: none sent)',
    },
    host: {
      type: 'string',
      maxLength: 1024,
      description:
        "HTTP listeners: the request's Host, one line (default: the Host lines among `headers`); checked as the engine checks it",
    },
    path: {
      type: 'string',
      maxLength: 8192,
      description:
        'HTTP listeners: the request target (origin-form path and query, or absolute-form `http://authority/path`, whose authority replaces Host; default "/")',
    },
    headers: {
      type: 'object',
      maxProperties: 64,
      description: 'HTTP request headers (HTTP listeners)',
      additionalProperties: {
        anyOf: [
          { type: 'string', maxLength: 8192 },
          { type: 'array', maxItems: 32, items: { type: 'string', maxLength: 8192 } },
        ],
      },
    },
  },
} as const;

const entryOut = {
  type: ['object', 'null'],
  additionalProperties: false,
  description: 'the deciding entry (the most specific covering the client): an allow entry, a deny entry, or null',
  properties: {
    index: { type: 'integer' },
    cidr: { type: 'string' },
    action: { type: 'string', enum: ['allow', 'deny'] },
    comment: { type: 'string' },
    expiresAt: { type: 'string' },
  },
} as const;

const responseSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    listener: { type: 'string' },
    mode: { type: 'string' },
    peer: { type: 'string' },
    peerTrusted: { type: 'boolean', description: 'the peer is in proxyProtocol.trustedSources' },
    proxyHeader: { type: 'string', description: 'PROXY outcome as the metric label version/result' },
    client: { type: ['string', 'null'] },
    clientPort: { type: ['integer', 'null'] },
    via: { type: ['string', 'null'] },
    trustedProxy: { type: 'boolean', description: 'HTTP: the client after PROXY is in http.trustedProxies (X-Forwarded-For is walked)' },
    sni: {
      type: ['string', 'null'],
      description: 'TCP listeners with routes: the SNI as the router sees it (lower-cased, trailing dot cut)',
    },
    host: {
      type: 'string',
      description:
        'HTTP listeners: the host the request is decided on and sent upstream with (Host or the absolute-form authority, lower-cased, trailing dot cut)',
    },
    allowlist: { type: 'string', description: "the list that decides: the route's, or the listener's" },
    allowlistVersion: { type: 'string' },
    entry: entryOut,
    route: {
      type: ['object', 'null'],
      additionalProperties: false,
      description: 'listeners with routes: the route that takes the request or (TCP, by SNI) the connection (null: none, see reason)',
      properties: {
        name: { type: 'string' },
        host: { type: 'string', description: 'the host entry that matched, as configured (lower-case): a name, *.suffix or *' },
        hostMatch: { type: 'string', enum: ['exact', 'wildcard', 'default'] },
        path: {
          type: ['object', 'null'],
          additionalProperties: false,
          description: 'the path entry that matched (null: the route has no paths)',
          properties: {
            path: { type: 'string' },
            match: { type: 'string', enum: ['exact', 'prefix'] },
            ignoreCase: { type: 'boolean', description: 'present (true) when the entry compares ASCII letters without case' },
          },
        },
        upstreams: { type: 'array', items: { type: 'string' } },
      },
    },
    routesVersion: { type: 'string', description: 'hash of the routes in force' },
    status: { type: 'integer', description: 'no_route and bad_request: the status the client gets (404 or 400)' },
    decision: { enum: ['allow', 'deny', 'close', 'no_route', 'bad_request'] },
    reason: {
      type: 'string',
      description:
        'close, deny, no_route or bad_request reason code (log field and metric label): pp_<code>, tls_bad_sni, denied_by_entry (a deny entry decided), not_allowlisted (no entry covers the client), route_no_host, route_no_path, route_bad_path, route_path_params, bad_request (the target), host_missing, host_repeated, host_invalid, host_too_long',
    },
    detail: { type: 'string' },
  },
} as const;

interface ExplainBody {
  listener: string;
  peer: string;
  proxyHeader?: string;
  sni?: string | null;
  headers?: Record<string, string | string[]>;
  host?: string;
  path?: string;
}

/** What explain reads of a TCP listener's SNI routes: the table and each route's name and list. */
interface SniRouting {
  readonly table: RouteTable;
  readonly routes: readonly { readonly name: string; readonly allowlist: string }[];
}

/** `PROXY ...` text (CRLF added when missing), else hex, else base64. */
function headerBytes(text: string): Buffer {
  if (text.startsWith('PROXY ')) return Buffer.from(text.endsWith('\r\n') ? text : `${text.replace(/\n$/, '')}\r\n`, 'latin1');
  const compact = text.replace(/\s+/g, '');
  if (compact.length % 2 === 0 && /^[0-9a-fA-F]+$/.test(compact)) return Buffer.from(compact, 'hex');
  if (/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) return Buffer.from(compact, 'base64');
  throw new ApiError(400, 'invalid_proxy_header', 'proxyHeader must be PROXY v1 text, hex or base64', 'proxyHeader');
}

/**
 * What explain needs of a listener: its name, config and live list. A listener in this process is
 * one; a cluster primary, which has no listeners, builds them from the config and its own copy of
 * the lists (the ones every worker is sent), so the explanation is the same.
 */
export type ExplainTarget = Pick<Listener, 'name' | 'config' | 'list'> & {
  /** A listener's SNI routes in force (they change on reload); absent: compiled from `config`. */
  readonly sniRoutes?: SniRouting | null;
};

/** The SNI routes a target decides with: the live ones, or the config's; null without routes. */
function sniRouting(l: ExplainTarget, fromConfig: Map<string, SniRouting>): SniRouting | null {
  if (l.config.mode !== 'tcp' || l.config.routes === undefined) return null;
  if (l.sniRoutes !== undefined && l.sniRoutes !== null) return l.sniRoutes;
  let r = fromConfig.get(l.name);
  if (r === undefined) {
    const routes = l.config.routes;
    r = {
      table: RouteTable.compile(routes, { kind: 'sni' }),
      routes: routes.map((x) => ({ name: x.name, allowlist: x.allowlist ?? l.config.allowlist })),
    };
    fromConfig.set(l.name, r);
  }
  return r;
}

export const explainRoutes: FastifyPluginAsync<{ listeners: readonly ExplainTarget[]; routes?: RoutesInForce | null }> = async (
  app,
  { listeners, routes = null },
) => {
  // Named lists resolve to the live holders, as in the listener and the HTTP forwarder (list-ref.ts).
  const trustedSources = new Map<string, AddressLookup>();
  const trustedProxies = new Map<string, AddressLookup>();
  const configRoutes = new Map<string, SniRouting>();
  for (const l of listeners) {
    trustedSources.set(l.name, addressSet(l.config.proxyProtocol.trustedSources, l.list.owner));
    trustedProxies.set(l.name, addressSet(l.config.http.trustedProxies, l.list.owner));
  }

  app.post<{ Body: ExplainBody }>(
    '/explain',
    {
      schema: {
        tags: ['diagnostics'],
        operationId: 'explainDecision',
        summary: 'Derive the client address and the allowlist decision for a peer, an optional PROXY header and HTTP headers',
        body: bodySchema,
        response: {
          200: { description: 'How the client address was derived and what the allowlist decides', ...responseSchema },
          ...errorResponses(AUTH_ERRORS, [400, 404, 413, 415]),
        },
      },
    },
    async (req) => {
      const b = req.body;
      const l = listeners.find((x) => x.name === b.listener);
      if (l === undefined)
        throw new ApiError(
          404,
          'unknown_listener',
          `no listener named ${JSON.stringify(b.listener)} (have: ${listeners.map((x) => x.name).join(', ')})`,
          'listener',
        );
      const peer = parseAddress(b.peer);
      if (!peer.ok) throw new ApiError(400, 'invalid_peer', `peer: ${peer.message}`, 'peer');

      const routing = sniRouting(l, configRoutes);
      if (b.sni !== undefined && routing === null) {
        throw new ApiError(
          400,
          'invalid_sni',
          `sni ${JSON.stringify(b.sni)}: listener ${JSON.stringify(l.name)} does not route on SNI (only tcp listeners with routes do)`,
          'sni',
        );
      }
      const mode = l.config.proxyProtocol.mode;
      const peerTrusted = mode !== 'off' && trustedSources.get(l.name)!.admits(peer.address);
      const base = {
        listener: l.name,
        mode: l.config.mode,
        peer: peer.address,
        peerTrusted,
        allowlist: l.config.allowlist,
        allowlistVersion: l.list.version,
      };

      let outcome: IdentityOutcome | null = beforeHeader(mode, peerTrusted);
      if (outcome === null) {
        const bytes = b.proxyHeader !== undefined ? headerBytes(b.proxyHeader) : Buffer.alloc(0);
        const r = decodeProxyHeader(bytes, { maxV2Length: l.config.proxyProtocol.maxV2Length });
        if (r.kind === 'more' && bytes.length > 0) {
          // The listener would wait for more bytes, then close (pp_truncated / pp_timeout).
          outcome = { ok: false, reason: 'pp_truncated', version: bytes[0] === 0x50 ? 'v1' : 'v2', detail: 'the header is incomplete' };
        } else {
          // No bytes: the peer speaks its own protocol first, which is not a PROXY header.
          outcome = afterHeader(r.kind === 'more' ? { kind: 'none' } : r, bytes[0] ?? 0, mode, peerTrusted);
        }
      }
      if (!outcome.ok) {
        return {
          ...base,
          proxyHeader: `${outcome.version}/${outcome.reason}`,
          client: null,
          clientPort: null,
          via: null,
          entry: null,
          decision: 'close',
          reason: outcome.reason,
          ...(outcome.detail !== undefined ? { detail: outcome.detail } : {}),
        };
      }
      let client = outcome.source?.address ?? peer.address;
      const clientPort = outcome.source?.port ?? null;
      let via: string = outcome.via;
      let trustedProxy = false;
      // HTTP: the request target and the Host, checked by the engine's functions before anything
      // else of the request (relay-conn.ts onHead).
      const lr = l.config.mode === 'http' ? routes?.get(l.name) : undefined;
      const routed = lr !== undefined && lr.table !== null;
      let host: string | null = null;
      let path = '/';
      if (l.config.mode === 'http') {
        const target = requestTarget(b.path ?? '/');
        if (target === null) {
          return {
            ...base,
            proxyHeader: outcome.label,
            client,
            clientPort,
            via,
            entry: null,
            route: null,
            decision: 'bad_request',
            reason: 'bad_request',
            status: 400,
            detail: `path ${JSON.stringify(b.path)} is neither origin-form ("/...") nor an http(s)://authority/... absolute-form without userinfo`,
          };
        }
        path = target.path;
        const lines = hostLines(b);
        if (lines.length === 0 && target.authority === null) {
          // Not told the request's Host: a routed listener cannot choose a route without one.
          if (routed)
            throw new ApiError(400, 'missing_host', 'this listener routes by host: give "host" (or a Host header in "headers")', 'host');
        } else {
          const h = requestHost(lines, target.authority);
          if (typeof h !== 'string') {
            return {
              ...base,
              proxyHeader: outcome.label,
              client,
              clientPort,
              via,
              entry: null,
              route: null,
              decision: 'bad_request',
              reason: h.reason,
              status: 400,
              detail: h.detail,
            };
          }
          host = h;
        }
      }
      const hostOut = host === null ? {} : { host };
      if (l.config.mode === 'http') {
        const proxies = trustedProxies.get(l.name)!;
        trustedProxy = proxies.admits(client);
        if (trustedProxy) {
          const xff = headerValue(b.headers, 'x-forwarded-for');
          const walked = clientFromForwardedFor(xff, client, proxies);
          if (walked !== client) via = 'xff';
          client = walked;
        }
      }
      // Routes: the route picks the allowlist (and the upstreams) before the decision.
      let list = l.list;
      let routeOut: Record<string, unknown> = {};
      if (routing !== null) {
        // The ClientHello reader's rule for the name (tls/client-hello.ts), then the route table.
        let sni = b.sni ?? null;
        if (sni !== null) {
          if (sni.endsWith('.')) sni = sni.slice(0, -1);
          const problem = hostNameProblem(sni);
          if (problem !== null) {
            return {
              ...base,
              proxyHeader: outcome.label,
              client,
              clientPort,
              via,
              sni: b.sni,
              route: null,
              entry: null,
              decision: 'close',
              reason: 'tls_bad_sni',
              detail: `server_name ${JSON.stringify(sni)} ${problem}`,
            };
          }
          sni = asciiLower(sni);
        }
        const m = routing.table.lookupHost(sni);
        if (m.kind === 'miss') {
          return {
            ...base,
            proxyHeader: outcome.label,
            client,
            clientPort,
            via,
            sni,
            route: null,
            entry: null,
            decision: 'close',
            reason: m.reason,
          };
        }
        const route = routing.routes[m.routeIndex]!;
        list = l.list.owner.get(route.allowlist);
        const rc = l.config.routes?.find((x) => x.name === route.name);
        routeOut = {
          sni,
          allowlist: route.allowlist,
          allowlistVersion: list.version,
          route: { name: route.name, host: m.host, hostMatch: m.hostMatch, path: null, upstreams: rc?.upstreams ?? l.config.upstreams },
        };
      } else if (routed && host !== null) {
        const r = lr.table!.lookup(host, path);
        const version = routes!.version.hash;
        if (r.kind === 'miss') {
          return {
            ...base,
            ...hostOut,
            proxyHeader: outcome.label,
            client,
            clientPort,
            via,
            trustedProxy,
            entry: null,
            route: null,
            routesVersion: version,
            decision: 'no_route',
            reason: r.reason,
            status: r.reason === 'route_bad_path' || r.reason === 'route_path_params' ? 400 : 404,
          };
        }
        const rc = lr.routes![r.routeIndex]!;
        const allowlist = rc.allowlist ?? lr.allowlist;
        list = l.list.owner.get(allowlist);
        routeOut = {
          allowlist,
          allowlistVersion: list.version,
          routesVersion: version,
          route: {
            name: r.route,
            host: r.host,
            hostMatch: r.hostMatch,
            path:
              r.path === null
                ? null
                : { path: r.path.path, match: r.path.match, ...(r.path.ignoreCase === true ? { ignoreCase: true } : {}) },
            upstreams: rc.upstreams ?? lr.upstreams,
          },
        };
      }
      const d = list.matcher.decide(client);
      const e = d.entry;
      return {
        ...base,
        ...routeOut,
        ...hostOut,
        proxyHeader: outcome.label,
        client,
        clientPort,
        via,
        trustedProxy,
        entry:
          e === null
            ? null
            : {
                index: d.index,
                cidr: e.cidr,
                action: e.action ?? 'allow',
                ...(e.comment !== undefined ? { comment: e.comment } : {}),
                ...(e.expiresAt !== undefined ? { expiresAt: e.expiresAt } : {}),
              },
        decision: d.allowed ? 'allow' : 'deny',
        ...(d.reason !== null ? { reason: d.reason } : {}),
      };
    },
  );
};

/**
 * The request's Host lines as the engine's parser hands them over ([name, value, ...]): `host`
 * as one line, else each Host entry of `headers` (an array: one line per element, so two lines
 * are two Host headers, as on the wire).
 */
function hostLines(b: ExplainBody): string[] {
  if (b.host !== undefined) return ['host', b.host];
  const out: string[] = [];
  if (b.headers === undefined) return out;
  for (const [k, v] of Object.entries(b.headers)) {
    if (k.toLowerCase() !== 'host') continue;
    for (const line of Array.isArray(v) ? v : [v]) out.push(k, line);
  }
  return out;
}

/** Header lines joined the way a request carries them (RFC 9110 5.3), case-insensitive name. */
function headerValue(headers: Record<string, string | string[]> | undefined, name: string): string | null {
  if (headers === undefined) return null;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) parts.push(...(Array.isArray(v) ? v : [v]));
  return parts.length === 0 ? null : parts.join(', ');
}
