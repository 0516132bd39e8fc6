/**
 * `POST /v1/explain`: what ipgate would decide for a connection, without making one.
 *
 * Input: the listener, the peer address (who connects to ipgate), optionally the bytes the peer
 * would send first (a PROXY header: v1 text, hex or base64) and, for HTTP listeners, request
 * headers, and for TCP listeners with routes the ClientHello's SNI (`sni`; absent or null: the
 * client sends none). Output: the client address, how it was derived (socket / proxy-v1 /
 * proxy-v2 / xff), the route that takes the connection (name, host entry, how it matched), the
 * allowlist it enforces, the entry that matched and the decision, or the reason the connection
 * would be closed (tls_bad_sni for a name the ClientHello reader refuses, route_no_host).
 *
 * The same functions as the data path decide: derive.ts (PROXY trust and header outcome, shared
 * with the listener), the PROXY decoder, forwarded-for.ts (the HTTP forwarder's X-Forwarded-For
 * walk), the listener's live matcher and its live SNI routes (route/sni-routes.ts: the same
 * table lookup), so the explanation cannot drift from the behaviour.
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
import { ApiError } from '../errors';
import { AUTH_ERRORS, errorResponses } from '../openapi';

const MAX_HEADER_TEXT = 16_384;

const bodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['listener', 'peer'],
  properties: {
    listener: { type: 'string', maxLength: 128, description: 'listener name' },
    peer: { type: 'string', maxLength: 64, description: 'the address that connects to ipgate (the socket peer)' },
    proxyHeader: { type: 'string', maxLength: MAX_HEADER_TEXT, description: 'the first bytes the peer sends: PROXY v1 text ("PROXY TCP4 ..."), hex or base64' },
    sni: { type: ['string', 'null'], maxLength: 300, description: 'TCP listeners with routes: the SNI of the ClientHello (absent or null: none sent)' },
    headers: {
      type: 'object', maxProperties: 64, description: 'HTTP request headers (HTTP listeners)',
      additionalProperties: { anyOf: [{ type: 'string', maxLength: 8192 }, { type: 'array', maxItems: 32, items: { type: 'string', maxLength: 8192 } }] },
    },
  },
} as const;

const entryOut = {
  type: ['object', 'null'], additionalProperties: false,
  description: 'the deciding entry (the most specific covering the client): an allow entry, a deny entry, or null',
  properties: { index: { type: 'integer' }, cidr: { type: 'string' }, action: { type: 'string', enum: ['allow', 'deny'] }, comment: { type: 'string' }, expiresAt: { type: 'string' } },
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
    sni: { type: ['string', 'null'], description: 'TCP listeners with routes: the SNI as the router sees it (lower-cased, trailing dot cut)' },
    route: { type: ['string', 'null'], description: 'TCP listeners with routes: the route that takes the connection (null: none)' },
    routeHost: { type: 'string', description: 'the route\'s host entry that matched: a name, *.suffix or *' },
    hostMatch: { type: 'string', enum: ['exact', 'wildcard', 'default'] },
    allowlist: { type: 'string', description: 'the list that decides: the route\'s, or the listener\'s' },
    allowlistVersion: { type: 'string' },
    entry: entryOut,
    decision: { enum: ['allow', 'deny', 'close'] },
    reason: { type: 'string', description: 'close or deny reason code (log field and metric label): pp_<code>, tls_bad_sni, route_no_host, denied_by_entry (a deny entry decided) or not_allowlisted (no entry covers the client)' },
    detail: { type: 'string' },
  },
} as const;

interface ExplainBody {
  listener: string;
  peer: string;
  proxyHeader?: string;
  sni?: string | null;
  headers?: Record<string, string | string[]>;
}

/** What explain reads of a TCP listener's SNI routes: the table and each route's name and list. */
interface SniRouting {
  readonly table: RouteTable;
  readonly routes: readonly { readonly name: string; readonly allowlist: string }[];
}

/** `PROXY ...` text (CRLF added when missing), else hex, else base64. */
export function headerBytes(text: string): Buffer {
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
    r = { table: RouteTable.compile(routes, { kind: 'sni' }), routes: routes.map((x) => ({ name: x.name, allowlist: x.allowlist ?? l.config.allowlist })) };
    fromConfig.set(l.name, r);
  }
  return r;
}

export const explainRoutes: FastifyPluginAsync<{ listeners: readonly ExplainTarget[] }> = async (app, { listeners }) => {
  // Named lists resolve to the live holders, as in the listener and the HTTP forwarder (list-ref.ts).
  const trustedSources = new Map<string, AddressLookup>();
  const trustedProxies = new Map<string, AddressLookup>();
  const configRoutes = new Map<string, SniRouting>();
  for (const l of listeners) {
    trustedSources.set(l.name, addressSet(l.config.proxyProtocol.trustedSources, l.list.owner));
    trustedProxies.set(l.name, addressSet(l.config.http.trustedProxies, l.list.owner));
  }

  app.post<{ Body: ExplainBody }>('/explain', {
    schema: {
      tags: ['diagnostics'], operationId: 'explainDecision',
      summary: 'Derive the client address and the allowlist decision for a peer, an optional PROXY header and HTTP headers',
      body: bodySchema,
      response: { 200: { description: 'How the client address was derived and what the allowlist decides', ...responseSchema }, ...errorResponses(AUTH_ERRORS, [400, 404, 413, 415]) },
    },
  }, async (req) => {
    const b = req.body;
    const l = listeners.find((x) => x.name === b.listener);
    if (l === undefined) throw new ApiError(404, 'unknown_listener', `no listener named ${JSON.stringify(b.listener)} (have: ${listeners.map((x) => x.name).join(', ')})`, 'listener');
    const peer = parseAddress(b.peer);
    if (!peer.ok) throw new ApiError(400, 'invalid_peer', `peer: ${peer.message}`, 'peer');

    const routing = sniRouting(l, configRoutes);
    if (b.sni !== undefined && routing === null) {
      throw new ApiError(400, 'invalid_sni', `sni ${JSON.stringify(b.sni)}: listener ${JSON.stringify(l.name)} does not route on SNI (only tcp listeners with routes do)`, 'sni');
    }
    const mode = l.config.proxyProtocol.mode;
    const peerTrusted = mode !== 'off' && trustedSources.get(l.name)!.lookup(peer.address) >= 0;
    const base = { listener: l.name, mode: l.config.mode, peer: peer.address, peerTrusted, allowlist: l.config.allowlist, allowlistVersion: l.list.version };

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
      return { ...base, proxyHeader: `${outcome.version}/${outcome.reason}`, client: null, clientPort: null, via: null, entry: null,
        decision: 'close', reason: outcome.reason, ...(outcome.detail !== undefined ? { detail: outcome.detail } : {}) };
    }
    let client = outcome.source?.address ?? peer.address;
    const clientPort = outcome.source?.port ?? null;
    let via: string = outcome.via;
    let trustedProxy = false;
    if (l.config.mode === 'http') {
      const proxies = trustedProxies.get(l.name)!;
      trustedProxy = proxies.lookup(client) >= 0;
      if (trustedProxy) {
        const xff = headerValue(b.headers, 'x-forwarded-for');
        const walked = clientFromForwardedFor(xff, client, proxies);
        if (walked !== client) via = 'xff';
        client = walked;
      }
    }
    let list = l.list;
    let routeOut = {};
    if (routing !== null) {
      // The ClientHello reader's rule for the name (tls/client-hello.ts), then the route table.
      let sni = b.sni ?? null;
      if (sni !== null) {
        if (sni.endsWith('.')) sni = sni.slice(0, -1);
        const problem = hostNameProblem(sni);
        if (problem !== null) {
          return { ...base, proxyHeader: outcome.label, client, clientPort, via, sni: b.sni, route: null, entry: null,
            decision: 'close', reason: 'tls_bad_sni', detail: `server_name ${JSON.stringify(sni)} ${problem}` };
        }
        sni = asciiLower(sni);
      }
      const m = routing.table.lookupHost(sni);
      if (m.kind === 'miss') {
        return { ...base, proxyHeader: outcome.label, client, clientPort, via, sni, route: null, entry: null, decision: 'close', reason: m.reason };
      }
      const route = routing.routes[m.routeIndex]!;
      list = l.list.owner.get(route.allowlist);
      routeOut = { sni, route: route.name, routeHost: m.host, hostMatch: m.hostMatch, allowlist: route.allowlist, allowlistVersion: list.version };
    }
    const d = list.matcher.decide(client);
    const e = d.entry;
    return {
      ...base, ...routeOut, proxyHeader: outcome.label, client, clientPort, via, trustedProxy,
      entry: e === null ? null : { index: d.index, cidr: e.cidr, action: e.action ?? 'allow', ...(e.comment !== undefined ? { comment: e.comment } : {}),
        ...(e.expiresAt !== undefined ? { expiresAt: e.expiresAt } : {}) },
      decision: d.allowed ? 'allow' : 'deny',
      ...(d.reason !== null ? { reason: d.reason } : {}),
    };
  });
};

/** Header lines joined the way a request carries them (RFC 9110 5.3), case-insensitive name. */
function headerValue(headers: Record<string, string | string[]> | undefined, name: string): string | null {
  if (headers === undefined) return null;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) parts.push(...(Array.isArray(v) ? v : [v]));
  return parts.length === 0 ? null : parts.join(', ');
}
