/**
 * The nginx / HAProxy interop suite (http-nginx.test.ts) with `http.engine: relay`: real peers in
 * front of ipgate (X-Forwarded-For chains, PROXY headers) and behind it (nginx as the backend).
 */
process.env.IPGATE_TEST_HTTP_ENGINE = 'relay';
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('./http-nginx.test');
