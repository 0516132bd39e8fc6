/**
 * decodeProxyHeader: the one entry point of the inbound PROXY stage.
 *
 * Stateless over the bytes received so far: the listener appends each chunk and calls again with
 * the concatenation (a header may arrive split across any number of TCP segments, docs/architecture.md). It
 * returns a value for every input -- need more / none / done / error, as Envoy's filter does --
 * never throws, never reads past buf.length, and never reports a length > buf.length.
 *
 * "none" is decided as early as possible: a first byte that is neither 'P' (v1) nor CR (v2), or
 * a prefix that leaves both signatures. Per the spec the listener must not *guess* on public
 * traffic; 'none' only serves trusted peers in 'optional' mode and the pp_untrusted check.
 */
import { DEFAULT_MAX_V2_LENGTH, V1_SIGNATURE, V2_SIGNATURE } from './constants';
import { MORE, NONE } from './header';
import type { DecodeOptions, DecodeResult } from './header';
import { decodeV1 } from './v1';
import { decodeV2 } from './v2';

export type { DecodeOptions, DecodeResult, ProxyAddress, ProxyHeader, Tlv } from './header';

const V1_FIRST = V1_SIGNATURE[0]!;
const V2_FIRST = V2_SIGNATURE[0]!;

export function decodeProxyHeader(buf: Buffer, options?: DecodeOptions): DecodeResult {
  if (buf.length === 0) return MORE;
  const first = buf[0];
  if (first === V1_FIRST) return decodeV1(buf);
  if (first === V2_FIRST) return decodeV2(buf, options?.maxV2Length ?? DEFAULT_MAX_V2_LENGTH);
  return NONE;
}
