/**
 * What a finished TLS handshake established, kept on the connection for the access log (one JSON
 * fragment built once per connection, not per request, and only when a line needs it: with the
 * access log off, or a connection that closes without a request, it is never built; the spread
 * and JSON.stringify were ~5 us of a handshake's CPU on Node 20, bench/README.md "What
 * ipgate adds to a new TLS handshake").
 */
export class TlsFacts {
  private fragment: string | null = null;

  constructor(
    /** `TLSv1.2` | `TLSv1.3`. */
    readonly version: string,
    /** The SNI name as the client sent it, or null. */
    readonly sni: string | null,
    /** IANA cipher suite name, e.g. `TLS_AES_128_GCM_SHA256`. */
    readonly cipher: string,
    /** A ticket resumed the session. */
    readonly resumed: boolean,
    /** The verified client certificate's subject (`CN=x, O=y`), or null. */
    readonly clientCert: string | null,
  ) {}

  /** `,"tls":{...}`: the access line's field, ready to append. */
  get json(): string {
    if (this.fragment === null) {
      const fields = {
        version: this.version,
        sni: this.sni,
        cipher: this.cipher,
        resumed: this.resumed,
        ...(this.clientCert !== null ? { clientCert: this.clientCert } : {}),
      };
      this.fragment = `,"tls":${JSON.stringify(fields)}`;
    }
    return this.fragment;
  }
}

export function tlsFacts(version: string, sni: string | null, cipher: string, resumed: boolean, clientCert: string | null): TlsFacts {
  return new TlsFacts(version, sni, cipher, resumed, clientCert);
}
