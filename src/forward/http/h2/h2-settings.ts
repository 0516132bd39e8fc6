/**
 * A listener's HTTP/2 settings, read once from its config and frozen (docs/http-engines.md "The
 * HTTP/2 engine"): the options every client session is made with, and the budgets the engine
 * keeps itself. Every nghttp2 limit is set here explicitly rather than left to the defaults of the
 * Node.js running it, so that a Node upgrade cannot move them.
 */
import http2 from 'node:http2';
import type { ListenerConfig } from '../../../schema/config';

export interface H2Settings {
  /** For http2.performServerHandshake. */
  readonly session: http2.ServerSessionOptions;
  readonly streamIdleTimeoutMs: number;
  readonly resetBurst: number;
  readonly resetPerSecond: number;
  readonly controlBurst: number;
  readonly controlPerSecond: number;
  /** http.maxRequestsPerConnection: streams on one connection before GOAWAY (0: no bound), as nginx's keepalive_requests. */
  readonly maxStreamsPerConnection: number;
  /** h2c with prior knowledge on a plaintext listener. */
  readonly cleartext: boolean;
}

export function h2Settings(config: Readonly<ListenerConfig>): H2Settings {
  const c = config.http.http2;
  const session: http2.ServerSessionOptions = {
    settings: {
      // RFC 9113 6.5.2 defaults, stated: the HPACK table the client's encoder may use (an insertion
      // bomb is bounded by it), frames of 16 KiB, the RFC's initial window (64 KiB of request
      // body per stream before ipgate reads it: nginx's http2_body_preread_size).
      headerTableSize: 4096,
      enablePush: false,
      initialWindowSize: 65_535,
      maxFrameSize: 16_384,
      maxConcurrentStreams: c.maxConcurrentStreams,
      maxHeaderListSize: c.maxHeaderListBytes,
      // RFC 8441 extended CONNECT (WebSocket over HTTP/2) is not offered.
      enableConnectProtocol: false,
    },
    // The HPACK table of ipgate's own encoder (responses).
    maxDeflateDynamicTableSize: 4096,
    maxHeaderListPairs: c.maxHeaderFields,
    maxSessionMemory: c.maxSessionMemoryMiB,
    // Entries in one SETTINGS frame; unacknowledged PINGs of ipgate's own.
    maxSettings: 32,
    maxOutstandingPings: 10,
    // Frames nghttp2 finds invalid (bad flow control, frames on closed streams, ...) and streams
    // refused past the concurrency limit, before the session is torn down.
    maxSessionInvalidFrames: 100,
    maxSessionRejectedStreams: 100,
    // ipgate never pushes; a response's header block is at most this (a huge upstream head is cut).
    peerMaxConcurrentStreams: 100,
    maxSendHeaderBlockLength: 65_536,
    paddingStrategy: http2.constants.PADDING_STRATEGY_NONE,
    // nghttp2's own rapid-reset bucket (1000 resets, 33/s; GOAWAY INTERNAL_ERROR past it) stays as
    // it is, a backstop behind the engine's tighter, counted one (`resets`): Node 20 cannot set it,
    // and one bound on both majors is what an operator reads in the config.
  };
  return Object.freeze({
    session,
    streamIdleTimeoutMs: c.streamIdleTimeoutMs,
    resetBurst: c.resets.burst,
    resetPerSecond: c.resets.perSecond,
    controlBurst: c.controlFrames.burst,
    controlPerSecond: c.controlFrames.perSecond,
    maxStreamsPerConnection: config.http.maxRequestsPerConnection,
    cleartext: c.cleartext && (config.tls === null || config.tls === undefined),
  });
}
