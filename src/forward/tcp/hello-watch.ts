/**
 * The handshake watch of a TCP listener with SNI routes (docs/routes-and-sni.md "After the first
 * hello: the handshake watch"). The route and its allowlist were decided on the first
 * ClientHello; a backend that answers it with a HelloRetryRequest then reads a second one, and
 * picks its server by that (nginx served another server block's certificate and pages to a
 * second hello naming it). So, from the moment the first hello is forwarded:
 *
 *   1. No further client byte goes to the backend until the backend's ServerHello is known: the
 *      client socket stays paused (the kernel's receive buffer and TCP flow control hold what a
 *      client pipelines; ipgate holds only what its last read carried past the hello).
 *   2. The backend's bytes go to the client as they are read, each chunk also shown to a
 *      ServerHelloReader (tls/server-hello.ts), which keeps no bytes.
 *   3. A ServerHello that is not a retry (TLS 1.3, 1.2, anything earlier) ends the watch: the held
 *      bytes go on and the ordinary relay takes both directions; a long stream costs nothing more.
 *   4. A HelloRetryRequest: the client's next bytes are gathered (connection/gather.ts, the loop of
 *      the first hello, within the same `sni.helloTimeoutMs`) until readRetryHello
 *      (tls/retry-hello.ts) says the second hello matches the first (then it and what preceded
 *      it go to the backend, and the watch goes back to 1 for the backend's real ServerHello), or
 *      why not (the connection is closed with that reason; the backend never sees the hello).
 *
 * Time: a backend that never answers is bounded by `timeouts.idleMs` (the client's idle timer,
 * which the forwarder arms before dialling); a client that never sends its second hello by
 * `sni.helloTimeoutMs` (`tls_timeout`), as for the first. Each retry is counted in
 * `ipgate_sni_hello_retries_total{result}`: `ok` or the reason.
 *
 * One object per connection an SNI route took (listeners without routes never build one); it
 * works on RawSockets and net.Sockets alike, and lets go of both at the end of the watch.
 */
import { Buffer } from 'node:buffer';
import type net from 'node:net';
import type { Logger } from 'pino';
import type { Connection, Endpoint } from '../../connection/connection';
import { gather, type GatherStage } from '../../connection/gather';
import { ListenerStats } from '../../metrics/listener-stats';
import { RawSocket } from '../../transport/raw-socket';
import type { ClientHelloDone } from '../../tls/client-hello';
import type { TlsReason } from '../../tls/codes';
import { readRetryHello } from '../../tls/retry-hello';
import { ServerHelloReader } from '../../tls/server-hello';
import { DEBUG_LEVEL, logsAt } from '../../log';

/** What the forwarder gives the watch (one per listener and socket model). */
export interface WatchHost<S extends Endpoint> {
  /** `sni.helloTimeoutMs`: how long a second hello may take. */
  readonly helloTimeoutMs: number;
  readonly stats: ListenerStats;
  readonly log: Logger;
  /**
   * The watch is over: relay both ways (the client is paused; the held bytes were written), with
   * the relay of this socket model (transport/relay-pair.ts), as a connection without a watch.
   */
  relayBoth(client: S, upstream: S): void;
  /** Close the connection with `reason` (both sockets). */
  closeWith(conn: Connection, reason: TlsReason): void;
}

/** The second hello's outcome, as the gather loop hands it over. */
type RetryOutcome = { ok: true; length: number } | { ok: false; reason: TlsReason; detail: string };

const EMPTY = Buffer.alloc(0);

export class HelloWatch<S extends Endpoint> implements GatherStage<RetryOutcome> {
  readonly timeoutMs: number;
  private readonly reader = new ServerHelloReader();
  /** Client bytes read past the last hello forwarded: they wait for the backend's ServerHello. */
  private held: Buffer;
  /** A second hello is being gathered (after a HelloRetryRequest, before it is forwarded). */
  private gathering = false;
  /** The watch is over (relay started, or the connection closed): no more callbacks act. */
  private over = false;
  private readonly onServerData = (chunk: Buffer): void => this.serverData(chunk);
  private readonly onServerEnd = (): void => this.serverEnded();
  private readonly onClientDrain = (): void => {
    this.upstream.resume();
  };
  /** Both sockets are RawSockets (the forwarder's handle path), else both net.Sockets. */
  private readonly raw: boolean;

  constructor(
    private readonly conn: Connection,
    private readonly client: S,
    private readonly upstream: S,
    private readonly first: ClientHelloDone,
    held: Buffer,
    private readonly host: WatchHost<S>,
  ) {
    this.timeoutMs = host.helloTimeoutMs;
    this.held = held;
    this.raw = client instanceof RawSocket;
  }

  /** Start reading the backend (the first hello has been written to it; the client is paused). */
  start(): void {
    if (this.raw) {
      const upstream = this.upstream as RawSocket;
      upstream.onData = this.onServerData;
      upstream.onEnd = this.onServerEnd;
      (this.client as RawSocket).onDrain = this.onClientDrain;
    } else {
      const upstream = this.upstream as net.Socket;
      upstream.on('data', this.onServerData);
      upstream.on('end', this.onServerEnd);
      (this.client as net.Socket).on('drain', this.onClientDrain);
    }
    this.upstream.resume();
  }

  private stop(): void {
    this.over = true;
    if (this.raw) {
      const upstream = this.upstream as RawSocket;
      upstream.onData = null;
      upstream.onEnd = null;
      (this.client as RawSocket).onDrain = null;
    } else {
      const upstream = this.upstream as net.Socket;
      upstream.off('data', this.onServerData);
      upstream.off('end', this.onServerEnd);
      (this.client as net.Socket).off('drain', this.onClientDrain);
    }
  }

  /** A chunk from the backend: to the client at once, and read for the ServerHello. */
  private serverData(chunk: Buffer): void {
    if (this.over) return;
    if (!this.client.write(chunk)) this.upstream.pause();
    let at = 0;
    for (;;) {
      const event = this.reader.read(chunk, at);
      if (event === 'need_more') return;
      if (event === 'error') {
        this.host.log.warn(
          { conn: this.conn.id, upstream: this.conn.upstream, route: this.conn.route?.name, detail: this.reader.message },
          "the backend's first flight is not a TLS ServerHello",
        );
        this.end('tls_bad_server_hello');
        return;
      }
      if (event === 'server_hello') {
        if (this.gathering) {
          this.host.log.warn(
            { conn: this.conn.id, upstream: this.conn.upstream, route: this.conn.route?.name },
            'the backend sent a ServerHello before the second ClientHello',
          );
          this.end('tls_bad_server_hello');
          return;
        }
        this.finish();
        return;
      }
      // hello_retry: the client's next hello decides; the rest of the chunk is read after it.
      at = this.reader.at;
      this.gathering = true;
      gather(this.conn, this.held, this);
      if (this.over) return;
    }
  }

  /** The backend ended its side during the watch (it refused the handshake): end the client's too. */
  private serverEnded(): void {
    if (this.over) return;
    this.stop();
    const { client, upstream } = this;
    const done = (): void => {
      client.destroy();
      upstream.destroy();
    };
    if (this.raw) (client as RawSocket).onFinish = done;
    else (client as net.Socket).once('finish', done);
    client.end();
  }

  /** The backend's ServerHello is no retry: the held bytes go on, then the ordinary relay. */
  private finish(): void {
    this.stop();
    if (this.held.length > 0) this.upstream.write(this.held);
    this.held = EMPTY;
    this.host.relayBoth(this.client, this.upstream);
  }

  private end(reason: TlsReason): void {
    this.stop();
    this.host.closeWith(this.conn, reason);
  }

  // --- the second hello, through the gather loop (GatherStage) ---------------------------------

  decide(buf: Buffer): RetryOutcome | null {
    const r = readRetryHello(buf, this.first);
    if (r.kind === 'need_more') return null;
    if (r.kind === 'error') return { ok: false, reason: r.reason, detail: r.message };
    return { ok: true, length: r.length };
  }

  timedOut(buf: Buffer): RetryOutcome {
    return { ok: false, reason: 'tls_timeout', detail: `${buf.length} bytes of the second ClientHello within ${this.timeoutMs} ms` };
  }

  ended(buf: Buffer): RetryOutcome {
    return { ok: false, reason: 'tls_truncated', detail: `the client closed after ${buf.length} bytes of the second ClientHello` };
  }

  gathered(conn: Connection, r: RetryOutcome, buf: Buffer): void {
    this.gathering = false;
    const stats = this.host.stats;
    if (this.over) return;
    if (!r.ok) {
      ListenerStats.bump(stats.sniHelloRetries, r.reason);
      const log = this.host.log;
      if (logsAt(log, DEBUG_LEVEL)) {
        log.debug(
          { conn: conn.id, client: conn.clientAddress, route: conn.route?.name, sni: conn.sni, reason: r.reason, detail: r.detail },
          'second ClientHello refused',
        );
      }
      this.end(r.reason);
      return;
    }
    ListenerStats.bump(stats.sniHelloRetries, 'ok');
    // The second hello and what came before it go on; what follows it waits for the ServerHello.
    const n = r.length;
    this.upstream.write(n === buf.length ? buf : buf.subarray(0, n));
    this.held = n === buf.length ? EMPTY : buf.subarray(n);
  }
}
