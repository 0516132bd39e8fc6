/**
 * Session ticket keys of one listener (TLS session resumption, RFC 5077 and RFC 8446 4.6.1), kept
 * in memory only: generated at start-up, replaced every ROTATE_MS. Node's SecureContext takes one
 * 48-byte key (`ticketKeys`), with no list of older keys that still decrypt, so a ticket issued
 * just before a rotation is not accepted after it: the client does a full handshake, nothing
 * else. A key that never changes would let whoever reads it decrypt every session it ever
 * protected (forward secrecy is only as good as the ticket key's lifetime), so it is rotated; an
 * hour keeps the lost resumptions to tickets issued in the last `sessionTimeout` (300 s) of each
 * hour. docs/tls.md "Session resumption".
 */
import { randomBytes } from 'node:crypto';

/** How long one ticket key is used. */
export const ROTATE_MS = 3_600_000;

export class TicketKeys {
  private key = randomBytes(48);
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly onRotate: () => void, private readonly rotateMs = ROTATE_MS) {}

  /** The key new contexts are built with. */
  get current(): Buffer {
    return this.key;
  }

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.rotate(), this.rotateMs);
    this.timer.unref();
  }

  /** A new key; the listener rebuilds its contexts with it (new handshakes only). */
  rotate(): void {
    this.key = randomBytes(48);
    this.onRotate();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
