/**
 * Who the client is, decided from what the listener knows: its PROXY mode, whether the peer is a
 * trusted source, and the decoder's answer. Pure functions, used by the listener on every
 * connection and by the admin API's `POST /v1/explain`, so the explanation cannot drift from what
 * the data path does.
 *
 * Two steps, because the listener must decide some connections before reading any byte:
 *   1. `beforeHeader`: off -> the socket is the client; required + untrusted peer -> closed
 *      (`pp_untrusted`: only the balancers may connect, anyone else could forge their header);
 *      otherwise read a header.
 *   2. `afterHeader`: once the decoder answers done / none / error.
 *
 * Outcomes carry the `version/result` label of `ListenerStats.proxyHeader` (the metric's labels).
 */
import type { Via } from '../connection/connection';
import type { PpReason } from '../proxy-protocol/codes';
import type { DecodeResult, ProxyAddress, Tlv } from '../proxy-protocol/decoder';

export type ProxyMode = 'off' | 'optional' | 'required';
export type HeaderVersion = 'v1' | 'v2' | 'none' | 'unknown';

/** The connection is closed: `reason` is the close result and the denial reason. */
interface IdentityRejected {
  ok: false;
  reason: PpReason;
  version: HeaderVersion;
  /** The decoder's sentence for a malformed header. */
  detail?: string;
}

/** The client is known. `source` null: the socket peer is the client. */
interface IdentityResolved {
  ok: true;
  via: Via;
  /** `ListenerStats.proxyHeader` key, e.g. `v2/ok`, `v2/local`, `none/none`, `none/off`. */
  label: string;
  source: ProxyAddress | null;
  destination: ProxyAddress | null;
  tlvs: readonly Tlv[];
  /** Header bytes to drop before the payload (0 without a header). */
  headerLength: number;
}

export type IdentityOutcome = IdentityRejected | IdentityResolved;

const NO_TLVS: readonly Tlv[] = Object.freeze([]);
const SOCKET_OFF: IdentityResolved = Object.freeze({
  ok: true,
  via: 'socket',
  label: 'none/off',
  source: null,
  destination: null,
  tlvs: NO_TLVS,
  headerLength: 0,
});
const SOCKET_PLAIN: IdentityResolved = Object.freeze({
  ok: true,
  via: 'socket',
  label: 'none/none',
  source: null,
  destination: null,
  tlvs: NO_TLVS,
  headerLength: 0,
});
/**
 * A trusted balancer that sent no header in `optional` mode: allowed (its own health checks, say),
 * but counted apart from plain public traffic, so "the balancer stopped sending PROXY" shows.
 */
const SOCKET_TRUSTED_PLAIN: IdentityResolved = Object.freeze({
  ok: true,
  via: 'socket',
  label: 'none/trusted_none',
  source: null,
  destination: null,
  tlvs: NO_TLVS,
  headerLength: 0,
});
const UNTRUSTED_UNREAD: IdentityRejected = Object.freeze({ ok: false, reason: 'pp_untrusted', version: 'none' });

/** Step 1, at accept. `null`: read a header (then `afterHeader`). */
export function beforeHeader(mode: ProxyMode, trusted: boolean): IdentityOutcome | null {
  if (mode === 'off') return SOCKET_OFF;
  if (mode === 'required' && !trusted) return UNTRUSTED_UNREAD;
  return null;
}

/**
 * Step 2: the decoder's final answer (never `more`) for the bytes read, whose first byte tells
 * the version of a header that could not be decoded.
 */
export function afterHeader(
  r: Exclude<DecodeResult, { kind: 'more' }>,
  firstByte: number,
  mode: ProxyMode,
  trusted: boolean,
): IdentityOutcome {
  if (r.kind === 'none') {
    if (mode === 'required') return { ok: false, reason: 'pp_missing', version: 'none' };
    return trusted ? SOCKET_TRUSTED_PLAIN : SOCKET_PLAIN;
  }
  const version = firstByte === 0x50 /* P */ ? 'v1' : 'v2';
  // Checked before the header's validity: an untrusted peer learns nothing about our parser.
  if (!trusted) return { ok: false, reason: 'pp_untrusted', version };
  if (r.kind === 'error') return { ok: false, reason: r.reason, version, detail: r.message };
  const h = r.header;
  if (h.command === 'proxy' && h.source !== null && h.destination !== null) {
    return {
      ok: true,
      via: h.version === 1 ? 'proxy-v1' : 'proxy-v2',
      label: `${version}/ok`,
      source: h.source,
      destination: h.destination,
      tlvs: h.tlvs,
      headerLength: r.length,
    };
  }
  // LOCAL (health checks from the balancer itself) and UNKNOWN / UNSPEC: the spec says to use the
  // real connection endpoints.
  return { ok: true, via: 'socket', label: `${version}/local`, source: null, destination: null, tlvs: h.tlvs, headerLength: r.length };
}
