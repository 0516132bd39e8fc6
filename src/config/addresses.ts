/**
 * Which addresses a configured bind or upstream means, for the collision and loop checks: an IP
 * literal is itself (IPv4-mapped IPv6 is the IPv4 address), `0.0.0.0` every IPv4 address, `::`
 * every address of both families (Node binds `::` dual stack), `localhost` 127.0.0.1 and ::1 (what
 * it resolves to on the hosts ipgate runs on). Any other DNS name is unknown until resolved, so it
 * only collides with the same name: a check must not refuse what it cannot know.
 */
import net from 'node:net';
import { parseAddress } from '../allowlist/cidr';
import type { HostPort } from '../address/host-port';

type Scope =
  | { kind: 'any' } // ::, dual stack
  | { kind: 'any4' } // 0.0.0.0
  | { kind: 'addresses'; addresses: readonly string[] }
  | { kind: 'name'; name: string };

function scopeOf(host: string): Scope {
  if (net.isIP(host) !== 0) {
    const a = parseAddress(host);
    const canonical = a.ok ? a.address : host.toLowerCase();
    if (canonical === '0.0.0.0') return { kind: 'any4' };
    if (canonical === '::') return { kind: 'any' };
    return { kind: 'addresses', addresses: [canonical] };
  }
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost') return { kind: 'addresses', addresses: ['127.0.0.1', '::1'] };
  return { kind: 'name', name };
}

const isV4 = (a: string): boolean => net.isIPv4(a);

/** Why two binds on the same port cannot both listen, or null when they can. */
export function bindCollision(a: HostPort, b: HostPort): string | null {
  if (a.port !== b.port || a.port === 0) return null;
  const sa = scopeOf(a.host);
  const sb = scopeOf(b.host);
  // "::" first: whatever a name resolves to, a bind needs a local address, and "::" covers them all.
  if (sa.kind === 'any' || sb.kind === 'any') return `port ${a.port} on "::" covers every IPv4 and IPv6 address`;
  if (sa.kind === 'name' || sb.kind === 'name') {
    return sa.kind === 'name' && sb.kind === 'name' && sa.name === sb.name ? 'the same address and port' : null;
  }
  if (sa.kind === 'any4' && sb.kind === 'any4') return 'the same address and port';
  if (sa.kind === 'any4' || sb.kind === 'any4') {
    const other = sa.kind === 'any4' ? sb : sa;
    if (other.kind === 'addresses' && other.addresses.some(isV4)) return `port ${a.port} on 0.0.0.0 covers every IPv4 address`;
    return null;
  }
  const shared = sa.kind === 'addresses' && sb.kind === 'addresses' ? sa.addresses.find((x) => sb.addresses.includes(x)) : undefined;
  return shared === undefined ? null : a.host === b.host ? 'the same address and port' : `both bind ${shared} port ${a.port}`;
}

/**
 * Whether connecting to `upstream` reaches the listener bound at `listen`: the same port and an
 * address the bind covers that is certainly this host's (loopback, the unspecified address, which
 * connects to the local host, or the bind's own address).
 */
export function loopsToItself(listen: HostPort, upstream: HostPort): boolean {
  if (listen.port === 0 || listen.port !== upstream.port) return false;
  const up = scopeOf(upstream.host);
  const bound = scopeOf(listen.host);
  if (up.kind === 'name' || bound.kind === 'name') return up.kind === 'name' && bound.kind === 'name' && up.name === bound.name;
  // Connecting to 0.0.0.0 or :: reaches the local host (Linux treats it as loopback).
  const targets = up.kind === 'addresses' ? up.addresses : up.kind === 'any4' ? ['127.0.0.1'] : ['::1'];
  return targets.some((t) => {
    if (bound.kind === 'addresses') return bound.addresses.includes(t);
    // A wildcard bind covers every local address, but only loopback is certainly local: 10.1.2.3
    // on the same port may well be another machine.
    if (bound.kind === 'any4') return isV4(t) && isLocal(t);
    return isLocal(t);
  });
}

function isLocal(a: string): boolean {
  return a === '::1' || a.startsWith('127.');
}
