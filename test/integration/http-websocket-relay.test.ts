/**
 * The WebSocket suite (http-websocket.test.ts) with `http.engine: relay`: the relay hands an
 * upgrade request, from its first byte, to the node:http path, so upgrades, their denials,
 * revocation and failures behave as on the other engines.
 */
process.env.IPGATE_TEST_HTTP_ENGINE = 'relay';
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('./http-websocket.test');
