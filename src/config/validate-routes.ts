/**
 * Semantic checks of a listener's `routes` (schema/routes.ts): what the schema cannot say. The
 * hosts and paths go through the route table's own compile step (route/route-table.ts), so the
 * config cannot accept a table the data path would refuse; references (allowlists), upstream
 * addresses and HTTP-only fields on TCP listeners are checked here. Every problem names the path
 * and quotes the value, all collected (validate.ts's convention).
 */
import { RouteTable, RouteTableError } from '../route/route-table';
import { problem } from '../schema/problem';
import { loopsToItself } from './addresses';
import { parseHostPort, type HostPort } from '../address/host-port';
import type { ListenerConfig } from '../schema/config';

interface RouteCheckContext {
  /** `listeners[i]` */
  at: string;
  /** The listener's bound address, when it parsed (for the loop check). */
  listen: HostPort | null;
  /** Whether an allowlist of that name is defined. */
  hasList(name: string): boolean;
  /** Names of the defined lists, for the message. */
  listNames(): string[];
}

export function checkRoutes(l: ListenerConfig, ctx: RouteCheckContext, problems: string[]): void {
  const { at } = ctx;
  const routes = l.routes;
  if (routes === undefined) {
    if (l.upstreams.length === 0)
      problems.push(
        problem(
          `${at}.upstreams`,
          l.upstreams,
          'is empty: give at least one upstream target host:port (or routes, each with its upstreams)',
        ),
      );
    if (l.sni !== undefined)
      problems.push(problem(`${at}.sni`, l.sni, 'is for TCP listeners with routes (SNI routing): remove it, or add routes'));
    return;
  }
  if (l.mode === 'http' && l.sni !== undefined) {
    problems.push(problem(`${at}.sni`, l.sni, `is for TCP listeners (SNI routing without termination) but ${at}.mode is "http"`));
  }
  try {
    RouteTable.compile(routes, { kind: l.mode === 'tcp' ? 'sni' : 'http', at: `${at}.routes` });
  } catch (err) {
    if (!(err instanceof RouteTableError)) throw err;
    problems.push(...err.problems);
  }
  routes.forEach((r, i) => {
    const rat = `${at}.routes[${i}]`;
    if (r.allowlist !== undefined && !ctx.hasList(r.allowlist)) {
      const known = ctx.listNames();
      problems.push(
        problem(
          `${rat}.allowlist`,
          r.allowlist,
          `no such allowlist (defined: ${known.length ? known.join(', ') : 'none'}; define it under "allowlists")`,
        ),
      );
    }
    if (r.upstreams === undefined) {
      if (l.upstreams.length === 0) {
        problems.push(
          problem(
            `${rat}.upstreams`,
            undefined,
            `is required: ${at}.upstreams is empty, so route ${JSON.stringify(r.name)} has nowhere to send its traffic`,
          ),
        );
      }
    } else {
      r.upstreams.forEach((u, j) => {
        const up = parseHostPort(u, false);
        if (typeof up === 'string') problems.push(problem(`${rat}.upstreams[${j}]`, u, up));
        else if (ctx.listen !== null && loopsToItself(ctx.listen, up)) {
          problems.push(
            problem(
              `${rat}.upstreams[${j}]`,
              u,
              `is this listener's own address (${at}.listen): every connection would be forwarded back to ipgate, without end`,
            ),
          );
        }
      });
    }
    if (l.mode === 'http') {
      const active = (r.upstreamHealth ?? l.upstreamHealth)?.active ?? null;
      const protocol = r.http?.upstreamProtocol ?? l.http.upstreamProtocol;
      if (active !== null && active.type === 'http' && protocol !== 'http1') {
        const p = httpCheckOverH2(
          r.upstreamHealth !== undefined ? `${rat}.upstreamHealth.active.type` : `${at}.upstreamHealth.active.type`,
          protocol,
        );
        if (!problems.includes(p)) problems.push(p);
      }
    }
    if (l.mode === 'tcp' && r.http !== undefined) {
      problems.push(
        problem(`${rat}.http`, r.http, `is an HTTP option but ${at}.mode is "tcp" (a TCP listener never sees HTTP): remove it`),
      );
    }
    for (const name of Object.keys(r.http?.requestHeaders ?? {})) {
      if (IDENTITY_HEADERS.has(name.toLowerCase())) {
        problems.push(
          problem(
            `${rat}.http.requestHeaders`,
            name,
            'is a client-IP header ipgate writes itself (docs/real-ip.md): it cannot be set per route',
          ),
        );
      }
    }
  });
}

/** Headers that carry the client's identity: written by ipgate only. */
const IDENTITY_HEADERS: ReadonlySet<string> = new Set([
  'x-forwarded-for',
  'x-real-ip',
  'forwarded',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-request-id',
  'host',
]);

/** An `http` check speaks HTTP/1.1 in clear text, which an h2c or h2 (TLS) upstream does not answer. */
export function httpCheckOverH2(path: string, protocol: string): string {
  return problem(
    path,
    'http',
    `speaks HTTP/1.1 in clear text, but the group's upstreamProtocol is "${protocol}": use type: tcp for these targets`,
  );
}
