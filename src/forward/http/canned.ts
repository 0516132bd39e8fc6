/**
 * ipgate's own responses, built once per listener (Node core habit: constant responses are
 * Buffers). Each exists twice:
 * - `wire`: the complete response with `Connection: close`, written straight to the socket when the
 *   connection ends with it (400/408/431 before a request object exists, 502/504, 403 to a client
 *   denied for the whole connection);
 * - `keepAliveWire`: the same without `Connection: close`, for a connection that stays open (a 403
 *   on a keep-alive connection: one write of a prebuilt Buffer per denial);
 * - `headers` + `body`: the parts, for tests and callers that build their own head.
 */
export class Canned {
  readonly wire: Buffer;
  readonly keepAliveWire: Buffer;
  /** Flat [name, value, ...] list (no Connection header); `extra` ones last. */
  readonly headers: readonly string[];
  constructor(
    readonly status: number,
    readonly reason: string,
    contentType: string,
    readonly body: Buffer,
    /** More header fields, [name, value, ...] (a redirect's Location: built per request, edge-rules.ts). */
    extra: readonly string[] = [],
  ) {
    this.headers = ['Content-Type', contentType, 'Content-Length', String(body.length), 'Cache-Control', 'no-store', ...extra];
    let more = '';
    for (let i = 0; i + 1 < extra.length; i += 2) more += `${extra[i]!}: ${extra[i + 1]!}\r\n`;
    this.wire = Buffer.concat([
      Buffer.from(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n` +
          `Cache-Control: no-store\r\n${more}Connection: close\r\n\r\n`,
        'latin1',
      ),
      body,
    ]);
    this.keepAliveWire = Buffer.concat([
      Buffer.from(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n` +
          `Cache-Control: no-store\r\n${more}\r\n`,
        'latin1',
      ),
      body,
    ]);
  }
}

const text = (status: number, reason: string, body: string): Canned =>
  new Canned(status, reason, 'text/plain; charset=utf-8', Buffer.from(body));

export class CannedResponses {
  readonly forbiddenText: Canned;
  readonly forbiddenJson: Canned;
  readonly badRequest = text(400, 'Bad Request', 'Bad Request\n');
  /** Listeners with routes: no route serves the request's host or path. */
  readonly notFound = text(404, 'Not Found', 'Not Found\n');
  /** A TLS listener's answer to a Host no route serves (RFC 9110 15.5.20): the client may retry on another connection. */
  readonly misdirected = text(421, 'Misdirected Request', 'Misdirected Request\n');
  readonly requestTimeout = text(408, 'Request Timeout', 'Request Timeout\n');
  readonly headersTooLarge = text(431, 'Request Header Fields Too Large', 'Request Header Fields Too Large\n');
  readonly badGateway = text(502, 'Bad Gateway', 'Bad Gateway\n');
  readonly gatewayTimeout = text(504, 'Gateway Timeout', 'Gateway Timeout\n');
  /** An HTTP/1.1 request routed to an upstream group that speaks HTTP/2 only (gRPC). */
  readonly versionNotSupported = text(505, 'HTTP Version Not Supported', 'HTTP Version Not Supported: this route serves HTTP/2 only\n');
  /** A request body over `maxBodyBytes` (edge-rules.ts). */
  readonly payloadTooLarge = text(413, 'Payload Too Large', 'Payload Too Large\n');
  /** No target of the upstream group is up (upstream-health.ts). */
  readonly serviceUnavailable = text(503, 'Service Unavailable', 'Service Unavailable\n');
  /** A client past its rate or concurrency limit (limits.*.status 429, RFC 6585). */
  readonly tooManyRequests = text(429, 'Too Many Requests', 'Too Many Requests\n');

  constructor(deniedBody: string) {
    this.forbiddenText = text(403, 'Forbidden', deniedBody);
    this.forbiddenJson = new Canned(
      403,
      'Forbidden',
      'application/json',
      Buffer.from(`${JSON.stringify({ error: 'forbidden', message: deniedBody.trim() })}\n`),
    );
  }

  /** 403 in the client's format: JSON when its Accept names application/json, else text. */
  forbidden(accept: string | null): Canned {
    return accept?.includes('application/json') ? this.forbiddenJson : this.forbiddenText;
  }
}
