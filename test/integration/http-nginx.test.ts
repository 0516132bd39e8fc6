/**
 * What a real nginx backend (Debian nginx-light) sees behind ipgate: it logs and returns
 * `$http_x_real_ip` and `$http_x_forwarded_for`, so every assertion is about what nginx received,
 * for a direct client, a client behind trusted nginx proxies (several hops), a forging client,
 * and HAProxy in front sending PROXY v2. Also: denied clients never reach nginx, keep-alive
 * requests share upstream connections (nginx's own `$connection_requests`), and the outbound
 * PROXY header to an nginx `listen ... proxy_protocol` is per client connection.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { freePort, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startHaproxy, startNginx, type Peer } from '../helpers/peers';
import { request } from '../helpers/http';

const skip = missing('nginx') || missing('haproxy');

const LOG_FORMAT = `log_format ipgate '$remote_addr|$http_x_real_ip|$http_x_forwarded_for|$http_x_forwarded_proto|$http_x_forwarded_port|$request_uri';`;
const RETURN = 'return 200 "$http_x_real_ip|$http_x_forwarded_for|$connection|$connection_requests\\n";';

interface Backend {
  peer: Peer;
  port: number;
  log: () => string[];
}

async function nginxBackend(t: Test, extraListen = ''): Promise<Backend> {
  const port = await freePort();
  const peer = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  ${LOG_FORMAT}
  keepalive_timeout 75s;
  keepalive_requests 10000;
  server {
    listen 127.0.0.1:${port}${extraListen};
    access_log logs/backend.log ipgate;
    location / { ${extraListen ? 'return 200 "$proxy_protocol_addr|$http_x_real_ip|$connection|$connection_requests\\n";' : RETURN} }
  }
}`,
    [port],
  );
  t.teardown(() => peer.stop());
  const file = path.join(peer.dir, 'logs/backend.log');
  return {
    peer,
    port,
    log: () => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : []),
  };
}

async function gate(t: Test, listener: Record<string, unknown>, allow: string[]): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: { main: allow },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          ...listener,
          // IPGATE_TEST_HTTP_ENGINE=relay: the same interop on the relay engine (http-nginx-relay.test.ts).
          ...(process.env.IPGATE_TEST_HTTP_ENGINE !== undefined
            ? { http: { engine: process.env.IPGATE_TEST_HTTP_ENGINE, ...((listener.http as Record<string, unknown> | undefined) ?? {}) } }
            : {}),
        },
      ],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

t.test('nginx backend sees the true client', { skip }, async (t) => {
  const nginx = await nginxBackend(t);
  const g = await gate(t, { upstreams: [`127.0.0.1:${nginx.port}`] }, ['127.0.0.3/32']);

  t.test('direct client', async (t) => {
    const r = await request({ port: g.port(), localAddress: '127.0.0.3', path: '/direct' });
    t.equal(r.status, 200);
    t.match(r.body, /^127\.0\.0\.3\|127\.0\.0\.3\|/);
    await waitFor(() => nginx.log().some((l) => l.endsWith('/direct')));
    const line = nginx.log().find((l) => l.endsWith('/direct'))!;
    t.equal(line, `127.0.0.1|127.0.0.3|127.0.0.3|http|${g.port()}|/direct`, 'nginx access log: peer is ipgate, X-Real-IP the client');
  });

  t.test('a client forging X-Forwarded-For / X-Real-IP / Forwarded from an untrusted address', async (t) => {
    const r = await request({
      port: g.port(),
      localAddress: '127.0.0.3',
      path: '/forged',
      headers: {
        'x-forwarded-for': '198.51.100.1, 10.0.0.1',
        'x-real-ip': '198.51.100.1',
        forwarded: 'for=198.51.100.1',
        'x-forwarded-proto': 'https',
      },
    });
    t.match(r.body, /^127\.0\.0\.3\|127\.0\.0\.3\|/, 'forgery discarded');
    await waitFor(() => nginx.log().some((l) => l.endsWith('/forged')));
    t.equal(
      nginx.log().find((l) => l.endsWith('/forged')),
      `127.0.0.1|127.0.0.3|127.0.0.3|http|${g.port()}|/forged`,
    );
  });

  t.test('denied: 403 and nginx receives nothing', async (t) => {
    const before = nginx.log().length;
    const r = await request({ port: g.port(), localAddress: '127.0.0.4', path: '/denied' });
    t.equal(r.status, 403);
    // A request that nginx does get, after the denied one: its log line proves the log is current.
    await request({ port: g.port(), localAddress: '127.0.0.3', path: '/marker' });
    await waitFor(() => nginx.log().some((l) => l.endsWith('/marker')));
    t.equal(nginx.log().length, before + 1, 'only the marker request reached nginx');
    t.notOk(nginx.log().some((l) => l.includes('127.0.0.4') || l.endsWith('/denied')));
  });

  t.test('keep-alive requests reuse the upstream connection (nginx $connection_requests)', async (t) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    t.teardown(() => agent.destroy());
    const seen: string[] = [];
    for (let i = 0; i < 10; i++) seen.push((await request({ port: g.port(), localAddress: '127.0.0.3', agent })).body.trim());
    const connections = new Set(seen.map((s) => s.split('|')[2]));
    t.equal(connections.size, 1, 'one nginx connection for 10 requests');
    t.ok(Number(seen[9]!.split('|')[3]) >= 10, `nginx counted ${seen[9]!.split('|')[3]} requests on it`);
    // Clients that close after each request do not cost an upstream connection each.
    const closing: string[] = [];
    for (let i = 0; i < 5; i++)
      closing.push((await request({ port: g.port(), localAddress: '127.0.0.3', headers: { connection: 'close' } })).body.split('|')[2]!);
    t.equal(new Set(closing).size, 1, 'Connection: close from the client does not reach nginx');
  });
});

t.test('client behind two trusted nginx proxies: the rightmost untrusted X-Forwarded-For address', { skip }, async (t) => {
  const nginx = await nginxBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${nginx.port}`],
      http: { trustedProxies: ['127.0.0.6/32', '127.0.0.7/32'] },
    },
    ['127.0.0.5/32'],
  );
  // Two hops in one nginx: outer (binds 127.0.0.7 towards inner) -> inner (binds 127.0.0.6 towards
  // ipgate), each appending its peer with $proxy_add_x_forwarded_for as operators configure it.
  const outer = await freePort();
  const inner = await freePort();
  const front = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  server {
    listen 127.0.0.1:${outer};
    location / { proxy_pass http://127.0.0.1:${inner}; proxy_bind 127.0.0.7; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }
  }
  server {
    listen 127.0.0.1:${inner};
    location / { proxy_pass http://127.0.0.1:${g.port()}; proxy_bind 127.0.0.6; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }
  }
}`,
    [outer, inner],
  );
  t.teardown(() => front.stop());

  const r = await request({ port: outer, localAddress: '127.0.0.5', path: '/hops', headers: { 'x-forwarded-for': '198.51.100.1' } });
  t.equal(r.status, 200);
  const [realIp, xff] = r.body.split('|');
  t.equal(realIp, '127.0.0.5', 'X-Real-IP: the client, not the forged entry nor a proxy');
  t.equal(xff, '198.51.100.1, 127.0.0.5, 127.0.0.7, 127.0.0.6', "X-Forwarded-For: the chain as received + ipgate's peer");
  await waitFor(() => nginx.log().some((l) => l.endsWith('/hops')));

  const denied = await request({
    port: outer,
    localAddress: '127.0.0.8',
    path: '/hops-denied',
    headers: { 'x-forwarded-for': '127.0.0.5' },
  });
  t.equal(denied.status, 403, 'a client claiming an allowed address via X-Forwarded-For is still itself');
  t.notOk(
    nginx.log().some((l) => l.endsWith('/hops-denied')),
    'nginx received nothing',
  );
});

t.test('HAProxy in front sending PROXY v2: the PROXY source is the client', { skip }, async (t) => {
  const nginx = await nginxBackend(t);
  const g = await gate(
    t,
    {
      upstreams: [`127.0.0.1:${nginx.port}`],
      proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.2/32'] },
    },
    ['127.0.0.8/32'],
  );
  const tcpPort = await freePort();
  const httpPort = await freePort();
  const haproxy = await startHaproxy(
    `
frontend tcp_in
  mode tcp
  bind 127.0.0.1:${tcpPort}
  default_backend gate_tcp
backend gate_tcp
  mode tcp
  server ipgate 127.0.0.1:${g.port()} send-proxy-v2 source 127.0.0.2
frontend http_in
  mode http
  bind 127.0.0.1:${httpPort}
  default_backend gate_http
backend gate_http
  mode http
  server ipgate 127.0.0.1:${g.port()} send-proxy-v2 source 127.0.0.2
`,
    [tcpPort, httpPort],
  );
  t.teardown(() => haproxy.stop());

  for (const [mode, port] of [
    ['tcp', tcpPort],
    ['http', httpPort],
  ] as const) {
    const r = await request({ port, localAddress: '127.0.0.8', path: `/haproxy-${mode}`, headers: { 'x-forwarded-for': '198.51.100.1' } });
    t.equal(r.status, 200, `${mode} mode`);
    const [realIp, xff] = r.body.split('|');
    t.equal(realIp, '127.0.0.8', `${mode} mode: X-Real-IP is the PROXY source`);
    t.equal(xff, '127.0.0.8', `${mode} mode: the client's own X-Forwarded-For is discarded`);
    const denied = await request({ port, localAddress: '127.0.0.9', path: `/haproxy-${mode}-denied` });
    t.equal(denied.status, 403, `${mode} mode: another client behind the same HAProxy is denied`);
  }
  await waitFor(() => nginx.log().some((l) => l.endsWith('/haproxy-http')));
  t.notOk(
    nginx.log().some((l) => l.includes('denied')),
    'nginx received no denied request',
  );
});

t.test('outbound PROXY header to nginx `listen proxy_protocol`: one upstream connection per client connection', { skip }, async (t) => {
  const nginx = await nginxBackend(t, ' proxy_protocol');
  const g = await gate(t, { upstreams: [`127.0.0.1:${nginx.port}`], outboundProxyProtocol: 'v2' }, ['127.0.0.3/32', '127.0.0.9/32']);
  const results: Record<string, string[]> = {};
  // Interleave two clients, each on its own keep-alive connection.
  const agents = {
    '127.0.0.3': new http.Agent({ keepAlive: true, maxSockets: 1 }),
    '127.0.0.9': new http.Agent({ keepAlive: true, maxSockets: 1 }),
  };
  t.teardown(() =>
    Object.values(agents).forEach((a) => {
      a.destroy();
    }),
  );
  for (let i = 0; i < 3; i++) {
    for (const [addr, agent] of Object.entries(agents)) {
      const r = await request({ port: g.port(), localAddress: addr, agent });
      (results[addr] ??= []).push(r.body.trim());
    }
  }
  for (const [addr, lines] of Object.entries(results)) {
    t.ok(
      lines.every((l) => l.startsWith(`${addr}|${addr}|`)),
      `${addr}: nginx's $proxy_protocol_addr and X-Real-IP are this client on every request`,
    );
    t.equal(new Set(lines.map((l) => l.split('|')[2])).size, 1, `${addr}: one upstream connection for its 3 requests`);
  }
  t.not(results['127.0.0.3']![0]!.split('|')[2], results['127.0.0.9']![0]!.split('|')[2], 'never shared between clients');
});
