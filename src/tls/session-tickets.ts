/**
 * Session ticket keys (TLS session resumption, RFC 5077 and RFC 8446 4.6.1), kept in memory only
 * and never logged: generated at start-up, replaced every ROTATE_MS. docs/tls.md "Session
 * resumption".
 *
 * - One key per listener. Node's SecureContext takes one 48-byte key (`ticketKeys`), with no list
 *   of older keys that still decrypt, so a ticket issued before a rotation is not accepted after
 *   it: the client does a full handshake, nothing else. A ticket (a session) is good for
 *   SESSION_TIMEOUT_S, nginx's `ssl_session_timeout` and HAProxy's `tune.ssl.lifetime` default
 *   (cert-store.ts sets it: createSecureContext, unlike a tls.Server, would leave OpenSSL's
 *   7200 s). A key that never changes would let whoever reads it decrypt every
 *   session it ever protected (forward secrecy is only as good as the ticket key's lifetime), so
 *   it is rotated every hour; only tickets issued in the last SESSION_TIMEOUT_S before a rotation
 *   are lost to it.
 * - Who makes them. One process: each listener's TicketKeys makes and rotates its own. Cluster
 *   (`workers` > 1, or the admin API in its own process): the primary makes and rotates them
 *   (ClusterTicketKeys) and sends them to every worker, at its start and at each rotation
 *   (cluster/protocol.ts `ticket-keys`), so a ticket one worker issued resumes on any other, as
 *   nginx's workers share the keys its master made. A worker's TicketKeys then only `adopt`s what
 *   it is sent and stops rotating on its own.
 */
import { randomBytes } from 'node:crypto';

/** How long a session (its ticket) can be resumed, in seconds: nginx's and HAProxy's default, 300. */
export const SESSION_TIMEOUT_S = 300;

/** How long one ticket key is used. */
export const ROTATE_MS = 3_600_000;
/** Node's `ticketKeys`: 16 bytes key name, 16 bytes HMAC secret, 16 bytes AES key. */
export const TICKET_KEY_BYTES = 48;

export class TicketKeys {
  private key: Buffer;
  private timer: NodeJS.Timeout | null = null;
  /** Set once the keys come from elsewhere (the cluster primary): no rotation here any more. */
  private adopted = false;
  private readonly changed: Array<() => void> = [];

  constructor(
    private readonly rotateMs = ROTATE_MS,
    key: Buffer = randomBytes(TICKET_KEY_BYTES),
  ) {
    this.key = key;
  }

  /** The key new contexts are built with. */
  get current(): Buffer {
    return this.key;
  }

  /** Whether the key is someone else's (adopt was called). */
  get external(): boolean {
    return this.adopted;
  }

  /** Call `fn` after each new key (the listener rebuilds its contexts: new handshakes only). */
  onChange(fn: () => void): void {
    this.changed.push(fn);
  }

  /** Rotate every `rotateMs`, unless the key is adopted. */
  start(): void {
    if (this.timer !== null || this.adopted) return;
    this.timer = setInterval(() => this.rotate(), this.rotateMs);
    this.timer.unref();
  }

  /** A new random key. */
  rotate(): void {
    this.set(randomBytes(TICKET_KEY_BYTES));
  }

  /**
   * Use `key`, made elsewhere (the cluster primary), from now on, and stop rotating here: the
   * owner sends the next one. Throws on a key of the wrong length (Node would refuse it when the
   * contexts are built, after the old ones were dropped).
   */
  adopt(key: Buffer): void {
    if (key.length !== TICKET_KEY_BYTES) throw new RangeError(`a ticket key has ${TICKET_KEY_BYTES} bytes, not ${key.length}`);
    this.adopted = true;
    this.stop();
    if (key.equals(this.key)) return;
    this.set(key);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private set(key: Buffer): void {
    this.key = key;
    for (const fn of this.changed) fn();
  }
}

/**
 * The cluster primary's keys: one TicketKeys per TLS listener with `sessionTickets`, all rotated
 * together every `rotateMs`; `onRotate` gets the whole set each time (to send to the workers).
 * The primary has no listeners: it only makes the keys.
 */
export class ClusterTicketKeys {
  private readonly keys = new Map<string, TicketKeys>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    listeners: readonly string[],
    private readonly onRotate: (keys: ReadonlyMap<string, Buffer>) => void,
    private readonly rotateMs = ROTATE_MS,
  ) {
    for (const name of listeners) this.keys.set(name, new TicketKeys(rotateMs));
  }

  /** The listeners it holds keys for. */
  get listeners(): string[] {
    return [...this.keys.keys()];
  }

  /** Each listener's key in force. */
  current(): Map<string, Buffer> {
    const out = new Map<string, Buffer>();
    for (const [name, k] of this.keys) out.set(name, k.current);
    return out;
  }

  start(): void {
    if (this.timer !== null || this.keys.size === 0) return;
    this.timer = setInterval(() => this.rotate(), this.rotateMs);
    this.timer.unref();
  }

  /** New keys for every listener, then `onRotate` with them. */
  rotate(): void {
    for (const k of this.keys.values()) k.rotate();
    this.onRotate(this.current());
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
