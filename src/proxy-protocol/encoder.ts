/**
 * Outbound PROXY headers, written before any payload on each upstream TCP connection (docs/architecture.md,
 * "Forwarding"). One call per forwarded connection, so v2 is built straight into one Buffer from
 * the precomputed signature; v1 is one template string (bench/micro/pp-decode.ts measures both).
 *
 * Addresses are canonical strings from sockets; a v4-mapped address is written as the IPv4 client
 * it is. When source and destination families differ, both are written as IPv6 (the IPv4 one
 * v4-mapped) under TCP6 / AF_INET6, since one header has one family.
 *
 * An invalid address, port or TLV here is a bug in ipgate (sockets report valid addresses), not a
 * peer fault, so it throws a TypeError with code ERR_PP_ENCODE_INPUT instead of returning a value.
 */
import { Buffer } from 'node:buffer';
import {
  V2_ADDR_LEN_INET,
  V2_ADDR_LEN_INET6,
  V2_AF_INET,
  V2_AF_INET6,
  V2_CMD_LOCAL,
  V2_CMD_PROXY,
  V2_FIXED_LENGTH,
  V2_SIGNATURE,
  V2_TRANSPORT_STREAM,
  V2_VERSION,
} from './constants';
import type { ProxyAddress, Tlv } from './header';
import { addressBytes, formatIPv4 } from '../address/canonical';
import { tlvsLength, writeTlvs } from './tlv';

const VER_CMD_PROXY = (V2_VERSION << 4) | V2_CMD_PROXY;
const FAM_TCP4 = (V2_AF_INET << 4) | V2_TRANSPORT_STREAM;
const FAM_TCP6 = (V2_AF_INET6 << 4) | V2_TRANSPORT_STREAM;
const MAX_V2_BODY = 0xffff;

/**
 * LOCAL, AF_UNSPEC, len 0: "When a sender presents a LOCAL connection, it should not present any
 * address so it sets this field to zero." The sender "should use this family when sending LOCAL".
 */
const V2_LOCAL = Buffer.concat([V2_SIGNATURE, Buffer.from([(V2_VERSION << 4) | V2_CMD_LOCAL, 0x00, 0x00, 0x00])]);

// Scratch for parsed addresses (encoding is synchronous): source at 0, destination at 16.
const scratch = new Uint8Array(32);

export class ProxyEncodeError extends TypeError {
  readonly code = 'ERR_PP_ENCODE_INPUT';
}

function checkPort(port: number, which: string): void {
  if (!Number.isInteger(port) || port < 0 || port > 0xffff) {
    throw new ProxyEncodeError(`PROXY encoder: ${which} port ${String(port)} is not an integer in 0..65535`);
  }
}

// The last address parsed into each scratch slot (0: source, 16: destination) and its family.
// The destination is the listener's own address on every connection without an inbound PROXY
// header, so its parse (a third of the encoder's time in a profile) is skipped; comparing a
// 10-15 character string costs less than parsing it. bench/README.md "Hot path".
let lastSrc = '';
let lastSrcFamily: 0 | 4 | 6 = 0;
let lastDst = '';
let lastDstFamily: 0 | 4 | 6 = 0;

function parseOrThrow(address: string, off: number, which: string): 4 | 6 {
  if (off === 0 ? address === lastSrc : address === lastDst) return off === 0 ? (lastSrcFamily as 4 | 6) : (lastDstFamily as 4 | 6);
  const family = typeof address === 'string' ? addressBytes(address, scratch, off) : 0;
  if (family === 0) {
    // Forget the slot's last address (kept in step with the slot's bytes).
    if (off === 0) lastSrc = '';
    else lastDst = '';
    throw new ProxyEncodeError(`PROXY encoder: ${which} address ${JSON.stringify(address)} is not an IP address`);
  }
  if (off === 0) {
    lastSrc = address;
    lastSrcFamily = family;
  } else {
    lastDst = address;
    lastDstFamily = family;
  }
  return family;
}

// The 12 signature bytes as a plain array: written by a loop the JIT unrolls, where
// Buffer#copy is a call into C++ per header.
const SIGNATURE: readonly number[] = [...V2_SIGNATURE];

// Byte loops rather than out.set(scratch.subarray(...)): a subarray is an object allocation per
// address, measurable at this size (bench/micro/pp-decode.ts).
function copyScratch(out: Buffer, to: number, from: number, count: number): void {
  for (let k = 0; k < count; k++) out[to + k] = scratch[from + k]!;
}

/** Writes the IPv4 at scratch[from..from+4) as `::ffff:a.b.c.d` into out[to..to+16). */
function writeMapped(out: Buffer, to: number, from: number): void {
  for (let k = 0; k < 10; k++) out[to + k] = 0;
  out[to + 10] = 0xff;
  out[to + 11] = 0xff;
  copyScratch(out, to + 12, from, 4);
}

/** `PROXY TCP4|TCP6 <src> <dst> <sport> <dport>\r\n` (section 2.1). */
export function encodeProxyV1(src: ProxyAddress, dst: ProxyAddress): Buffer {
  const srcFamily = parseOrThrow(src.address, 0, 'source');
  const dstFamily = parseOrThrow(dst.address, 16, 'destination');
  checkPort(src.port, 'source');
  checkPort(dst.port, 'destination');
  // A mapped input ("::ffff:1.2.3.4") is re-formatted from bytes to be plain; a plain dotted quad
  // passed the strict parse, so it is already canonical and is used as is.
  let srcText = srcFamily === 4 && src.address.charCodeAt(0) === 0x3a ? formatIPv4(scratch, 0) : src.address;
  let dstText = dstFamily === 4 && dst.address.charCodeAt(0) === 0x3a ? formatIPv4(scratch, 16) : dst.address;
  let proto = 'TCP4';
  if (srcFamily !== 4 || dstFamily !== 4) {
    proto = 'TCP6';
    // The dotted tail is what inet_ntop (HAProxy, nginx) writes for a mapped address; RFC 4291
    // text that strict receivers, ours included, accept.
    if (srcFamily === 4) srcText = `::ffff:${srcText}`;
    if (dstFamily === 4) dstText = `::ffff:${dstText}`;
  }
  return Buffer.from(`PROXY ${proto} ${srcText} ${dstText} ${src.port} ${dst.port}\r\n`, 'latin1');
}

/** v2 PROXY command, STREAM transport, AF_INET or AF_INET6, then `tlvs` in order. */
export function encodeProxyV2(src: ProxyAddress, dst: ProxyAddress, tlvs?: readonly Tlv[]): Buffer {
  const srcFamily = parseOrThrow(src.address, 0, 'source');
  const dstFamily = parseOrThrow(dst.address, 16, 'destination');
  checkPort(src.port, 'source');
  checkPort(dst.port, 'destination');
  let extra = 0;
  if (tlvs !== undefined && tlvs.length > 0) {
    for (const tlv of tlvs) {
      if (!Number.isInteger(tlv.type) || tlv.type < 0 || tlv.type > 0xff || tlv.value.length > 0xffff) {
        throw new ProxyEncodeError('PROXY encoder: TLV type must be 0..255 and value at most 65535 bytes');
      }
    }
    extra = tlvsLength(tlvs);
  }
  const inet = srcFamily === 4 && dstFamily === 4;
  const addressLength = inet ? V2_ADDR_LEN_INET : V2_ADDR_LEN_INET6;
  const body = addressLength + extra;
  if (body > MAX_V2_BODY) throw new ProxyEncodeError('PROXY encoder: TLVs make the v2 header longer than 65535 + 16 bytes');

  // allocUnsafe: every byte is written below.
  const out = Buffer.allocUnsafe(V2_FIXED_LENGTH + body);
  for (let k = 0; k < 12; k++) out[k] = SIGNATURE[k]!;
  out[12] = VER_CMD_PROXY;
  out[13] = inet ? FAM_TCP4 : FAM_TCP6;
  out[14] = body >> 8;
  out[15] = body & 0xff;
  let pos = V2_FIXED_LENGTH;
  if (inet) {
    copyScratch(out, pos, 0, 4);
    copyScratch(out, pos + 4, 16, 4);
    pos += 8;
  } else {
    if (srcFamily === 4) writeMapped(out, pos, 0);
    else copyScratch(out, pos, 0, 16);
    if (dstFamily === 4) writeMapped(out, pos + 16, 16);
    else copyScratch(out, pos + 16, 16, 16);
    pos += 32;
  }
  out[pos] = src.port >> 8;
  out[pos + 1] = src.port & 0xff;
  out[pos + 2] = dst.port >> 8;
  out[pos + 3] = dst.port & 0xff;
  pos += 4;
  if (extra > 0) writeTlvs(tlvs!, out, pos);
  return out;
}

/** A LOCAL header (health checks): a fresh copy, so a caller cannot alter the shared template. */
export function encodeProxyV2Local(): Buffer {
  return Buffer.from(V2_LOCAL);
}
