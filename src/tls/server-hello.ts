/**
 * ServerHelloReader: watches the backend's first flight on a TCP listener with SNI routes and says
 * when its ServerHello is known and whether it is a HelloRetryRequest (docs/routes-and-sni.md
 * "After the first hello: the handshake watch"). The forwarder passes every server byte to the
 * client as it is read and shows the same chunk to this reader; nothing is held or copied.
 *
 * Why: the route and its allowlist were decided on the first ClientHello. A HelloRetryRequest makes
 * the client send a second one, which the backend reads afresh (OpenSSL runs its server-name
 * callback again), so the second hello must be checked before the backend sees it
 * (retry-hello.ts). That needs to know, for each ClientHello forwarded, whether the server's
 * answer is a retry.
 *
 * Incremental, unlike readClientHello: the bytes are not kept, so the state is a few numbers. One
 * step per byte of record and handshake headers and of the first 34 bytes of each ServerHello
 * (legacy_version and random); the rest of a message is skipped in one step per record.
 *
 * Wire format (RFC 8446 5.1 records, 4.1.3 ServerHello; RFC 5246 7.4.1.3 for TLS 1.2):
 *
 *   record       type[1] · legacy_record_version[2] = 03 xx · length[2] · fragment
 *   handshake    msg_type[1] = 2 (server_hello) · length[3]   -- may span records
 *   ServerHello  legacy_version[2] = 03 03 · random[32] · ...
 *
 * A ServerHello whose random is SHA-256("HelloRetryRequest") is a HelloRetryRequest (4.1.3).
 *
 * Before the ServerHello the reader accepts handshake records and alerts (a TLS 1.2 server may
 * send a warning, a failing one a fatal alert and then closes); after a HelloRetryRequest, the
 * rest of it and one ChangeCipherSpec record (the middlebox-compatibility one, RFC 8446 D.4), then
 * the next ServerHello. Anything else is an error (`tls_bad_server_hello`): the backend is not
 * speaking TLS as the route expects, and the watch cannot say whether a retry happened, so the
 * connection is closed rather than guessed about. A second HelloRetryRequest is one too (4.1.4:
 * the client must abort the handshake on it).
 *
 * `read` never throws, never reads outside the chunk and never modifies it.
 */
import type { TlsReason } from './codes';

/** RFC 8446 4.1.3: SHA-256("HelloRetryRequest"), the random of a HelloRetryRequest. */
export const HRR_RANDOM: Readonly<Buffer> = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');

/** What `read` found, in the chunk, from `start`. */
export type ServerHelloEvent =
  /** Everything was read; no ServerHello random completed yet. */
  | 'need_more'
  /** A ServerHello that is not a retry (TLS 1.3 or earlier): the watch is over. `at`: where it stopped. */
  | 'server_hello'
  /** A HelloRetryRequest. `at`: where it stopped; call again from there for the rest of the chunk. */
  | 'hello_retry'
  /** Not a ServerHello flight: `reason` and `message` say why; every later call answers the same. */
  | 'error';

const CONTENT_CCS = 20;
const CONTENT_ALERT = 21;
const CONTENT_HANDSHAKE = 22;
const HANDSHAKE_SERVER_HELLO = 2;
const RECORD_HEADER = 5;
/** RFC 8446 5.1: a plaintext record holds at most 2^14 bytes. */
const MAX_PLAINTEXT = 16384;
/** legacy_version[2] + random[32] + session_id length[1] + cipher_suite[2] + compression[1]. */
const MIN_SERVER_HELLO = 38;
/** legacy_version and random: what the reader must see of each ServerHello. */
const PREFIX = 34;

export class ServerHelloReader {
  /** After `server_hello` or `hello_retry`: the offset in the chunk just past the random. */
  at = 0;
  /** HelloRetryRequests seen (0 or 1; a second is an error). */
  retries = 0;
  /** After `error`. */
  reason: TlsReason | null = null;
  message = '';

  /** Record header bytes seen of the current record (0..5; 5: inside its fragment). */
  private headerSeen = 0;
  private type = 0;
  private recordLength = 0;
  /** Fragment bytes of the current record not read yet. */
  private left = 0;
  /** Handshake header bytes seen of the current message (0..4). */
  private messageHeaderSeen = 0;
  private messageLength = 0;
  /** Body bytes of the current handshake message seen. */
  private messageSeen = 0;
  private retryRandom = true;
  private seenCcs = false;
  private done = false;

  /** Read `chunk` from `start` up to the first event (see ServerHelloEvent). */
  read(chunk: Buffer, start = 0): ServerHelloEvent {
    if (this.reason !== null) return 'error';
    if (this.done) {
      this.at = start;
      return 'server_hello';
    }
    const n = chunk.length;
    let i = start;
    while (i < n) {
      if (this.headerSeen < RECORD_HEADER) {
        const b = chunk[i++]!;
        const k = this.headerSeen++;
        if (k === 0) {
          this.type = b;
          if (b !== CONTENT_HANDSHAKE && b !== CONTENT_ALERT && b !== CONTENT_CCS)
            return this.fail(`a record of content type ${b} before the ServerHello`);
          if (b === CONTENT_CCS && (this.retries === 0 || this.seenCcs)) {
            return this.fail(
              this.retries === 0 ? 'a ChangeCipherSpec before the ServerHello' : 'a second ChangeCipherSpec after the HelloRetryRequest',
            );
          }
        } else if (k === 1) {
          if (b !== 3) return this.fail(`record version major ${b} is not 3`);
        } else if (k === 3) {
          this.recordLength = b << 8;
        } else if (k === 4) {
          const len = this.recordLength | b;
          if (len === 0 || len > MAX_PLAINTEXT) return this.fail(`a record of ${len} bytes before the ServerHello (1..${MAX_PLAINTEXT})`);
          if (this.type === CONTENT_ALERT && len !== 2) return this.fail(`an alert record of ${len} bytes (2)`);
          if (this.type === CONTENT_CCS && len !== 1) return this.fail(`a ChangeCipherSpec record of ${len} bytes (1)`);
          this.left = len;
        }
        continue;
      }
      if (this.type === CONTENT_HANDSHAKE) {
        const event = this.handshake(chunk, i);
        if (event !== 'need_more') return event;
        i = this.at;
      } else {
        if (this.type === CONTENT_CCS) {
          if (chunk[i] !== 1) return this.fail(`a ChangeCipherSpec of value ${chunk[i]} (1)`);
          this.seenCcs = true;
        }
        // An alert's level and description are the client's to read: it gets them as they are.
        const k = Math.min(this.left, n - i);
        i += k;
        this.left -= k;
      }
      if (this.left === 0) this.headerSeen = 0;
    }
    return 'need_more';
  }

  /** Handshake fragment bytes from `i`, up to the record's end or the chunk's; sets `at`. */
  private handshake(chunk: Buffer, i: number): ServerHelloEvent {
    const end = Math.min(chunk.length, i + this.left);
    while (i < end) {
      if (this.messageHeaderSeen < 4) {
        const b = chunk[i++]!;
        this.left--;
        if (this.messageHeaderSeen++ === 0) {
          if (b !== HANDSHAKE_SERVER_HELLO) return this.fail(`handshake message type ${b} where a ServerHello (2) belongs`);
          this.messageLength = 0;
        } else {
          this.messageLength = (this.messageLength << 8) | b;
        }
        if (this.messageHeaderSeen === 4) {
          if (this.messageLength < MIN_SERVER_HELLO)
            return this.fail(`a ServerHello of ${this.messageLength} bytes (at least ${MIN_SERVER_HELLO})`);
          this.messageSeen = 0;
          this.retryRandom = true;
        }
        continue;
      }
      if (this.messageSeen < PREFIX) {
        const b = chunk[i++]!;
        this.left--;
        const k = this.messageSeen++;
        if (k === 0 && b !== 3) return this.fail(`ServerHello legacy_version major ${b} is not 3`);
        if (k >= 2 && b !== HRR_RANDOM[k - 2]) this.retryRandom = false;
        if (this.messageSeen === PREFIX) {
          this.at = i;
          if (!this.retryRandom) {
            this.done = true;
            return 'server_hello';
          }
          if (this.retries++ > 0) return this.fail('a second HelloRetryRequest (RFC 8446 4.1.4)');
          if (this.left === 0) this.headerSeen = 0;
          return 'hello_retry';
        }
        continue;
      }
      // The rest of a HelloRetryRequest: skipped.
      const k = Math.min(end - i, this.messageLength - this.messageSeen);
      i += k;
      this.left -= k;
      this.messageSeen += k;
      if (this.messageSeen === this.messageLength) this.messageHeaderSeen = 0;
    }
    this.at = i;
    return 'need_more';
  }

  private fail(message: string): ServerHelloEvent {
    this.reason = 'tls_bad_server_hello';
    this.message = message;
    return 'error';
  }
}
