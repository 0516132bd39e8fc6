/**
 * After a 101 (WebSocket and other upgrades): the client connection and its upstream socket relay
 * bytes both ways, as a TCP listener's connection does (transport/relay-pair.ts, shared with
 * forward/tcp/tcp-forwarder.ts):
 * - backpressure: a full socket pauses the other side's reads until it drains;
 * - half-close: a FIN from one side ends the other side's writes, while the other direction keeps
 *   flowing; when both directions have ended (both FINs read, both sent) the sockets close;
 * - a reset or error on one side destroys the other;
 * - idle: the client socket's idle check (timeouts.idleMs, RelayConn.check) covers both
 *   directions, since everything from the upstream is written to it;
 * - revocation and drain destroy the client socket (HttpForwarder), which closes the upstream
 *   (RelayConn.closed).
 */
import type { ByteSocket } from '../../../transport/byte-socket';
import { relayPair } from '../../../transport/relay-pair';

/** No bulk switch: an upgraded connection keeps its reads as they are. */
const relayTunnel = relayPair<ByteSocket>(null);

export class Tunnel {
  constructor(
    private readonly client: ByteSocket,
    private readonly upstream: ByteSocket,
    /** What the client sent after the upgrade request, before the 101 reached it. */
    private readonly early: Buffer | null,
  ) {}

  start(): void {
    const { client, upstream } = this;
    if (this.early !== null && this.early.length > 0) upstream.write(this.early);
    upstream.onClose(() => {
      // The upstream is gone: what it sent is flushed to the client, then the client closes.
      if (client.destroyed) return;
      if (client.writeFinished) {
        client.destroy();
        return;
      }
      const finished = (): void => client.destroy();
      client.onFinish = finished;
      client.end();
    });
    relayTunnel(client, upstream);
  }
}
