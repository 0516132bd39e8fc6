/**
 * The admin API answers only requests addressed to it by an IP literal, `localhost`, or a name the
 * operator listed (`admin.allowedHosts`): anything else is 421 Misdirected Request (RFC 9110 15.5.20).
 *
 * Why: DNS rebinding. A page a browser on the admin host loads from evil.example can re-point
 * evil.example at 127.0.0.1 and then read `/readyz`, `/metrics` and `/openapi.json` (public routes)
 * through the browser, which still sends `Host: evil.example`. A legitimate client names the address
 * it connects to (an IP, localhost, or the admin Service's DNS name, which the chart lists).
 *
 * A request without Host is allowed: HTTP/1.1 requires one (Node answers 400 before any route), so
 * only HTTP/1.0 gets here without it, and a browser, which a rebinding attack needs, always sends one.
 */
import net from 'node:net';

type HostVerdict = { ok: true } | { ok: false; message: string };

export class HostAllowlist {
  private readonly names: ReadonlySet<string>;

  constructor(allowed: readonly string[]) {
    this.names = new Set(allowed.map(normaliseName));
  }

  check(host: string | undefined): HostVerdict {
    if (host === undefined) return { ok: true };
    const name = hostPart(host);
    if (name !== null) {
      if (name.ip || name.host === 'localhost' || this.names.has(name.host)) return { ok: true };
    }
    return {
      ok: false,
      message:
        `Host ${JSON.stringify(host.slice(0, 256))} is not an address of this admin API: use an IP address or localhost, ` +
        'or add the name to admin.allowedHosts',
    };
  }
}

/** Lower case without a trailing dot: `Admin.Example.` and `admin.example` are one name. */
function normaliseName(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** The host of a Host header without its port; null when it is not `host[:port]` / `[v6][:port]`. */
export function hostPart(header: string): { host: string; ip: boolean } | null {
  let host: string;
  let rest: string;
  if (header.startsWith('[')) {
    const close = header.indexOf(']');
    if (close < 0) return null;
    host = header.slice(1, close);
    if (!net.isIPv6(host)) return null;
    rest = header.slice(close + 1);
    if (rest !== '' && !/^:[0-9]{1,5}$/.test(rest)) return null;
    return { host, ip: true };
  }
  const colon = header.indexOf(':');
  host = colon < 0 ? header : header.slice(0, colon);
  rest = colon < 0 ? '' : header.slice(colon);
  if (rest !== '' && !/^:[0-9]{1,5}$/.test(rest)) return null; // a second colon: an unbracketed IPv6, or junk
  if (host === '') return null;
  return { host: normaliseName(host), ip: net.isIPv4(host) };
}
