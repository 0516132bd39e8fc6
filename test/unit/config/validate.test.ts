/**
 * Semantic checks beyond the schema: sockets that cannot all bind, a listener forwarding to itself,
 * options where they do not apply (refused), and configs that work but probably not as meant
 * (warnings: loaded, returned beside the config, printed by main and check-config).
 */
import t from 'tap';
import { ConfigError } from '../../../src/config/errors';
import { buildConfig, configWarnings } from '../../../src/config/load';
import { MAIN } from '../../helpers/root';

type Raw = Record<string, unknown> & { listeners: Record<string, unknown>[] };
const tcp = (listen: string, extra: Record<string, unknown> = {}) => ({
  name: `l${listen.replace(/\W/g, '')}`,
  listen,
  allowlist: 'main',
  upstreams: ['127.0.0.1:7100'],
  ...extra,
});
const config = (listeners: Record<string, unknown>[], extra: Record<string, unknown> = {}): Raw => ({
  allowlists: { main: ['10.0.0.0/8'] },
  admin: { listen: null },
  listeners,
  ...extra,
});

function outcome(raw: unknown): { problems: string[]; warnings: string[] } {
  try {
    return { problems: [], warnings: [...configWarnings(buildConfig(raw))] };
  } catch (err) {
    if (err instanceof ConfigError) return { problems: [...err.problems], warnings: [] };
    throw err;
  }
}

const refused: { what: string; raw: Raw; problem: string }[] = [
  {
    what: 'admin on 0.0.0.0 and a listener on 127.0.0.1, same port',
    raw: config([tcp('127.0.0.1:9901')], { admin: { listen: '0.0.0.0:9901' } }),
    problem:
      'listeners[0].listen: "127.0.0.1:9901": collides with admin.listen "0.0.0.0:9901": port 9901 on 0.0.0.0 covers every IPv4 address; the admin API never shares a data port',
  },
  {
    what: 'admin on 127.0.0.1 and a listener on localhost, same port',
    raw: config([tcp('localhost:9901')], { admin: { listen: '127.0.0.1:9901' } }),
    problem:
      'listeners[0].listen: "localhost:9901": collides with admin.listen "127.0.0.1:9901": both bind 127.0.0.1 port 9901; the admin API never shares a data port',
  },
  {
    what: 'admin on [::] and a listener on 127.0.0.1 (dual stack)',
    raw: config([tcp('127.0.0.1:9901')], { admin: { listen: '[::]:9901' } }),
    problem:
      'listeners[0].listen: "127.0.0.1:9901": collides with admin.listen "[::]:9901": port 9901 on "::" covers every IPv4 and IPv6 address',
  },
  {
    what: 'admin on [::1] and a listener on [::]',
    raw: config([tcp('[::]:9901')], { admin: { listen: '[::1]:9901' } }),
    problem: 'listeners[0].listen: "[::]:9901": collides with admin.listen "[::1]:9901"',
  },
  {
    what: 'two listeners on 0.0.0.0:P and 127.0.0.1:P',
    raw: config([tcp('0.0.0.0:7000'), tcp('127.0.0.1:7000')]),
    problem:
      'listeners[1].listen: "127.0.0.1:7000": collides with listeners[0].listen "0.0.0.0:7000": port 7000 on 0.0.0.0 covers every IPv4 address; only one socket can listen on it',
  },
  {
    what: '[::]:P and a host name on P (a bind needs a local address, and :: covers them all)',
    raw: config([tcp('[::]:7000'), tcp('gate.example:7000')]),
    problem:
      'listeners[1].listen: "gate.example:7000": collides with listeners[0].listen "[::]:7000": port 7000 on "::" covers every IPv4 and IPv6 address',
  },
  {
    what: 'the same host name and port twice',
    raw: config([tcp('gate.example:7000'), tcp('GATE.example:7000')]),
    problem: 'listeners[1].listen: "GATE.example:7000": collides with listeners[0].listen "gate.example:7000": the same address and port',
  },
  {
    what: 'two listeners on [::]:P and [::1]:P',
    raw: config([tcp('[::]:7000'), tcp('[::1]:7000')]),
    problem: 'listeners[1].listen: "[::1]:7000": collides with listeners[0].listen "[::]:7000"',
  },
  {
    what: 'an IPv4-mapped IPv6 bind is the IPv4 address',
    raw: config([tcp('127.0.0.1:7000'), tcp('[::ffff:127.0.0.1]:7000')]),
    problem:
      'listeners[1].listen: "[::ffff:127.0.0.1]:7000": collides with listeners[0].listen "127.0.0.1:7000": both bind 127.0.0.1 port 7000',
  },
  {
    what: "the echo TCP backend on a listener's address",
    raw: config([tcp('127.0.0.1:7000')], { echo: { tcp: '127.0.0.1:7000' } }),
    problem: 'echo.tcp: "127.0.0.1:7000": collides with listeners[0].listen "127.0.0.1:7000": the same address and port',
  },
  {
    what: 'the echo HTTP backend on 0.0.0.0 and a listener on 127.0.0.1',
    raw: config([tcp('127.0.0.1:7000')], { echo: { http: '0.0.0.0:7000' } }),
    problem:
      'echo.http: "0.0.0.0:7000": collides with listeners[0].listen "127.0.0.1:7000": port 7000 on 0.0.0.0 covers every IPv4 address',
  },
  {
    what: 'an upstream that is the listener itself (127.0.0.1 under 0.0.0.0)',
    raw: config([tcp('0.0.0.0:7000', { upstreams: ['127.0.0.1:7000'] })]),
    problem:
      'listeners[0].upstreams[0]: "127.0.0.1:7000": is this listener\'s own address (listeners[0].listen "0.0.0.0:7000"): every connection would be forwarded back to ipgate',
  },
  {
    what: 'an upstream localhost:P under [::]:P',
    raw: config([tcp('[::]:7000', { upstreams: ['10.0.0.1:80', 'localhost:7000'] })]),
    problem: 'listeners[0].upstreams[1]: "localhost:7000": is this listener\'s own address',
  },
  {
    what: 'an upstream equal to the listen address',
    raw: config([tcp('127.0.0.2:7000', { upstreams: ['127.0.0.2:7000'] })]),
    problem: 'listeners[0].upstreams[0]: "127.0.0.2:7000": is this listener\'s own address',
  },
  {
    what: 'http options on a tcp listener',
    raw: config([tcp('127.0.0.1:7000', { http: { trustedProxies: ['10.0.0.0/8'] } })]),
    problem:
      'listeners[0].http.trustedProxies: ["10.0.0.0/8"]: is an HTTP option but listeners[0].mode is "tcp": remove it, or set mode: http',
  },
  {
    what: 'admin.allowedHosts with a port',
    raw: config([tcp('127.0.0.1:7000')], { admin: { listen: null, allowedHosts: ['admin.example:9901'] } }),
    problem: 'admin.allowedHosts[0]: "admin.example:9901": must be a host name without port, scheme or wildcard',
  },
  {
    what: 'admin.allowedHosts with a wildcard',
    raw: config([tcp('127.0.0.1:7000')], { admin: { listen: null, allowedHosts: ['*.example'] } }),
    problem: 'admin.allowedHosts[0]: "*.example": must be a host name',
  },
  {
    what: 'an HTTP health check of h2c upstreams (it speaks HTTP/1.1)',
    raw: config([
      tcp('127.0.0.1:7000', { mode: 'http', http: { upstreamProtocol: 'h2c' }, upstreamHealth: { active: { type: 'http', path: '/hz' } } }),
    ]),
    problem:
      'listeners[0].upstreamHealth.active.type: "http": speaks HTTP/1.1 in clear text, but the group\'s upstreamProtocol is "h2c": use type: tcp for these targets',
  },
  {
    what: "a route's HTTP health check where the route's upstreams speak h2",
    raw: config([
      tcp('127.0.0.1:7000', {
        mode: 'http',
        routes: [{ name: 'g', hosts: ['g.example'], http: { upstreamProtocol: 'h2' }, upstreamHealth: { active: { type: 'http' } } }],
      }),
    ]),
    problem:
      'listeners[0].routes[0].upstreamHealth.active.type: "http": speaks HTTP/1.1 in clear text, but the group\'s upstreamProtocol is "h2"',
  },
  {
    what: 'a check interval below 100 ms',
    raw: config([tcp('127.0.0.1:7000', { upstreamHealth: { active: { intervalMs: 5 } } })]),
    problem: 'listeners[0].upstreamHealth.active.intervalMs: 5:',
  },
  {
    what: 'a check type that does not exist',
    raw: config([tcp('127.0.0.1:7000', { upstreamHealth: { active: { type: 'udp' } } })]),
    problem: 'listeners[0].upstreamHealth.active.type: "udp":',
  },
];

t.test('refused: each problem names the field and quotes both values; nothing is built', async (t) => {
  for (const row of refused) {
    const { problems } = outcome(row.raw);
    t.ok(
      problems.some((p) => p.startsWith(row.problem)),
      `${row.what}: got ${JSON.stringify(problems)}`,
    );
  }
});

const accepted: { what: string; raw: Raw; warnings: string[] }[] = [
  {
    what: 'different ports on one address',
    raw: config([tcp('0.0.0.0:7000'), tcp('127.0.0.1:7001')], { admin: { listen: '0.0.0.0:9901' } }),
    warnings: [],
  },
  { what: 'IPv4 loopback and IPv6 loopback on one port', raw: config([tcp('127.0.0.1:7000'), tcp('[::1]:7000')]), warnings: [] },
  {
    what: 'a host name and 127.0.0.1 on one port (what the name resolves to is not known here)',
    raw: config([tcp('gate.example:7000'), tcp('127.0.0.1:7000')]),
    warnings: [],
  },
  { what: 'two loopback addresses on one port', raw: config([tcp('127.0.0.1:7000'), tcp('127.0.0.2:7000')]), warnings: [] },
  { what: 'port 0 twice (the kernel picks distinct ports)', raw: config([tcp('127.0.0.1:0'), tcp('0.0.0.0:0')]), warnings: [] },
  {
    what: 'an upstream on the same port of another host',
    raw: config([tcp('0.0.0.0:7000', { upstreams: ['10.1.2.3:7000'] })]),
    warnings: [],
  },
  {
    what: 'an upstream named by DNS on the same port (not known to be this host)',
    raw: config([tcp('0.0.0.0:7000', { upstreams: ['backend.svc:7000'] })]),
    warnings: [],
  },
  {
    what: 'admin.allowedHosts with names, any case, a trailing dot',
    raw: config([tcp('127.0.0.1:7000')], {
      admin: { listen: null, allowedHosts: ['Admin.IPGATE.svc', 'ipgate-admin.ipgate.svc.cluster.local.'] },
    }),
    warnings: [],
  },
  { what: 'an empty http section on a tcp listener sets nothing', raw: config([tcp('127.0.0.1:7000', { http: {} })]), warnings: [] },
  {
    what: 'trustedSources 0.0.0.0/0',
    raw: config([tcp('127.0.0.1:7000', { proxyProtocol: { mode: 'optional', trustedSources: ['0.0.0.0/0', '10.0.0.0/8'] } })]),
    warnings: [
      'listeners[0].proxyProtocol.trustedSources[0]: "0.0.0.0/0": trusts every IPv4 address: anyone there can send a PROXY header and choose the client address ipgate checks',
    ],
  },
  {
    what: 'trustedSources ::/0',
    raw: config([tcp('127.0.0.1:7000', { proxyProtocol: { mode: 'required', trustedSources: ['::/0'] } })]),
    warnings: ['listeners[0].proxyProtocol.trustedSources[0]: "::/0": trusts every IPv6 address'],
  },
  {
    what: 'trustedSources 64.0.0.0/2 (a quarter of IPv4)',
    raw: config([tcp('127.0.0.1:7000', { proxyProtocol: { mode: 'optional', trustedSources: ['64.0.0.0/2'] } })]),
    warnings: ['listeners[0].proxyProtocol.trustedSources[0]: "64.0.0.0/2": trusts 1/4 of all IPv4 addresses'],
  },
  {
    what: 'trustedProxies ::/0 on an http listener',
    raw: config([tcp('127.0.0.1:7000', { mode: 'http', http: { trustedProxies: ['::/0'] } })]),
    warnings: ['listeners[0].http.trustedProxies[0]: "::/0": trusts every IPv6 address: anyone there can send X-Forwarded-For'],
  },
  {
    what: 'a /8 is not warned about',
    raw: config([tcp('127.0.0.1:7000', { mode: 'http', http: { trustedProxies: ['10.0.0.0/8'] } })]),
    warnings: [],
  },
  {
    what: 'upstreamMaxSockets is applied by the relay',
    raw: config([tcp('127.0.0.1:7000', { mode: 'http', http: { engine: 'relay', upstreamMaxSockets: 16 } })]),
    warnings: [],
  },
  {
    what: 'engine undici (removed): the relay serves it, with a warning',
    raw: config([tcp('127.0.0.1:7000', { mode: 'http', http: { engine: 'undici' } })]),
    warnings: [
      'listeners[0].http.engine: "undici": was removed (undici\'s client can kill the process on a close-delimited response; docs/http-engines.md): the relay engine serves this listener',
    ],
  },
  {
    what: 'engine http-proxy (removed): the relay serves it, with a warning',
    raw: config([tcp('127.0.0.1:7000', { mode: 'http', http: { engine: 'http-proxy' } })]),
    warnings: [
      'listeners[0].http.engine: "http-proxy": was removed (its shared keep-alive agent let an upgrade request desync a pooled upstream connection',
    ],
  },
  {
    what: 'the relay with an outbound PROXY header: no warning (its own upstream connection per client)',
    raw: config([tcp('127.0.0.1:7000', { mode: 'http', outboundProxyProtocol: 'v2', http: { engine: 'relay' } })]),
    warnings: [],
  },
  {
    what: 'PROXY options with the PROXY protocol off',
    raw: config([tcp('127.0.0.1:7000', { proxyProtocol: { trustedSources: ['10.0.0.0/8'], headerTimeoutMs: 100 } })]),
    warnings: [
      'listeners[0].proxyProtocol.trustedSources: ["10.0.0.0/8"]: is ignored: proxyProtocol.mode is "off"',
      'listeners[0].proxyProtocol.headerTimeoutMs: 100: is ignored',
    ],
  },
];

t.test('accepted: the config builds, with exactly the warnings expected', async (t) => {
  for (const row of accepted) {
    const { problems, warnings } = outcome(row.raw);
    t.same(problems, [], `${row.what}: no problem`);
    t.equal(warnings.length, row.warnings.length, `${row.what}: ${row.warnings.length} warning(s), got ${JSON.stringify(warnings)}`);
    row.warnings.forEach((w, i) => {
      t.ok(warnings[i]?.startsWith(w), `${row.what}: warning ${i} is ${JSON.stringify(w)}`);
    });
  }
});

t.test('a config with no warnings and a config built elsewhere both report none', async (t) => {
  t.same(configWarnings(buildConfig(config([tcp('127.0.0.1:7000')]))), []);
  t.same(configWarnings({} as never), [], 'an object buildConfig did not make');
});

t.test('ipgate check-config prints the warnings and still says valid; a refused config exits 1 naming the field', async (t) => {
  const { spawnSync } = await import('node:child_process');
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const YAML = (await import('yaml')).default;
  if (!fs.existsSync(MAIN)) {
    t.fail(`${MAIN} is missing: run npm run build:all first`);
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-check-config-'));
  const run = (raw: unknown) => {
    const file = path.join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
    fs.writeFileSync(file, YAML.stringify(raw));
    const r = spawnSync(process.execPath, [MAIN, 'check-config', file], { encoding: 'utf8' });
    return { file, status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const warned = run(config([tcp('127.0.0.1:7000', { proxyProtocol: { mode: 'optional', trustedSources: ['0.0.0.0/0'] } })]));
  t.equal(warned.status, 0, warned.stderr);
  t.match(warned.stdout, `${warned.file}: valid (1 listener(s), 1 allowlist(s))`);
  // The YAML line of the value, as nginx -t names file and line.
  const lineOf = (file: string, text: string): number =>
    fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .findIndex((l) => l.includes(text)) + 1;
  t.equal(
    warned.stderr,
    `ipgate: warning: ${warned.file}: listeners[0].proxyProtocol.trustedSources[0]: "0.0.0.0/0": trusts every IPv4 address: ` +
      `anyone there can send a PROXY header and choose the client address ipgate checks; list only the CIDRs of your load balancers or proxies in ${warned.file}:${lineOf(warned.file, '0.0.0.0/0')}\n`,
  );
  const refused = run(config([tcp('0.0.0.0:7000'), tcp('127.0.0.1:7000')]));
  t.equal(refused.status, 1);
  t.match(refused.stderr, 'listeners[1].listen: "127.0.0.1:7000": collides with listeners[0].listen "0.0.0.0:7000"');
  t.match(refused.stderr, ` in ${refused.file}:${lineOf(refused.file, '127.0.0.1:7000')}\n`, 'and names the line of the value');
  t.equal(refused.stdout, '', 'not "valid"');
});
