/**
 * PROXY protocol v2, the binary header (HAProxy doc/proxy-protocol.txt section 2.2):
 *
 *   sig[12]  0D 0A 0D 0A 00 0D 0A 51 55 49 54 0A
 *   ver_cmd  high nibble version (2), low nibble command (LOCAL 0 / PROXY 1)
 *   fam      high nibble address family, low nibble transport
 *   len[2]   big-endian, "the length of the protocol header in bytes is always exactly 16 + this value"
 *   address block, then TLVs up to 16 + len
 *
 * Parsed from bytes, never strings. Each field is checked as soon as its byte has arrived, so a
 * bad header is rejected before the rest of it is waited for; the cap is checked before waiting.
 *
 * Decisions (each allowed by the spec, chosen for an allowlisting TCP proxy):
 * - AF_INET/AF_INET6 with DGRAM (0x12, 0x22) is rejected (pp_bad_transport). HAProxy accepts it;
 *   but ipgate only accepts TCP, so a header describing a UDP flow on a TCP connection is a
 *   misconfigured or lying sender. The spec lets a receiver fall back to UNSPEC for combinations
 *   it does not implement, and for UNSPEC "the receiver is free to accept the connection anyway
 *   and use the real endpoint addresses or to reject it"; falling back would silently attribute
 *   the client to the load balancer's address, which may itself be allowlisted -- we reject.
 *   The same goes for INET/INET6 with transport UNSPEC (0x10, 0x20), which the spec never lists.
 * - UNSPEC family (0x00..0x02) with PROXY: family 'unknown', "The receiver should ignore address
 *   information" -- the whole block is skipped, TLVs included (their offset is unknowable).
 * - AF_UNIX (0x31, 0x32): family 'unknown' (a path says nothing about the client; use the socket
 *   address); the 216-byte block is required, TLVs after it are kept.
 * - LOCAL: "the receiver must accept this connection as valid and must use the real connection
 *   endpoints and discard the protocol block including the family which is ignored" -- block and
 *   TLVs discarded, but the version/command/family nibbles must still be assigned values
 *   ("other values ... must be rejected as invalid by receivers"), and the cap still applies.
 */
import {
  V2_ADDR_LEN_INET,
  V2_ADDR_LEN_INET6,
  V2_ADDR_LEN_UNIX,
  V2_AF_INET,
  V2_AF_INET6,
  V2_AF_UNIX,
  V2_AF_UNSPEC,
  V2_CMD_LOCAL,
  V2_CMD_PROXY,
  V2_FIXED_LENGTH,
  V2_SIGNATURE,
  V2_TRANSPORT_DGRAM,
  V2_TRANSPORT_STREAM,
  V2_VERSION,
} from './constants';
import { fail, MORE, NONE } from './header';
import type { DecodeResult, ProxyHeader } from './header';
import { formatIPv4, formatIPv6 } from '../address/canonical';
import { walkTlvs } from './tlv';

const OFFSET_VER_CMD = 12;
const OFFSET_FAM = 13;
const OFFSET_LEN = 14;

function skipped(command: 'proxy' | 'local', length: number): DecodeResult {
  const header: ProxyHeader = { version: 2, command, family: 'unknown', source: null, destination: null, tlvs: [] };
  return { kind: 'done', header, length };
}

/**
 * Decodes a v2 header at the start of buf. Precondition: buf.length >= 1 and buf[0] is 0x0D.
 * `maxLength` caps 16 + len. Never reads past buf.length.
 */
export function decodeV2(buf: Buffer, maxLength: number): DecodeResult {
  const sigLength = V2_SIGNATURE.length;
  const seen = Math.min(buf.length, sigLength);
  for (let k = 0; k < seen; k++) if (buf[k] !== V2_SIGNATURE[k]) return NONE;
  if (buf.length <= OFFSET_VER_CMD) return MORE;

  const verCmd = buf[OFFSET_VER_CMD]!;
  // "it must always be sent as \x2 and the receiver must only accept this value."
  if (verCmd >> 4 !== V2_VERSION) return fail('pp_bad_version', 'v2 version nibble is not 2');
  const command = verCmd & 0x0f;
  // "other values are unassigned ... Receivers must drop connections presenting unexpected values"
  if (command !== V2_CMD_LOCAL && command !== V2_CMD_PROXY) return fail('pp_bad_command', 'v2 command is neither LOCAL nor PROXY');
  if (buf.length <= OFFSET_FAM) return MORE;

  const fam = buf[OFFSET_FAM]!;
  const family = fam >> 4;
  const transport = fam & 0x0f;
  // Family and transport: "other values are unspecified ... and must be rejected as invalid".
  if (family > V2_AF_UNIX) return fail('pp_bad_family', 'v2 address family is not UNSPEC, INET, INET6 or UNIX');
  if (transport > V2_TRANSPORT_DGRAM) return fail('pp_bad_transport', 'v2 transport is not UNSPEC, STREAM or DGRAM');
  if (buf.length < V2_FIXED_LENGTH) return MORE;

  const total = V2_FIXED_LENGTH + ((buf[OFFSET_LEN]! << 8) | buf[OFFSET_LEN + 1]!);
  if (total > maxLength) return fail('pp_too_long', `v2 header length exceeds the ${maxLength}-byte cap`);

  if (command === V2_CMD_LOCAL) {
    // "Receivers MUST always consider this field to skip the appropriate number of bytes and must
    // not assume zero is presented for LOCAL connections."
    return buf.length < total ? MORE : skipped('local', total);
  }

  let addressLength: number;
  switch (family) {
    case V2_AF_UNSPEC:
      return buf.length < total ? MORE : skipped('proxy', total);
    case V2_AF_INET:
    case V2_AF_INET6:
      if (transport !== V2_TRANSPORT_STREAM) {
        return fail('pp_bad_transport', 'v2 IPv4/IPv6 transport is not STREAM (ipgate proxies TCP only)');
      }
      addressLength = family === V2_AF_INET ? V2_ADDR_LEN_INET : V2_ADDR_LEN_INET6;
      break;
    default:
      addressLength = V2_ADDR_LEN_UNIX;
  }
  // Checked before waiting: a len too short for the family can never become valid.
  if (total - V2_FIXED_LENGTH < addressLength) {
    return fail('pp_bad_length', 'v2 length is shorter than the address block of its family');
  }
  // "The receiver must not start to parse an address before the whole address block is received."
  if (buf.length < total) return MORE;

  const tlvs = walkTlvs(buf, V2_FIXED_LENGTH + addressLength, total);
  if (tlvs === null) return fail('pp_bad_tlv', 'v2 TLV overruns the header or leaves stray bytes');

  let header: ProxyHeader;
  if (family === V2_AF_UNIX) {
    header = { version: 2, command: 'proxy', family: 'unknown', source: null, destination: null, tlvs };
  } else if (family === V2_AF_INET) {
    // union proxy_addr.ipv4_addr: src_addr, dst_addr, src_port, dst_port -- network byte order.
    header = {
      version: 2,
      command: 'proxy',
      family: 'tcp4',
      source: { address: formatIPv4(buf, 16), port: (buf[24]! << 8) | buf[25]! },
      destination: { address: formatIPv4(buf, 20), port: (buf[26]! << 8) | buf[27]! },
      tlvs,
    };
  } else {
    // union proxy_addr.ipv6_addr: src_addr[16], dst_addr[16], src_port, dst_port.
    header = {
      version: 2,
      command: 'proxy',
      family: 'tcp6',
      source: { address: formatIPv6(buf, 16), port: (buf[48]! << 8) | buf[49]! },
      destination: { address: formatIPv6(buf, 32), port: (buf[50]! << 8) | buf[51]! },
      tlvs,
    };
  }
  return { kind: 'done', header, length: total };
}
