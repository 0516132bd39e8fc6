/**
 * The whole HTTP forwarding suite (http-forward.test.ts) with `http.engine: http-proxy`: the engine
 * that still carries upgrades and outbound-PROXY requests, and whose measured defects (crash without
 * an error listener, upstream request left running, no pool, hop-by-hop headers, xfwd) each have a
 * test there.
 */
process.env.IPGATE_TEST_HTTP_ENGINE = 'http-proxy';
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('./http-forward.test');
