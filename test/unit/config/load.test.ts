/**
 * Config: validated once, every error names the path and the offending value, unknown keys are
 * refused, defaults applied, the result frozen.
 */
import t from 'tap';
import { problemsOf } from '../../helpers/config-problems';
import { ConfigError } from '../../../src/config/errors';
import { buildConfig, jsonPointerToPath, parseConfig } from '../../../src/config/load';

const listener = { name: 'a', listen: '127.0.0.1:7000', allowlist: 'main', upstreams: ['127.0.0.1:7100'] };
const base = () => ({ allowlists: { main: ['10.0.0.0/8'] }, listeners: [structuredClone(listener)] });

t.test('a minimal config gets every default and is frozen', async (t) => {
  const c = buildConfig(base());
  t.equal(c.listeners[0]!.mode, 'tcp');
  t.equal(c.listeners[0]!.proxyProtocol.mode, 'off', 'PROXY protocol off by default (closed)');
  t.same(c.listeners[0]!.proxyProtocol.trustedSources, [], 'no trusted sources by default');
  t.equal(c.listeners[0]!.proxyProtocol.headerTimeoutMs, 5000);
  t.equal(c.listeners[0]!.outboundProxyProtocol, 'none');
  t.same(c.listeners[0]!.http.trustedProxies, [], 'no trusted proxies by default');
  t.equal(c.admin.listen, '127.0.0.1:9901', 'admin API on loopback by default');
  t.equal(c.admin.separateProcess, false, 'one process by default (the admin API beside the listeners)');
  t.equal(c.revokeLive, true);
  t.same(
    c.allowlists.main,
    { source: 'store', entries: [{ cidr: '10.0.0.0/8' }], file: null, configMap: null, allowTemporary: false },
    'the array form is a store list; bare CIDR strings normalised to entries',
  );
  t.ok(Object.isFrozen(c) && Object.isFrozen(c.listeners[0]) && Object.isFrozen(c.listeners[0]!.proxyProtocol), 'deeply frozen');
  t.throws(
    () => {
      (c.listeners[0] as { name: string }).name = 'x';
    },
    TypeError,
    'mutation throws (strict mode)',
  );
});

t.test('YAML text parses the same way', async (t) => {
  const c = parseConfig(`
allowlists:
  main:
    - 10.0.0.0/8
    - { cidr: "2001:db8::/32", comment: office, expiresAt: "2030-01-01T00:00:00Z" }
listeners:
  - name: a
    listen: "[::]:7000"
    allowlist: main
    upstreams: ["backend.default.svc.cluster.local:80"]
    proxyProtocol: { mode: required, trustedSources: [10.1.0.0/16] }
`);
  t.same(c.allowlists.main!.entries[1], { cidr: '2001:db8::/32', comment: 'office', expiresAt: '2030-01-01T00:00:00Z' });
  t.equal(c.listeners[0]!.proxyProtocol.mode, 'required');
});

const bad: Array<[string, (c: ReturnType<typeof base> & Record<string, unknown>) => void, string]> = [
  [
    'prefix out of range names the path and value',
    (c) => {
      c.allowlists.main = ['10.0.0.1/33'];
    },
    'allowlists.main[0]: "10.0.0.1/33": prefix length 33 out of range for IPv4',
  ],
  [
    'host bits set',
    (c) => {
      c.allowlists.main = ['10.0.0.1/8'];
    },
    'allowlists.main[0]: "10.0.0.1/8": ',
  ],
  [
    'leading zero octet',
    (c) => {
      c.allowlists.main = ['010.0.0.0/8'];
    },
    'allowlists.main[0]: "010.0.0.0/8": ',
  ],
  [
    'short form',
    (c) => {
      c.allowlists.main = ['10/8'];
    },
    'allowlists.main[0]: "10/8": ',
  ],
  [
    'entry object with a bad cidr',
    (c) => {
      (c.allowlists as Record<string, unknown>).main = [{ cidr: '1.2.3.4/40' }];
    },
    'allowlists.main[0].cidr: "1.2.3.4/40": prefix length 40 out of range for IPv4',
  ],
  [
    'entry with an unknown key',
    (c) => {
      (c.allowlists as Record<string, unknown>).main = [{ cidr: '1.2.3.0/24', note: 'x' }];
    },
    'allowlists.main[0].note',
  ],
  [
    'unknown top-level key',
    (c) => {
      c.listner = [];
    },
    'listner: [] : unknown key'.replace(' :', ':'),
  ],
  [
    'unknown listener key',
    (c) => {
      (c.listeners[0] as Record<string, unknown>).upstream = 'x';
    },
    'listeners[0].upstream: "x": unknown key',
  ],
  [
    'bad enum',
    (c) => {
      (c.listeners[0] as Record<string, unknown>).proxyProtocol = { mode: 'maybe' };
    },
    'listeners[0].proxyProtocol.mode: "maybe": must be one of "off", "optional", "required"',
  ],
  [
    'wrong type is not coerced',
    (c) => {
      (c.listeners[0] as Record<string, unknown>).timeouts = { connectMs: '5000' };
    },
    'listeners[0].timeouts.connectMs: "5000": must be an integer, not a string',
  ],
  [
    'missing required key',
    (c) => {
      delete (c.listeners[0] as Record<string, unknown>).listen;
    },
    'listeners[0].listen: (missing): required',
  ],
  [
    'no upstreams and no routes',
    (c) => {
      delete (c.listeners[0] as Record<string, unknown>).upstreams;
    },
    'listeners[0].upstreams: []: is empty: give at least one upstream target',
  ],
  [
    'unknown allowlist reference',
    (c) => {
      c.listeners[0]!.allowlist = 'nope';
    },
    'listeners[0].allowlist: "nope": no such allowlist (defined: main',
  ],
  [
    'duplicate listener name',
    (c) => {
      c.listeners.push({ ...listener, listen: '127.0.0.1:7001' });
    },
    'listeners[1].name: "a": duplicate of listeners[0].name',
  ],
  [
    'duplicate bind',
    (c) => {
      c.listeners.push({ ...listener, name: 'b' });
    },
    'listeners[1].listen: "127.0.0.1:7000": collides with listeners[0].listen "127.0.0.1:7000": the same address and port',
  ],
  [
    'port out of range',
    (c) => {
      c.listeners[0]!.listen = '127.0.0.1:70000';
    },
    'listeners[0].listen: "127.0.0.1:70000": port 70000 out of range',
  ],
  [
    'IPv6 listen without brackets',
    (c) => {
      c.listeners[0]!.listen = '::1:7000';
    },
    'listeners[0].listen: "::1:7000": an IPv6 address must be written in brackets',
  ],
  [
    'upstream port 0',
    (c) => {
      c.listeners[0]!.upstreams = ['127.0.0.1:0'];
    },
    'listeners[0].upstreams[0]: "127.0.0.1:0": port 0 is not a valid destination',
  ],
  [
    'trusted source not a CIDR',
    (c) => {
      (c.listeners[0] as Record<string, unknown>).proxyProtocol = { mode: 'optional', trustedSources: ['lb.example'] };
    },
    'listeners[0].proxyProtocol.trustedSources[0]: "lb.example": ',
  ],
  [
    'PROXY mode on with nobody trusted',
    (c) => {
      (c.listeners[0] as Record<string, unknown>).proxyProtocol = { mode: 'required' };
    },
    'listeners[0].proxyProtocol.trustedSources: []: is empty',
  ],
  [
    'a data port on the admin address',
    (c) => {
      c.listeners[0]!.listen = '127.0.0.1:9901';
    },
    'listeners[0].listen: "127.0.0.1:9901": collides with admin.listen "127.0.0.1:9901": the same address and port; the admin API never shares a data port',
  ],
  [
    'admin.separateProcess is a boolean, not coerced',
    (c) => {
      c.admin = { separateProcess: 'no' };
    },
    'admin.separateProcess: "no": must be true or false, not a string',
  ],
  [
    'unknown admin key',
    (c) => {
      c.admin = { separateProcesses: false };
    },
    'admin.separateProcesses: false: unknown key',
  ],
  [
    'bad list name',
    (c) => {
      (c.allowlists as Record<string, unknown>)['bad name!'] = [];
    },
    'allowlists.bad name!: invalid name',
  ],
  [
    'no listeners',
    (c) => {
      c.listeners = [];
    },
    'listeners: []: must NOT have fewer than 1 items',
  ],
];

t.test('invalid configs: each problem names the path and the value', async (t) => {
  for (const [name, mutate, expected] of bad) {
    const raw = base() as ReturnType<typeof base> & Record<string, unknown>;
    mutate(raw);
    const problems = problemsOf(raw);
    t.ok(
      problems.some((p) => p.startsWith(expected) || p.includes(expected)),
      `${name}: got ${JSON.stringify(problems)}`,
    );
  }
});

t.test('all problems are reported at once, not just the first', async (t) => {
  const raw = base();
  raw.allowlists.main = ['10.0.0.1/33', '300.1.1.1'];
  raw.listeners[0]!.upstreams = ['nohost'];
  t.equal(problemsOf(raw).length, 3, JSON.stringify(problemsOf(raw)));
});

t.test('YAML syntax errors and duplicate keys are config errors', async (t) => {
  t.throws(() => parseConfig('listeners: [\n'), ConfigError);
  t.throws(() => parseConfig('listeners: []\nlisteners: []\n'), /not valid YAML/);
  t.throws(() => parseConfig('- a\n- b\n'), /must be a mapping/);
});

t.test('JSON pointer to config path', async (t) => {
  t.equal(jsonPointerToPath('/listeners/1/allowlist'), 'listeners[1].allowlist');
  t.equal(jsonPointerToPath('/allowlists/a~1b/0'), 'allowlists.a/b[0]');
  t.equal(jsonPointerToPath(''), '(top level)');
});

t.test('IPGATE_ADMIN_LISTEN replaces admin.listen; a bad value names the variable', async (t) => {
  const yaml =
    'allowlists: { main: [10.0.0.0/8] }\nadmin: { listen: "0.0.0.0:9901" }\nlisteners:\n  - { name: a, listen: "127.0.0.1:7000", allowlist: main, upstreams: ["127.0.0.1:7100"] }\n';
  t.equal(parseConfig(yaml, 'c.yaml', { IPGATE_ADMIN_LISTEN: '10.1.2.3:9901' }).admin.listen, '10.1.2.3:9901', 'the variable wins');
  t.equal(parseConfig(yaml, 'c.yaml', { IPGATE_ADMIN_LISTEN: '[fd00::7]:9901' }).admin.listen, '[fd00::7]:9901', 'IPv6 in brackets');
  t.equal(parseConfig(yaml, 'c.yaml', { IPGATE_ADMIN_LISTEN: '  ' }).admin.listen, '0.0.0.0:9901', "empty: the config's");
  t.equal(parseConfig(yaml, 'c.yaml', {}).admin.listen, '0.0.0.0:9901', "unset: the config's");
  const noAdmin = yaml.replace('admin: { listen: "0.0.0.0:9901" }\n', '');
  t.equal(parseConfig(noAdmin, 'c.yaml', { IPGATE_ADMIN_LISTEN: '10.1.2.3:9902' }).admin.listen, '10.1.2.3:9902', 'without an admin block');
  try {
    parseConfig(yaml, 'c.yaml', { IPGATE_ADMIN_LISTEN: '10.1.2.3:99999' });
    t.fail('a bad value is refused');
  } catch (err) {
    t.ok(err instanceof ConfigError, 'a config error');
    t.match(
      (err as ConfigError).problems.join('\n'),
      /environment variable IPGATE_ADMIN_LISTEN: "10\.1\.2\.3:99999"/,
      'names the variable and quotes the value',
    );
  }
  // The collision checks see the replaced address: the admin API may not take a listener's port.
  try {
    parseConfig(yaml, 'c.yaml', { IPGATE_ADMIN_LISTEN: '127.0.0.1:7000' });
    t.fail('a collision through the variable is refused');
  } catch (err) {
    t.match((err as ConfigError).problems.join('\n'), /admin\.listen.*127\.0\.0\.1:7000/, 'refused as admin.listen, quoting the address');
  }
});
