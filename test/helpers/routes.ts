/**
 * Backends for the route tests: one nginx with three servers (A, B, C), each answering its name,
 * the request target it received, X-Route and X-Real-IP, so a test reads which backend a request
 * reached and what it was sent.
 */
import type { Test } from 'tap';
import { freePort } from './net';
import { nginxHttpPreamble, startNginx } from './peers';

/** One nginx, three servers: each answers its name, the target it received, X-Route and X-Real-IP. */
export async function threeBackends(t: Test): Promise<{ a: number; b: number; c: number }> {
  const [a, b, c] = [await freePort(), await freePort(), await freePort()];
  const server = (name: string, port: number): string => `server {
    listen 127.0.0.1:${port};
    location / { return 200 "${name}|$request_uri|$http_x_route|$http_x_real_ip\\n"; }
  }`;
  const peer = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  keepalive_timeout 75s;
  ${server('A', a)}
  ${server('B', b)}
  ${server('C', c)}
}`,
    [a, b, c],
  );
  t.teardown(() => peer.stop());
  return { a, b, c };
}
