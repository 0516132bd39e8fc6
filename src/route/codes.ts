/**
 * Why a request or a connection matched no route: one code per way, the log field and the
 * `reason` metric label (closed and small, as proxy-protocol/codes.ts).
 */
export type RouteMissReason = 'route_no_host' | 'route_no_path' | 'route_bad_path' | 'route_path_params';

export const ROUTE_MISS_REASONS: Readonly<Record<RouteMissReason, string>> = Object.freeze({
  route_no_host: 'No route serves this host (or SNI) and the listener has no default route "*".',
  route_no_path: 'Routes serve this host, but none of its paths matches the request path.',
  route_bad_path:
    'The request path cannot be matched safely (no leading "/", ".." above the root, an encoded "/" or "\\", a control character, a bad "%" escape).',
  route_path_params:
    'The request path holds ";" path parameters (or an encoded ";"), which backends read differently; refused unless http.pathParameters is servlet (400).',
});
