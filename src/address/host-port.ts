import net from 'node:net';

export interface HostPort {
  host: string;
  port: number;
}

/**
 * `host:port`, `[v6]:port`. The host is an IP address or a DNS name (upstreams are often Service
 * names in Kubernetes). Returns a message instead of throwing: config validation collects them all.
 */
export function parseHostPort(text: string, allowPortZero: boolean): HostPort | string {
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0 || text[close + 1] !== ':') return 'expected "[IPv6]:port"';
    host = text.slice(1, close);
    if (!net.isIPv6(host)) return `"${host}" is not an IPv6 address`;
    portText = text.slice(close + 2);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon <= 0) return 'expected "host:port"';
    host = text.slice(0, colon);
    if (host.includes(':')) return 'an IPv6 address must be written in brackets: "[::1]:port"';
    if (!net.isIPv4(host) && !/^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$/.test(host)) {
      return `"${host}" is neither an IPv4 address nor a host name`;
    }
    portText = text.slice(colon + 1);
  }
  if (!/^[0-9]+$/.test(portText)) return portText === '' ? 'the port is missing after ":"' : `port "${portText}" is not a number`;
  if (portText.length > 1 && portText.startsWith('0')) return `port "${portText}" has a leading zero`;
  const port = Number(portText);
  if (port > 65535) return `port ${portText.length > 12 ? `${portText.slice(0, 12)}...` : portText} out of range (0-65535)`;
  if (port === 0 && !allowPortZero) return 'port 0 is not a valid destination';
  return { host, port };
}
