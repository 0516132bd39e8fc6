/**
 * HttpEngine on undici (listener option `http.engine: undici`, opt-in): one undici Pool per
 * upstream target, driven through `Pool.dispatch(opts, handler)` with undici's raw-header handler
 * API (onConnect/onHeaders/onData/onComplete/onError: undici 7 passes such a handler through
 * unwrapped; the newer onRequestStart API is wrapped and parses headers into objects). No
 * ClientRequest, no http-proxy passes, no per-request closures: one small handler object per
 * request. bench/README.md "HTTP engines" has the measurement that chose this API.
 *
 * Same guarantees as HttpProxyEngine (test/integration/http-undici.test.ts):
 * - Request headers exactly as the forwarder built them (request-headers.ts), minus
 *   Transfer-Encoding, which undici refuses as a header and re-creates itself (a stream body
 *   without Content-Length goes chunked). undici adds only Host (ours) / Connection: keep-alive /
 *   Content-Length framing.
 * - Response hop-by-hop headers dropped (responseHeaders): an upstream `Connection: close` closes
 *   only the pooled upstream socket, never the client's.
 * - Pool bounded by upstreamMaxSockets (`connections`), idle sockets closed after
 *   upstreamIdleTimeoutMs (`keepAliveTimeout`; a backend's shorter `Keep-Alive: timeout` hint wins).
 * - The upstream deadline stays the forwarder's timer (it covers queueing, connect and response
 *   headers and answers 504): undici's own headersTimeout/bodyTimeout are off so one clock decides.
 * - Client abort / timeout: the forwarder destroys `ex.proxyReq`, here a handle that calls
 *   undici's abort (a request still queued for a socket is aborted as soon as it gets one).
 * - Bodies stream both ways with backpressure: the request body is the IncomingMessage (undici
 *   pauses reading it on a full socket); response chunks go to res.write and a `false` pauses the
 *   upstream socket until the response drains.
 *
 * Upgrades (WebSocket) and requests through a dedicated agent (outbound PROXY header: one
 * upstream connection per client, ProxyHeaderAgent) stay on http-proxy even with this engine.
 */
import type { Agent, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { buildConnector, Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { FixedHistogram } from '../../metrics/fixed-histogram';
import type { Upstream } from '../tcp/tcp-forwarder';
import type { EngineSink, HttpEngine } from './engine';
import type { Exchange } from './exchange';
import { HttpProxyEngine, responseHeaders } from './http-proxy-engine';

export interface UndiciEngineOptions {
  /** upstreamMaxSockets */
  connections: number;
  /** upstreamIdleTimeoutMs */
  idleMs: number;
  /** Upstream connect time, per new connection (the same histogram the http.Agent path feeds). */
  connectTime?: FixedHistogram;
}

export class UndiciEngine implements HttpEngine {
  private readonly pools: Pool[];
  /** Upgrades and dedicated-agent (PROXY header) requests. */
  private readonly fallback: HttpProxyEngine;

  constructor(targets: readonly Upstream[], readonly defaultAgent: Agent, private readonly sink: EngineSink,
    options: UndiciEngineOptions) {
    this.fallback = new HttpProxyEngine(targets, defaultAgent, sink);
    this.pools = targets.map((t) => new Pool(`http://${t.host.includes(':') ? `[${t.host}]` : t.host}:${t.port}`, {
      connections: options.connections,
      pipelining: 1,
      keepAliveTimeout: options.idleMs,
      keepAliveMaxTimeout: options.idleMs,
      headersTimeout: 0,
      bodyTimeout: 0,
      ...(options.connectTime !== undefined ? { connect: timedConnector(options.connectTime) } : {}),
    }));
  }

  web(ex: Exchange, target: number, headers: OutgoingHttpHeaders, agent: Agent): void {
    if (agent !== this.defaultAgent) {
      this.fallback.web(ex, target, headers, agent);
      return;
    }
    if (headers['transfer-encoding'] !== undefined) delete headers['transfer-encoding'];
    const call = new UndiciCall(ex, this.sink);
    ex.proxyReq = call as unknown as Exchange['proxyReq'];
    const req = ex.req;
    try {
      this.pools[target]!.dispatch({
        path: req.url ?? '/', method: req.method ?? 'GET', headers: headers as Record<string, string>,
        body: ex.bodyless ? null : req,
      }, call);
    } catch (err) {
      // Invalid options (undici validates headers synchronously): answer 502 like any upstream failure.
      call.onError(err as Error);
      return;
    }
    this.sink.upstreamRequest(ex);
  }

  ws(ex: Exchange, target: number, headers: OutgoingHttpHeaders, agent: Agent, head: Buffer): void {
    // Upgrades stay on http-proxy: undici would hand back the upstream socket just the same, but
    // the tunnel code (forwarder `upgraded`, the 101 relay) is proven on http-proxy.
    this.fallback.ws(ex, target, headers, agent, head);
  }

  close(): void {
    for (const pool of this.pools) void pool.destroy().catch(() => undefined);
  }
}

/**
 * One upstream request: undici's dispatch handler, and the handle the forwarder keeps as
 * `ex.proxyReq` (it only calls `destroy(err?)` and reads `destroyed`).
 */
class UndiciCall implements Dispatcher.DispatchHandler {
  destroyed = false;
  /** An outcome was reported to the sink (error) or the response finished: ignore the rest. */
  private done = false;
  private abort: ((err?: Error) => void) | null = null;
  private resume: (() => void) | null = null;
  private pendingError: Error | null = null;

  constructor(private readonly ex: Exchange, private readonly sink: EngineSink) {}

  /** The forwarder's abort: client gone (no err) or upstream timeout (err with code ETIMEDOUT). */
  destroy(err?: Error): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    const reason = err ?? Object.assign(new Error('client aborted'), { code: 'ECONNRESET' });
    if (this.abort !== null) {
      this.abort(reason);
      return this;
    }
    // Still queued for a pooled socket: undici gives the abort function only once it has one.
    // Answer now (504 on timeout; nothing after a client abort) and abort when it starts.
    this.pendingError = reason;
    if (err !== undefined) this.fail(err);
    return this;
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
    if (this.pendingError !== null) abort(this.pendingError);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    if (this.done) return false;
    const res = this.ex.res as ServerResponse;
    if (res.headersSent || res.destroyed) {
      this.destroy();
      return false;
    }
    if (statusCode < 200) return true; // informational (1xx): not relayed, like http-proxy
    const raw: string[] = new Array<string>(rawHeaders.length);
    for (let i = 0; i < rawHeaders.length; i++) raw[i] = rawHeaders[i]!.toString('latin1');
    res.writeHead(statusCode, statusText, responseHeaders(raw));
    this.sink.upstreamResponse(this.ex, statusCode);
    this.resume = resume;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.done) return false;
    const res = this.ex.res as ServerResponse;
    if (res.write(chunk)) return true;
    res.once('drain', this.resume!);
    return false;
  }

  onComplete(): void {
    if (this.done) return;
    this.done = true;
    (this.ex.res as ServerResponse).end();
  }

  onError(err: Error): void {
    if (this.done) return;
    this.fail(err);
  }

  private fail(err: Error): void {
    this.done = true;
    this.destroyed = true;
    this.sink.upstreamError(this.ex, nodeError(err));
  }
}

/** undici's error codes as the Node socket codes the forwarder classifies (502 reasons, failover). */
function nodeError(err: Error): NodeJS.ErrnoException {
  const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
  switch (e.code) {
    case 'UND_ERR_SOCKET':
      return Object.assign(new Error(err.message), { code: e.cause?.code ?? 'ECONNRESET', cause: err });
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
      return Object.assign(new Error(err.message), { code: 'ETIMEDOUT', cause: err });
    default:
      return e;
  }
}

function timedConnector(histogram: FixedHistogram): buildConnector.connector {
  const connect = buildConnector({});
  return (opts, cb) => {
    const startedAt = performance.now();
    connect(opts, (...args) => {
      if (args[0] === null) histogram.observe((performance.now() - startedAt) / 1000);
      cb(...args);
    });
  };
}
