import type net from 'node:net';
import type { AllowEntry } from '../allowlist/entry';
import type { UpstreamGroup } from '../upstream/upstream-group';
import type { RouteCounts } from '../metrics/listener-stats';
import type { Tlv } from '../proxy-protocol/decoder';
import type { Reason } from '../reasons';
import type { TlsFacts } from './tls-facts';
import type { LiveList } from '../store/live-lists';
import type { ByteSocket } from '../transport/byte-socket';
import type { Linked, LinkedSet } from './linked-set';
import type { RawSocket } from '../transport/raw-socket';

/**
 * A side of a connection: a net.Socket, or a ByteSocket (transport/byte-socket.ts): a RawSocket
 * on listeners that run on libuv handles (transport/raw-socket.ts), or an HTTP upgrade's upstream.
 */
export type Endpoint = net.Socket | ByteSocket;

/** The accepted side: a net.Socket (a TLSSocket after a handshake) or a RawSocket. */
export type ClientSocket = net.Socket | RawSocket;

/** How the client address was learned: the access-log field `via`. */
export type Via = 'socket' | 'proxy-v1' | 'proxy-v2' | 'xff';

/**
 * The route that took a connection (TCP listeners with routes: route/sni-routes.ts). The
 * allowlist decision and revocation use its list; the forwarder dials its upstream group.
 */
export interface ConnectionRoute {
  /** The route's name: the access log's `route` and the metric label. */
  readonly name: string;
  /** The list the route enforces (its own `allowlist`, or the listener's). */
  readonly list: LiveList;
  /** Its upstream group (its own round robin). */
  readonly upstreams: UpstreamGroup;
  /** Its counters (ListenerStats.route(name): kept across reloads). */
  readonly counts: RouteCounts;
}

/**
 * Everything known about one accepted connection. One object per connection, filled in stage by
 * stage; no per-connection closures beyond what Node's socket events need.
 */
export class Connection implements Linked<Connection> {
  /** The address that connected to us (canonical). */
  peerAddress: string;
  peerPort: number;
  /** The real client: from the PROXY header when trusted, else the peer. */
  clientAddress: string;
  clientPort: number;
  /**
   * Where the client connected to: the PROXY header's destination, else our socket's address.
   * '' until read: a TCP listener on libuv handles asks its socket (getsockname) only when an
   * outbound PROXY header needs it (forward/tcp/tcp-forwarder.ts `destination`), while the socket
   * is open; a connection whose PROXY header gave the destination never asks.
   */
  destAddress: string;
  destPort: number;
  via: Via = 'socket';
  tlvs: readonly Tlv[] = [];
  /**
   * The allowlist entry that admits the client (the access log's `entry`); null before the
   * decision and when denied. A list change re-checks it (Listener.revokeDenied).
   */
  entry: AllowEntry | null = null;
  /** TCP listeners with routes: the route chosen by SNI (null before, and on other listeners). */
  route: ConnectionRoute | null = null;
  /** TCP listeners with routes: the ClientHello's SNI (null: none sent, or not read yet). Logged, never a label. */
  sni: string | null = null;
  /** `host:port` of the upstream, once chosen. */
  upstream: string | null = null;
  upstreamSocket: Endpoint | null = null;
  readonly startedAt = Date.now();
  /** Close result label (`ok`, `denied`, `pp_timeout`, `upstream_refused`, `revoked`, ...). */
  result: Reason | null = null;
  /** Set when an allowlist change no longer allows the client: the forwarder must stop. */
  revoked = false;
  /**
   * Handed to a handler that decides per request (HTTP): its requests are decided, logged and
   * re-checked one by one (ConnectionHandler.recheck), the connection has no decision of its own.
   */
  decidedPerRequest = false;
  /** A TLS listener's handshake result (the access log's `tls`), null on plaintext. */
  tls: TlsFacts | null = null;
  /**
   * The handler's own record of this connection (the HTTP forwarder's HttpConn; on a TCP
   * listener's libuv-handle path, the client's idle timer), null before and on other listeners.
   * A field here, not a property added to the socket after it was made: that gave HTTP client
   * sockets a shape of their own, which upstream and TCP sockets do not have (bench/README.md
   * "Callbacks that take their socket as `this`": no change in bytes).
   */
  handlerState: object | null = null;

  /** Its listener's set of open connections (Listener.connections: connection/linked-set.ts). */
  linkSet: LinkedSet<Connection> | null = null;
  linkPrev: Connection | null = null;
  linkNext: Connection | null = null;

  constructor(
    readonly id: number,
    readonly listener: string,
    /** The client side: the accepted socket, replaced by its TLSSocket once a TLS listener's handshake is done. */
    public socket: ClientSocket,
    peerAddress: string,
    peerPort: number,
    localAddress: string,
    localPort: number,
  ) {
    this.peerAddress = peerAddress;
    this.peerPort = peerPort;
    this.clientAddress = peerAddress;
    this.clientPort = peerPort;
    this.destAddress = localAddress;
    this.destPort = localPort;
  }
}
