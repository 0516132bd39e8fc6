/**
 * HttpEngine on http-proxy 1.18 (the chosen engine), with its defects on Node 20 handled here or
 * by the forwarder, each proven by a test in test/integration/http-forward.test.ts:
 *
 * 1. No `error` listener = an upstream error crashes the process (EventEmitter throws). An error
 *    listener is attached to every proxy instance at construction; errors go to the sink, which
 *    answers 502/504 or destroys the socket once headers went out.
 * 2. The upstream request keeps running after the client disconnects: http-proxy only aborts on
 *    the request's `aborted` event, which Node 20 no longer emits once the request body was read
 *    (any GET). The forwarder destroys the upstream request when the response closes unfinished.
 * 3. Without an agent every request opens a new upstream connection (`Connection: close` is
 *    forced). The forwarder passes a keep-alive http.Agent (bounded sockets, idle timeout below
 *    the backend's).
 * 4. The client's `Connection: close` and hop-by-hop headers are copied upstream, defeating the
 *    pool: the forwarder builds the upstream headers itself (request-headers.ts); response
 *    hop-by-hop headers are dropped here (selfHandleResponse), so an upstream `Connection: close`
 *    no longer closes the client's keep-alive connection, and Node, not the upstream, decides the
 *    client connection's fate (maxRequestsPerSocket, drain, revocation).
 * 5. `xfwd` reads the socket address (wrong behind the PROXY protocol) and appends unvalidated
 *    client values: not used; the XHeaders passes are removed and the forwarder sets the headers.
 * Also removed: `deleteLength` (it sets `Content-Length: 0` and drops Transfer-Encoding on a
 * chunked DELETE/OPTIONS, sending the body unframed: the upstream would read it as the next request
 * on a pooled connection); `checkMethodAndHeader` for ws (non-WebSocket upgrades are proxied too);
 * `timeout` (the forwarder's timer covers queueing + connect + response headers).
 */
import type { Agent, ClientRequest, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type net from 'node:net';
import httpProxy from 'http-proxy';
import type { Upstream } from '../tcp/tcp-forwarder';
import type { EngineSink, HttpEngine } from './engine';
import { kExchange, type Exchange } from './exchange';

type Pass = { name: string };
interface ProxyInternals {
  webPasses: Pass[];
  wsPasses: Pass[];
}

const REMOVED_WEB = new Set(['deleteLength', 'timeout', 'XHeaders']);
const REMOVED_WS = new Set(['checkMethodAndHeader', 'XHeaders']);

interface Carrier { [kExchange]?: Exchange }

export class HttpProxyEngine implements HttpEngine {
  private readonly proxies: httpProxy[];

  constructor(targets: readonly Upstream[], readonly defaultAgent: Agent, private readonly sink: EngineSink) {
    this.proxies = targets.map((t) => this.createProxy(t));
  }

  web(ex: Exchange, target: number, headers: OutgoingHttpHeaders, agent: Agent): void {
    // setupOutgoing copies req.headers: hand it the rewritten ones.
    ex.req.headers = headers as IncomingMessage['headers'];
    const proxy = this.proxies[target]!;
    // The common case passes no per-call options: http-proxy then skips its options merge.
    if (agent === this.defaultAgent) proxy.web(ex.req, ex.res!);
    else proxy.web(ex.req, ex.res!, { agent });
  }

  ws(ex: Exchange, target: number, headers: OutgoingHttpHeaders, agent: Agent, head: Buffer): void {
    ex.req.headers = headers as IncomingMessage['headers'];
    this.proxies[target]!.ws(ex.req, ex.socket, head, { agent });
  }

  private createProxy(target: Upstream): httpProxy {
    const proxy = httpProxy.createProxyServer({
      target: { protocol: 'http:', host: target.host, port: target.port } as unknown as string,
      agent: this.defaultAgent,
      selfHandleResponse: true,
      // The forwarder sets every forwarding header; http-proxy's would be wrong (defect 5).
      xfwd: false,
      // Keep the client's Host (and path) as sent: the upstream sees the request the client made.
      changeOrigin: false,
    });
    const internals = proxy as unknown as ProxyInternals;
    internals.webPasses = internals.webPasses.filter((p) => !REMOVED_WEB.has(p.name));
    internals.wsPasses = internals.wsPasses.filter((p) => !REMOVED_WS.has(p.name));
    const sink = this.sink;
    // Defect 1: always listen for errors. req carries the exchange for web and ws alike.
    proxy.on('error', (err: NodeJS.ErrnoException, req: IncomingMessage) => {
      const ex = (req as Carrier)[kExchange];
      if (ex !== undefined) sink.upstreamError(ex, err);
    });
    // The client went away first (http-proxy saw ECONNRESET with the client socket destroyed and
    // aborted the upstream request itself): nothing to answer.
    proxy.on('econnreset', () => undefined);
    proxy.on('proxyReq', (proxyReq: ClientRequest, req: IncomingMessage) => {
      const ex = (req as Carrier)[kExchange];
      if (ex === undefined) return;
      ex.proxyReq = proxyReq;
      sink.upstreamRequest(ex);
    });
    proxy.on('proxyReqWs', (proxyReq: ClientRequest, req: IncomingMessage) => {
      const ex = (req as Carrier)[kExchange];
      if (ex === undefined) return;
      ex.proxyReq = proxyReq;
      (proxyReq as Carrier)[kExchange] = ex;
      // Before http-proxy's own listener: it pipes right away.
      proxyReq.once('upgrade', onUpstreamUpgrade);
      // The upstream may refuse the upgrade with an ordinary response, which http-proxy relays.
      proxyReq.once('response', onUpstreamWsResponse);
      sink.upstreamRequest(ex);
    });
    proxy.on('proxyRes', (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse) => {
      const ex = (req as Carrier)[kExchange];
      if (ex === undefined) return;
      if (res.headersSent || res.destroyed) {
        proxyRes.destroy();
        return;
      }
      res.writeHead(proxyRes.statusCode ?? 502, proxyRes.statusMessage ?? '', responseHeaders(proxyRes.rawHeaders));
      sink.upstreamResponse(ex, proxyRes.statusCode ?? 502);
      proxyRes.pipe(res);
    });
    function onUpstreamWsResponse(this: ClientRequest, res: IncomingMessage): void {
      const ex = (this as Carrier)[kExchange];
      if (ex === undefined) return;
      sink.upstreamResponse(ex, res.statusCode ?? 502);
      // http-proxy pipes a declined upgrade's response to the client socket, and a pipe ends its
      // destination only on the source's 'end': a response the backend cut short would leave the
      // client connection open for good (fuzz finding D). Rare path: a closure is fine here.
      res.once('close', () => { if (!res.complete) ex.socket.destroy(); });
    }
    function onUpstreamUpgrade(this: ClientRequest, _res: IncomingMessage, socket: net.Socket): void {
      const ex = (this as Carrier)[kExchange];
      if (ex !== undefined) sink.upgraded(ex, socket);
    }
    return proxy;
  }
}

/**
 * The upstream's response headers minus hop-by-hop ones (RFC 7230 6.1), as a flat list with
 * duplicates (Set-Cookie) and case preserved. Transfer-Encoding is re-framed by Node.
 */
export function responseHeaders(raw: readonly string[]): string[] {
  const out: string[] = [];
  let named: string[] | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    switch (name.length) {
      case 2: // te
      case 7: // trailer, upgrade
      case 10: // connection, keep-alive
      case 16: // proxy-connection
      case 17: { // transfer-encoding
        const lower = name.toLowerCase();
        if (lower === 'connection') {
          for (const part of raw[i + 1]!.split(',')) {
            const token = part.trim().toLowerCase();
            if (token !== '' && token !== 'close' && token !== 'keep-alive') (named ??= []).push(token);
          }
          continue;
        }
        if (lower === 'te' || lower === 'trailer' || lower === 'upgrade' || lower === 'keep-alive' ||
            lower === 'proxy-connection' || lower === 'transfer-encoding') continue;
      }
    }
    out.push(name, raw[i + 1]!);
  }
  if (named === null) return out;
  const drop = named;
  const kept: string[] = [];
  for (let i = 0; i < out.length; i += 2) {
    const lower = out[i]!.toLowerCase();
    if (lower === 'content-length' || !drop.includes(lower)) kept.push(out[i]!, out[i + 1]!);
  }
  return kept;
}
