/**
 * After a 101 (WebSocket and other upgrades): the client connection and its upstream socket relay
 * bytes both ways, as a TCP listener's connection does (forward/tcp/tcp-forwarder.ts):
 * - backpressure: a full socket pauses the other side's reads until it drains;
 * - half-close: a FIN from one side ends the other side's writes, while the other direction keeps
 *   flowing (both sockets are allowHalfOpen); when both directions have ended the sockets close;
 * - a reset or error on one side destroys the other;
 * - idle: the client socket's timeout (timeouts.idleMs, set by the relay) covers both directions,
 *   since everything from the upstream is written to it;
 * - revocation and drain destroy the client socket (HttpForwarder), which closes the upstream
 *   (RelayConn.closed).
 */
import type net from 'node:net';

export class Tunnel {
  constructor(
    private readonly client: net.Socket,
    private readonly upstream: net.Socket,
    /** What the client sent after the upgrade request, before the 101 reached it. */
    private readonly early: Buffer | null,
  ) {}

  start(): void {
    const { client, upstream } = this;
    if (this.early !== null && this.early.length > 0) upstream.write(this.early);
    pipe(client, upstream);
    pipe(upstream, client);
    upstream.once('close', () => {
      // The upstream is gone: what it sent is flushed to the client, then the client closes.
      if (client.destroyed) return;
      if (client.writableFinished || !client.writable) client.destroy();
      else {
        client.end();
        client.once('finish', () => client.destroy());
      }
    });
    client.resume();
    upstream.resume();
  }
}

function pipe(from: net.Socket, to: net.Socket): void {
  from.on('data', (d: Buffer) => {
    if (!to.write(d)) from.pause();
  });
  to.on('drain', () => from.resume());
  // Both sockets are allowHalfOpen and autoDestroy: once both directions have ended (and the
  // writes are flushed), each socket closes by itself.
  from.once('end', () => {
    if (!to.destroyed) to.end();
  });
}
