/**
 * Canonical client addresses.
 *
 * One spelling per address everywhere (allowlist checks, logs, headers, outbound PROXY headers):
 * an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack `[::]` listener reports for an
 * IPv4 peer) is the IPv4 address; IPv6 is lower-case RFC 5952 text as Node reports it. The same
 * canonical form as address/canonical.ts, which spells addresses read from text.
 */
import { scanIPv4 } from '../address/scan';

const MAPPED_PREFIX = '::ffff:';

/**
 * Canonical form of an address Node reported (socket.remoteAddress / localAddress).
 * Cheap on the hot path: a prefix test, no parsing, unless the mapped prefix is present.
 */
export function canonicalAddress(address: string): string {
  if (address.length > 7 && address.charCodeAt(0) === 58 /* : */ && address.toLowerCase().startsWith(MAPPED_PREFIX)) {
    const rest = address.slice(MAPPED_PREFIX.length);
    if (scanIPv4(rest, 0, rest.length) >= 0) return rest;
  }
  return address;
}

/** `1.2.3.4:80` / `[::1]:80`: how an address and port are written in logs and config. */
export function formatHostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
