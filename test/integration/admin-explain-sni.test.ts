/**
 * `POST /v1/explain` with `sni` on a TCP listener with routes: which route (and which host entry)
 * takes the connection and which allowlist entry decides, from the same route table and lists as
 * the data path. One row is checked against a real connection too.
 */
import t from 'tap';
import { startAdminGate } from '../helpers/admin-api';
import { closed, connect, waitFor } from '../helpers/net';
import { clientHello, sniExt } from '../fixtures/tls/client-hello-vectors';

t.test('explain answers the route and the entry for an SNI', async (t) => {
  const g = await startAdminGate(t, {
    allowlists: {
      main: ['127.0.0.0/8', { cidr: '203.0.113.0/24', comment: 'office' }],
      api: [{ cidr: '198.51.100.0/24', comment: 'partners' }],
    },
    listeners: [
      {
        name: 'sni',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: ['127.0.0.1:9'],
        routes: [
          { name: 'api', hosts: ['api.example'], allowlist: 'api' },
          { name: 'tenants', hosts: ['*.t.example'] },
          { name: 'fallback', hosts: ['*'] },
        ],
      },
      {
        name: 'strict',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: ['127.0.0.1:9'],
        routes: [{ name: 'api', hosts: ['api.example'] }],
      },
      { name: 'plain', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] },
    ],
  });
  const cases: { desc: string; body: Record<string, unknown>; want: Record<string, unknown> }[] = [
    {
      desc: "an exact name: its route and the route's list (a partner is allowed)",
      body: { listener: 'sni', peer: '198.51.100.7', sni: 'api.example' },
      want: {
        route: { name: 'api', host: 'api.example', hostMatch: 'exact', path: null },
        allowlist: 'api',
        decision: 'allow',
        entry: { cidr: '198.51.100.0/24', comment: 'partners' },
      },
    },
    {
      desc: "the same name from the office: not on the route's list",
      body: { listener: 'sni', peer: '203.0.113.9', sni: 'API.example.' },
      want: { sni: 'api.example', route: { name: 'api' }, allowlist: 'api', decision: 'deny', reason: 'not_allowlisted', entry: null },
    },
    {
      desc: "a wildcard: the listener's list",
      body: { listener: 'sni', peer: '203.0.113.9', sni: 'a.b.t.example' },
      want: {
        route: { name: 'tenants', host: '*.t.example', hostMatch: 'wildcard', path: null },
        allowlist: 'main',
        decision: 'allow',
        entry: { comment: 'office' },
      },
    },
    {
      desc: 'no SNI: the default route',
      body: { listener: 'sni', peer: '203.0.113.9' },
      want: { sni: null, route: { name: 'fallback', host: '*', hostMatch: 'default', path: null }, decision: 'allow' },
    },
    {
      desc: 'an IP literal as SNI: the reader refuses the hello',
      body: { listener: 'sni', peer: '203.0.113.9', sni: '192.0.2.1' },
      want: { decision: 'close', reason: 'tls_bad_sni', route: null },
    },
    {
      desc: 'no route and no default: closed',
      body: { listener: 'strict', peer: '127.0.0.1', sni: 'other.example' },
      want: { decision: 'close', reason: 'route_no_host', route: null, sni: 'other.example' },
    },
  ];
  for (const c of cases) {
    const r = await g.api('POST', '/v1/explain', { body: c.body });
    t.equal(r.status, 200, `${c.desc}: 200`);
    t.match(r.json, c.want, c.desc);
  }
  const bad = await g.api('POST', '/v1/explain', { body: { listener: 'plain', peer: '127.0.0.1', sni: 'a.example' } });
  t.equal(bad.status, 400, 'sni on a listener without routes: 400');
  t.match(bad.json, { message: /"a\.example".*"plain"/ }, 'the message quotes the value and the listener');

  // The data path agrees with the strict row: a real hello for other.example is closed route_no_host.
  const l = g.app.listeners.find((x) => x.name === 'strict')!;
  const s = await connect({ port: g.port('strict') });
  s.write(clientHello({ extensions: [sniExt('other.example')] }));
  await closed(s);
  await waitFor(() => l.stats.closed.get('route_no_host') === 1, 5000, 'route_no_host counted');
  t.pass('a real connection is closed route_no_host');
});
