/**
 * `listeners[*].routes` and `sni` in the config (src/schema/routes.ts, validate-routes.ts):
 * defaults, and every refusal naming the field and quoting the value.
 */
import t from 'tap';
import { problemsOf } from '../../helpers/config-problems';
import { buildConfig } from '../../../src/config/load';

const base = (listener: Record<string, unknown>): Record<string, unknown> => ({
  allowlists: { main: ['10.0.0.0/8'], api: ['192.0.2.0/24'] },
  listeners: [{ name: 'edge', mode: 'http', listen: '127.0.0.1:7000', allowlist: 'main', ...listener }],
});

t.test('routes load with their defaults; a listener without routes is unchanged', async (t) => {
  const c = buildConfig(
    base({
      routes: [
        {
          name: 'api',
          hosts: ['api.example.com'],
          paths: [{ path: '/v1' }, { path: '/health', match: 'exact' }],
          upstreams: ['127.0.0.1:7101'],
          allowlist: 'api',
        },
        { name: 'default', hosts: ['*'], upstreams: ['127.0.0.1:7102'] },
      ],
    }),
  );
  const l = c.listeners[0]!;
  t.same(l.upstreams, [], 'listener upstreams default to [] when every route has its own');
  t.same(
    l.routes![0]!.paths,
    [
      { path: '/v1', match: 'prefix' },
      { path: '/health', match: 'exact' },
    ],
    'match defaults to prefix',
  );
  t.equal(l.sni, undefined);
  const plain = buildConfig(base({ upstreams: ['127.0.0.1:7101'] }));
  t.equal(plain.listeners[0]!.routes, undefined, 'no routes: feature off');
  const tcp = buildConfig(base({ mode: 'tcp', sni: {}, routes: [{ name: 'a', hosts: ['a.example.com'], upstreams: ['127.0.0.1:7101'] }] }));
  t.same(tcp.listeners[0]!.sni, { helloTimeoutMs: 5000 }, 'sni.helloTimeoutMs defaults to 5000');
});

const refusals: { desc: string; listener: Record<string, unknown>; expect: RegExp }[] = [
  { desc: 'no upstreams and no routes', listener: {}, expect: /^listeners\[0\]\.upstreams: \[\]: is empty/ },
  {
    desc: 'a route without upstreams when the listener has none',
    listener: { routes: [{ name: 'a', hosts: ['*'] }] },
    expect: /^listeners\[0\]\.routes\[0\]\.upstreams: \(missing\): is required: .*route "a"/,
  },
  {
    desc: 'an unknown route allowlist',
    listener: { upstreams: ['127.0.0.1:7101'], routes: [{ name: 'a', hosts: ['*'], allowlist: 'nope' }] },
    expect: /^listeners\[0\]\.routes\[0\]\.allowlist: "nope": no such allowlist \(defined: main, api/,
  },
  {
    desc: 'a bad route upstream',
    listener: { routes: [{ name: 'a', hosts: ['*'], upstreams: ['nohost'] }] },
    expect: /^listeners\[0\]\.routes\[0\]\.upstreams\[0\]: "nohost": /,
  },
  {
    desc: 'a route upstream that is the listener itself',
    listener: { routes: [{ name: 'a', hosts: ['*'], upstreams: ['127.0.0.1:7000'] }] },
    expect: /^listeners\[0\]\.routes\[0\]\.upstreams\[0\]: "127\.0\.0\.1:7000": is this listener's own address/,
  },
  {
    desc: 'a bad wildcard host (the route table compile step)',
    listener: { upstreams: ['127.0.0.1:7101'], routes: [{ name: 'a', hosts: ['a.*.com'] }] },
    expect: /routes\[0\] \("a"\)\.hosts\[0\]: "a\.\*\.com": a wildcard is only allowed/,
  },
  {
    desc: 'a path not in normal form',
    listener: { upstreams: ['127.0.0.1:7101'], routes: [{ name: 'a', hosts: ['*'], paths: [{ path: '/a/../b' }] }] },
    expect: /"\/a\/\.\.\/b"/,
  },
  {
    desc: 'paths on a TCP (SNI) listener',
    listener: { mode: 'tcp', upstreams: ['127.0.0.1:7101'], routes: [{ name: 'a', hosts: ['a.example.com'], paths: [{ path: '/' }] }] },
    expect: /routes\[0\].*paths/,
  },
  {
    desc: 'http options on a TCP route',
    listener: { mode: 'tcp', upstreams: ['127.0.0.1:7101'], routes: [{ name: 'a', hosts: ['*'], http: { deniedBody: 'no' } }] },
    expect: /^listeners\[0\]\.routes\[0\]\.http: .*mode is "tcp"/,
  },
  {
    desc: 'a client-IP header set per route',
    listener: {
      upstreams: ['127.0.0.1:7101'],
      routes: [{ name: 'a', hosts: ['*'], http: { requestHeaders: { 'X-Real-IP': '1.2.3.4' } } }],
    },
    expect: /^listeners\[0\]\.routes\[0\]\.http\.requestHeaders: "X-Real-IP": is a client-IP header/,
  },
  {
    desc: 'sni on an HTTP listener',
    listener: { upstreams: ['127.0.0.1:7101'], sni: {}, routes: [{ name: 'a', hosts: ['*'] }] },
    expect: /^listeners\[0\]\.sni: .*mode is "http"/,
  },
  {
    desc: 'sni without routes',
    listener: { mode: 'tcp', upstreams: ['127.0.0.1:7101'], sni: {} },
    expect: /^listeners\[0\]\.sni: .*with routes/,
  },
  {
    desc: 'an unknown route key (schema)',
    listener: { upstreams: ['127.0.0.1:7101'], routes: [{ name: 'a', hosts: ['*'], upstream: ['x:1'] }] },
    expect: /routes\/0.*upstream|routes\[0\].*upstream/,
  },
  {
    desc: 'two routes with one name',
    listener: {
      upstreams: ['127.0.0.1:7101'],
      routes: [
        { name: 'a', hosts: ['a.example.com'] },
        { name: 'a', hosts: ['b.example.com'] },
      ],
    },
    expect: /"a"/,
  },
];

for (const row of refusals) {
  t.test(`refused: ${row.desc}`, async (t) => {
    const problems = problemsOf(base(row.listener));
    t.ok(
      problems.some((p) => row.expect.test(p)),
      `a problem matches ${row.expect}`,
      { problems },
    );
  });
}
