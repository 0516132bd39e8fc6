/**
 * v2 TLV vectors (section 2.2): "The first byte is the Type of the vector. The second two bytes
 * represent the length in bytes of the value ... and following the length field is the number of
 * bytes specified by the length." Values are kept raw; nested SSL sub-TLVs are not walked.
 */
import { Buffer } from 'node:buffer';
import { TLV_HEADER_LENGTH } from './constants';
import type { Tlv } from './header';

/**
 * Walks the TLVs in buf[start, end). Returns null when a TLV's declared length runs past `end`
 * or 1-2 stray bytes are left (too few for a TLV header): both mean the sender's length
 * arithmetic is wrong, so nothing in the header can be trusted. Caller guarantees end <= buf.length.
 */
export function walkTlvs(buf: Buffer, start: number, end: number): Tlv[] | null {
  const tlvs: Tlv[] = [];
  let pos = start;
  while (pos < end) {
    if (end - pos < TLV_HEADER_LENGTH) return null;
    const type = buf[pos]!;
    const length = (buf[pos + 1]! << 8) | buf[pos + 2]!;
    const valueStart = pos + TLV_HEADER_LENGTH;
    // Bounds checked before the copy is allocated.
    if (length > end - valueStart) return null;
    // A copy, not a view: the header outlives the read buffer, and a view would pin the whole
    // chunk (payload included) and change if the caller reuses that memory.
    tlvs.push({ type, value: Buffer.from(buf.subarray(valueStart, valueStart + length)) });
    pos = valueStart + length;
  }
  return tlvs;
}

/** Encoded size of `tlvs` (3 + value length each). */
export function tlvsLength(tlvs: readonly Tlv[]): number {
  let total = 0;
  for (let k = 0; k < tlvs.length; k++) total += TLV_HEADER_LENGTH + tlvs[k]!.value.length;
  return total;
}

/** Writes `tlvs` at out[off..]; the caller sized `out` with tlvsLength(). Returns the end offset. */
export function writeTlvs(tlvs: readonly Tlv[], out: Buffer, off: number): number {
  let pos = off;
  for (let k = 0; k < tlvs.length; k++) {
    const tlv = tlvs[k]!;
    out[pos] = tlv.type;
    out[pos + 1] = tlv.value.length >> 8;
    out[pos + 2] = tlv.value.length & 0xff;
    tlv.value.copy(out, pos + TLV_HEADER_LENGTH);
    pos += TLV_HEADER_LENGTH + tlv.value.length;
  }
  return pos;
}
