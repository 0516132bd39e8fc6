/**
 * The TCP path and large-read suites again on net.Sockets (IPGATE_TCP_HANDLES=0): TCP listeners
 * run on libuv handles where Node has them (src/transport/raw-socket.ts), and net.Socket stays the
 * path for upstreams given by name, for a Node without the bindings, and for an operator who turns
 * handles off. Both must pass the same tests.
 */
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
// path in a variable: tsc checks a literal one and would want the extension dropped, which the
// test runner's ESM loader cannot resolve.)
for (const suite of ['./tcp-path.test.ts', './tcp-large-reads.test.ts']) void import(suite);
