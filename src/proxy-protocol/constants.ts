/**
 * Wire constants of the PROXY protocol (HAProxy doc/proxy-protocol.txt, sections 2.1 and 2.2).
 * Built once at load; the decoder and encoder only read them.
 */

/** v1 signature: "a string identifying the protocol : "PROXY" ( \x50 \x52 \x4F \x58 \x59 )". */
export const V1_SIGNATURE: Readonly<Buffer> = Buffer.from('PROXY', 'latin1');

/**
 * "If the CRLF sequence is not found in the first 107 characters, the receiver should declare the
 * line invalid" -- 107 is the worst case `PROXY UNKNOWN <ipv6> <ipv6> 65535 65535\r\n`.
 */
export const V1_MAX_LENGTH = 107;

/** v2 signature: "\x0D \x0A \x0D \x0A \x00 \x0D \x0A \x51 \x55 \x49 \x54 \x0A". */
export const V2_SIGNATURE: Readonly<Buffer> = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

/** Fixed part of a v2 header: signature, ver_cmd, fam, len (struct proxy_hdr_v2). */
export const V2_FIXED_LENGTH = 16;

/**
 * Default cap on a v2 header's total size (16 + len). The len field allows 65 551 bytes; a peer
 * (trusted but buggy, or any peer while the listener is still deciding whether it sent a header)
 * could then make us hold ~64 KiB per connection for the whole header timeout -- memory
 * exhaustion by many slow connections. 4096 leaves room for AF_UNIX (216 bytes of addresses) plus
 * the TLVs real senders add (ALPN, authority, SSL with client-cert CN, AWS/GCP/Azure ids), as
 * go-proxyproto's MaxV2HeaderSize does.
 */
export const DEFAULT_MAX_V2_LENGTH = 4096;

/** "The highest four bits contains the version ... it must always be sent as \x2". */
export const V2_VERSION = 0x2;
export const V2_CMD_LOCAL = 0x0;
export const V2_CMD_PROXY = 0x1;

export const V2_AF_UNSPEC = 0x0;
export const V2_AF_INET = 0x1;
export const V2_AF_INET6 = 0x2;
export const V2_AF_UNIX = 0x3;

export const V2_TRANSPORT_STREAM = 0x1;
export const V2_TRANSPORT_DGRAM = 0x2;

/** Address block sizes: "2*4 + 2*2 = 12", "2*16 + 2*2 = 36", "2*108 = 216". */
export const V2_ADDR_LEN_INET = 12;
export const V2_ADDR_LEN_INET6 = 36;
export const V2_ADDR_LEN_UNIX = 216;

/** A TLV is type (1 byte) + length (2 bytes, network order) + value. */
export const TLV_HEADER_LENGTH = 3;
