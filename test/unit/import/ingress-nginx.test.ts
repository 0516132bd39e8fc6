/**
 * `ipgate import ingress-nginx` on the fixture corpus (test/fixtures/ingress-nginx/): per manifest,
 * the exact list of what is not carried over, the routes and allowlists made, and that the config
 * passes the loader `check-config` uses (buildConfig).
 */
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildConfig } from '../../../src/config/load';
import type { Config } from '../../../src/schema/config';
import { convertIngressNginx, DEFAULT_OPTIONS, uniqueName, type ImportOptions, type ImportResult } from '../../../src/import/ingress-nginx';
import { addDocuments, emptySet } from '../../../src/import/objects';
import { FIXTURES } from '../../helpers/root';

const DIR = path.join(FIXTURES, 'ingress-nginx');

function importFixture(file: string, opts: Partial<ImportOptions> = {}): ImportResult {
  const set = emptySet();
  addDocuments(set, fs.readFileSync(path.join(DIR, file), 'utf8'), file);
  const configMap = set.configMaps.find((c) => c.metadata?.name === 'ingress-nginx-controller') ?? null;
  return convertIngressNginx(
    { ingresses: set.ingresses, services: set.services, configMap, servicesFrom: 'file' },
    { ...DEFAULT_OPTIONS, ...opts },
  );
}

/** `name hosts paths -> upstream [allowlist]`, one string per route of the first listener. */
function routesOf(c: Config): string[] {
  return c.listeners[0]!.routes!.map(
    (r) =>
      `${r.name} ${r.hosts.join(',')} ${(r.paths ?? []).map((p) => `${p.match}:${p.path}`).join(',') || '(every path)'} -> ${r.upstreams!.join(',')}${r.allowlist ? ` [${r.allowlist}]` : ''}`,
  );
}

/** `cidr` or `deny cidr`, one string per entry. */
function entries(c: Config, list: string): string[] {
  return c.allowlists[list]!.entries.map((e) => `${e.action === 'deny' ? 'deny ' : ''}${e.cidr}`);
}

interface Row {
  name: string;
  file: string;
  opts?: Partial<ImportOptions>;
  /** `source item`, exactly, in report order. */
  unconverted: string[];
  skipped?: string[];
  check: (t: Test, c: Config, r: ImportResult) => void;
}

const rows: Row[] = [
  {
    name: 'whitelist-source-range, two paths to two Services, TLS without --tls, a body-size limit',
    file: '01-shop-whitelist-tls.yaml',
    unconverted: ['Ingress shop/web spec.tls[0]'],
    check: (t, c, r) => {
      t.same(routesOf(c), [
        'shop-web-0 shop.example.com prefix:/ -> web.shop.svc.cluster.local:80 [shop-web]',
        'shop-web-1 shop.example.com prefix:/api -> api.shop.svc.cluster.local:8080 [shop-web]',
      ]);
      t.same(entries(c, 'shop-web'), ['10.0.0.0/8', '192.168.1.0/24']);
      t.same(entries(c, 'ingress-nginx-default'), ['0.0.0.0/0', '::/0'], 'no ConfigMap: ingress-nginx admitted everyone elsewhere');
      t.equal(c.allowlists['shop-web']!.source, 'config');
      t.same(
        r.report.ignored.map((f) => f.item),
        ['cert-manager.io/cluster-issuer'],
      );
      t.ok(
        r.report.notes.some((n) => n.item.startsWith('ssl-redirect')),
        'the HTTP->HTTPS redirect of the TLS host, with its difference, is a note',
      );
      t.same(
        c.listeners[0]!.routes!.map((x) => x.http?.httpsRedirect),
        [
          { status: 308, port: 443, beforeAllowlist: false },
          { status: 308, port: 443, beforeAllowlist: false },
        ],
        "ssl-redirect (ingress-nginx's default) on the TLS host's routes",
      );
    },
  },
  {
    name: 'allowlist-source-range with IPv6 and a denylist: allow entries inside a deny range are left out',
    file: '02-allow-deny-ipv6.yaml',
    unconverted: [],
    check: (t, c, r) => {
      t.same(routesOf(c), [
        'platform-admin-0 admin.example.com exact:/healthz,prefix:/ -> admin.platform.svc.cluster.local:9000 [platform-admin]',
      ]);
      t.same(
        entries(c, 'platform-admin'),
        ['2001:db8::/32', '10.0.0.0/8', '192.0.2.0/24', 'deny 2001:db8:dead::/48', 'deny 10.6.6.0/24'],
        '10.6.6.7 (inside the denied 10.6.6.0/24) left out; 192.0.2.10/24 masked; whitelist-source-range (0.0.0.0/0) not used',
      );
      t.match(r.report.notes.map((n) => n.reason).join('\n'), /10\.6\.6\.7\/32 \(inside deny 10\.6\.6\.0\/24\)/);
      t.match(r.report.notes.map((n) => n.reason).join('\n'), /reads its old name only when it is empty/);
    },
  },
  {
    name: 'denylist alone: everyone else admitted; ImplementationSpecific paths become prefixes with a note',
    file: '03-denylist-only.yaml',
    unconverted: [],
    check: (t, c, r) => {
      t.same(entries(c, 'marketing-blog'), ['0.0.0.0/0', '::/0', 'deny 203.0.113.0/24', 'deny 198.51.100.7/32', 'deny 2001:db8:bad::/64']);
      t.same(
        routesOf(c).map((s) => s.split(' ').slice(2, 3)[0]),
        ['prefix:/', 'prefix:/wp-admin'],
      );
      t.ok(r.report.notes.some((n) => n.item === 'pathType ImplementationSpecific' && n.value === '/, /wp-admin'));
    },
  },
  {
    name: 'use-regex + rewrite-target: the (/|$)(.*) form is a prefix rewrite; a plain path under /$2 and other regex paths are listed',
    file: '04-rewrite-regex.yaml',
    unconverted: [
      'Ingress api/rewrite spec.rules[0].http.paths[1]',
      'Ingress api/api-v2 spec.rules[0].http.paths[0]',
      'Ingress api/rewrite nginx.ingress.kubernetes.io/use-regex',
    ],
    check: (t, c, r) => {
      t.match(
        r.report.unconverted[0]!.reason,
        /^rewrite-target "\/\$2" on "\/static" \(no capture groups\): ingress-nginx \(0\.22 and later\) sent EVERY request under this path upstream as "\/"/,
        "/static under the Ingress's rewrite-target went up as / whatever the path: not a prefix rewrite",
      );
      t.match(
        r.report.unconverted.at(-1)!.reason,
        /^ipgate matches no regular expressions: api\.example\.com\/v2\/\.\* \(every Ingress's paths on api\.example\.com\) are not routed; api\.example\.com\/v2-docs hold no regex syntax/,
        'use-regex by name, with the paths it left out and those it made prefixes',
      );
      t.same(
        routesOf(c),
        [
          'api-rewrite-0 api.example.com prefix:/something -> http-svc.api.svc.cluster.local:80 [api-rewrite]',
          'api-api-v2-0 api.example.com prefix:/v2-docs -> api-v2.api.svc.cluster.local:8080',
        ],
        'the Exact /v2-docs was a regex prefix under ingress-nginx (use-regex on the host)',
      );
      t.same(
        (c.listeners[0]!.routes![0]!.http as { rewrite?: unknown }).rewrite,
        { replacePrefix: '/', forwardedPrefix: false },
        '/something(/|$)(.*) with /$2: the prefix replaced by /, no X-Forwarded-Prefix (ingress-nginx sent one only with x-forwarded-prefix)',
      );
    },
  },
  {
    name: 'auth, CORS and a snippet are listed, and the auth-url routes refused to everyone; ssl-redirect "false" and service-upstream are not (nothing to carry); the rate limit converted',
    file: '05-auth-cors-snippets.yaml',
    unconverted: ['auth-url', 'auth-signin', 'configuration-snippet', 'enable-cors'].map(
      (a) => `Ingress monitoring/grafana nginx.ingress.kubernetes.io/${a}`,
    ),
    check: (t, c) => {
      t.equal(routesOf(c).length, 2);
      // auth-url: ipgate cannot ask the auth service, so the routes fail closed (the empty list)
      // instead of serving every client of whitelist-source-range without authentication.
      t.same(
        c.listeners[0]!.routes!.map((r) => r.allowlist),
        ['ingress-nginx-refused', 'ingress-nginx-refused'],
      );
      t.same(entries(c, 'ingress-nginx-refused'), []);
      t.same(
        c.listeners[0]!.routes!.map((r) => r.http),
        [
          { upstreamTimeoutMs: 3_600_000, readTimeoutMs: 3_600_000 },
          { upstreamTimeoutMs: 3_600_000, readTimeoutMs: 3_600_000 },
        ],
        'proxy-read-timeout: "3600" on both routes (between reads, and the wait for the head)',
      );
      t.same(
        c.listeners[0]!.routes!.map((r) => r.limits?.requests?.rate),
        ['20r/s', '20r/s'],
        'limit-rps: "20" on both routes',
      );
    },
  },
  {
    name: 'a canary Ingress is skipped and its annotations listed; the primary is converted',
    file: '06-canary.yaml',
    unconverted: [
      'Ingress shop/checkout-canary nginx.ingress.kubernetes.io/canary',
      'Ingress shop/checkout-canary nginx.ingress.kubernetes.io/canary-weight',
    ],
    skipped: ['Ingress shop/checkout-canary'],
    check: (t, c) => {
      t.same(routesOf(c), ['shop-checkout-0 checkout.example.com prefix:/ -> checkout-v1.shop.svc.cluster.local:8080']);
    },
  },
  {
    name: 'ingress classes: another class and no class are skipped; the legacy annotation counts',
    file: '07-ingress-classes.yaml',
    unconverted: [],
    skipped: ['Ingress edge/traefik-app', 'Ingress edge/classless'],
    check: (t, c, r) => {
      t.same(routesOf(c), ['edge-legacy-0 legacy.example.com prefix:/ -> legacy.edge.svc.cluster.local:80']);
      t.same(r.report.ignored, [], "a skipped Ingress's annotations are not reported one by one");
    },
  },
  {
    name: '--ingress-without-class converts the Ingress naming no class',
    file: '07-ingress-classes.yaml',
    opts: { withoutClass: true },
    unconverted: [],
    skipped: ['Ingress edge/traefik-app'],
    check: (t, c) => {
      t.same(
        routesOf(c).map((s) => s.split(' ')[0]),
        ['edge-legacy-0', 'edge-classless-0'],
      );
    },
  },
  {
    name: '--ingress-class traefik converts only the Traefik Ingress',
    file: '07-ingress-classes.yaml',
    opts: { ingressClass: 'traefik' },
    unconverted: [],
    skipped: ['Ingress edge/legacy', 'Ingress edge/classless'],
    check: (t, c, r) => {
      t.same(
        routesOf(c).map((s) => s.split(' ')[0]),
        ['edge-traefik-app-0'],
      );
      t.same(
        r.report.ignored.map((f) => f.item),
        ['traefik.ingress.kubernetes.io/router.entrypoints'],
      );
    },
  },
  {
    name: 'two Ingresses claim one host + path: the oldest keeps it, equal timestamps by name descending',
    file: '08-conflict.yaml',
    unconverted: ['Ingress apps/team-a spec.rules[0].http.paths[1]', 'Ingress apps/team-b spec.rules[0].http.paths[0]'],
    check: (t, c, r) => {
      t.same(routesOf(c), [
        'apps-team-c-0 app.example.com prefix:/docs -> docs-c.apps.svc.cluster.local:80',
        'apps-team-a-0 app.example.com prefix:/api/ -> api-a.apps.svc.cluster.local:8080 [apps-team-a]',
        'apps-team-b-0 app.example.com prefix:/b -> api-b.apps.svc.cluster.local:8080 [apps-team-b]',
      ]);
      t.match(r.report.unconverted[1]!.reason, /already routed by Ingress apps\/team-a/);
    },
  },
  {
    name: 'defaultBackend is the "*" route; a named port resolves through a Service in the file, or is listed',
    file: '09-default-backend-named-ports.yaml',
    unconverted: ['Ingress docs/docs spec.rules[0].http.paths[0].backend.service.port.name'],
    check: (t, c) => {
      t.same(routesOf(c), [
        'default-catch-all-0 * (every path) -> fallback.default.svc.cluster.local:8081 [default-catch-all]',
        'docs-docs-0 docs.example.com prefix:/search -> search.docs.svc.cluster.local:7700',
      ]);
    },
  },
  {
    name: 'controller ConfigMap: PROXY protocol, trusted proxies, a global allowlist, the body size; other keys listed',
    file: '10-controller-configmap.yaml',
    unconverted: ['ssl-protocols', 'log-format-escape-json'].map((k) => `ConfigMap ingress-nginx/ingress-nginx-controller ${k}`),
    check: (t, c) => {
      const l = c.listeners[0]!;
      t.same(l.proxyProtocol.mode, 'required');
      t.same(l.proxyProtocol.trustedSources, ['10.0.0.0/16', '2001:db8:1b::/48']);
      t.same(l.http.trustedProxies, [], 'with use-proxy-protocol the PROXY header names the client: X-Forwarded-For is not walked');
      t.equal(l.http.xForwardedFor, 'append', 'compute-full-forwarded-for: "true"');
      t.equal(l.http.upstreamTimeoutMs, 120_000, 'proxy-read-timeout: "120"');
      t.equal(l.http.maxBodyBytes, 50 * 1024 * 1024, 'proxy-body-size: "50m", the default of the routes without their own');
      t.same(entries(c, 'ingress-nginx-default'), ['198.51.100.0/24', '2001:db8:cafe::/48']);
      t.same(
        routesOf(c),
        [
          'shop-store-0 store.example.com prefix:/ -> store.shop.svc.cluster.local:80',
          'shop-store-1 * exact:/status -> status.shop.svc.cluster.local:8080',
        ],
        'a rule without host is the "*" host; routes without annotations use the listener\'s (global) list',
      );
    },
  },
  {
    name: 'kubectl List (JSON): HTTPS backends and resource backends listed, host bits masked, wildcard host',
    file: '11-kubectl-list.json',
    unconverted: [
      'Ingress intranet/portal nginx.ingress.kubernetes.io/backend-protocol',
      'Ingress intranet/portal spec.rules[2].http.paths[0].backend',
      'Ingress intranet/portal spec.tls[0]',
    ],
    check: (t, c) => {
      t.same(entries(c, 'intranet-portal'), ['10.8.0.0/16', 'fd00:10::/64']);
      t.same(
        routesOf(c).map((s) => s.split(' ')[1]),
        ['portal.corp.example', 'wiki.corp.example'],
      );
    },
  },
  {
    name: '--tls: an HTTPS listener with the Secret as certificate, and nothing listed for TLS',
    file: '11-kubectl-list.json',
    opts: { tls: true },
    unconverted: [
      'Ingress intranet/portal nginx.ingress.kubernetes.io/backend-protocol',
      'Ingress intranet/portal spec.rules[2].http.paths[0].backend',
    ],
    check: () => {
      /* the HTTPS listener is checked in its own test below */
    },
  },
  {
    name: 'backend-protocol GRPC and GRPCS: routes to HTTP/2 upstreams (h2c, h2), with a note each',
    file: '13-grpc.yaml',
    unconverted: [],
    check: (t, c, r) => {
      const routes = c.listeners[0]!.routes!;
      t.same(
        routes.map((x) => `${x.hosts[0]} ${x.http?.upstreamProtocol}`),
        ['orders.example.com h2c', 'payments.example.com h2'],
      );
      t.same(
        r.report.notes.filter((n) => n.item.endsWith('backend-protocol')).map((n) => n.value),
        ['GRPC', 'grpcs'],
        'each noted',
      );
      t.match(r.report.notes.find((n) => n.value === 'grpcs')!.reason, /upstreamCA/, 'GRPCS: the CA to set is named');
    },
  },
  {
    name: 'an invalid allowlist stays closed (empty list); a forwarded-for-header ipgate cannot read trusts no proxy',
    file: '12-invalid-whitelist.yaml',
    unconverted: [
      'ConfigMap ingress-nginx/ingress-nginx-controller forwarded-for-header',
      'Ingress finance/payments nginx.ingress.kubernetes.io/whitelist-source-range',
    ],
    check: (t, c) => {
      t.same(entries(c, 'finance-payments'), []);
      t.same(c.listeners[0]!.http.trustedProxies, []);
    },
  },
];

for (const row of rows) {
  t.test(row.name, async (t) => {
    const r = importFixture(row.file, row.opts);
    t.same(
      r.report.unconverted.map((f) => `${f.source} ${f.item}`),
      row.unconverted,
      'exactly these are not carried over',
    );
    t.same(
      r.report.skipped.map((f) => f.source),
      row.skipped ?? [],
      'exactly these Ingresses are skipped',
    );
    t.not(r.config, null);
    // The TLS files are named, not read (the import runs where the Secrets are not).
    const c = buildConfig(r.config!, undefined, { tlsFiles: false });
    row.check(t, c, r);
  });
}

t.test('--tls: the HTTPS listener carries the same routes and one certificate per Secret', async (t) => {
  const r = importFixture('11-kubectl-list.json', { tls: true });
  const listeners = r.config!.listeners as Array<Record<string, unknown>>;
  t.same(
    listeners.map((l) => `${String(l.name)} ${String(l.listen)}`),
    ['http 0.0.0.0:8080', 'https 0.0.0.0:8443'],
  );
  t.same(listeners[1]!.tls, {
    certificates: [{ cert: '/etc/ipgate/tls/corp-wildcard/tls.crt', key: '/etc/ipgate/tls/corp-wildcard/tls.key' }],
  });
  t.same(listeners[1]!.routes, listeners[0]!.routes);
  t.not(listeners[1]!.routes, listeners[0]!.routes, 'copies: the YAML output has no anchors');
});

t.test('the same Secret name in two namespaces gets one directory each', async (t) => {
  const ing = (ns: string): Record<string, unknown> => ({
    kind: 'Ingress',
    metadata: { name: 'app', namespace: ns },
    spec: {
      ingressClassName: 'nginx',
      tls: [{ hosts: [`${ns}.example.com`], secretName: 'tls' }],
      rules: [
        {
          host: `${ns}.example.com`,
          http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'app', port: { number: 80 } } } }] },
        },
      ],
    },
  });
  const r = convertIngressNginx(
    { ingresses: [ing('a'), ing('b')], services: [], configMap: null, servicesFrom: 'file' },
    { ...DEFAULT_OPTIONS, tls: true },
  );
  const https = (r.config!.listeners as Array<Record<string, unknown>>)[1]!;
  t.same(
    (https.tls as { certificates: Array<{ cert: string }> }).certificates.map((c) => c.cert),
    ['/etc/ipgate/tls/b.tls/tls.crt', '/etc/ipgate/tls/a.tls/tls.crt'],
    'no timestamps: ingress-nginx\'s order is "namespace/name" descending',
  );
});

t.test('no Ingress of the class: no config, and the report says why', async (t) => {
  const r = importFixture('07-ingress-classes.yaml', { ingressClass: 'haproxy' });
  t.equal(r.config, null);
  t.equal(r.report.skipped.length, 3);
  t.equal(r.report.routes, 0);
});

t.test('route and list names: bounded labels, hashed when long or taken, stable', async (t) => {
  const rows: Array<{ name: string; base: string; taken: string[]; expect: RegExp }> = [
    { name: 'short and free: as is', base: 'shop-web-0', taken: [], expect: /^shop-web-0$/ },
    {
      name: 'too long: cut to 63 with 8 hex digits',
      base: `${'a'.repeat(40)}-${'b'.repeat(40)}-0`,
      taken: [],
      expect: /^a{40}-b{13}-[0-9a-f]{8}$/,
    },
    { name: 'taken ("a-b"/"c" vs "a"/"b-c"): hashed', base: 'a-b-c-0', taken: ['a-b-c-0'], expect: /^a-b-c-0-[0-9a-f]{8}$/ },
    { name: 'characters outside the label set become "-"', base: 'ns-web:v2-0', taken: [], expect: /^ns-web-v2-0$/ },
  ];
  for (const row of rows) {
    const name = uniqueName(row.base, `key:${row.base}`, new Set(row.taken));
    t.match(name, row.expect, row.name);
    t.ok(name.length <= 63 && /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(name), `${row.name}: a valid label`);
    t.equal(uniqueName(row.base, `key:${row.base}`, new Set(row.taken)), name, `${row.name}: stable`);
  }
});

t.test('long namespace and Ingress names still make valid, distinct route names', async (t) => {
  const ns = 'n'.repeat(60);
  const ing = (name: string): Record<string, unknown> => ({
    kind: 'Ingress',
    metadata: { name, namespace: ns },
    spec: {
      ingressClassName: 'nginx',
      rules: [
        {
          host: `${name}.example.com`,
          http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 's', port: { number: 80 } } } }] },
        },
      ],
    },
  });
  const r = convertIngressNginx({
    ingresses: [ing('x'.repeat(50)), ing('y'.repeat(50))],
    services: [],
    configMap: null,
    servicesFrom: 'file',
  });
  const raw = r.config!;
  const c = buildConfig(raw);
  const names = c.listeners[0]!.routes!.map((x) => x.name);
  t.equal(new Set(names).size, 2);
  for (const n of names) t.ok(n.length <= 63, `${n} is at most 63 characters`);
});

t.test('defaultBackend with rules: "/" on the hosts the Ingress was first to name, unless an Ingress routes "/" there', async (t) => {
  const backend = (name: string): Record<string, unknown> => ({ service: { name, port: { number: 80 } } });
  const ing = (name: string, created: string, spec: Record<string, unknown>): Record<string, unknown> => ({
    kind: 'Ingress',
    metadata: { name, namespace: 'ns', creationTimestamp: created },
    spec: { ingressClassName: 'nginx', ...spec },
  });
  const path = (p: string, svc: string): Record<string, unknown> => ({ path: p, pathType: 'Prefix', backend: backend(svc) });
  const r = convertIngressNginx({
    ingresses: [
      // oldest: names a.example and b.example first, with a defaultBackend
      ing('old', '2020-01-01T00:00:00Z', {
        defaultBackend: backend('old-default'),
        rules: [
          { host: 'a.example', http: { paths: [path('/api', 'old-api')] } },
          { host: 'b.example', http: { paths: [path('/x', 'old-x')] } },
        ],
      }),
      // younger: routes "/" on b.example itself (replaces the root), and has a defaultBackend of its own
      ing('young', '2021-01-01T00:00:00Z', {
        defaultBackend: backend('young-default'),
        rules: [{ host: 'b.example', http: { paths: [path('/', 'young-root')] } }],
      }),
      // a catch-all (no rules) younger than a host-less "/" path: the catch-all still takes "*"
      ing('hostless', '2019-01-01T00:00:00Z', { rules: [{ http: { paths: [path('/', 'hostless')] } }] }),
      ing('catch-all', '2022-01-01T00:00:00Z', { defaultBackend: backend('catch-all') }),
    ],
    services: [],
    configMap: null,
    servicesFrom: 'file',
  });
  const c = buildConfig(r.config!);
  t.same(
    routesOf(c).map((s) => s.replace(/\.ns\.svc\.cluster\.local/, '')),
    [
      'ns-old-0 a.example prefix:/api -> old-api:80',
      'ns-old-1 b.example prefix:/x -> old-x:80',
      'ns-old-2 a.example (every path) -> old-default:80',
      'ns-young-0 b.example prefix:/ -> young-root:80',
      'ns-catch-all-0 * (every path) -> catch-all:80',
    ],
  );
  t.same(
    r.report.unconverted.map((f) => `${f.source} ${f.item}`),
    ['Ingress ns/hostless spec.rules[0].http.paths[0]'],
    'the host-less "/" path loses to the catch-all Ingress, as in ingress-nginx (the catch-all is set before paths)',
  );
  t.same(
    r.report.notes.filter((n) => n.item === 'spec.defaultBackend').map((n) => n.source),
    ['Ingress ns/young'],
    'the unused defaultBackend is a note',
  );
});

t.test('malformed Ingresses are reported, never thrown, and the rest still converts', async (t) => {
  const good = {
    kind: 'Ingress',
    metadata: { name: 'good', namespace: 'ns' },
    spec: {
      ingressClassName: 'nginx',
      rules: [
        {
          host: 'good.example',
          http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'g', port: { number: 80 } } } }] },
        },
      ],
    },
  };
  const bad = (name: string, spec: unknown, annotations: unknown = {}): Record<string, unknown> => ({
    kind: 'Ingress',
    metadata: { name, namespace: 'ns', annotations },
    spec: { ingressClassName: 'nginx', ...(spec as object) },
  });
  const path = (extra: Record<string, unknown>): Record<string, unknown> => ({
    host: 'bad.example',
    http: { paths: [{ path: '/', pathType: 'Prefix', ...extra }] },
  });
  const rows: Array<{ name: string; ing: Record<string, unknown>; item: RegExp }> = [
    { name: 'a rule that is not a mapping', ing: bad('r1', { rules: ['x'] }), item: /^spec\.rules\[0\]$/ },
    {
      name: 'a path entry that is null',
      ing: bad('r2', { rules: [{ host: 'bad.example', http: { paths: [null] } }] }),
      item: /^spec\.rules\[0\]\.http\.paths\[0\]$/,
    },
    { name: 'no backend', ing: bad('r3', { rules: [path({})] }), item: /\.backend$/ },
    { name: 'port 0', ing: bad('r4', { rules: [path({ backend: { service: { name: 's', port: { number: 0 } } } })] }), item: /\.backend$/ },
    {
      name: 'port 70000',
      ing: bad('r5', { rules: [path({ backend: { service: { name: 's', port: { number: 70000 } } } })] }),
      item: /\.backend$/,
    },
    { name: 'no service name', ing: bad('r6', { rules: [path({ backend: { service: { port: { number: 80 } } } })] }), item: /\.backend$/ },
    {
      name: 'an unknown pathType',
      ing: bad('r7', {
        rules: [
          {
            host: 'bad.example',
            http: { paths: [{ path: '/', pathType: 'Regex', backend: { service: { name: 's', port: { number: 80 } } } }] },
          },
        ],
      }),
      item: /\.pathType$/,
    },
    {
      name: 'a path not in normal form',
      ing: bad('r8', {
        rules: [
          {
            host: 'bad.example',
            http: { paths: [{ path: '/a/../b', pathType: 'Prefix', backend: { service: { name: 's', port: { number: 80 } } } }] },
          },
        ],
      }),
      item: /\.path$/,
    },
    {
      name: 'an IP address as host',
      ing: bad('r9', { rules: [{ host: '192.0.2.1', http: { paths: [] } }] }),
      item: /^spec\.rules\[0\]\.host$/,
    },
    {
      name: 'proxy-read-timeout with a unit (ingress-nginx wants whole seconds)',
      ing: bad(
        'r11',
        { rules: [path({ backend: { service: { name: 's', port: { number: 80 } } } })] },
        { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '10s' },
      ),
      item: /proxy-read-timeout$/,
    },
    {
      name: 'a TLS block without secretName',
      ing: bad('r10', { tls: [{ hosts: ['bad.example'] }], rules: [path({ backend: { service: { name: 's', port: { number: 80 } } } })] }),
      item: /^spec\.tls\[0\]$/,
    },
  ];
  for (const row of rows) {
    const r = convertIngressNginx({ ingresses: [good, row.ing], services: [], configMap: null, servicesFrom: 'file' });
    t.ok(
      r.report.unconverted.some(
        (f) => f.source === `Ingress ns/${String((row.ing.metadata as { name: string }).name)}` && row.item.test(f.item),
      ),
      `${row.name}: listed`,
    );
    t.doesNotThrow(() => buildConfig(r.config!), `${row.name}: the rest converts to a valid config`);
  }
  const weird = convertIngressNginx({
    ingresses: [
      good,
      { kind: 'Ingress', metadata: { name: 'w', annotations: { 'nginx.ingress.kubernetes.io/use-regex': true } }, spec: 'nonsense' },
      { kind: 'Ingress' },
    ],
    services: [],
    configMap: { kind: 'ConfigMap', data: 'x' },
    servicesFrom: 'file',
  });
  t.equal(weird.report.routes, 1, 'a spec that is not a mapping, an Ingress without metadata, a ConfigMap without data: nothing thrown');
});

t.test('host names are matched case-insensitively, as the route table does', async (t) => {
  const ing = (name: string, host: string, created: string): Record<string, unknown> => ({
    kind: 'Ingress',
    metadata: { name, namespace: 'ns', creationTimestamp: created },
    spec: {
      ingressClassName: 'nginx',
      rules: [{ host, http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name, port: { number: 80 } } } }] } }],
    },
  });
  const r = convertIngressNginx({
    ingresses: [ing('a', 'App.Example.com', '2020-01-01T00:00:00Z'), ing('b', 'app.example.com', '2021-01-01T00:00:00Z')],
    services: [],
    configMap: null,
    servicesFrom: 'file',
  });
  t.same(
    r.report.unconverted.map((f) => f.source),
    ['Ingress ns/b'],
    'one host: the younger claim is listed',
  );
  t.doesNotThrow(() => buildConfig(r.config!));
});

t.test('edge-rule annotations: each mapped to its route option, the config valid; bad values reported by name', async (t) => {
  const P = 'nginx.ingress.kubernetes.io/';
  const ing = (annotations: Record<string, string>): Record<string, unknown> => ({
    kind: 'Ingress',
    metadata: { name: 'e', namespace: 'ns', annotations },
    spec: {
      ingressClassName: 'nginx',
      rules: [
        {
          host: 'e.example',
          http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 's', port: { number: 80 } } } }] },
        },
      ],
    },
  });
  const rows: Array<{ ann: Record<string, string>; http?: Record<string, unknown>; unconverted?: string[] }> = [
    { ann: { 'proxy-body-size': '8m' }, http: { maxBodyBytes: 8 * 1024 * 1024 } },
    { ann: { 'proxy-body-size': '512k' }, http: { maxBodyBytes: 512 * 1024 } },
    { ann: { 'proxy-body-size': '1000' }, http: { maxBodyBytes: 1000 } },
    { ann: { 'proxy-body-size': '0' }, http: { maxBodyBytes: null } },
    { ann: { 'proxy-body-size': '8 MB' }, unconverted: [`${P}proxy-body-size`] },
    { ann: { 'proxy-connect-timeout': '3' }, http: { connectTimeoutMs: 3000 } },
    { ann: { 'proxy-send-timeout': '120' }, http: { sendTimeoutMs: 120_000 } },
    { ann: { 'proxy-read-timeout': '90' }, http: { upstreamTimeoutMs: 90_000, readTimeoutMs: 90_000 } },
    { ann: { 'proxy-send-timeout': '5s' }, unconverted: [`${P}proxy-send-timeout`] },
    { ann: { 'permanent-redirect': 'https://new.example/x' }, http: { redirect: { url: 'https://new.example/x', status: 301 } } },
    {
      ann: { 'permanent-redirect': 'https://new.example/', 'permanent-redirect-code': '308' },
      http: { redirect: { url: 'https://new.example/', status: 308 } },
    },
    { ann: { 'temporal-redirect': 'https://tmp.example/' }, http: { redirect: { url: 'https://tmp.example/', status: 302 } } },
    {
      ann: { 'temporal-redirect': 'https://tmp.example/', 'temporal-redirect-code': '307' },
      http: { redirect: { url: 'https://tmp.example/', status: 307 } },
    },
    {
      ann: { 'permanent-redirect': 'https://a.example/', 'temporal-redirect': 'https://b.example/' },
      http: { redirect: { url: 'https://a.example/', status: 301 } },
    },
    {
      ann: { 'permanent-redirect': 'https://new.example/', 'permanent-redirect-code': '200' },
      unconverted: [`${P}permanent-redirect-code`],
    },
    { ann: { 'permanent-redirect': 'not a url' }, unconverted: [`${P}permanent-redirect`] },
    { ann: { 'limit-rate': '100' }, unconverted: [`${P}limit-rate`] },
    { ann: { 'rewrite-target': '/' }, http: {} },
    { ann: { 'force-ssl-redirect': 'true' }, http: { httpsRedirect: { status: 308, port: 443, beforeAllowlist: false } } },
    { ann: { 'ssl-redirect': 'true' }, http: {} },
    { ann: { 'enable-cors': 'true' }, unconverted: [`${P}enable-cors`] },
    { ann: { 'auth-url': 'http://auth/' }, unconverted: [`${P}auth-url`] },
    { ann: { 'configuration-snippet': 'more_set_headers "x: y";' }, unconverted: [`${P}configuration-snippet`] },
  ];
  for (const row of rows) {
    const ann = Object.fromEntries(Object.entries(row.ann).map(([k, v]) => [`${P}${k}`, v]));
    const r = convertIngressNginx({ ingresses: [ing(ann)], services: [], configMap: null, servicesFrom: 'file' });
    const what = JSON.stringify(row.ann);
    t.same(
      r.report.unconverted.map((f) => f.item),
      row.unconverted ?? [],
      `${what}: unconverted`,
    );
    const c = buildConfig({ ...r.config!, store: { type: 'memory' }, admin: { listen: null } } as never);
    t.same(
      c.listeners[0]!.routes![0]!.http ?? {},
      row.http === undefined
        ? {}
        : { ...row.http, ...('redirect' in row.http ? { redirect: { ...(row.http.redirect as object), beforeAllowlist: false } } : {}) },
      `${what}: the route option, through the loader check-config uses`,
    );
  }
});
