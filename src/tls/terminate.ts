/**
 * The TLS stage of an HTTP listener (docs/architecture.md "The data path", docs/tls.md): after the
 * PROXY header (a balancer's header precedes the ClientHello), before identity, the allowlist and
 * the HTTP engine. The accepted net.Socket is wrapped in a server tls.TLSSocket; the bytes the
 * PROXY stage read past its header are handed back to the socket first (`unshift`: TLSSocket feeds
 * a wrapped socket's buffered bytes to OpenSSL before reading more). The engine then gets the
 * TLSSocket, a net.Socket like a plaintext one, and its code is the same for both.
 *
 * The certificate is chosen before OpenSSL sees a byte. With several pairs (or `unknownSni:
 * refuse`) the stage first reads the ClientHello off the accepted socket (readClientHello, the
 * SNI router's reader), looks its server_name up in the store, and builds the TLSSocket on that
 * pair's SecureContext; the hello is handed back with the rest. Node's SNICallback is not used:
 * on Node 20 the context it returns is applied by copying its certificate and key onto the
 * connection (`SSL_use_certificate`), which leaves the initial context's certificate of another
 * key type in place, and OpenSSL then signs with whichever the client prefers: with an ECDSA
 * default and an RSA pair for another name, a client asking for the RSA name got the ECDSA
 * certificate of the default name (docs/tls.md "Certificates"; test/integration/tls-contexts
 * .test.ts "the certificate of the name asked for, whatever the key types and their order"; Node
 * 24 was right). A handshake on the pair's own context has nothing else to choose from, on every
 * Node. With one pair and `unknownSni: first` nothing is read first: the name cannot change the
 * certificate.
 *
 * Result: `done(conn, tlsSocket)` once the handshake finished, or `failed(conn, reason)` after the
 * socket was destroyed. A failure is the peer's fault: counted (ipgate_tls_handshakes_total
 * {result}), logged at debug, never thrown.
 *
 * Renegotiation: every context refuses a client-initiated TLS 1.2 renegotiation (cert-store.ts,
 * `SSL_OP_NO_RENEGOTIATION`: OpenSSL answers its ClientHello with a no_renegotiation alert and the
 * connection goes on, as nginx does). Node reports the refused attempt as a second `secure` event,
 * which is counted (ipgate_tls_renegotiations_refused_total) and logged at debug.
 */
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import type net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import type { TlsConfig } from '../schema/tls';
import type { Connection } from '../connection/connection';
import type { TlsHandshakeReason } from '../reasons';
import type { TlsStats } from '../metrics/tls-stats';
import type { CertStore } from './cert-store';
import { TlsFacts } from '../connection/tls-facts';
import { WaitSweep, type Waiter } from '../connection/wait-sweep';
import type { LinkedSet } from '../connection/linked-set';
import { peerVerifyError } from './peer-verify';
import { readClientHello } from './client-hello';

export interface TlsStageResult {
  done(conn: Connection, socket: tls.TLSSocket): void;
  failed(conn: Connection, reason: TlsHandshakeReason): void;
}

/**
 * ALPN, in the server's order of preference (OpenSSL picks the first of ours the client offers):
 * `h2` then `http/1.1` where the listener serves HTTP/2 (`http.http2.enabled`, docs/tls.md "ALPN"),
 * else `http/1.1` alone. Given to each TLSSocket in wire form (length-prefixed), which Node only
 * copies: the list form is encoded per socket, ~5 us of a handshake's CPU on Node 20
 * (bench/README.md "What ipgate adds to a new TLS handshake").
 */
const ALPN_H1 = Buffer.from('\x08http/1.1', 'latin1');
const ALPN_H2 = Buffer.from('\x02h2\x08http/1.1', 'latin1');

/**
 * The Handshake of a socket, for the event handlers (shared functions, not one closure each): the
 * accepted socket while its ClientHello is read, then the TLSSocket.
 */
const kHandshake = Symbol('ipgate.tlsHandshake');
type HsSocket = net.Socket & { [kHandshake]?: Handshake | undefined };

const EMPTY = Buffer.alloc(0);

/**
 * OpenSSL error codes (Node's `ERR_SSL_*`) by what they say about the peer. Anything else is
 * `tls_handshake_failed`.
 */
const BY_CODE: Readonly<Record<string, TlsHandshakeReason>> = {
  ERR_SSL_WRONG_VERSION_NUMBER: 'tls_not_handshake',
  ERR_SSL_HTTP_REQUEST: 'tls_not_handshake',
  ERR_SSL_HTTPS_PROXY_REQUEST: 'tls_not_handshake',
  ERR_SSL_UNKNOWN_PROTOCOL: 'tls_not_handshake',
  ERR_SSL_PACKET_LENGTH_TOO_LONG: 'tls_not_handshake',
  ERR_SSL_RECORD_LENGTH_MISMATCH: 'tls_not_handshake',
  ERR_SSL_UNSUPPORTED_PROTOCOL: 'tls_version',
  ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION: 'tls_version',
  ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE: 'tls_client_cert_missing',
  ERR_SSL_CERTIFICATE_VERIFY_FAILED: 'tls_client_cert_invalid',
  ECONNRESET: 'tls_handshake_aborted',
  EPIPE: 'tls_handshake_aborted',
};

/**
 * One handshake in progress: the state its event handlers share. A Waiter of the stage's sweep
 * while it lasts: the handshake timeout is checked there, not by a timer per handshake.
 */
export class Handshake implements Waiter {
  /** The listener's wait sweep's links (connection/linked-set.ts). */
  linkSet: LinkedSet<Waiter> | null = null;
  linkPrev: Waiter | null = null;
  linkNext: Waiter | null = null;
  /** The client asked for a name no certificate serves (the store's lookup found none). */
  sniMiss = false;
  /** The ClientHello carried a server_name the reader took. */
  sniSeen = false;
  /** Done or failed: counted, and the sweep no longer checks it. */
  settled = false;
  /** Handed to the listener (`done`): a `secure` event after this is a refused renegotiation. */
  established = false;
  /** The TLS socket, once the certificate is chosen; null while the ClientHello is read. */
  socket: tls.TLSSocket | null = null;
  /** The bytes read so far while the ClientHello is read. */
  hello: Buffer = EMPTY;

  constructor(
    readonly stage: TlsTerminator,
    readonly conn: Connection,
    readonly raw: net.Socket,
    readonly result: TlsStageResult,
    readonly startedAt: number,
  ) {}

  check(now: number): void {
    if (!this.settled && now - this.startedAt >= this.stage.timeoutMs) this.stage.fail(this, 'tls_handshake_timeout', 'unknown');
  }
}

export class TlsTerminator {
  private readonly requestCert: boolean;
  private readonly rejectUnauthorized: boolean;
  private readonly log: Logger;
  /** `handshakeTimeoutMs`. */
  readonly timeoutMs: number;
  /** The ALPN list offered (wire form). */
  private readonly alpn: Buffer;
  /**
   * The handshake timeouts: one periodic check per listener (a quarter of the timeout, 50 ms to
   * 1 s) instead of a setTimeout + clearTimeout per handshake, ~7 us of a handshake's CPU on Node
   * 20 (bench/README.md "What ipgate adds to a new TLS handshake"). A handshake may
   * so run up to one interval past the timeout before it is closed.
   */
  private readonly sweep: WaitSweep;

  constructor(
    config: Readonly<TlsConfig>,
    readonly store: CertStore,
    readonly stats: TlsStats,
    logger: Logger,
    /** The listener serves HTTP/2 (ALPN `h2` first). */
    h2 = false,
  ) {
    this.alpn = h2 ? ALPN_H2 : ALPN_H1;
    this.requestCert = config.clientCertificate !== 'none';
    this.rejectUnauthorized = config.clientCertificate === 'required';
    this.log = logger.child({ listener: stats.listener });
    this.timeoutMs = config.handshakeTimeoutMs;
    this.sweep = new WaitSweep(config.handshakeTimeoutMs);
  }

  /** Handshake on `raw` (paused); `leftover`: bytes read past the PROXY header. */
  start(conn: Connection, raw: net.Socket, leftover: Buffer, result: TlsStageResult): void {
    const hs = new Handshake(this, conn, raw, result, performance.now());
    this.sweep.add(hs);
    // One pair that also serves unknown names: every name gets `initial`, nothing to read first.
    if (!this.store.sniDecides) {
      this.handshake(hs, leftover, this.store.initial);
      return;
    }
    hs.hello = leftover;
    if (leftover.length > 0 && this.helloRead(hs)) return;
    (raw as HsSocket)[kHandshake] = hs;
    raw.on('data', onHelloData);
    raw.on('end', onEndEarly);
    raw.on('close', onHelloClose);
    raw.resume();
  }

  /**
   * The ClientHello as read so far: once the reader answers, the certificate is chosen and the
   * handshake starts on it (true); false while it needs more. A hello the reader refuses (not
   * TLS, malformed, a server_name that is no host name, larger than it holds) is handed to
   * OpenSSL as it is, on `initial`: OpenSSL says what is wrong with it (the failure codes are
   * OpenSSL's, as before), or, for one it takes, the default certificate answers, as for a name no
   * pair serves (none with `unknownSni: refuse`).
   */
  helloRead(hs: Handshake): boolean {
    const r = readClientHello(hs.hello);
    if (r.kind === 'need_more') return false;
    let ctx: tls.SecureContext | null = null;
    if (r.kind === 'done' && r.sni !== null) {
      hs.sniSeen = true;
      ctx = this.store.lookup(r.sni);
      hs.sniMiss = ctx === null;
    }
    const bytes = hs.hello;
    hs.hello = EMPTY;
    stopReading(hs.raw);
    this.handshake(hs, bytes, ctx ?? this.store.initial);
    return true;
  }

  /** The TLS socket around `raw` on `context`, `bytes` (read already) handed back first. */
  private handshake(hs: Handshake, bytes: Buffer, context: tls.SecureContext): void {
    const raw = hs.raw;
    if (bytes.length > 0) raw.unshift(bytes);
    const socket: HsSocket & tls.TLSSocket = new tls.TLSSocket(raw, {
      isServer: true,
      secureContext: context,
      ALPNProtocols: this.alpn,
      requestCert: this.requestCert,
      // `required`: OpenSSL fails a handshake without a client certificate; whether one that was
      // sent verifies is checked at `secure` (peer-verify.ts), for `optional` too.
      rejectUnauthorized: this.rejectUnauthorized,
    });
    hs.socket = socket;
    // Shared handlers finding the state on the socket, and `on` rather than `once` (which wraps
    // each listener): fewer objects per handshake. Each acts once (`settled`), but `secure`,
    // which also reports a refused renegotiation.
    socket[kHandshake] = hs;
    socket.on('secure', onSecure);
    socket.on('error', onHandshakeError);
    socket.on('close', onCloseEarly);
    // The accepted socket allows half-open connections; a client that ends its side before the
    // handshake is done can never finish it (it must still send its Finished).
    socket.on('end', onEndEarly);
    // A wrapped socket accepted paused (pauseOnConnect) must be read for the handshake to run.
    socket.resume();
  }

  /** The handshake finished: verify the client certificate, record the facts, hand over. */
  secured(hs: Handshake): void {
    const socket = hs.socket!;
    const version = socket.getProtocol() ?? 'unknown';
    let clientCert: string | null = null;
    if (this.requestCert) {
      const peer = socket.getPeerX509Certificate();
      if (peer !== undefined) {
        const why = peerVerifyError(socket);
        if (why !== null) {
          this.log.debug(
            { conn: hs.conn.id, peer: hs.conn.peerAddress, reason: 'tls_client_cert_invalid', detail: why, subject: oneLine(peer.subject) },
            'TLS handshake failed',
          );
          this.fail(hs, 'tls_client_cert_invalid', version);
          return;
        }
        clientCert = oneLine(peer.subject);
      } else if (this.rejectUnauthorized) {
        this.fail(hs, 'tls_client_cert_missing', version); // OpenSSL refuses this first; kept as a guard
        return;
      }
    }
    if (!hs.sniSeen && !this.store.hasFallback) {
      // unknownSni: refuse, and no SNI: the empty initial context cannot finish a handshake, so
      // this is a guard only.
      this.fail(hs, 'tls_unknown_sni', version);
      return;
    }
    this.settle(hs);
    const resumed = socket.isSessionReused();
    if (resumed) this.stats.resumed++;
    this.stats.handshake('ok', version, (performance.now() - hs.startedAt) / 1000);
    const servername = (socket as tls.TLSSocket & { servername?: string | false }).servername;
    const cipher = socket.getCipher();
    hs.conn.tls = new TlsFacts(
      version,
      typeof servername === 'string' ? servername : null,
      cipher.standardName ?? cipher.name,
      resumed,
      clientCert,
    );
    // Errors after the handshake (a reset, a bad record) end this connection only.
    socket.on('error', onLaterError);
    hs.established = true;
    hs.result.done(hs.conn, socket);
  }

  /**
   * The client started a TLS 1.2 renegotiation on an established connection and OpenSSL refused
   * it (SSL_OP_NO_RENEGOTIATION: a no_renegotiation alert, nothing computed for it). Counted and
   * logged at debug, a peer's doing; the connection goes on, as with nginx (an OpenSSL client
   * then gives up on its own: `openssl s_client` ends with "no renegotiation").
   */
  renegotiationRefused(hs: Handshake): void {
    this.stats.renegotiationsRefused++;
    this.log.debug({ conn: hs.conn.id, peer: hs.conn.peerAddress, client: hs.conn.clientAddress }, 'TLS renegotiation refused');
  }

  errored(hs: Handshake, err: NodeJS.ErrnoException): void {
    let reason: TlsHandshakeReason = BY_CODE[err.code ?? ''] ?? 'tls_handshake_failed';
    // With `refuse`, OpenSSL fails a handshake it has no certificate for as any other failure
    // (no suitable signature algorithm / no shared cipher): the SNI lookup says why.
    if (reason === 'tls_handshake_failed' && !this.store.hasFallback && (hs.sniMiss || !hs.sniSeen)) reason = 'tls_unknown_sni';
    this.log.debug({ conn: hs.conn.id, peer: hs.conn.peerAddress, reason, err: err.code ?? err.message }, 'TLS handshake failed');
    // Before the versions are agreed, getProtocol() names the server's highest: not the client's.
    const agreed = reason !== 'tls_not_handshake' && reason !== 'tls_handshake_aborted' && reason !== 'tls_handshake_failed';
    this.fail(hs, reason, agreed ? (hs.socket!.getProtocol() ?? 'unknown') : 'unknown');
  }

  fail(hs: Handshake, reason: TlsHandshakeReason, version: string): void {
    if (hs.settled) return;
    this.settle(hs);
    this.stats.handshake(
      reason,
      version === 'unknown' || version === null ? 'unknown' : version,
      (performance.now() - hs.startedAt) / 1000,
    );
    if (hs.socket !== null) {
      hs.socket.on('error', onLaterError);
      hs.socket.destroy();
    } else {
      stopReading(hs.raw);
    }
    hs.raw.destroy();
    hs.result.failed(hs.conn, reason);
  }

  private settle(hs: Handshake): void {
    hs.settled = true;
    this.sweep.delete(hs);
  }
}

function onSecure(this: HsSocket): void {
  const hs = this[kHandshake]!;
  if (!hs.settled) hs.stage.secured(hs);
  else if (hs.established) hs.stage.renegotiationRefused(hs);
}

function onHandshakeError(this: HsSocket, err: NodeJS.ErrnoException): void {
  const hs = this[kHandshake]!;
  if (!hs.settled) hs.stage.errored(hs, err);
}

function onCloseEarly(this: HsSocket): void {
  const hs = this[kHandshake]!;
  // Closed before `secure` without an error event: the client went away mid-handshake.
  if (!hs.settled) hs.stage.fail(hs, 'tls_handshake_aborted', 'unknown');
  else hs.raw.destroy(); // the TLS socket closed: make sure the accepted one does (the listener's close)
}

function onEndEarly(this: HsSocket): void {
  const hs = this[kHandshake]!;
  if (!hs.settled) hs.stage.fail(hs, 'tls_handshake_aborted', 'unknown');
}

/** A chunk of the accepted socket while its ClientHello is read. */
function onHelloData(this: HsSocket, chunk: Buffer): void {
  const hs = this[kHandshake]!;
  hs.hello = hs.hello.length === 0 ? chunk : Buffer.concat([hs.hello, chunk]);
  hs.stage.helloRead(hs);
}

/** The accepted socket closed (a reset) while its ClientHello was read. */
function onHelloClose(this: HsSocket): void {
  const hs = this[kHandshake]!;
  if (!hs.settled) hs.stage.fail(hs, 'tls_handshake_aborted', 'unknown');
}

/** The ClientHello is read (or the handshake failed first): the accepted socket's data is the TLSSocket's. */
function stopReading(raw: HsSocket): void {
  if (raw[kHandshake] === undefined) return;
  raw.pause();
  raw.off('data', onHelloData);
  raw.off('end', onEndEarly);
  raw.off('close', onHelloClose);
  raw[kHandshake] = undefined;
}

function onLaterError(): void {
  // The listener's debug line for the accepted socket covers it; the 'close' that follows ends it.
}

/** `CN=a\nO=b` -> `CN=a, O=b`. */
function oneLine(subject: string): string {
  return subject.replace(/\n/g, ', ');
}
