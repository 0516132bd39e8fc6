/**
 * Failure codes of the ClientHello stage (SNI routing on TCP listeners, docs/routes-and-sni.md),
 * and of the watch that follows the handshake to the backend's ServerHello (a second ClientHello
 * after a HelloRetryRequest: forward/tcp/hello-watch.ts).
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
  | 'tls_timeout'
  | 'tls_hrr_sni_changed'
  | 'tls_hrr_alpn_changed'
  | 'tls_hrr_hello_changed'
  | 'tls_hrr_unexpected'
  | 'tls_bad_server_hello';

export const TLS_REASONS: Readonly<Record<TlsReason, string>> = Object.freeze({
  tls_not_handshake:
    'The first bytes are not a TLS handshake record (content type 22, version 3.x): plaintext, an unstripped PROXY header, or another protocol.',
  tls_sslv2: 'The client sent an SSL 2.0-compatible ClientHello, which carries no extensions (so no SNI) and is prohibited (RFC 6176).',
  tls_not_client_hello: 'The first handshake message is not a ClientHello.',
  tls_record_overflow: 'A TLS record declares more than 2^14 bytes of plaintext (RFC 8446 section 5.1, record_overflow).',
  tls_too_large:
    'The ClientHello declares more bytes than maxHelloLength, its records exceed the buffer the reader may hold, or (after a HelloRetryRequest) the early data before the second hello does.',
  tls_malformed:
    'A length or field of the ClientHello is inconsistent (overrun, empty fragment, interleaved record, duplicate extension, bytes after it).',
  tls_bad_sni:
    'The server_name extension is not exactly one valid DNS host name (an IP literal, a bad character or label, two names, ...).',
  // Listener-level: readClientHello() never returns them (it answers need_more); the listener does.
  tls_truncated:
    'The peer closed the connection before a complete ClientHello arrived (the first, or the second after a HelloRetryRequest).',
  tls_timeout: "No complete ClientHello arrived within the listener's hello timeout (the first, or the second after a HelloRetryRequest).",
  // The handshake watch (forward/tcp/hello-watch.ts): after the backend's HelloRetryRequest.
  tls_hrr_sni_changed:
    'The second ClientHello after a HelloRetryRequest names another server than the first, which chose the route and its allowlist (RFC 8446 4.1.2: it must not change).',
  tls_hrr_alpn_changed:
    'The second ClientHello after a HelloRetryRequest offers other ALPN protocols than the first (RFC 8446 4.1.2: it must not change).',
  tls_hrr_hello_changed:
    'The second ClientHello after a HelloRetryRequest changes its versions (legacy_version, supported_versions) or encrypted_client_hello (RFC 8446 4.1.2).',
  tls_hrr_unexpected:
    'After a HelloRetryRequest the client sent something other than its second ClientHello (an alert, another record type, a second ChangeCipherSpec, early data it did not offer).',
  tls_bad_server_hello:
    "The backend's first flight is not a TLS ServerHello (another record or message first, a malformed header, a second HelloRetryRequest), so no second hello could be checked.",
});
