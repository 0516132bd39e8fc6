/**
 * `ipgate import ingress-nginx` as operators run it: the compiled binary on every fixture manifest,
 * its output through the real `ipgate check-config`; the exit codes for unreadable input and
 * nothing to convert; and the cluster read through a loopback Kubernetes API (test/helpers/
 * fake-kube-api.ts) with the Ingress list, a Service for a named port and the controller ConfigMap.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { importMain, type ImportIo } from '../../src/cli/import';
import type { ImportReport } from '../../src/import/ingress-nginx';
import { FakeKubeApi } from '../helpers/fake-kube-api';
import { ROOT, runIpgate } from '../helpers/ipgate';

const FIXTURES = path.join(ROOT, 'test/fixtures/ingress-nginx');

const ipgate = runIpgate;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-import-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

t.test('every fixture: import exits 0 and its config passes `ipgate check-config`', async (t) => {
  const files = fs
    .readdirSync(FIXTURES)
    .filter((f) => /\.(ya?ml|json)$/.test(f))
    .sort();
  t.ok(files.length >= 12, `${files.length} fixture manifests`);
  for (const f of files) {
    const out = path.join(tmp, `${f}.ipgate.yaml`);
    const imp = ipgate(['import', 'ingress-nginx', '-f', path.join(FIXTURES, f), '-o', out, '--report=json']);
    t.equal(imp.status, 0, `${f}: import exit code (stderr: ${imp.stderr.slice(0, 300)})`);
    const report = JSON.parse(imp.stderr) as ImportReport;
    t.ok(report.routes > 0, `${f}: ${report.routes} routes, ${report.unconverted.length} unconverted`);
    const check = ipgate(['check-config', out]);
    t.equal(check.status, 0, `${f}: check-config exit code (stderr: ${check.stderr.slice(0, 300)})`);
    t.match(check.stdout, /valid \(1 listener\(s\)/, `${f}: check-config says valid`);
    t.notMatch(fs.readFileSync(out, 'utf8'), /\*[a-z0-9]+\n|&[a-z0-9]+ /, `${f}: no YAML anchors or aliases`);
  }
});

t.test('stdin in, config on stdout, the text report on stderr naming each item and its Ingress', async (t) => {
  const text = fs.readFileSync(path.join(FIXTURES, '05-auth-cors-snippets.yaml'), 'utf8');
  const r = ipgate(['import', 'ingress-nginx', '-f', '-'], text);
  t.equal(r.status, 0);
  const config = YAML.parse(r.stdout) as { listeners: Array<{ routes: Array<{ name: string }> }> };
  t.same(
    config.listeners[0]!.routes.map((x) => x.name),
    ['monitoring-grafana-0', 'monitoring-grafana-1'],
  );
  t.match(r.stdout, /# Ingress monitoring\/grafana spec\.rules\[0\]\.http\.paths\[0\]\n/, 'each route says where it came from');
  for (const a of ['auth-url', 'auth-signin', 'configuration-snippet', 'enable-cors', 'limit-rps']) {
    t.match(r.stderr, new RegExp(`Ingress monitoring/grafana: nginx\\.ingress\\.kubernetes\\.io/${a} `), `${a} listed with its Ingress`);
  }
});

t.test('exit codes: unreadable input 2, nothing to convert 1, usage errors 2', async (t) => {
  fs.writeFileSync(path.join(tmp, 'not-yaml.yaml'), 'kind: Ingress\n  metadata: [\n');
  fs.writeFileSync(path.join(tmp, 'no-kind.yaml'), 'metadata: {name: x}\n');
  fs.writeFileSync(path.join(tmp, 'scalar.yaml'), '--- 42\n');
  const rows: Array<{ name: string; args: string[]; status: number; stderr: RegExp }> = [
    {
      name: 'a file that does not exist',
      args: ['-f', path.join(tmp, 'missing.yaml')],
      status: 2,
      stderr: /cannot read -f ".*missing\.yaml"/,
    },
    {
      name: 'not YAML',
      args: ['-f', path.join(tmp, 'not-yaml.yaml')],
      status: 2,
      stderr: /not-yaml\.yaml: document 1: not valid YAML\/JSON/,
    },
    {
      name: 'a document without kind',
      args: ['-f', path.join(tmp, 'no-kind.yaml')],
      status: 2,
      stderr: /no-kind\.yaml: document 1: not a Kubernetes object: it has no "kind"/,
    },
    {
      name: 'a document that is not a mapping',
      args: ['-f', path.join(tmp, 'scalar.yaml')],
      status: 2,
      stderr: /scalar\.yaml: document 1: not a Kubernetes object/,
    },
    {
      name: 'no Ingress of the class',
      args: ['-f', path.join(FIXTURES, '07-ingress-classes.yaml'), '--ingress-class=haproxy'],
      status: 1,
      stderr: /nothing to convert: no Ingress of class "haproxy" made a route; no config written/,
    },
    { name: 'an unknown flag', args: ['--frobnicate'], status: 2, stderr: /unknown option --frobnicate/ },
    {
      name: 'a format given to -o',
      args: ['-f', path.join(FIXTURES, '03-denylist-only.yaml'), '-o', 'json'],
      status: 2,
      stderr: /-o takes a FILE here/,
    },
    {
      name: 'a bad --report',
      args: ['-f', path.join(FIXTURES, '03-denylist-only.yaml'), '--report', 'xml'],
      status: 2,
      stderr: /--report "xml": expected text or json/,
    },
    {
      name: 'cluster flags with --file',
      args: ['-f', path.join(FIXTURES, '03-denylist-only.yaml'), '--namespace', 'x'],
      status: 2,
      stderr: /--namespace is for reading the cluster/,
    },
    {
      name: 'a bad --configmap',
      args: ['-f', path.join(FIXTURES, '03-denylist-only.yaml'), '--configmap', 'justaname'],
      status: 2,
      stderr: /--configmap "justaname": expected NAMESPACE\/NAME or none/,
    },
  ];
  for (const row of rows) {
    const r = ipgate(['import', 'ingress-nginx', ...row.args]);
    t.equal(r.status, row.status, `${row.name}: exit ${row.status}`);
    t.match(r.stderr, row.stderr, `${row.name}: says why`);
    t.equal(r.stdout, '', `${row.name}: no config written`);
  }
  const unknownSource = ipgate(['import', 'traefik']);
  t.equal(unknownSource.status, 2);
  t.match(unknownSource.stderr, /cannot import from "traefik" \(known: ingress-nginx\)/);
  const help = ipgate(['import', '--help']);
  t.equal(help.status, 0);
  t.match(help.stdout, /^Usage: ipgate import ingress-nginx/);
});

/** An Ingress as the API server lists it (IngressList items carry no kind). */
function apiIngress(
  ns: string,
  name: string,
  created: string,
  annotations: Record<string, string>,
  spec: Record<string, unknown>,
): Record<string, unknown> {
  return {
    metadata: { name, namespace: ns, uid: `uid-${name}`, resourceVersion: '1', creationTimestamp: created, annotations },
    spec,
    status: {},
  };
}

const rule = (host: string, port: Record<string, unknown>, service = 'web', p = '/'): Record<string, unknown> => ({
  host,
  http: { paths: [{ path: p, pathType: 'Prefix', backend: { service: { name: service, port } } }] },
});

function capture(): { io: ImportIo; out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (s) => out.push(s), err: (s) => err.push(s), env: {}, readStdin: () => '', timeoutMs: 5000 }, out, err };
}

t.test('from the cluster: Ingresses listed, a named port resolved through its Service, the controller ConfigMap read', async (t) => {
  const api = await new FakeKubeApi({ allowedNames: ['ingress-nginx-controller'] }).start();
  t.teardown(() => api.close());
  const kubeconfig = api.writeKubeconfig(tmp);
  api.serve('/apis/networking.k8s.io/v1/ingresses', {
    kind: 'IngressList',
    apiVersion: 'networking.k8s.io/v1',
    metadata: { resourceVersion: '900' },
    items: [
      apiIngress(
        'shop',
        'web',
        '2024-01-01T00:00:00Z',
        { 'nginx.ingress.kubernetes.io/whitelist-source-range': '203.0.113.0/24' },
        { ingressClassName: 'nginx', rules: [rule('shop.example.com', { name: 'http' })] },
      ),
      apiIngress(
        'other',
        'traefik',
        '2024-01-01T00:00:00Z',
        {},
        { ingressClassName: 'traefik', rules: [rule('t.example.com', { number: 80 })] },
      ),
    ],
  });
  api.serve('/api/v1/namespaces/shop/services/web', {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name: 'web', namespace: 'shop' },
    spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 8080, targetPort: 'http-alt', protocol: 'TCP' }] },
  });
  api.create('ingress-nginx', 'ingress-nginx-controller', {
    'use-proxy-protocol': 'true',
    'proxy-real-ip-cidr': '10.0.0.0/16',
    'worker-processes': '4',
  });

  const c = capture();
  const code = await importMain(['ingress-nginx', '--kubeconfig', kubeconfig, '--report=json'], c.io);
  t.equal(code, 0, c.err.join(''));
  const config = YAML.parse(c.out.join('')) as {
    allowlists: Record<string, { entries: Array<{ cidr: string }> }>;
    listeners: Array<Record<string, unknown>>;
  };
  const l = config.listeners[0]!;
  t.same(
    l.routes,
    [
      {
        name: 'shop-web-0',
        hosts: ['shop.example.com'],
        paths: [{ path: '/', match: 'prefix' }],
        upstreams: ['web.shop.svc.cluster.local:8080'],
        allowlist: 'shop-web',
      },
    ],
    'the named port "http" resolved through the Service to 8080',
  );
  t.same(l.proxyProtocol, { mode: 'required', trustedSources: ['10.0.0.0/16'] }, 'use-proxy-protocol from the controller ConfigMap');
  t.same(
    config.allowlists['shop-web']!.entries.map((e) => e.cidr),
    ['203.0.113.0/24'],
  );
  const report = JSON.parse(c.err.join('')) as ImportReport;
  t.same(
    report.unconverted.map((f) => `${f.source} ${f.item}`),
    ['ConfigMap ingress-nginx/ingress-nginx-controller worker-processes'],
  );
  t.same(
    report.skipped.map((f) => f.source),
    ['Ingress other/traefik'],
  );
  const paths = api.requests.map((r) => `${r.method} ${r.path} ${r.status}`);
  t.same(
    paths,
    [
      'GET /apis/networking.k8s.io/v1/ingresses 200',
      'GET /api/v1/namespaces/ingress-nginx/configmaps/ingress-nginx-controller 200',
      'GET /api/v1/namespaces/shop/services/web 200',
    ],
    'one list, the ConfigMap, and only the Service a named port needs',
  );
  t.ok(
    api.requests.every((r) => r.authorization === `Bearer ${api.token}`),
    'every request carries the token',
  );
});

t.test('from the cluster: no controller ConfigMap is a note (defaults assumed); a refused list is exit 2', async (t) => {
  const api = await new FakeKubeApi({ allowedNames: ['ingress-nginx-controller'] }).start();
  t.teardown(() => api.close());
  const kubeconfig = api.writeKubeconfig(tmp);
  api.serve('/apis/networking.k8s.io/v1/namespaces/shop/ingresses', {
    kind: 'IngressList',
    apiVersion: 'networking.k8s.io/v1',
    metadata: { resourceVersion: '5' },
    items: [
      apiIngress(
        'shop',
        'web',
        '2024-01-01T00:00:00Z',
        {},
        { ingressClassName: 'nginx', rules: [rule('shop.example.com', { name: 'http' })] },
      ),
    ],
  });
  const c = capture();
  const code = await importMain(['ingress-nginx', '--kubeconfig', kubeconfig, '-n', 'shop', '--report=json'], c.io);
  t.equal(code, 1, 'the only path names a port of a Service that does not exist: nothing to convert');
  const report = JSON.parse(c.err[0]!) as ImportReport;
  t.match(report.notes[0], {
    source: 'ConfigMap ingress-nginx/ingress-nginx-controller',
    reason: /not found: ingress-nginx's defaults are assumed/,
  });
  t.match(report.unconverted[0], { source: 'Ingress shop/web', reason: 'Service shop/web was not found' });

  api.failNext(1, 403);
  const d = capture();
  t.equal(await importMain(['ingress-nginx', '--kubeconfig', kubeconfig, '-n', 'shop'], d.io), 2);
  t.match(d.err.join(''), /^ipgate import: GET \/apis\/networking\.k8s\.io\/v1\/namespaces\/shop\/ingresses: HTTP 403/);
  t.same(d.out, [], 'no config written');
});

t.test('--configmap chooses the controller ConfigMap in files (or none); --annotations-prefix', async (t) => {
  const f10 = path.join(FIXTURES, '10-controller-configmap.yaml');
  const run = async (
    args: string[],
  ): Promise<{ code: number; config: { listeners: Array<Record<string, unknown>> } | null; report: ImportReport }> => {
    const c = capture();
    const code = await importMain(['ingress-nginx', ...args, '--report=json'], c.io);
    return {
      code,
      config: c.out.length > 0 ? (YAML.parse(c.out.join('')) as { listeners: Array<Record<string, unknown>> }) : null,
      report: JSON.parse(c.err.join('')) as ImportReport,
    };
  };
  const none = await run(['-f', f10, '--configmap', 'none']);
  t.equal(none.code, 0);
  t.equal(none.config!.listeners[0]!.proxyProtocol, undefined, 'no ConfigMap: no PROXY protocol');
  t.same(none.report.unconverted, [], 'no ConfigMap keys listed');
  t.same(
    none.report.notes.map((n) => n.source),
    ['ConfigMap ingress-nginx/ingress-nginx-controller', 'ConfigMap shop/app-settings'],
    'both ConfigMaps named as ignored',
  );

  const other = await run(['-f', f10, '--configmap=shop/app-settings']);
  t.same(
    other.report.unconverted.map((f) => `${f.source} ${f.item}`),
    ['ConfigMap shop/app-settings FEATURE_X'],
    "the chosen ConfigMap's keys are read (and listed)",
  );

  const file = path.join(tmp, 'prefixed.yaml');
  fs.writeFileSync(
    file,
    `kind: Ingress
metadata:
  name: app
  namespace: corp
  annotations:
    ingress.corp.example/whitelist-source-range: 10.9.0.0/16
    nginx.ingress.kubernetes.io/whitelist-source-range: 0.0.0.0/0
spec:
  ingressClassName: nginx
  rules: [{host: app.corp.example, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}}]
`,
  );
  const prefixed = await run(['-f', file, '--annotations-prefix', 'ingress.corp.example']);
  t.equal(prefixed.code, 0);
  t.same(
    (prefixed.config as unknown as { allowlists: Record<string, { entries: Array<{ cidr: string }> }> }).allowlists[
      'corp-app'
    ]!.entries.map((e) => e.cidr),
    ['10.9.0.0/16'],
  );
  t.same(
    prefixed.report.ignored.map((f) => f.item),
    ['nginx.ingress.kubernetes.io/whitelist-source-range'],
    "the default prefix is another controller's then",
  );
});

t.test(
  'the controller ConfigMap is never guessed: two candidates or two differing copies are refused, an identical copy is read once',
  async (t) => {
    const cm = (ns: string, name: string, data: Record<string, string>): string =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${name}, namespace: ${ns}}\ndata: ${JSON.stringify(data)}\n`;
    const ing = fs.readFileSync(path.join(FIXTURES, '03-denylist-only.yaml'), 'utf8');
    const files = {
      a: cm('ingress-nginx', 'ingress-nginx-controller', { 'use-proxy-protocol': 'true', 'proxy-real-ip-cidr': '10.0.0.0/16' }),
      same: cm('ingress-nginx', 'ingress-nginx-controller', { 'proxy-real-ip-cidr': '10.0.0.0/16', 'use-proxy-protocol': 'true' }),
      other: cm('ingress-nginx', 'ingress-nginx-controller', { 'use-proxy-protocol': 'true', 'proxy-real-ip-cidr': '0.0.0.0/0' }),
      legacy: cm('kube-system', 'nginx-configuration', { 'use-forwarded-headers': 'true', 'proxy-real-ip-cidr': '192.0.2.0/24' }),
    };
    const paths: Record<string, string> = {};
    for (const [k, text] of Object.entries(files)) fs.writeFileSync((paths[k] = path.join(tmp, `cm-${k}.yaml`)), text);
    fs.writeFileSync(path.join(tmp, 'cm-ingress.yaml'), ing);
    const run = (extra: string[]) =>
      ipgate(['import', 'ingress-nginx', '-f', path.join(tmp, 'cm-ingress.yaml'), ...extra, '--report=json']);

    const differ = run(['-f', paths.a!, '-f', paths.other!]);
    t.equal(differ.status, 2, 'the same ConfigMap twice with different data');
    t.match(
      differ.stderr,
      /ConfigMap ingress-nginx\/ingress-nginx-controller is given twice with different data \(.*cm-a\.yaml: document 1, .*cm-other\.yaml: document 1\): a cluster holds one; give only the one in force/,
    );
    t.equal(differ.stdout, '');

    const same = run(['-f', paths.a!, '-f', paths.same!]);
    t.equal(same.status, 0, same.stderr);
    const report = JSON.parse(same.stderr) as ImportReport;
    t.match(
      report.notes.filter((n) => n.item === 'object'),
      [
        {
          source: 'ConfigMap ingress-nginx/ingress-nginx-controller',
          value: /cm-same\.yaml: document 1/,
          reason: /^given again with the same data \(first at .*cm-a\.yaml: document 1\): read once$/,
        },
      ],
      'named as the same object given again, not as "not the ingress-nginx controller ConfigMap"',
    );
    t.notMatch(same.stderr, /not the ingress-nginx controller ConfigMap/);

    const two = run(['-f', paths.a!, '-f', paths.legacy!]);
    t.equal(two.status, 2, "two ConfigMaps that each look like the controller's");
    t.match(
      two.stderr,
      /2 ConfigMaps look like the ingress-nginx controller's: ingress-nginx\/ingress-nginx-controller \(.*cm-a\.yaml: document 1\), kube-system\/nginx-configuration \(.*cm-legacy\.yaml: document 1\); choose one with --configmap NAMESPACE\/NAME/,
    );
    const chosen = run(['-f', paths.a!, '-f', paths.legacy!, '--configmap', 'kube-system/nginx-configuration']);
    t.equal(chosen.status, 0, chosen.stderr);
    t.match(
      (JSON.parse(chosen.stderr) as ImportReport).notes.filter((n) => n.item === 'object'),
      [
        {
          source: 'ConfigMap ingress-nginx/ingress-nginx-controller',
          reason: 'ignored: --configmap chose kube-system/nginx-configuration',
        },
      ],
    );
  },
);

t.test('trust flags: usage errors, and a refusal is exit 3 with the reasons in the JSON report', async (t) => {
  const f10 = path.join(FIXTURES, '10-controller-configmap.yaml');
  const bad = ipgate(['import', 'ingress-nginx', '-f', f10, '--proxy-real-ip-cidr', '10.0.0.1/16']);
  t.equal(bad.status, 2);
  t.match(bad.stderr, /--proxy-real-ip-cidr: "10\.0\.0\.1\/16": /, "host bits set: ipgate's strict CIDR parser names the value");
  const outside = ipgate(['import', 'ingress-nginx', '-f', f10, '--proxy-real-ip-cidr', '10.0.0.0/24,10.1.0.0/24', '--report=json']);
  t.equal(outside.status, 3);
  t.equal(outside.stdout, '', 'no config written');
  const report = JSON.parse(outside.stderr.slice(0, outside.stderr.lastIndexOf('}') + 1)) as ImportReport;
  t.match(report.refused, [
    {
      source: 'ConfigMap ingress-nginx/ingress-nginx-controller',
      item: '--proxy-real-ip-cidr',
      value: '10.1.0.0/24',
      reason: /outside the ConfigMap's proxy-real-ip-cidr "10\.0\.0\.0\/16,2001:db8:1b::\/48"/,
    },
  ]);
  t.match(
    outside.stderr,
    /ipgate import: refused, no config written:\n {2}ConfigMap ingress-nginx\/ingress-nginx-controller: --proxy-real-ip-cidr "10\.1\.0\.0\/24": outside/,
  );
  const inside = ipgate([
    'import',
    'ingress-nginx',
    '-f',
    f10,
    '--proxy-real-ip-cidr',
    '10.0.4.0/24',
    '--proxy-real-ip-cidr',
    '2001:db8:1b::/64',
  ]);
  t.equal(inside.status, 0, inside.stderr);
  t.same(
    (YAML.parse(inside.stdout) as { listeners: Array<{ proxyProtocol: unknown }> }).listeners[0]!.proxyProtocol,
    { mode: 'required', trustedSources: ['10.0.4.0/24', '2001:db8:1b::/64'] },
    'narrowed to the balancers',
  );
});
