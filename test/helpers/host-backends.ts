/**
 * Backends that choose what to serve by the request's host, each the way a real stack does, and
 * report what they served, for the Host tests (a route's allowlist holds only if the backend
 * serves the host the route was chosen for):
 * - a Node app that routes as many do, `new URL(req.url, 'http://' + req.headers.host)` (WHATWG
 *   URL: percent-decoding, IDNA mapping, userinfo), and as Express does with `trust proxy`
 *   (req.hostname: the first X-Forwarded-Host, else Host, the port cut);
 * - nginx with `server_name` blocks for www.example.com and admin.example.com and a default
 *   server (nginx lower-cases the Host and cuts a trailing dot before choosing the block).
 */
import http from 'node:http';
import type { Test } from 'tap';
import { freePort } from './net';
import { nginxHttpPreamble, startNginx } from './peers';
import { listenLoopback } from './http';

/** What the Node app saw and served. */
export interface UrlRouterReport {
  /** `new URL(req.url, 'http://' + Host).hostname`, or null when that throws. */
  url: string | null;
  pathname: string | null;
  /** Express's req.hostname with `trust proxy`: the first X-Forwarded-Host, else Host; no port. */
  express: string;
  host: string | null;
  xForwardedHost: string | null;
  forwarded: string | null;
}

/** The Node app: answers 200 with its UrlRouterReport as JSON. */
export async function urlRouterBackend(t: Test): Promise<number> {
  const server = http.createServer((req, res) => {
    const host = req.headers.host ?? null;
    let url: string | null = null;
    let pathname: string | null = null;
    try {
      const u = new URL(req.url ?? '/', `http://${host ?? ''}`);
      url = u.hostname;
      pathname = u.pathname;
    } catch {
      // an app would answer 400 or crash here; reported as null
    }
    const xfh = req.headers['x-forwarded-host'];
    const xForwardedHost = typeof xfh === 'string' ? xfh : null;
    const report: UrlRouterReport = {
      url,
      pathname,
      express: expressHostname(xForwardedHost ?? host ?? ''),
      host,
      xForwardedHost,
      forwarded: req.headers.forwarded ?? null,
    };
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(report));
  });
  return listenLoopback(t, server);
}

/** Express 4/5 req.hostname: the first of a list, the port cut (IPv6 brackets kept). */
function expressHostname(value: string): string {
  const first = value.includes(',') ? value.slice(0, value.indexOf(',')).trimEnd() : value;
  const offset = first.startsWith('[') ? first.indexOf(']') + 1 : 0;
  const colon = first.indexOf(':', offset);
  return colon === -1 ? first : first.slice(0, colon);
}

/** nginx with three server blocks on one port; each answers `nginx|<block>|$host|$request_uri`. */
export async function serverNameBackend(t: Test): Promise<number> {
  const port = await freePort();
  const block = (name: string, serverName: string, extra = ''): string => `server {
    listen 127.0.0.1:${port}${extra};
    server_name ${serverName};
    location / { return 200 "nginx|${name}|$host|$request_uri\\n"; }
  }`;
  const peer = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  large_client_header_buffers 4 32k;
  ${block('default', '_', ' default_server')}
  ${block('www', 'www.example.com')}
  ${block('admin', 'admin.example.com')}
}`,
    [port],
  );
  t.teardown(() => peer.stop());
  return port;
}
