/**
 * The decoded shape of a PROXY header and the decode result. Lives apart from decoder.ts so v1.ts
 * and v2.ts can build results without importing the dispatcher; decoder.ts re-exports all of it.
 */
import type { PpReason } from './codes';

/** `address` is canonical: IPv4 dotted, IPv6 RFC 5952 lower-case compressed, v4-mapped -> IPv4. */
export interface ProxyAddress {
  address: string;
  port: number;
}

/** A v2 TLV, value kept raw (a copy: it must not pin or alias the connection's read buffer). */
export interface Tlv {
  type: number;
  value: Buffer;
}

export interface ProxyHeader {
  version: 1 | 2;
  /** v1 is always 'proxy'. */
  command: 'proxy' | 'local';
  /**
   * As declared on the wire. 'unknown' for v1 UNKNOWN, v2 UNSPEC, v2 AF_UNIX and v2 LOCAL: the
   * caller uses the socket address. A 'tcp6' header may carry v4-mapped addresses, which are
   * reported as IPv4 (one spelling per address, docs/architecture.md "Client identity").
   */
  family: 'tcp4' | 'tcp6' | 'unknown';
  /** null whenever family is 'unknown'. */
  source: ProxyAddress | null;
  destination: ProxyAddress | null;
  /** v2 PROXY over INET/INET6/UNIX only; empty for v1, LOCAL and UNSPEC. */
  tlvs: Tlv[];
}

export type DecodeResult =
  /** A valid prefix of a header: call again with more bytes appended. */
  | { kind: 'more' }
  /** These bytes cannot start any PROXY header (plain traffic, for 'optional' mode). */
  | { kind: 'none' }
  /** Header complete; `length` bytes are the header, the bytes after it are payload, untouched. */
  | { kind: 'done'; header: ProxyHeader; length: number }
  | { kind: 'error'; reason: PpReason; message: string };

export interface DecodeOptions {
  /** Cap on a v2 header's total size, 16 + len (default DEFAULT_MAX_V2_LENGTH = 4096). */
  maxV2Length?: number;
}

/** Shared, frozen: the two answers that carry no data are allocated once. */
export const MORE: DecodeResult = Object.freeze({ kind: 'more' });
export const NONE: DecodeResult = Object.freeze({ kind: 'none' });

export function fail(reason: PpReason, message: string): DecodeResult {
  return { kind: 'error', reason, message };
}
