/**
 * The one door to a Node internal the TLS stage needs: whether the client certificate verified.
 *
 * A server-side tls.TLSSocket built around an accepted socket (terminate.ts, which must run after
 * the PROXY stage, so it cannot be a tls.Server's own accept) lets OpenSSL finish the handshake
 * with any client certificate: Node's verify callback accepts everything and tls.Server checks
 * the result afterwards through the TLSWrap handle's `verifyError()`, which it does not do for a
 * TLSSocket it did not create (`authorized` stays false, `authorizationError` unset). This reads
 * the same result the same way. Where the method is missing (a Node that changed it), every
 * client certificate counts as not verified: the stage fails closed
 * (test/unit/tls/peer-verify.test.ts fails on such a Node).
 */
import type tls from 'node:tls';

interface TlsHandle {
  verifyError?: () => (Error & { code?: string }) | null;
}

/** True when this Node exposes the verification result where this module reads it. */
export function verifyErrorAvailable(socket: tls.TLSSocket): boolean {
  const handle = (socket as unknown as { _handle?: TlsHandle | null })._handle;
  return handle !== null && handle !== undefined && typeof handle.verifyError === 'function';
}

/**
 * null when the peer's certificate chain verified against the context's CA, else the OpenSSL
 * code (`UNABLE_TO_VERIFY_LEAF_SIGNATURE`, `CERT_HAS_EXPIRED`, ...), or `unverifiable` when
 * this Node does not say.
 */
export function peerVerifyError(socket: tls.TLSSocket): string | null {
  const handle = (socket as unknown as { _handle?: TlsHandle | null })._handle;
  if (handle === null || handle === undefined || typeof handle.verifyError !== 'function') return 'unverifiable';
  const err = handle.verifyError();
  return err === null || err === undefined ? null : (err.code ?? err.message);
}
