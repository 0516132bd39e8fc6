/**
 * The checks of a listener's HTTP/2 options the schema cannot express (schema/http2.ts,
 * `http.upstreamProtocol`, `http.upstreamCA` and their route forms): CA files exist and hold
 * certificates (paths made absolute, relative to the config file), and the options agree with
 * each other. Every problem names the field and quotes the value.
 */
import path from 'node:path';
import { loadCaBundle } from '../tls/cert-pair';
import { problem } from '../schema/problem';
import type { ListenerConfig } from '../schema/config';

export function checkHttp2(at: string, l: ListenerConfig, baseDir: string | null, problems: string[], warnings: string[]): void {
  const h = l.http;
  const abs = (file: string): string => path.resolve(baseDir ?? process.cwd(), file);
  const ca = (field: string, written: string): string => {
    const file = abs(written);
    const r = loadCaBundle(file);
    if (typeof r === 'string') problems.push(problem(field, written, r));
    return file;
  };
  if (h.http2.cleartext && l.tls !== null && l.tls !== undefined) {
    warnings.push(
      problem(`${at}.http.http2.cleartext`, true, 'is ignored on a TLS listener (HTTP/2 comes by ALPN there: http.http2.enabled)'),
    );
  }
  if (h.upstreamCA !== null) {
    if (h.upstreamProtocol !== 'h2')
      warnings.push(
        problem(`${at}.http.upstreamCA`, h.upstreamCA, `is ignored: http.upstreamProtocol is "${h.upstreamProtocol}" (only h2 dials TLS)`),
      );
    h.upstreamCA = ca(`${at}.http.upstreamCA`, h.upstreamCA);
  }
  const shares = (p: string): boolean => p !== 'http1';
  if (
    l.outboundProxyProtocol !== 'none' &&
    (shares(h.upstreamProtocol) || (l.routes ?? []).some((r) => shares(r.http?.upstreamProtocol ?? 'http1')))
  ) {
    problems.push(
      problem(
        `${at}.outboundProxyProtocol`,
        l.outboundProxyProtocol,
        "cannot be sent to HTTP/2 upstreams (upstreamProtocol h2c or h2): their connection is shared by every client's streams, and a PROXY header names one client",
      ),
    );
  }
  (l.routes ?? []).forEach((r, i) => {
    const rh = r.http;
    if (rh?.upstreamCA === undefined) return;
    const protocol = rh.upstreamProtocol ?? h.upstreamProtocol;
    const field = `${at}.routes[${i}].http.upstreamCA`;
    if (protocol !== 'h2')
      warnings.push(problem(field, rh.upstreamCA, `is ignored: the route's upstreamProtocol is "${protocol}" (only h2 dials TLS)`));
    rh.upstreamCA = ca(field, rh.upstreamCA);
  });
}
