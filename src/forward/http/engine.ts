/**
 * The proxying engine behind the HTTP forwarder, kept behind this small interface so it can be
 * replaced (undici, a hand-written client) if a benchmark shows one better: the forwarder decides
 * identity, headers, admission and error responses; the engine only moves one request/response
 * (or upgrade) between a client and an upstream target and reports what happened.
 */
import type { Agent, OutgoingHttpHeaders } from 'node:http';
import type net from 'node:net';
import type { Exchange } from './exchange';

/** What the engine reports back to the forwarder. */
export interface EngineSink {
  /** The upstream request exists (queued or on a socket): the forwarder can abort it from now on. */
  upstreamRequest(ex: Exchange): void;
  /** The upstream answered; its status line and headers went to the client, the body streams. */
  upstreamResponse(ex: Exchange, status: number): void;
  /** The upstream failed (connect, reset, our abort). Nothing has been written by the engine. */
  upstreamError(ex: Exchange, err: NodeJS.ErrnoException): void;
  /** An upgrade was accepted upstream (101 relayed); bytes now flow both ways. */
  upgraded(ex: Exchange, upstreamSocket: net.Socket): void;
}

export interface HttpEngine {
  /**
   * Send `ex.req` with `headers` (already rewritten) through `agent` to target number `target` of
   * the list the engine was built with; stream the answer to `ex.res`.
   */
  web(ex: Exchange, target: number, headers: OutgoingHttpHeaders, agent: Agent): void;
  /** Same for an upgrade request on `ex.socket`; `head` = bytes after the request head. */
  ws(ex: Exchange, target: number, headers: OutgoingHttpHeaders, agent: Agent, head: Buffer): void;
  /** The agent requests use unless told otherwise (no per-call options on the hot path). */
  readonly defaultAgent: Agent;
  /** Release pooled upstream connections the engine owns itself (the forwarder closes its agent). */
  close?(): void;
}
