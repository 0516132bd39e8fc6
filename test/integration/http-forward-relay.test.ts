/**
 * The whole HTTP forwarding suite (http-forward.test.ts) with `http.engine: relay`
 * (src/forward/http/relay/): identity, forged headers, PROXY + request in one segment, trusted
 * proxies, 403, pool reuse, hop-by-hop both ways, 502 / 504 / failover, client aborts, 408 / 400 /
 * 431, chunked framing, maxRequestsPerConnection, keep-alive idle, revocation and drain.
 */
process.env.IPGATE_TEST_HTTP_ENGINE = 'relay';
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('./http-forward.test');
