/**
 * Backends that say which of their locations served a request, for the route tests of issue 27
 * (test/integration/route-differential.test.ts, route-path-params.test.ts). Each serves the same
 * site in its own way, and answers `loc=<location>` from the location that took the request:
 *
 *   host admin.example.com  any path                     -> admin-host
 *   host www.example.com    /admin, /admin/...           -> www-admin
 *                           /public, /public/...         -> www-public
 *                           anything else                -> www-root
 *   any other host                                       -> default
 *
 * - nginx: one `server` per name (`server_name`, the default server for other names) and
 *   `location` blocks with the route table's boundaries (`= /admin` and `/admin/`, so `/adminx`
 *   is not admin). `locationAdmin: 'prefix'` writes the common `location /admin` instead (a string
 *   prefix: it takes `/adminx` and `/admin;x=1/`).
 * - Tomcat 10 (helpers/tomcat.ts): one <Host> per name, static files whose content names the
 *   location (`admin/index.html` is www-admin), served by the DefaultServlet after Tomcat's own
 *   normalisation: path parameters cut per segment, then decoded, then dot segments.
 * - A WHATWG URL router in Node, as many apps route: `new URL(req.url, 'http://' + Host)`, the
 *   hostname, the pathname decoded once, prefixes compared case-insensitively (Express's routing
 *   unless `case sensitive routing` is set).
 * Every location's content is `loc=<name>\n`; a response without it served no location (a 404,
 * a redirect, a 400 of the backend's own).
 */
import http from 'node:http';
import type { Test } from 'tap';
import { freePort } from './net';
import { nginxHttpPreamble, startNginx } from './peers';
import { startTomcat } from './tomcat';
import { listenLoopback } from './http';

export type Location = 'admin-host' | 'www-admin' | 'www-public' | 'www-root' | 'default';

/** The location named in a response body, or null when none served it. */
export function servedLocation(body: string): Location | null {
  const m = /^loc=([a-z-]+)\n$/.exec(body);
  return m === null ? null : (m[1] as Location);
}

const say = (loc: Location): string => `return 200 "loc=${loc}\\n";`;

/** nginx with a server per name and a location per route. */
export async function locationNginx(t: Test, opts: { locationAdmin?: 'boundary' | 'prefix' } = {}): Promise<number> {
  const port = await freePort();
  const admin =
    opts.locationAdmin === 'prefix'
      ? `location /admin { ${say('www-admin')} }`
      : `location = /admin { ${say('www-admin')} }\n      location /admin/ { ${say('www-admin')} }`;
  const peer = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  server {
    listen 127.0.0.1:${port} default_server;
    server_name _;
    location / { ${say('default')} }
  }
  server {
    listen 127.0.0.1:${port};
    server_name admin.example.com;
    location / { ${say('admin-host')} }
  }
  server {
    listen 127.0.0.1:${port};
    server_name www.example.com;
    location / { ${say('www-root')} }
    ${admin}
    location = /public { ${say('www-public')} }
    location /public/ { ${say('www-public')} }
  }
}`,
    [port],
  );
  t.teardown(() => peer.stop());
  return port;
}

/** Tomcat with a <Host> per name and a static file per location (default host: "fallback"). */
export async function locationTomcat(t: Test): Promise<number> {
  const file = (loc: Location): string => `loc=${loc}\n`;
  const tomcat = await startTomcat(t, [
    { name: 'fallback', files: { 'index.html': file('default') } },
    { name: 'admin.example.com', files: { 'index.html': file('admin-host') } },
    {
      name: 'www.example.com',
      files: { 'index.html': file('www-root'), 'admin/index.html': file('www-admin'), 'public/index.html': file('www-public') },
    },
  ]);
  return tomcat.port;
}

/** The location a WHATWG-URL router picks, or null (it answers 400) when the URL does not parse. */
export function whatwgLocation(url: string, host: string | undefined): Location | null {
  let u: URL;
  let path: string;
  try {
    u = new URL(url, `http://${host ?? ''}`);
    path = decodeURIComponent(u.pathname);
  } catch {
    return null;
  }
  if (u.hostname === 'admin.example.com') return 'admin-host';
  if (u.hostname !== 'www.example.com') return 'default';
  if (/^\/admin(\/|$)/i.test(path)) return 'www-admin';
  if (/^\/public(\/|$)/i.test(path)) return 'www-public';
  return 'www-root';
}

/** A Node app routing by WHATWG URL (hostname, then a case-insensitive path prefix). */
export async function locationWhatwg(t: Test): Promise<number> {
  const server = http.createServer((req, res) => {
    const loc = whatwgLocation(req.url ?? '/', req.headers.host);
    if (loc === null) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end('bad url\n');
      return;
    }
    const body = `loc=${loc}\n`;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
    res.end(body);
  });
  server.keepAliveTimeout = 30_000;
  return listenLoopback(t, server);
}
