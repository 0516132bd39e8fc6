/**
 * Failure codes of the ClientHello stage (SNI routing on TCP listeners, docs/routes-and-sni.md).
 *
 * One code per way the first bytes of a TLS connection can be unusable, as in
 * proxy-protocol/codes.ts: the code is both the log field and the `reason` metric label, so the
 * set is closed and small. The sentence is what an operator reads next to the code.
 */
export type TlsReason =
  | 'tls_not_handshake'
  | 'tls_sslv2'
  | 'tls_not_client_hello'
  | 'tls_record_overflow'
  | 'tls_too_large'
  | 'tls_malformed'
  | 'tls_bad_sni'
  | 'tls_truncated'
  | 'tls_timeout';

export const TLS_REASONS: Readonly<Record<TlsReason, string>> = Object.freeze({
  tls_not_handshake: 'The first bytes are not a TLS handshake record (content type 22, version 3.x): plaintext, an unstripped PROXY header, or another protocol.',
  tls_sslv2: 'The client sent an SSL 2.0-compatible ClientHello, which carries no extensions (so no SNI) and is prohibited (RFC 6176).',
  tls_not_client_hello: 'The first handshake message is not a ClientHello.',
  tls_record_overflow: 'A TLS record declares more than 2^14 bytes of plaintext (RFC 8446 section 5.1, record_overflow).',
  tls_too_large: 'The ClientHello declares more bytes than maxHelloLength, or its records exceed the buffer the reader may hold.',
  tls_malformed: 'A length or field of the ClientHello is inconsistent (overrun, empty fragment, interleaved record, duplicate extension, bytes after it).',
  tls_bad_sni: 'The server_name extension is not exactly one valid DNS host name (an IP literal, a bad character or label, two names, ...).',
  // Listener-level: readClientHello() never returns them (it answers need_more); the listener does.
  tls_truncated: 'The peer closed the connection before a complete ClientHello arrived.',
  tls_timeout: 'No complete ClientHello arrived within the listener\'s hello timeout.',
});
