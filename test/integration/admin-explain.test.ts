/**
 * `POST /v1/explain` and `GET /v1/connections` against a running ipgate: explain gives the same
 * answer as a real connection with the same peer and header (the listener and explain share
 * derive.ts), and connections lists the live connection with its derived client.
 */
import t from 'tap';
import { startAdminGate } from '../helpers/admin-api';
import { connect, readLine, waitFor } from '../helpers/net';
import { createTcpEcho } from '../../src/echo/echo-server';
import { encodeProxyV2 } from '../../src/proxy-protocol/encoder';
import type net from 'node:net';
import type { Test } from 'tap';

async function echo(t: Test): Promise<number> {
  const s = createTcpEcho();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  return (s.address() as net.AddressInfo).port;
}

t.test('explain and connections', async (t) => {
  const backend = await echo(t);
  const g = await startAdminGate(t, {
    allowlists: { main: [{ cidr: '203.0.113.0/24', comment: 'docs' }, '127.0.0.1/32'] },
    listeners: [
      {
        name: 'pp',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [`127.0.0.1:${backend}`],
        outboundProxyProtocol: 'v2',
        proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.1/32'] },
      },
      {
        name: 'web',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [`127.0.0.1:${backend}`],
        http: { trustedProxies: ['10.0.0.0/8'] },
      },
    ],
  });
  const v1 = 'PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n';
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>]> = [
    [
      'a v1 header from the trusted balancer gives the client',
      { listener: 'pp', peer: '127.0.0.1', proxyHeader: v1 },
      {
        client: '203.0.113.7',
        clientPort: 5555,
        via: 'proxy-v1',
        decision: 'allow',
        proxyHeader: 'v1/ok',
        entry: { index: 0, cidr: '203.0.113.0/24', comment: 'docs' },
      },
    ],
    [
      'the same header as hex',
      { listener: 'pp', peer: '127.0.0.1', proxyHeader: Buffer.from(v1).toString('hex') },
      { client: '203.0.113.7', via: 'proxy-v1' },
    ],
    [
      'a v2 header as base64',
      {
        listener: 'pp',
        peer: '127.0.0.1',
        proxyHeader: encodeProxyV2({ address: '198.51.100.9', port: 1 }, { address: '127.0.0.1', port: 2 }).toString('base64'),
      },
      { client: '198.51.100.9', via: 'proxy-v2', decision: 'deny', reason: 'not_allowlisted', entry: null },
    ],
    [
      'an untrusted peer is closed in required mode',
      { listener: 'pp', peer: '198.51.100.1', proxyHeader: v1 },
      { decision: 'close', reason: 'pp_untrusted', peerTrusted: false, client: null },
    ],
    [
      'a trusted peer without a header is closed in required mode',
      { listener: 'pp', peer: '127.0.0.1' },
      { decision: 'close', reason: 'pp_missing' },
    ],
    [
      'a truncated header',
      { listener: 'pp', peer: '127.0.0.1', proxyHeader: Buffer.from('PROXY TCP4 203.0.113.7 ').toString('hex') },
      { decision: 'close', reason: 'pp_truncated' },
    ],
    [
      'HTTP from a trusted proxy: the X-Forwarded-For walk',
      { listener: 'web', peer: '10.1.2.3', headers: { 'X-Forwarded-For': '1.2.3.4, 203.0.113.50, 10.9.9.9' } },
      { client: '203.0.113.50', via: 'xff', trustedProxy: true, decision: 'allow' },
    ],
    [
      'HTTP from anyone else: X-Forwarded-For ignored',
      { listener: 'web', peer: '198.51.100.2', headers: { 'x-forwarded-for': '203.0.113.50' } },
      { client: '198.51.100.2', via: 'socket', trustedProxy: false, decision: 'deny' },
    ],
    [
      'a mapped IPv6 peer is its IPv4 address',
      { listener: 'web', peer: '::ffff:127.0.0.1' },
      { peer: '127.0.0.1', client: '127.0.0.1', decision: 'allow' },
    ],
  ];
  for (const [name, body, want] of cases) {
    const r = await g.api('POST', '/v1/explain', { body });
    t.equal(r.status, 200, `${name}: status`);
    t.match(r.json, want, name);
  }
  t.equal((await g.api('POST', '/v1/explain', { body: { listener: 'nope', peer: '127.0.0.1' } })).status, 404, 'unknown listener: 404');
  t.equal((await g.api('POST', '/v1/explain', { body: { listener: 'pp', peer: '127.0.0.01' } })).status, 400, 'bad peer: 400');
  t.equal(
    (await g.api('POST', '/v1/explain', { body: { listener: 'pp', peer: '127.0.0.1', proxyHeader: '%%%' } })).status,
    400,
    'bad header encoding: 400',
  );
  t.equal(
    (await g.api('POST', '/v1/explain', { body: { listener: 'pp', peer: '127.0.0.1' }, token: null })).status,
    401,
    'needs the token',
  );

  // The data path agrees with explain for the first case, and the live connection is listed.
  const c = await connect({ port: g.port('pp') });
  c.write(v1);
  c.write('x\n');
  t.match(await readLine(c), /^ipgate-echo client=203\.0\.113\.7:5555 via=proxy-v2/, 'a real connection with that header: the same client');
  let listed: Record<string, unknown> | undefined;
  await waitFor(
    async () => {
      const r = await g.api('GET', '/v1/connections?listener=pp');
      listed = (r.json as { connections: Array<Record<string, unknown>> }).connections[0];
      return listed?.upstream !== null && listed !== undefined;
    },
    5000,
    'the connection listed',
  );
  t.match(listed, { listener: 'pp', client: '203.0.113.7:5555', via: 'proxy-v1', admitted: true, upstream: `127.0.0.1:${backend}` });
  t.match(listed?.peer, /^127\.0\.0\.1:\d+$/);
  const limited = await g.api('GET', '/v1/connections?limit=1');
  t.equal(limited.status, 200);
  t.ok((limited.json as { total: number }).total >= 1);
  t.equal((await g.api('GET', '/v1/connections?listener=nope')).status, 404);
  t.equal((await g.api('GET', '/v1/connections?limit=0')).status, 400, 'limit must be >= 1');
  c.destroy();
});
