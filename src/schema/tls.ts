/**
 * A listener's `tls:` block: TLS termination on `mode: http` listeners (docs/tls.md).
 *
 * ```yaml
 * tls:
 *   certificates:
 *     - {cert: /etc/ipgate/tls/web/tls.crt, key: /etc/ipgate/tls/web/tls.key}
 *     - {cert: api/tls.crt, key: api/tls.key, hosts: [api.example.com], name: api}
 *   unknownSni: first
 *   minVersion: TLSv1.2
 *   clientCertificate: none
 * ```
 *
 * Each option is written once here: its JSON Schema (with the default Ajv fills in), its type
 * (`Static<>`) and its documentation. File checks (readable, PEM, key matches certificate) are
 * src/tls/cert-store.ts's, called from validate.ts.
 */
import { Enum, NAME_PATTERN, Nullable, Section, Type, type Static } from './kit';

const TLS_VERSIONS = ['TLSv1.2', 'TLSv1.3'] as const;

const TlsCertificateSchema = Section({
  /**
   * PEM file: the certificate, then its intermediates (a chain; `tls.crt` of a Kubernetes TLS
   * Secret is this). Relative paths are relative to the config file.
   */
  cert: Type.String({ minLength: 1 }),
  /** PEM file: the private key (RSA or ECDSA, unencrypted). Relative as `cert`. */
  key: Type.String({ minLength: 1 }),
  /**
   * Names this certificate serves (exact, or `*.example.com`: one label); null: the certificate's
   * own DNS subjectAltNames (its CN when it has none), re-read when it is reloaded.
   */
  hosts: Nullable(Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { minItems: 1, maxItems: 1000 }), { default: null }),
  /**
   * The metric label (`certificate`) and log name of this pair; null: its index in
   * `certificates` ("0" for the first).
   */
  name: Nullable(Type.String({ pattern: NAME_PATTERN }), { default: null }),
});

const TlsSchema = Section({
  /**
   * Certificate + key pairs, one or more. The first is also the one a client without SNI, or
   * with a name no pair serves, gets (unless `unknownSni: refuse`).
   */
  certificates: Type.Array(TlsCertificateSchema, { minItems: 1, maxItems: 1000 }),
  /**
   * A ClientHello whose SNI names no certificate's host, or that carries no SNI:
   * `first`: the first certificate answers (as the first `server` of an nginx port does);
   * `refuse`: the handshake fails (`tls_unknown_sni`), so a scanner learns no name (nginx
   * `ssl_reject_handshake on`).
   */
  unknownSni: Enum(['first', 'refuse'], { default: 'first' }),
  /** Lowest protocol version accepted (1.0 and 1.1 are deprecated, RFC 8996, and not offered). */
  minVersion: Enum(TLS_VERSIONS, { default: 'TLSv1.2' }),
  /** Highest protocol version offered. */
  maxVersion: Enum(TLS_VERSIONS, { default: 'TLSv1.3' }),
  /**
   * PEM file of the CA certificates client certificates must chain to (relative as `cert`);
   * null: none (no client certificates asked for). Watched and reloaded like the pairs.
   */
  clientCA: Nullable(Type.String({ minLength: 1 }), { default: null }),
  /**
   * `none`: no client certificate is asked for. `optional`: asked for; a client may send none,
   * but one it sends must verify against `clientCA`. `required`: a verified client certificate
   * is needed to finish the handshake (`tls_client_cert_missing` / `tls_client_cert_invalid`).
   * `optional` and `required` need `clientCA`.
   */
  clientCertificate: Enum(['none', 'optional', 'required'], { default: 'none' }),
  /**
   * The handshake (from the first byte after any PROXY header to the handshake's end) must finish
   * within this time (ms), else the connection is closed (`tls_handshake_timeout`). Checked every
   * quarter of it (at least every 50 ms, at most every second), so a stalled handshake is closed
   * up to that much later.
   */
  handshakeTimeoutMs: Type.Integer({ minimum: 1, maximum: 300_000, default: 10_000 }),
  /**
   * Session resumption by tickets (RFC 5077 / RFC 8446 4.6.1), their keys generated in memory at
   * start-up and replaced every hour (src/tls/session-tickets.ts); with several workers the
   * primary makes them and every worker shares them. `false`: no tickets.
   */
  sessionTickets: Type.Boolean({ default: true }),
  /**
   * How often the certificate, key and CA files are checked for a change (mtime, inode, size,
   * then a content hash), ms; a Kubernetes Secret volume swaps its `..data` symlink, which fs.watch
   * does not see on every filesystem.
   */
  reloadIntervalMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 2000 }),
});

/** The listener property: the block, or null (no TLS: plaintext HTTP). */
export const ListenerTlsProperty = Nullable(TlsSchema, { default: null });

export type TlsCertificateConfig = Static<typeof TlsCertificateSchema>;
export type TlsConfig = Static<typeof TlsSchema>;
