/**
 * HTTP/2 from clients on an HTTP listener (`http.http2`; docs/http-engines.md "The HTTP/2 engine").
 * Each stream is one request to the same policy as an HTTP/1.1 request; the limits here bound what
 * one connection can cost, with the defaults nginx and Envoy ship (128 streams, as nginx's
 * `http2_max_concurrent_streams`).
 *
 * ```yaml
 * http:
 *   http2:
 *     enabled: true            # ALPN h2 on a TLS listener
 *     cleartext: false         # h2c with prior knowledge on a plaintext one (a trusted balancer in front)
 *     maxConcurrentStreams: 128
 * ```
 */
import { Ms, Section, Type, type Static } from './kit';

/** A token bucket: `burst` at once, refilled at `perSecond`. */
function Budget(burst: number, perSecond: number) {
  return Section(
    {
      /** How many at once (the bucket's size); one more closes the connection. */
      burst: Type.Integer({ minimum: 1, maximum: 100_000, default: burst }),
      /** How many per second the bucket refills (a steady rate this high is never refused). */
      perSecond: Type.Integer({ minimum: 1, maximum: 100_000, default: perSecond }),
    },
    { default: {} },
  );
}

export const Http2Schema = Section(
  {
    /**
     * A TLS listener offers HTTP/2 by ALPN (`h2`, then `http/1.1`), as nginx's `http2 on`, Envoy and
     * Traefik do; a client that offers only `http/1.1` (or no ALPN) gets HTTP/1.1 as before.
     * `false`: ALPN `http/1.1` only (an h2-only client, e.g. every gRPC client, fails the handshake).
     */
    enabled: Type.Boolean({ default: true }),
    /**
     * A plaintext listener also takes HTTP/2 with prior knowledge (h2c, RFC 9113 3.3): a connection
     * that starts with the HTTP/2 preface is served as HTTP/2, any other as HTTP/1.1. For a trusted
     * balancer in front that speaks h2c; the listener then accepts net.Sockets instead of libuv
     * handles (docs/http-engines.md "h2c").
     */
    cleartext: Type.Boolean({ default: false }),
    /**
     * Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS; nginx
     * `http2_max_concurrent_streams`); one more is refused (RST_STREAM REFUSED_STREAM).
     */
    maxConcurrentStreams: Type.Integer({ minimum: 1, maximum: 1000, default: 128 }),
    /**
     * Largest request header list, bytes, counted as RFC 9113 6.5.2 does (each field's name and
     * value plus 32), after HPACK decoding (SETTINGS_MAX_HEADER_LIST_SIZE): an indexed-header bomb
     * ends at this size. A stream over it is reset (ENHANCE_YOUR_CALM).
     */
    maxHeaderListBytes: Type.Integer({ minimum: 1024, maximum: 1_048_576, default: 32_768 }),
    /** Largest number of header fields (pseudo-headers included) in one request; one more resets the stream. */
    maxHeaderFields: Type.Integer({ minimum: 8, maximum: 10_000, default: 128 }),
    /**
     * Memory one connection may hold in nghttp2 (HPACK tables, queued frames, buffered bodies), MiB;
     * past it new streams are refused (RST_STREAM ENHANCE_YOUR_CALM).
     */
    maxSessionMemoryMiB: Type.Integer({ minimum: 1, maximum: 1024, default: 10 }),
    /**
     * A stream that moves no byte either way for this long is reset (CANCEL, `h2_stream_timeout`):
     * a client that opens a request and stops sending its body, or an upstream that stops sending.
     * Long-lived calls (gRPC streams) need a route whose traffic is never silent this long.
     */
    streamIdleTimeoutMs: Ms({ default: 300_000 }),
    /**
     * Streams the client may reset (RST_STREAM) before their response is complete: the rapid-reset
     * attack (CVE-2023-44487) opens and cancels streams to make the proxy start work it never
     * finishes. Past the budget: GOAWAY ENHANCE_YOUR_CALM and the connection closes (`h2_rapid_reset`).
     */
    resets: Budget(200, 100),
    /**
     * PING and SETTINGS frames from the client (each one costs an acknowledgement): past the budget,
     * GOAWAY ENHANCE_YOUR_CALM and the connection closes (`h2_control_flood`).
     */
    controlFrames: Budget(100, 20),
  },
  { default: {} },
);

export type Http2Config = Static<typeof Http2Schema>;
