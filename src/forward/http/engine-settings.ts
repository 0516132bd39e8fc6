/**
 * A listener's HTTP engine settings, read once from its config and frozen: the engine's bounds
 * (docs/http-engines.md) and its own canned answers. What varies per request (the upstream group,
 * its timeout, the 403's body) comes in the policy's decision instead.
 */
import type { ListenerConfig } from '../../schema/config';
import type { CannedResponses } from './canned';

export interface EngineSettings {
  /** http.requestHeaderTimeoutMs: a request head not complete by then is answered 408. */
  readonly requestHeaderTimeoutMs: number;
  /** http.keepAliveTimeoutMs: an idle keep-alive connection closes after this. */
  readonly keepAliveTimeoutMs: number;
  /** timeouts.idleMs: a client connection (or tunnel) silent this long in both directions is closed. */
  readonly idleTimeoutMs: number;
  /** http.upstreamIdleTimeoutMs: a client connection's own upstream socket idles this long at most. */
  readonly upstreamIdleTimeoutMs: number;
  /** http.maxRequestsPerConnection (0: no bound). */
  readonly maxRequestsPerConnection: number;
  /** http.maxHeaderBytes: a larger request head is answered 431. */
  readonly maxHeaderBytes: number;
  /** The engine's own answers: 400, 408, 431, 502, 504. */
  readonly canned: CannedResponses;
}

export function engineSettings(config: Readonly<ListenerConfig>, canned: CannedResponses): EngineSettings {
  const h = config.http;
  return Object.freeze({
    requestHeaderTimeoutMs: h.requestHeaderTimeoutMs,
    keepAliveTimeoutMs: h.keepAliveTimeoutMs,
    idleTimeoutMs: config.timeouts.idleMs,
    upstreamIdleTimeoutMs: h.upstreamIdleTimeoutMs,
    maxRequestsPerConnection: h.maxRequestsPerConnection,
    maxHeaderBytes: h.maxHeaderBytes,
    canned,
  });
}
