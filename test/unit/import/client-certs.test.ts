/**
 * `--tls` off the cluster and client certificates (src/import/listeners.ts, client-certs.ts):
 * Secret directories a chart can mount (cert-manager's dotted names included), the files named
 * but not read, auth-tls-secret / auth-tls-verify-client as the HTTPS listener's tls.clientCA /
 * tls.clientCertificate where every host asked the same, the hosts that cannot be honoured left
 * off (never served without the certificate ingress-nginx asked for), the ssl-client-* headers
 * removed from clients, use-regex reported by name.
 */
import t from 'tap';
import { buildConfig } from '../../../src/config/load';
import { convertIngressNginx, DEFAULT_OPTIONS, type ImportOptions, type ImportResult } from '../../../src/import/ingress-nginx';
import type { KubeObject } from '../../../src/import/objects';

const A = 'nginx.ingress.kubernetes.io/';

interface Spec {
  host: string;
  path?: string;
  tls?: string | null;
  ann?: Record<string, string>;
}
let seq = 0;
function ingress(ns: string, name: string, s: Spec): KubeObject {
  seq++;
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(s.ann ?? {})) annotations[`${A}${k}`] = v;
  return {
    kind: 'Ingress',
    metadata: { name, namespace: ns, creationTimestamp: `2024-01-${String(seq).padStart(2, '0')}T00:00:00Z`, annotations },
    spec: {
      ingressClassName: 'nginx',
      ...(s.tls !== undefined ? { tls: [{ hosts: [s.host], ...(s.tls !== null ? { secretName: s.tls } : {}) }] } : {}),
      rules: [
        {
          host: s.host,
          http: { paths: [{ path: s.path ?? '/', pathType: 'Prefix', backend: { service: { name, port: { number: 80 } } } }] },
        },
      ],
    },
  };
}

function convert(ingresses: KubeObject[], opts: Partial<ImportOptions> = {}, cm: Record<string, string> | null = null): ImportResult {
  const configMap: KubeObject | null =
    cm === null ? null : { kind: 'ConfigMap', metadata: { name: 'ingress-nginx-controller', namespace: 'ingress-nginx' }, data: cm };
  return convertIngressNginx({ ingresses, services: [], configMap, servicesFrom: 'file' }, { ...DEFAULT_OPTIONS, tls: true, ...opts });
}

type L = {
  name: string;
  tls?: Record<string, unknown>;
  http: Record<string, unknown>;
  routes: Array<{ hosts: string[]; allowlist?: string }>;
};
const listeners = (r: ImportResult): L[] => r.config!.listeners as L[];
const hostsOf = (l: L | undefined): string[] => (l?.routes ?? []).map((x) => x.hosts[0]!);
const findings = (list: Array<{ source: string; item: string; reason: string }>, item: string): string[] =>
  list.filter((f) => f.item.endsWith(item)).map((f) => `${f.source}: ${f.reason}`);

t.test("cert-manager's dotted Secret name is the directory; a name no Secret can have is listed; the files are not read", async (t) => {
  const r = convert([
    ingress('shop', 'web', { host: 'shop.example.com', tls: 'shop.example.com-tls' }),
    ingress('shop', 'bad', { host: 'bad.example.com', tls: 'Shop_TLS' }),
  ]);
  const https = listeners(r)[1]!;
  t.same(https.tls, {
    certificates: [{ cert: '/etc/ipgate/tls/shop.example.com-tls/tls.crt', key: '/etc/ipgate/tls/shop.example.com-tls/tls.key' }],
  });
  t.match(findings(r.report.unconverted, 'secretName'), [/^Ingress shop\/bad: not a Kubernetes Secret name \(a DNS-1123 subdomain/]);
  t.match(
    r.report.notes.find((n) => n.item === 'tls.secrets'),
    { source: 'chart', value: '[{name: shop.example.com-tls, secretName: shop.example.com-tls}]' },
    'the chart values that mount it, name = secretName',
  );
  t.doesNotThrow(() => buildConfig(r.config!, undefined, { tlsFiles: false }), 'every check but the files');
  t.throws(
    () => buildConfig(r.config!),
    /listeners\[1\]\.tls\.certificates\[0\]\.cert: "\/etc\/ipgate\/tls\/shop\.example\.com-tls\/tls\.crt": cannot read/,
    'ipgate at start-up (and check-config) still reads them',
  );

  const rel = convert([ingress('shop', 'web', { host: 'shop.example.com', tls: 'web-tls' })], { tlsDir: 'tls' });
  t.same(
    listeners(rel)[1]!.tls,
    { certificates: [{ cert: 'tls/web-tls/tls.crt', key: 'tls/web-tls/tls.key' }] },
    '--tls-dir tls: relative to the config file',
  );
});

t.test(
  'every host required a certificate from one CA: the HTTPS listener requires it; plaintext only redirects the hosts to HTTPS',
  async (t) => {
    const r = convert([
      ingress('bank', 'api', { host: 'api.bank.example', tls: 'api-tls', ann: { 'auth-tls-secret': 'bank/partners-ca' } }),
      ingress('bank', 'admin', {
        host: 'admin.bank.example',
        tls: 'admin-tls',
        ann: { 'auth-tls-secret': 'bank/partners-ca', 'auth-tls-verify-client': 'on', 'auth-tls-match-cn': 'CN=ops' },
      }),
    ]);
    const ls = listeners(r);
    t.same(
      ls.map((l) => l.name),
      ['http', 'https'],
    );
    t.same(
      ls[0]!.routes.map((x) => (x as { http?: unknown }).http),
      [{ redirect: { scheme: 'https', status: 308 } }, { redirect: { scheme: 'https', status: 308 } }],
      "plaintext: ingress-nginx's redirect to HTTPS only, which no X-Forwarded-Proto turns off: never forwarded without the certificate",
    );
    t.match(ls[1]!.tls, { clientCA: '/etc/ipgate/tls/partners-ca/ca.crt', clientCertificate: 'required' });
    t.same(hostsOf(ls[1]), ['api.bank.example', 'admin.bank.example']);
    t.same(ls[1]!.http.stripHeaders, ['ssl-client-cert', 'ssl-client-verify', 'ssl-client-subject-dn', 'ssl-client-issuer-dn']);
    t.same(findings(r.report.unconverted, 'auth-tls-secret'), []);
    t.match(findings(r.report.notes, 'auth-tls-secret').join('\n'), /host api\.bank\.example is only redirected on the plaintext listener/);
    t.match(findings(r.report.unconverted, 'auth-tls-match-cn'), [/^Ingress bank\/admin: ipgate does not check the certificate's subject/]);
    t.match(
      findings(r.report.notes, 'auth-tls-secret').join('\n'),
      /the HTTPS listener's tls\.clientCertificate: required and tls\.clientCA/,
    );
    t.match(
      r.report.notes.find((n) => n.item === 'tls.secrets')!.value,
      /\{name: partners-ca, secretName: partners-ca\}/,
      'the CA Secret is mounted too',
    );
    t.doesNotThrow(() => buildConfig(r.config!, undefined, { tlsFiles: false }));
  },
);

t.test('mixed hosts: the one that required a certificate is left off both listeners, never served without it', async (t) => {
  const r = convert([
    ingress('bank', 'api', { host: 'api.bank.example', tls: 'api-tls', ann: { 'auth-tls-secret': 'bank/partners-ca' } }),
    ingress('shop', 'web', { host: 'www.example.com', tls: 'www-tls' }),
  ]);
  const [http, https] = listeners(r);
  t.same(hostsOf(http), ['api.bank.example', 'www.example.com']);
  t.same((http!.routes[0] as { http?: unknown }).http, { redirect: { scheme: 'https', status: 308 } }, 'api: redirected only');
  t.same((http!.routes[1] as { http?: unknown }).http, { httpsRedirect: { status: 308 } }, "www: ingress-nginx's ssl-redirect");
  t.same(hostsOf(https), ['www.example.com']);
  t.notOk('clientCA' in https!.tls!, 'no client certificate asked of www');
  t.match(findings(r.report.unconverted, 'auth-tls-secret'), [
    /host api\.bank\.example is left off the HTTPS listener: ingress-nginx required a client certificate from bank\/partners-ca's ca\.crt .* \(www\.example\.com\) required none or another CA: give api\.bank\.example an HTTPS listener of its own/,
  ]);
  t.same(
    http!.http.stripHeaders,
    ['ssl-client-cert', 'ssl-client-verify', 'ssl-client-subject-dn', 'ssl-client-issuer-dn'],
    'a client cannot claim a verified certificate to any backend',
  );
});

t.test('without --tls: the certificate ingress-nginx asked for over HTTPS is listed by name', async (t) => {
  const r = convert(
    [ingress('bank', 'api', { host: 'api.bank.example', ann: { 'auth-tls-secret': 'bank/ca', 'auth-tls-verify-client': 'optional' } })],
    { tls: false },
  );
  t.same(hostsOf(listeners(r)[0]), ['api.bank.example'], 'no TLS block, no redirect: plaintext as ingress-nginx served it');
  t.match(findings(r.report.unconverted, 'auth-tls-secret'), [
    /^Ingress bank\/api: ingress-nginx asked api\.bank\.example for a client certificate over HTTPS \(auth-tls-verify-client optional\); an HTTPS listener is written only with --tls$/,
  ]);
});

t.test('ssl-redirect "false": ingress-nginx served the host in plaintext without a certificate, and so does ipgate', async (t) => {
  const r = convert([
    ingress('bank', 'api', { host: 'api.bank.example', tls: 'api-tls', ann: { 'auth-tls-secret': 'bank/ca', 'ssl-redirect': 'false' } }),
  ]);
  t.same(
    listeners(r).map((l) => `${l.name} ${hostsOf(l).join(',')}`),
    ['http api.bank.example', 'https api.bank.example'],
  );
  const viaCm = convert(
    [ingress('bank', 'api', { host: 'api.bank.example', tls: 'api-tls', ann: { 'auth-tls-secret': 'bank/ca' } })],
    {},
    { 'ssl-redirect': 'false' },
  );
  t.same(
    listeners(viaCm).map((l) => l.name),
    ['http', 'https'],
    'the ConfigMap\'s ssl-redirect: "false" too',
  );
  t.same(viaCm.report.unconverted, [], 'and the ConfigMap key is not listed (nothing to redirect)');
});

t.test('optional, optional_no_ca, off, and the second Ingress on a host', async (t) => {
  const optional = convert([
    ingress('a', 'one', { host: 'one.example', tls: 'one-tls', ann: { 'auth-tls-secret': 'a/ca', 'auth-tls-verify-client': 'optional' } }),
    ingress('a', 'two', { host: 'two.example', tls: 'two-tls', ann: { 'auth-tls-secret': 'a/ca', 'auth-tls-verify-client': 'optional' } }),
  ]);
  t.match(listeners(optional)[1]!.tls, { clientCA: '/etc/ipgate/tls/ca/ca.crt', clientCertificate: 'optional' });
  t.same(
    listeners(optional).map((l) => hostsOf(l).length),
    [2, 2],
    'optional hosts stay on plaintext: a client without a certificate was served anyway',
  );

  const mixed = convert([
    ingress('a', 'one', { host: 'one.example', tls: 'one-tls', ann: { 'auth-tls-secret': 'a/ca', 'auth-tls-verify-client': 'optional' } }),
    ingress('a', 'nca', {
      host: 'nca.example',
      tls: 'nca-tls',
      ann: { 'auth-tls-secret': 'a/ca', 'auth-tls-verify-client': 'optional_no_ca', 'auth-tls-pass-certificate-to-upstream': 'true' },
    }),
    ingress('a', 'off', { host: 'off.example', tls: 'off-tls', ann: { 'auth-tls-secret': 'a/ca', 'auth-tls-verify-client': 'off' } }),
  ]);
  const https = listeners(mixed)[1]!;
  t.notOk('clientCA' in https.tls!);
  t.same(hostsOf(https), ['one.example', 'nca.example', 'off.example'], 'kept: none of them refused a client without a certificate');
  t.match(findings(mixed.report.unconverted, 'auth-tls-secret'), [
    /^Ingress a\/one: host one\.example: not asked for a client certificate \(auth-tls-verify-client optional\)/,
    /^Ingress a\/nca: host nca\.example: ipgate does not ask for a certificate it does not verify/,
  ]);
  t.match(findings(mixed.report.unconverted, 'auth-tls-pass-certificate-to-upstream'), [
    /^Ingress a\/nca: ipgate sends no ssl-client-cert header upstream/,
  ]);

  const second = convert([
    ingress('a', 'first', { host: 'x.example', tls: 'x-tls', ann: { 'auth-tls-secret': 'a/ca-1' } }),
    ingress('a', 'later', { host: 'x.example', tls: 'x-tls', ann: { 'auth-tls-secret': 'a/ca-2' } }),
  ]);
  t.match(listeners(second)[1]!.tls, { clientCA: '/etc/ipgate/tls/ca-1/ca.crt' }, "the oldest Ingress sets the host's CA");
  t.match(findings(second.report.notes, 'auth-tls-secret'), [
    /^Ingress a\/later: not used for x\.example \(Ingress a\/first\): an older Ingress set/,
    /^Ingress a\/first: host x\.example is only redirected on the plaintext listener/,
    /^Ingress a\/first: the HTTPS listener's/,
  ]);
  t.match(
    second.report.notes.find((n) => n.item === 'http.stripHeaders'),
    { source: 'Ingress a/first', value: 'ssl-client-cert, ssl-client-verify, ssl-client-subject-dn, ssl-client-issuer-dn' },
  );

  const bad = convert([ingress('a', 'x', { host: 'x.example', ann: { 'auth-tls-verify-client': 'maybe', 'auth-tls-secret': 'a/ca' } })], {
    tls: false,
  });
  t.match(findings(bad.report.notes, 'auth-tls-verify-client'), [/not on, off, optional or optional_no_ca: ingress-nginx took "on"/]);
  const lone = convert([ingress('a', 'x', { host: 'x.example', ann: { 'auth-tls-verify-client': 'on' } })], { tls: false });
  t.match(findings(lone.report.notes, 'auth-tls-verify-client'), [/has no effect without auth-tls-secret/]);
  t.equal(
    lone.report.notes.some((n) => n.reason.includes('ssl-client')),
    false,
    'no CA, no headers removed',
  );
});

t.test('an auth-tls-secret ingress-nginx could not use: the host answered 403, and its routes get the empty list', async (t) => {
  const rows: Array<{ what: string; secret: string; cm?: Record<string, string>; refused: boolean }> = [
    { what: 'not namespace/name', secret: 'partners-ca', refused: true },
    { what: 'another namespace', secret: 'other/partners-ca', refused: true },
    {
      what: 'another namespace with allow-cross-namespace-resources',
      secret: 'other/partners-ca',
      cm: { 'allow-cross-namespace-resources': 'true' },
      refused: false,
    },
    { what: "an empty namespace is the Ingress's", secret: '/partners-ca', refused: false },
  ];
  for (const row of rows) {
    const r = convert(
      [
        ingress('bank', 'api', { host: 'api.bank.example', ann: { 'auth-tls-secret': row.secret, 'ssl-redirect': 'false' } }),
        ingress('bank', 'more', { host: 'api.bank.example', path: '/more', ann: {} }),
      ],
      { tls: false },
      row.cm ?? null,
    );
    const routes = listeners(r)[0]!.routes;
    t.same(
      routes.map((x) => x.allowlist ?? '(listener)'),
      row.refused ? ['ingress-nginx-refused', 'ingress-nginx-refused'] : ['(listener)', '(listener)'],
      `${row.what}: every route of the host`,
    );
    if (row.refused) {
      t.same((r.config!.allowlists as Record<string, unknown>)['ingress-nginx-refused'], { source: 'config', entries: [] });
      t.match(findings(r.report.unconverted, 'auth-tls-secret'), [
        /ingress-nginx answered 403 to every request for api\.bank\.example, and so does ipgate/,
      ]);
    }
    t.doesNotThrow(() => buildConfig(r.config!));
  }
});

t.test('use-regex is reported by name when it changed nothing but the matching', async (t) => {
  const r = convert([ingress('a', 'x', { host: 'x.example', ann: { 'use-regex': 'true' } })], { tls: false });
  t.match(
    r.report.notes.filter((n) => n.item === `${A}use-regex`),
    [
      {
        value: 'true',
        reason: /^ipgate matches no regular expressions; x\.example\/ hold no regex syntax and became case-sensitive prefixes/,
      },
    ],
  );
  t.same(
    convert([ingress('a', 'x', { host: 'x.example', ann: { 'use-regex': 'false' } })], { tls: false }).report.notes.filter((n) =>
      n.item.endsWith('use-regex'),
    ),
    [],
    '"false": nothing',
  );
});

t.test(
  'from-to-www-redirect on a host that required a certificate: the www route only redirects, and the listener still requires it',
  async (t) => {
    const r = convert([
      ingress('bank', 'api', {
        host: 'api.bank.example',
        tls: 'api-tls',
        ann: { 'auth-tls-secret': 'bank/ca', 'from-to-www-redirect': 'true' },
      }),
    ]);
    const [http, https] = listeners(r);
    t.same(hostsOf(https), ['api.bank.example', 'www.api.bank.example']);
    t.match(
      https!.tls,
      { clientCA: '/etc/ipgate/tls/ca/ca.crt', clientCertificate: 'required' },
      'the www route does not take the requirement off',
    );
    t.same(
      http!.routes.map((x) => (x as { http?: unknown }).http),
      [{ redirect: { scheme: 'https', status: 308 } }, { redirect: { host: 'api.bank.example', status: 308 } }],
      'plaintext: the host to HTTPS, www to the host',
    );
    t.same(findings(r.report.unconverted, 'auth-tls-secret'), []);
  },
);
