/**
 * The policy's answer for one request (http-policy.ts `admit`), what every engine acts on
 * (docs/http-engines.md "The policy and its engines").
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { UpstreamGroup } from '../../upstream/upstream-group';
import type { Canned } from './canned';
import type { Exchange } from './exchange';
import type { HostRefusal } from './request-host';

/** The upstream bounds of a route (or listener) with timeout rules (docs/edge-rules.md "Timeouts"). */
export interface UpstreamTimeouts {
  readonly connectMs: number;
  /** 0: none. */
  readonly readMs: number;
  /** 0: none. */
  readonly sendMs: number;
}

/**
 * One hidden class for every answer (a class, not literals of varying shape), built once per
 * request; the quick denials share two prebuilt ones.
 */
export class RequestDecision {
  /**
   * Largest request body, bytes (`maxBodyBytes` of the route or listener), -1: none. A
   * Content-Length over it was answered 413 by the policy; the engine counts a chunked (or
   * HTTP/2) body as it streams and answers 413 (or cuts) once it passes (bodyOverLimit).
   */
  maxBodyBytes = -1;
  /** The upstream bounds (connect, read, send) of the route; null: the listener's connect timeout, no others. */
  timeouts: UpstreamTimeouts | null = null;
  /**
   * Milliseconds the request waits before it goes upstream (a rate limit's delay within the
   * burst, nginx `limit_req` without `nodelay`); its body waits with it. 0: at once.
   */
  delayMs = 0;
  /** A concurrency limit's slot (edge-rules.ts LimitSlot), released when the request is over (HttpRecorder.finished). */
  slot: { release(): void } | null = null;

  constructor(
    /**
     * `forward`: send it upstream. `answer`: ipgate answers with `answer` (a refusal, a route
     * miss, an edge rule's answer). `reject`: a request no backend may see (`refusal` says why):
     * `answer` (400), counted as a client error, and the connection ends.
     */
    readonly verdict: 'forward' | 'answer' | 'reject',
    /** The request's record (identity, entry, route, outcome); null for a quick denial (nothing per request to keep). */
    readonly ex: Exchange | null,
    /** The canned answer (verdict `answer`), else null. */
    readonly answer: Canned | null,
    /** The connection ends after the answer (a refused direct client with `http.denied.keepAlive: false`, a 413). */
    readonly closeAfterAnswer: boolean,
    /** The upstream head's headers (verdict `forward`), else null. */
    readonly headers: OutgoingHttpHeaders | null,
    /** The upstream group that serves it (the route's, else the listener's); null when answered. */
    readonly group: UpstreamGroup | null,
    /** Bound on the upstream's response head (the route's `upstreamTimeoutMs`, else the listener's). */
    readonly upstreamTimeoutMs: number,
    /** The target sent upstream instead of the client's (routes: the path's normal form), or null: as sent. */
    readonly path: string | null,
    /** The Upgrade header's value (an upgrade request), or null. */
    readonly upgrade: string | null,
    /** Verdict `reject`: why (a bad Host: request-host.ts), else null. */
    readonly refusal: HostRefusal | null = null,
  ) {}
}

/**
 * The body-size check every engine runs as a body streams (HTTP/1.1 chunked, HTTP/2 DATA): the
 * bytes seen so far of a request whose decision has a limit. True once they pass it: the engine
 * answers 413 if it has not answered yet (else cuts the stream) and reports `body_too_large`.
 */
export function bodyOverLimit(d: RequestDecision, seen: number): boolean {
  return d.maxBodyBytes >= 0 && seen > d.maxBodyBytes;
}
