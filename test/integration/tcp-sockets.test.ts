/**
 * The TCP path and large-read suites again on net.Sockets (IPGATE_TCP_HANDLES=0): TCP listeners
 * run on libuv handles where Node has them (src/transport/raw-socket.ts), and net.Socket stays the
 * path for upstreams given by name, for a Node without the bindings, and for an operator who turns
 * handles off. Both must pass the same tests.
 */
import path from 'node:path';
import t from 'tap';
import { startIpgate } from '../helpers/ipgate';

process.env.IPGATE_TCP_HANDLES = '0';

t.test('IPGATE_TCP_HANDLES=0: the TCP listener runs on net.Sockets', async (t) => {
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  t.equal(g.app.listeners[0]!.rawSockets, false);
});

// The suites register their tests on import and run in this process with the setting above. (A
// path in a variable with this file's own extension: the compiled .js where tests run from dist,
// docs/testing.md "Tests run compiled".)
for (const suite of ['./tcp-path.test', './tcp-large-reads.test']) void import(suite + path.extname(__filename));
