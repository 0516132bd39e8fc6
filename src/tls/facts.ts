/**
 * What a finished TLS handshake established, kept on the connection for the access log (one JSON
 * fragment built once per connection, not per request).
 */
export interface TlsFacts {
  /** `TLSv1.2` | `TLSv1.3`. */
  readonly version: string;
  /** The SNI name as the client sent it, or null. */
  readonly sni: string | null;
  /** IANA cipher suite name, e.g. `TLS_AES_128_GCM_SHA256`. */
  readonly cipher: string;
  /** A ticket resumed the session. */
  readonly resumed: boolean;
  /** The verified client certificate's subject (`CN=x, O=y`), or null. */
  readonly clientCert: string | null;
  /** `,"tls":{...}`: the access line's field, ready to append. */
  readonly json: string;
}

export function tlsFacts(version: string, sni: string | null, cipher: string, resumed: boolean, clientCert: string | null): TlsFacts {
  const fields = { version, sni, cipher, resumed, ...(clientCert !== null ? { clientCert } : {}) };
  return { version, sni, cipher, resumed, clientCert, json: `,"tls":${JSON.stringify(fields)}` };
}
