/**
 * Invalid values are refused by `helm template` and `helm lint` (values.schema.json, or the chart's
 * cross-field checks) with a message naming the field. CIDRs and addresses are checked by pattern:
 * the patterns agree with ipgate's own parser (src/allowlist/cidr.ts) on every syntax question, so
 * a value that passes the chart does not crash-loop the pod.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parseCidr } from '../../src/allowlist/cidr';
import { parseHostPort } from '../../src/address/host-port';
import { parseConfig } from '../../src/config/load';
import { prng } from '../helpers/prng';
import { CHART, HTTP_LISTENER, TCP_LISTENER, lint, render, renderError } from '../helpers/helm';

const withListener = (patch: Record<string, unknown>) => ({ listeners: [{ ...HTTP_LISTENER, ...patch }], allowlists: { office: [] } });

const CASES: { what: string; values: Record<string, unknown>; message: RegExp }[] = [
  { what: 'kind StatefulSet', values: { kind: 'StatefulSet' }, message: /at '\/kind': value must be one of 'DaemonSet', 'Deployment'/ },
  {
    what: 'service.type ClusterIP (the data Service must be reachable from outside)',
    values: { service: { type: 'ClusterIP' } },
    message: /at '\/service\/type': value must be one of 'NodePort', 'LoadBalancer'/,
  },
  {
    what: 'externalTrafficPolicy misspelt',
    values: { service: { externalTrafficPolicy: 'local' } },
    message: /at '\/service\/externalTrafficPolicy': value must be one of 'Local', 'Cluster'/,
  },
  {
    what: 'nodePort above 32767',
    values: withListener({ nodePort: 40000 }),
    message: /at '\/listeners\/0\/nodePort'[\s\S]*maximum: got 40,000, want 32,767/,
  },
  {
    what: 'nodePort below 30000',
    values: withListener({ nodePort: 8080 }),
    message: /at '\/listeners\/0\/nodePort'[\s\S]*minimum: got 8,080, want 30,000/,
  },
  {
    what: 'proxyProtocol mode "maybe"',
    values: withListener({ proxyProtocol: { mode: 'maybe' } }),
    message: /at '\/listeners\/0\/proxyProtocol\/mode': value must be one of 'off', 'optional', 'required'/,
  },
  {
    what: 'listener port 70000',
    values: withListener({ port: 70000 }),
    message: /at '\/listeners\/0\/port': maximum: got 70,000, want 65,535/,
  },
  {
    what: 'listener without upstreams',
    values: withListener({ upstreams: [] }),
    message: /at '\/listeners\/0\/upstreams': minItems: got 0, want 1/,
  },
  { what: 'upstream without a port', values: withListener({ upstreams: ['backend'] }), message: /at '\/listeners\/0\/upstreams\/0'/ },
  {
    what: 'outboundProxyProtocol v3',
    values: withListener({ outboundProxyProtocol: 'v3' }),
    message: /at '\/listeners\/0\/outboundProxyProtocol': value must be one of 'none', 'v1', 'v2'/,
  },
  {
    what: 'unknown listener key (typo)',
    values: withListener({ upstream: ['x:1'] }),
    message: /at '\/listeners\/0': additional properties 'upstream' not allowed/,
  },
  { what: 'unknown top-level key', values: { hostnetwork: true }, message: /additional properties 'hostnetwork' not allowed/ },
  { what: 'listener name with uppercase (a port name)', values: withListener({ name: 'Web' }), message: /at '\/listeners\/0\/name'/ },
  { what: 'no listeners', values: { listeners: [] }, message: /at '\/listeners': minItems: got 0, want 1/ },
  { what: 'workers 0', values: { config: { workers: 0 } }, message: /at '\/config\/workers'/ },
  {
    what: 'admin.separateProcess not a boolean',
    values: { admin: { separateProcess: 1 } },
    message: /at '\/admin\/separateProcess': got number, want boolean/,
  },
  {
    what: 'logging level verbose',
    values: { config: { logging: { level: 'verbose' } } },
    message: /at '\/config\/logging\/level': value must be one of/,
  },
  { what: 'image digest not sha256', values: { image: { digest: 'latest' } }, message: /at '\/image\/digest'/ },
  // Cross-field checks (templates/_helpers.tpl "ipgate.validate").
  {
    what: 'listener port < 1024 without hostNetwork',
    values: withListener({ port: 80 }),
    message: /listeners\[0\]\.port: 80 is below 1024.*without hostNetwork/,
  },
  {
    what: 'listener names an undefined allowlist',
    values: { listeners: [TCP_LISTENER] },
    message: /listeners\[0\]\.allowlist: "partners" is not defined under allowlists \(defined: default\)/,
  },
  {
    what: 'two listeners with one name',
    values: { listeners: [HTTP_LISTENER, { ...TCP_LISTENER, name: 'web' }], allowlists: { office: [], partners: [] } },
    message: /listeners\[1\]\.name: "web" is used twice/,
  },
  {
    what: 'listener on the admin port',
    values: withListener({ port: 9901 }),
    message: /listeners\[0\]\.port: 9901 is already used by another listener or by admin\.port/,
  },
  {
    what: 'PROXY protocol on with no trusted source (ipgate refuses it at start)',
    values: { listeners: [{ ...TCP_LISTENER, proxyProtocol: { mode: 'required', trustedSources: [] } }], allowlists: { partners: [] } },
    message: /listeners\[0\]\.proxyProtocol\.trustedSources: is empty, so no peer may send a PROXY header in mode "required"/,
  },
  {
    what: 'grace period shorter than the drain',
    values: { terminationGracePeriodSeconds: 10 },
    message: /terminationGracePeriodSeconds: 10 s is not more than/,
  },
  {
    what: 'hostNetwork Deployment with 2 replicas and no anti-affinity',
    values: { hostNetwork: true, kind: 'Deployment', replicaCount: 2 },
    message: /hostNetwork: two pods of a Deployment on one node/,
  },
];

for (const c of CASES) {
  t.test(`refused: ${c.what}`, async (t) => {
    t.match(renderError(c.values), c.message);
  });
}

// -------------------------------------------------------------------------------------------------
// CIDRs and addresses

const withLists = (lists: Record<string, unknown[]>) => ({
  listeners: [{ ...HTTP_LISTENER, allowlist: 'office' }],
  allowlists: { office: [], ...lists },
});

const BAD_CIDRS: { what: string; values: Record<string, unknown>; field: string }[] = [
  {
    what: 'an allowlist entry with three octets',
    values: withLists({ office: ['203.0.113.0/24', '203.0.113/24'] }),
    field: '/allowlists/office/1',
  },
  {
    what: 'an allowlist entry object with prefix 33',
    values: withLists({ office: [{ cidr: '203.0.113.0/33', comment: 'x' }] }),
    field: '/allowlists/office/0',
  },
  { what: 'an allowlist entry with a leading-zero octet', values: withLists({ office: ['010.0.0.0/8'] }), field: '/allowlists/office/0' },
  { what: 'an IPv6 entry with two "::"', values: withLists({ office: ['2001:db8::1::/64'] }), field: '/allowlists/office/0' },
  {
    what: 'an expiresAt without time and offset',
    values: withLists({ office: [{ cidr: '10.0.0.0/8', expiresAt: '2030-01-01' }] }),
    field: '/allowlists/office/0/expiresAt',
  },
  {
    what: 'a PROXY trusted source with an octet above 255',
    values: {
      listeners: [{ ...TCP_LISTENER, proxyProtocol: { mode: 'optional', trustedSources: ['10.0.0.256/32'] } }],
      allowlists: { partners: [] },
    },
    field: '/listeners/0/proxyProtocol/trustedSources/0',
  },
  {
    what: 'a trusted proxy with a trailing "/"',
    values: { listeners: [{ ...HTTP_LISTENER, http: { trustedProxies: ['192.0.2.0/'] } }], allowlists: { office: [] } },
    field: '/listeners/0/http/trustedProxies/0',
  },
  {
    what: 'clusterNetworks with a comma',
    values: { config: { clusterNetworks: ['10.244.0.0/16,10.96.0.0/12'] } },
    field: '/config/clusterNetworks/0',
  },
  {
    what: 'loadBalancerSourceRanges without a prefix (Kubernetes needs one)',
    values: { service: { type: 'LoadBalancer', loadBalancerSourceRanges: ['203.0.113.7'] } },
    field: '/service/loadBalancerSourceRanges/0',
  },
  {
    what: 'an upstream port 70000',
    values: { listeners: [{ ...HTTP_LISTENER, upstreams: ['web.apps:70000'] }], allowlists: { office: [] } },
    field: '/listeners/0/upstreams/0',
  },
  {
    what: 'an upstream IPv6 address without brackets',
    values: { listeners: [{ ...HTTP_LISTENER, upstreams: ['2001:db8::1:8080'] }], allowlists: { office: [] } },
    field: '/listeners/0/upstreams/0',
  },
];

for (const c of BAD_CIDRS) {
  t.test(`helm lint refuses ${c.what}, naming the field`, async (t) => {
    const r = lint(c.values);
    t.not(r.status, 0, 'lint fails');
    t.match(r.output, new RegExp(`at '${c.field.replace(/\//g, '\\/')}'`), `names ${c.field}`);
    t.match(r.output, /1 chart\(s\) failed/);
  });
}

t.test('helm lint passes the same fields written correctly (the refusals above are about the typo)', async (t) => {
  const r = lint({
    listeners: [
      {
        ...HTTP_LISTENER,
        allowlist: 'office',
        upstreams: ['web.apps:8080', '[2001:db8::10]:8080', '192.0.2.10:80'],
        http: { trustedProxies: ['192.0.2.0/24', '2001:db8:1::/48'] },
      },
      { ...TCP_LISTENER, proxyProtocol: { mode: 'optional', trustedSources: ['10.0.0.0/8', '10.1.2.3'] } },
    ],
    allowlists: {
      office: ['203.0.113.0/24', '203.0.113.7', '::/0', { cidr: '2001:db8::/32', expiresAt: '2030-01-31T18:00:00+01:00' }],
      partners: [],
    },
    config: { clusterNetworks: ['10.244.0.0/16', 'fd00:10:244::/56'] },
    service: { type: 'LoadBalancer', loadBalancerSourceRanges: ['0.0.0.0/0', '::/0'] },
  });
  t.equal(r.status, 0, r.output);
});

t.test('an IPv4 CIDR with host bits set, or an IPv4-mapped one, is refused by the chart (ipgate would refuse it at start)', async (t) => {
  t.match(
    renderError(withLists({ office: ['203.0.113.7/24'] })),
    /allowlists\.office\[0\]: host bits set in "203\.0\.113\.7\/24": did you mean 203\.0\.113\.0\/24\?/,
  );
  t.match(
    renderError(withLists({ office: [{ cidr: '10.1.0.0/8' }] })),
    /allowlists\.office\[0\]\.cidr: host bits set in "10\.1\.0\.0\/8": did you mean 10\.0\.0\.0\/8\?/,
  );
  t.match(
    renderError({ config: { clusterNetworks: ['10.244.1.0/16'] } }),
    /config\.clusterNetworks\[0\]: host bits set .* did you mean 10\.244\.0\.0\/16\?/,
  );
  t.match(
    renderError({
      listeners: [{ ...TCP_LISTENER, proxyProtocol: { mode: 'optional', trustedSources: ['10.0.0.1/31'] } }],
      allowlists: { partners: [] },
    }),
    /listeners\[0\]\.proxyProtocol\.trustedSources\[0\]: host bits set .* did you mean 10\.0\.0\.0\/31\?/,
  );
  t.match(
    renderError({ listeners: [{ ...HTTP_LISTENER, http: { trustedProxies: ['192.0.2.255/25'] } }], allowlists: { office: [] } }),
    /listeners\[0\]\.http\.trustedProxies\[0\]: host bits set .* did you mean 192\.0\.2\.128\/25\?/,
  );
  t.match(
    renderError(withLists({ office: ['::ffff:203.0.113.0/120'] })),
    /allowlists\.office\[0\]: "::ffff:203\.0\.113\.0\/120" is an IPv4-mapped IPv6 CIDR, which never matches/,
  );
  t.match(
    renderError({ config: { clusterNetworks: ['0:0:0:0:0:FFFF:a00:0/104'] } }),
    /config\.clusterNetworks\[0\]: .* is an IPv4-mapped IPv6 CIDR/,
  );
  // The edges: /0, /32 and a bare address have no host bits to check.
  const ok = render(
    withLists({ office: ['0.0.0.0/0', '255.255.255.255/32', '255.255.255.254/31', '198.51.100.7', '2001:db8::/32', '64:ff9b::/96'] }),
  );
  t.equal(ok.all('ConfigMap').length > 0, true);
});

// The schema's patterns, as helm compiles them (Go RE2 and JavaScript agree on this subset:
// no lookaround, no backreferences, ASCII classes only).
const schema = JSON.parse(fs.readFileSync(path.join(CHART, 'values.schema.json'), 'utf8')) as {
  definitions: Record<string, { pattern: string }>;
};
const pattern = (name: string): RegExp => new RegExp(schema.definitions[name]!.pattern);
const CIDR = pattern('cidr');
const CIDR_WITH_PREFIX = pattern('cidrWithPrefix');
const UPSTREAM = pattern('upstream');

/** ipgate's verdict on syntax: refusals for host bits and IPv4-mapped CIDRs are semantic, not syntax. */
function ipgateSyntaxOk(text: string): boolean {
  const r = parseCidr(text);
  return r.ok || /^"[^"]*": (host bits set|an IPv4-mapped IPv6 CIDR)/.test(r.message);
}

const CIDR_CASES = [
  '10.0.0.0/8',
  '0.0.0.0/0',
  '255.255.255.255/32',
  '198.51.100.7',
  '10.0.0.0/08',
  '10.0.0.0/',
  '10.0.0.0/33',
  '10/8',
  '10.1/16',
  '010.0.0.0/8',
  '256.0.0.0/8',
  '1.2.3.4.5/32',
  ' 10.0.0.0/8',
  '10.0.0.0 /8',
  '10.0.0.0/8/8',
  '0x0a.0.0.0/8',
  '1.2.3.-1/32',
  '::/0',
  '::',
  '::1',
  '::1/128',
  '2001:db8::/32',
  '2001:DB8::/32',
  '2001:db8::/129',
  '2001:db8:::/32',
  ':::1',
  '1::2::3',
  '1:2:3:4:5:6:7:8',
  '1:2:3:4:5:6:7:8/64',
  '1:2:3:4:5:6:7:8:9',
  '1:2:3:4:5:6:7::',
  '::2:3:4:5:6:7:8',
  '1:2:3:4:5:6:7:8::',
  '12345::/16',
  'fe80::1%eth0',
  '::ffff:1.2.3.4',
  '::ffff:1.2.3.4/128',
  '::ffff:0:0/96',
  '::1.2.3.4',
  '64:ff9b::192.0.2.33',
  '1:2:3:4:5:6:1.2.3.4',
  '1:2:3:4:5:6:7:1.2.3.4',
  '1::1.2.3.4',
  '1:2:3:4:5::1.2.3.4',
  '1:2:3:4:5:6::1.2.3.4',
  'g::1',
  '2001:db8::/032',
];

t.test("the CIDR pattern agrees with ipgate's parser on every listed case", async (t) => {
  for (const c of CIDR_CASES) {
    t.equal(CIDR.test(c), ipgateSyntaxOk(c), `${JSON.stringify(c)}: ipgate ${ipgateSyntaxOk(c) ? 'accepts' : 'refuses'} its syntax`);
  }
});

/** Random IPv6 text forms: full, "::" anywhere it fits, upper case, an IPv4 tail, and mutations. */
function randomV6(rand: () => number): string {
  const groups = Array.from({ length: 8 }, () => (rand() < 0.4 ? 0 : Math.floor(rand() * 65536)).toString(16));
  let parts = groups;
  if (rand() < 0.3)
    parts = [
      ...groups.slice(0, 6),
      `${Math.floor(rand() * 256)}.${Math.floor(rand() * 256)}.${Math.floor(rand() * 256)}.${Math.floor(rand() * 256)}`,
    ];
  let text = parts.join(':');
  if (rand() < 0.7) {
    const n = parts.length;
    const from = Math.floor(rand() * n);
    const to = Math.min(n, from + 1 + Math.floor(rand() * (n - from)));
    text = `${parts.slice(0, from).join(':')}::${parts.slice(to).join(':')}`;
  }
  if (rand() < 0.2) text = text.toUpperCase();
  const mutation = rand();
  if (mutation < 0.08) text = `${text}:1`;
  else if (mutation < 0.16) text = text.replace(':', ':::');
  else if (mutation < 0.22) text = text.replace(/[0-9a-f]+/i, '12345');
  else if (mutation < 0.28) text = `${text}::`;
  if (rand() < 0.5) text += `/${Math.floor(rand() * 140)}`;
  return text;
}

t.test("the CIDR pattern agrees with ipgate's parser on 20,000 random IPv6 forms (seeded)", async (t) => {
  const rand = prng(21);
  let accepted = 0;
  let disagreements = 0;
  for (let i = 0; i < 20_000; i++) {
    const text = randomV6(rand);
    const ok = ipgateSyntaxOk(text);
    if (ok) accepted++;
    if (CIDR.test(text) !== ok) {
      if (disagreements++ < 10)
        t.fail(`${JSON.stringify(text)}: pattern ${CIDR.test(text) ? 'matches' : 'does not match'}, ipgate ${ok ? 'accepts' : 'refuses'}`);
    }
  }
  t.equal(disagreements, 0);
  t.ok(accepted > 5000 && accepted < 18_000, `both kinds occur (${accepted} accepted)`);
});

t.test('CIDRs for Kubernetes fields need the prefix; the rest is the same pattern', async (t) => {
  t.ok(CIDR_WITH_PREFIX.test('10.0.0.0/8'));
  t.notOk(CIDR_WITH_PREFIX.test('10.0.0.1'));
  t.notOk(CIDR_WITH_PREFIX.test('2001:db8::1'));
  for (const c of CIDR_CASES.filter((c) => c.includes('/'))) t.equal(CIDR_WITH_PREFIX.test(c), CIDR.test(c), c);
});

t.test("the upstream pattern agrees with ipgate's host:port parser", async (t) => {
  const cases = [
    'web:8080',
    'web.apps.svc.cluster.local:443',
    'web.apps.svc.cluster.local.:443',
    '192.0.2.10:80',
    '[2001:db8::1]:8080',
    '[::1]:1',
    'web',
    'web:',
    'web:0',
    'web:65535',
    'web:65536',
    'web:08080',
    '2001:db8::1:8080',
    '[2001:db8::1]',
    '[2001:db8::1]8080',
    '-web:80',
    'we_b:80',
    'web..apps:80',
    '[1.2.3.4]:80',
    `${'a'.repeat(63)}.b:1`,
    `${'a'.repeat(64)}.b:1`,
  ];
  for (const c of cases) {
    const ipgate = typeof parseHostPort(c, false) !== 'string';
    t.equal(UPSTREAM.test(c), ipgate, `${JSON.stringify(c)}: ipgate ${ipgate ? 'accepts' : 'refuses'}`);
  }
});

t.test('IPv6 host bits: the chart agrees with ipgate on seeded random CIDRs (all valid ones render, each refused one fails)', async (t) => {
  const rand = prng(2121);
  const valid: string[] = [];
  const hostBits: string[] = [];
  while (valid.length < 200 || hostBits.length < 12) {
    const text = randomV6(rand);
    if (!text.includes('/') || !CIDR.test(text)) continue;
    const r = parseCidr(text);
    if (r.ok && valid.length < 200) valid.push(text);
    else if (!r.ok && /^"[^"]*": host bits set/.test(r.message) && hostBits.length < 12) hostBits.push(text);
  }
  t.doesNotThrow(() => render(withLists({ office: valid })), `${valid.length} CIDRs ipgate accepts render`);
  for (const c of hostBits) {
    t.match(
      renderError(withLists({ office: [c] })),
      /allowlists\.office\[0\]: host bits set in .*: the address must be the first of its \/\d+/,
      c,
    );
  }
});

// -------------------------------------------------------------------------------------------------
// Trusting every address

t.test('a trust list covering every address is refused with the reason, listed or through the allowlist it names', async (t) => {
  const rows: { what: string; values: Record<string, unknown>; message: RegExp }[] = [
    {
      what: 'trustedSources 0.0.0.0/0',
      values: {
        listeners: [{ ...TCP_LISTENER, proxyProtocol: { mode: 'required', trustedSources: ['10.0.0.0/8', '0.0.0.0/0'] } }],
        allowlists: { partners: [] },
      },
      message:
        /listeners\[0\]\.proxyProtocol\.trustedSources: a range covering every address \(\/0\) trusts every peer: any client could send a PROXY header naming any client address and pass the allowlist as that address/,
    },
    {
      what: 'trustedProxies ::/0',
      values: { listeners: [{ ...HTTP_LISTENER, http: { trustedProxies: ['::/0'] } }], allowlists: { office: [] } },
      message:
        /listeners\[0\]\.http\.trustedProxies: a range covering every address \(\/0\) trusts every peer: any client could send an X-Forwarded-For naming any client address/,
    },
    {
      what: 'trustedSources naming an allowlist that holds 0.0.0.0/0',
      values: {
        listeners: [{ ...TCP_LISTENER, proxyProtocol: { mode: 'optional', trustedSources: 'balancers' } }],
        allowlists: { partners: [], balancers: ['192.0.2.0/24', { cidr: '0.0.0.0/0', comment: 'all' }] },
      },
      message:
        /listeners\[0\]\.proxyProtocol\.trustedSources: a range covering every address \(\/0\) \(through allowlist "balancers"\) trusts every peer/,
    },
    {
      what: 'trustedProxies naming a source: config list that holds ::/0',
      values: {
        listeners: [{ ...HTTP_LISTENER, http: { trustedProxies: 'proxies' } }],
        allowlists: { office: [], proxies: { source: 'config', entries: ['::/0'] } },
      },
      message: /listeners\[0\]\.http\.trustedProxies: .* \(through allowlist "proxies"\)/,
    },
  ];
  for (const row of rows) {
    const message = renderError(row.values);
    t.match(message, row.message, row.what);
    t.match(
      message,
      /List your balancers' or proxies' CIDRs instead; if nothing but them can reach this listener \(a firewall, a NetworkPolicy\), set listeners\[0\]\.allowTrustAll: true/,
      `${row.what}: the way out`,
    );
  }
});

t.test("allowTrustAll: true renders the trust-all range, and stays out of ipgate's config (a chart-only key)", async (t) => {
  const out = render({
    listeners: [{ ...TCP_LISTENER, allowTrustAll: true, proxyProtocol: { mode: 'required', trustedSources: ['0.0.0.0/0', '::/0'] } }],
    allowlists: { partners: [] },
  });
  const config = parseConfig(out.one('ConfigMap', '-config').data['config.yaml'] as string);
  t.same(config.listeners[0]!.proxyProtocol.trustedSources, ['0.0.0.0/0', '::/0']);
  t.notMatch(out.one('ConfigMap', '-config').data['config.yaml'] as string, /allowTrustAll/, "ipgate's schema would refuse the key");
  t.match(
    renderError({ listeners: [{ ...TCP_LISTENER, allowTrustAll: 'always' }], allowlists: { partners: [] } }),
    /at '\/listeners\/0\/allowTrustAll': got string, want boolean/,
  );
  // An allowlist of clients may of course admit everyone: only trust lists are checked.
  t.doesNotThrow(() => render({ listeners: [{ ...HTTP_LISTENER, allowlist: 'office' }], allowlists: { office: ['0.0.0.0/0', '::/0'] } }));
});
