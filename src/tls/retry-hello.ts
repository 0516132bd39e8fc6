/**
 * readRetryHello: after the backend answered a HelloRetryRequest (server-hello.ts), the client's
 * next bytes must be its second ClientHello, equal to the first in everything the route and the
 * backend's choice of server depend on (docs/routes-and-sni.md "After the first hello: the
 * handshake watch"). Stateless over the bytes received so far, as readClientHello is: need_more /
 * done / error, never throws, never modifies the buffer.
 *
 * RFC 8446 4.1.2: "the client MUST send the same ClientHello without modification, except as
 * follows": a new key_share, early_data removed, a cookie added, pre_shared_key updated, padding
 * changed. A backend reads the second hello afresh (OpenSSL runs its server-name callback again
 * and nginx picks the server block by it), so a client could route and be admitted by one name
 * and then be served as another. Compared, and refused when they differ:
 *
 *   server_name        tls_hrr_sni_changed    as the route compared it (lower case, no trailing
 *                                             dot: route/host-name.ts), none = none
 *   ALPN               tls_hrr_alpn_changed   the same protocols in the same order (a backend may
 *                                             choose a server or an application by it)
 *   legacy_version, supported_versions, encrypted_client_hello
 *                      tls_hrr_hello_changed  the version the backend's parser follows, and
 *                                             whether the name read is an outer one
 *
 * Not compared: random, session id, cipher suites, groups and the other extensions. They must be
 * equal too, but no backend chooses a server by them, the backend's TLS stack checks what it
 * needs, and a client that changes them gains no other server from the route's decision.
 *
 * Before the second hello the client may have sent (right after the first, before the server's
 * answer, or after it): one ChangeCipherSpec record (the compatibility one, D.4) and, when the
 * first hello offered early_data, 0-RTT application_data records, which the server skips after a
 * retry (4.2.10). Anything else is `tls_hrr_unexpected`. The early data is held with the hello
 * until the check, so it is capped: MAX_EARLY_DATA_HELD.
 */
import { readClientHello, type ClientHelloDone, type ReadOptions } from './client-hello';
import type { TlsReason } from './codes';

/**
 * Cap on the 0-RTT bytes (records included) held before a second ClientHello. Threat: a client
 * that offers early_data and then streams application_data records after the retry would make
 * ipgate hold them all before the hello that decides whether they may pass. 16 KiB is what nginx
 * (ssl_early_data on) and OpenSSL accept as max_early_data by default; 1 KiB covers the record
 * headers and AEAD tags of the records it comes in.
 */
export const MAX_EARLY_DATA_HELD = 16384 + 1024;

/** RFC 8446 5.2: a protected record holds at most 2^14 + 256 bytes. */
const MAX_CIPHERTEXT = 16384 + 256;
const CONTENT_CCS = 20;
const CONTENT_ALERT = 21;
const CONTENT_HANDSHAKE = 22;
const CONTENT_APPLICATION_DATA = 23;

export type RetryHelloResult =
  | { kind: 'need_more' }
  /** The second hello checks out: `length` bytes (what preceded it, and it) may go to the backend. */
  | { kind: 'done'; hello: ClientHelloDone; length: number }
  | { kind: 'error'; reason: TlsReason; message: string };

const NEED_MORE: RetryHelloResult = Object.freeze({ kind: 'need_more' });

function fail(reason: TlsReason, message: string): RetryHelloResult {
  return { kind: 'error', reason, message };
}

/**
 * The client's bytes after the HelloRetryRequest (everything it sent after the first hello, in
 * fact: what it sent before the retry arrived is held too), checked against `first`.
 */
export function readRetryHello(buf: Buffer, first: ClientHelloDone, options?: ReadOptions): RetryHelloResult {
  const n = buf.length;
  let p = 0;
  let ccs = false;
  for (;;) {
    if (p >= n) return NEED_MORE;
    const type = buf[p]!;
    if (type === CONTENT_HANDSHAKE) break;
    if (type === CONTENT_ALERT) {
      return fail(
        'tls_hrr_unexpected',
        n >= p + 7
          ? `an alert (level ${buf[p + 5]}, description ${buf[p + 6]}) instead of the second ClientHello`
          : 'an alert instead of the second ClientHello',
      );
    }
    if (type === CONTENT_CCS) {
      if (ccs) return fail('tls_hrr_unexpected', 'a second ChangeCipherSpec record before the second ClientHello');
      // RFC 8446 5: "a single byte value 0x01"; the record header's version major is 3.
      for (let k = 1; k < 6 && p + k < n; k++) {
        const b = buf[p + k]!;
        if ((k === 1 && b !== 3) || (k === 3 && b !== 0) || (k === 4 && b !== 1) || (k === 5 && b !== 1)) {
          return fail('tls_hrr_unexpected', 'a ChangeCipherSpec record that is not the single byte 0x01');
        }
      }
      if (p + 6 > n) return NEED_MORE;
      ccs = true;
      p += 6;
      continue;
    }
    if (type !== CONTENT_APPLICATION_DATA)
      return fail('tls_hrr_unexpected', `a record of content type ${type} before the second ClientHello`);
    if (!first.earlyData)
      return fail('tls_hrr_unexpected', 'application data before the second ClientHello, and the first offered no early_data');
    if (p + 1 < n && buf[p + 1] !== 3) return fail('tls_hrr_unexpected', `an application_data record of version major ${buf[p + 1]}`);
    if (p + 5 > n) return NEED_MORE;
    const length = (buf[p + 3]! << 8) | buf[p + 4]!;
    if (length === 0 || length > MAX_CIPHERTEXT)
      return fail('tls_record_overflow', `an early data record of ${length} bytes (1..${MAX_CIPHERTEXT})`);
    const end = p + 5 + length;
    if (end > MAX_EARLY_DATA_HELD)
      return fail('tls_too_large', `early data before the second ClientHello reaches byte ${end} (at most ${MAX_EARLY_DATA_HELD})`);
    if (end > n) return NEED_MORE;
    p = end;
  }
  const r = readClientHello(p === 0 ? buf : buf.subarray(p), options);
  if (r.kind !== 'done') return r;
  const change = retryHelloChange(first, r);
  if (change !== null) return change;
  return { kind: 'done', hello: r, length: p + r.length };
}

/** null when `second` may follow `first` after a HelloRetryRequest; else why not. */
function retryHelloChange(first: ClientHelloDone, second: ClientHelloDone): RetryHelloResult | null {
  if (first.sni !== second.sni) {
    return fail(
      'tls_hrr_sni_changed',
      `server_name ${JSON.stringify(first.sni)} in the first ClientHello, ${JSON.stringify(second.sni)} in the second`,
    );
  }
  if (!sameList(first.alpn, second.alpn)) {
    return fail(
      'tls_hrr_alpn_changed',
      `ALPN ${JSON.stringify(first.alpn)} in the first ClientHello, ${JSON.stringify(second.alpn)} in the second`,
    );
  }
  if (first.legacyVersion !== second.legacyVersion || !sameList(first.supportedVersions, second.supportedVersions)) {
    return fail('tls_hrr_hello_changed', 'the second ClientHello offers other versions than the first');
  }
  if (first.ech !== second.ech)
    return fail('tls_hrr_hello_changed', `encrypted_client_hello ${first.ech ? 'dropped from' : 'added to'} the second ClientHello`);
  return null;
}

function sameList<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
