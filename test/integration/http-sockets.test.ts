/**
 * The HTTP engine's suites again on net.Sockets (IPGATE_TCP_HANDLES=0): plaintext HTTP listeners
 * and upstreams given as IP literals run on libuv handles where Node has them
 * (src/transport/raw-socket.ts), and net.Socket (behind transport/byte-socket.ts NetByteSocket)
 * stays the path for TLS client connections, upstreams given by name, a Node without the bindings
 * and an operator who turns handles off. Both must pass the same tests.
 */
import path from 'node:path';
import t from 'tap';
import { startIpgate } from '../helpers/ipgate';

process.env.IPGATE_TCP_HANDLES = '0';

t.test('IPGATE_TCP_HANDLES=0: the HTTP listener runs on net.Sockets', async (t) => {
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  t.equal(g.app.listeners[0]!.rawSockets, false);
});

// The suites register their tests on import and run in this process with the setting above (a
// path in a variable: see tcp-sockets.test.ts).
for (const suite of [
  './http-engine.test',
  './http-relay.test',
  './http-websocket.test',
  './http-denied.test',
  './http-reload-revoke.test',
  './http-refused-body.test',
])
  void import(suite + path.extname(__filename));
