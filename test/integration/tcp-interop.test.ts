/**
 * Interop with real PROXY protocol peers from Debian packages:
 * - HAProxy `send-proxy` / `send-proxy-v2` in front of ipgate: the echo backend learns the address
 *   of HAProxy's client, not HAProxy's.
 * - ipgate's outbound v1 / v2 headers accepted by nginx `stream` (`listen ... proxy_protocol`) and
 *   by HAProxy `accept-proxy`, which report the client address they were given.
 */
import type net from 'node:net';
import t, { type Test } from 'tap';
import { createTcpEcho } from '../../src/echo/echo-server';
import { startIpgate } from '../helpers/ipgate';
import { connect, freePort, readAll, readLine } from '../helpers/net';
import { missing, startHaproxy, startNginx } from '../helpers/peers';

async function echoBackend(t: Test): Promise<number> {
  const server = createTcpEcho();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

t.test('HAProxy send-proxy / send-proxy-v2 in front of ipgate', { skip: missing('haproxy') }, async (t) => {
  const backend = await echoBackend(t);
  const g = await startIpgate({
    allowlists: { main: ['127.0.0.21/32', '127.0.0.22/32'] },
    listeners: [
      {
        name: 'tcp',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.1/32'] },
        upstreams: [`127.0.0.1:${backend}`],
        outboundProxyProtocol: 'v2',
      },
    ],
  });
  t.teardown(() => g.app.shutdown(0));
  const v1Port = await freePort();
  const v2Port = await freePort();
  const haproxy = await startHaproxy(
    `
frontend fe_v1
  mode tcp
  bind 127.0.0.1:${v1Port}
  default_backend be_v1
backend be_v1
  mode tcp
  server ipgate 127.0.0.1:${g.port()} send-proxy
frontend fe_v2
  mode tcp
  bind 127.0.0.1:${v2Port}
  default_backend be_v2
backend be_v2
  mode tcp
  server ipgate 127.0.0.1:${g.port()} send-proxy-v2
`,
    [v1Port, v2Port],
  );
  t.teardown(haproxy.stop);
  const stats = g.app.listeners[0]!.stats;

  for (const [name, port, client] of [
    ['send-proxy', v1Port, '127.0.0.21'],
    ['send-proxy-v2', v2Port, '127.0.0.22'],
  ] as const) {
    const c = await connect({ port, localAddress: client });
    c.write('x\n');
    const line = await readLine(c);
    t.match(
      line,
      new RegExp(`^ipgate-echo client=${client.replace(/\./g, '\\.')}:${c.localPort} via=proxy-v2`),
      `${name}: the backend learns HAProxy's client ${client}`,
    );
    c.destroy();
  }
  // A client HAProxy forwards but the allowlist does not name is denied on the PROXY address.
  const denied = await connect({ port: v2Port, localAddress: '127.0.0.23' });
  denied.write('x\n');
  t.equal((await readAll(denied)).length, 0, 'client not on the list is denied through HAProxy');
  t.equal(stats.proxyHeader.get('v1/ok'), 1, 'one v1 header accepted');
  t.equal(stats.proxyHeader.get('v2/ok'), 2, 'two v2 headers accepted');
});

t.test('nginx stream proxy_protocol accepts ipgate outbound v1 and v2', { skip: missing('nginx') }, async (t) => {
  const nginxPort = await freePort();
  const nginx = await startNginx(
    `
stream {
  server {
    listen 127.0.0.1:${nginxPort} proxy_protocol;
    return "nginx saw $proxy_protocol_addr:$proxy_protocol_port to $proxy_protocol_server_addr:$proxy_protocol_server_port\\n";
  }
}`,
    [nginxPort],
    { stream: true },
  );
  t.teardown(nginx.stop);
  for (const version of ['v1', 'v2'] as const) {
    const g = await startIpgate({
      allowlists: { main: ['127.0.0.31/32'] },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${nginxPort}`],
          outboundProxyProtocol: version,
        },
      ],
    });
    t.teardown(() => g.app.shutdown(0));
    const c = await connect({ port: g.port(), localAddress: '127.0.0.31' });
    const line = await readLine(c);
    t.equal(
      line,
      `nginx saw 127.0.0.31:${c.localPort} to 127.0.0.1:${g.port()}`,
      `${version}: nginx reports the real client and destination`,
    );
    c.destroy();
  }
});

t.test('HAProxy accept-proxy accepts ipgate outbound v1 and v2', { skip: missing('haproxy') }, async (t) => {
  const v1Port = await freePort();
  const v2Port = await freePort();
  // HAProxy answers an HTTP request with the source address it took from the PROXY header.
  const haproxy = await startHaproxy(
    `
frontend fe
  mode http
  bind 127.0.0.1:${v1Port} accept-proxy
  bind 127.0.0.1:${v2Port} accept-proxy
  http-request return status 200 content-type text/plain lf-string "haproxy saw %[src]:%[src_port]\\n"
`,
    [v1Port, v2Port],
  );
  t.teardown(haproxy.stop);
  for (const [version, port] of [
    ['v1', v1Port],
    ['v2', v2Port],
  ] as const) {
    const g = await startIpgate({
      allowlists: { main: ['127.0.0.41/32'] },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${port}`],
          outboundProxyProtocol: version,
        },
      ],
    });
    t.teardown(() => g.app.shutdown(0));
    const c = await connect({ port: g.port(), localAddress: '127.0.0.41' });
    c.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const reply = (await readAll(c)).toString();
    t.match(reply, /^HTTP\/1\.1 200/, `${version}: HAProxy accepted the header`);
    t.match(reply, new RegExp(`haproxy saw 127\\.0\\.0\\.41:${c.localPort}\\n`), `${version}: HAProxy reports the real client`);
  }
});
