/**
 * Failure codes of the PROXY protocol stage.
 *
 * One code per way a header can be bad (HAProxy's `PRX_*` catalogue is the model): the code is
 * both the log field and the `reason` metric label, so the set is closed and small. The sentence
 * is what an operator reads next to the code; keep it one line.
 */
export type PpReason =
  | 'pp_truncated'
  | 'pp_bad_signature'
  | 'pp_bad_version'
  | 'pp_bad_command'
  | 'pp_bad_family'
  | 'pp_bad_transport'
  | 'pp_bad_length'
  | 'pp_bad_address'
  | 'pp_bad_port'
  | 'pp_bad_syntax'
  | 'pp_bad_crlf'
  | 'pp_too_long'
  | 'pp_bad_tlv'
  | 'pp_timeout'
  | 'pp_untrusted'
  | 'pp_missing';

export const PP_REASONS: Readonly<Record<PpReason, string>> = Object.freeze({
  // Listener-level: decodeProxyHeader() never returns it (it answers 'more'); the listener does
  // when the peer half-closes or resets before the header is complete.
  pp_truncated: 'The peer closed the connection before a complete PROXY header arrived.',
  pp_bad_signature: 'The bytes start with "PROXY" but are not followed by the single space v1 requires.',
  pp_bad_version: 'The v2 version nibble is not 2 (spec: "the receiver must only accept this value").',
  pp_bad_command: 'The v2 command is neither LOCAL (0) nor PROXY (1).',
  pp_bad_family: 'The address family is not one the spec defines (v1: not TCP4/TCP6/UNKNOWN; v2: family nibble > 3).',
  pp_bad_transport:
    'The v2 transport is unassigned, or is not STREAM for an IPv4/IPv6 family (a UDP or unspecified transport cannot describe this TCP connection).',
  pp_bad_length: 'The v2 length field is shorter than the address block its family requires.',
  pp_bad_address:
    'An address is malformed or does not match the declared family (leading zeros, octet > 255, zone id, IPv6 under TCP4, ...).',
  pp_bad_port: 'A v1 port is not a decimal integer in 0..65535 without leading zeros.',
  pp_bad_syntax: 'The v1 line is not exactly the fields and single spaces the spec requires, or holds a non-printable byte.',
  pp_bad_crlf: 'The v1 line ends with a lone LF, or has a CR not followed by LF.',
  pp_too_long: 'The header exceeds its size limit (v1: no CRLF within 107 bytes; v2: 16 + length above maxV2Length).',
  pp_bad_tlv: 'A v2 TLV overruns the header, or bytes too few to form a TLV are left at its end.',
  // Listener-level codes, in the catalogue so every close reason has one home.
  pp_timeout: 'No complete PROXY header arrived within headerTimeoutMs.',
  pp_untrusted: 'A peer outside proxyProtocol.trustedSources sent a PROXY header (or any connection in required mode).',
  pp_missing: 'A trusted peer on a required-mode listener sent data that is not a PROXY header.',
});
