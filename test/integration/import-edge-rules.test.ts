/**
 * The redirect and rewrite annotations of ingress-nginx, imported and served (issue 30 item 7): for
 * each form, an Ingress manifest -> `ipgate import ingress-nginx` (the compiled binary) -> `ipgate
 * check-config` on its output -> ipgate started from that output in front of a real nginx backend
 * that answers with the target and X-Forwarded-Prefix it received. Each row asserts what
 * ingress-nginx answered for the annotation (the redirect's status and Location, the path the
 * backend saw); the forms that cannot be carried over exactly are asserted to be listed by name.
 * Only the listen address and the upstream addresses (Service names) of the output are changed.
 */
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import type { ImportReport } from '../../src/import/ingress-nginx';
import { request } from '../helpers/http';
import { runIpgate, startIpgate, tmpDir } from '../helpers/ipgate';
import { freePort } from '../helpers/net';
import { missing, nginxHttpPreamble, startNginx } from '../helpers/peers';

const skip = missing('nginx');

const ingress = (name: string, host: string, ann: Record<string, string>, paths: string[], extra = ''): string => `---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ${name}
  namespace: web
  creationTimestamp: "2024-01-01T00:00:00Z"
  annotations: ${JSON.stringify(Object.fromEntries(Object.entries(ann).map(([k, v]) => [`nginx.ingress.kubernetes.io/${k}`, v])))}
spec:
  ingressClassName: nginx
${extra}  rules:
    - host: ${host}
      http:
        paths:
${paths.map((p) => `          - {path: ${JSON.stringify(p)}, pathType: ImplementationSpecific, backend: {service: {name: ${name}, port: {number: 80}}}}`).join('\n')}
`;
const tlsFor = (host: string): string => `  tls: [{hosts: [${host}], secretName: ${host.replace(/\./g, '-')}}]\n`;

const MANIFESTS = [
  ingress('tls', 'tls.example', { 'whitelist-source-range': '127.0.0.2/32' }, ['/'], tlsFor('tls.example')),
  ingress('force', 'force.example', { 'force-ssl-redirect': 'true' }, ['/']),
  ingress('nossl', 'nossl.example', { 'ssl-redirect': 'false' }, ['/'], tlsFor('nossl.example')),
  ingress('acme', 'acme.example', {}, ['/', '/.well-known/acme-challenge/tok'], tlsFor('acme.example')),
  ingress('shop', 'shop.example', { 'from-to-www-redirect': 'true' }, ['/']),
  ingress('blog', 'www.blog.example', { 'from-to-www-redirect': 'true', 'permanent-redirect': 'https://new.example/' }, ['/']),
  ingress('rw', 'rw.example', { 'use-regex': 'true', 'rewrite-target': '/$2' }, ['/api(/|$)(.*)']),
  ingress('rw2', 'rw2.example', { 'rewrite-target': '/v2/$2', 'x-forwarded-prefix': '/app' }, ['/app(/|$)(.*)']),
  ingress('rw3', 'rw3.example', { 'rewrite-target': '/$1' }, ['/foo/?(.*)']),
  ingress('rw4', 'rw4.example', { 'rewrite-target': '/' }, ['/old']),
  ingress('rx', 'rx.example', { 'use-regex': 'true' }, ['/items/[0-9]+', '/plain']),
  ingress('authx', 'authx.example', { 'auth-url': 'http://auth.example/check' }, ['/']),
  ingress(
    'extras',
    'extras.example',
    {
      'enable-cors': 'true',
      'configuration-snippet': 'more_set_headers "X: y";',
      'enable-modsecurity': 'true',
    },
    ['/'],
  ),
].join('');

const CONFIGMAP = `---
apiVersion: v1
kind: ConfigMap
metadata: {name: ingress-nginx-controller, namespace: ingress-nginx}
data: {http-redirect-code: "301", force-ssl-redirect: "true", no-tls-redirect-locations: "/healthz", proxy-body-size: "1k"}
`;

interface Row {
  desc: string;
  host: string;
  path: string;
  from?: string;
  status: number;
  /** The Location of a redirect. */
  location?: string;
  /** What the backend saw: `<target>|<X-Forwarded-Prefix>`. */
  seen?: string;
  /** A POST body. */
  body?: string;
}

const dir = tmpDir('ipgate-import-edge-');
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Import `manifests` with the binary, check its output with the binary, serve it in front of `backend`. */
async function importAndServe(
  t: Test,
  name: string,
  manifests: string,
  backend: number,
): Promise<{ port: number; report: ImportReport; config: string }> {
  const input = path.join(dir, `${name}.yaml`);
  const out = path.join(dir, `${name}.ipgate.yaml`);
  fs.writeFileSync(input, manifests);
  const imp = runIpgate(['import', 'ingress-nginx', '-f', input, '-o', out, '--report=json']);
  t.equal(imp.status, 0, `${name}: import exits 0 (${imp.stderr.slice(0, 300)})`);
  const check = runIpgate(['check-config', out]);
  t.equal(check.status, 0, `${name}: ipgate check-config passes (${check.stderr.slice(0, 300)})`);
  const text = fs.readFileSync(out, 'utf8');
  const config = YAML.parse(text) as { listeners: Array<{ listen: string; routes: Array<{ upstreams: string[] }> }> };
  for (const l of config.listeners) {
    l.listen = '127.0.0.1:0';
    for (const r of l.routes) r.upstreams = r.upstreams.map(() => `127.0.0.1:${backend}`);
  }
  const g = await startIpgate(config as unknown as Record<string, unknown>, 'warn');
  t.teardown(() => g.app.shutdown(0));
  return { port: g.port(), report: JSON.parse(imp.stderr) as ImportReport, config: text };
}

async function check(t: Test, port: number, rows: readonly Row[]): Promise<void> {
  for (const row of rows) {
    const r = await request({
      port,
      localAddress: row.from ?? '127.0.0.2',
      path: row.path,
      headers: { host: row.host },
      ...(row.body !== undefined ? { method: 'POST', body: row.body } : {}),
    });
    t.equal(r.status, row.status, `${row.desc}: ${row.status}`);
    if (row.location !== undefined) t.equal(r.headers.location, row.location, `${row.desc}: Location ${row.location}`);
    if (row.seen !== undefined) t.equal(r.body, row.seen, `${row.desc}: the backend saw ${row.seen}`);
  }
}

t.test('redirect and rewrite annotations: imported, checked, and served as ingress-nginx served them', { skip }, async (t) => {
  const port = await freePort();
  const nginx = await startNginx(
    `http {\n  ${nginxHttpPreamble()}\n  server { listen 127.0.0.1:${port}; location / { return 200 "$request_uri|$http_x_forwarded_prefix"; } }\n}`,
    [port],
  );
  t.teardown(() => nginx.stop());

  const { port: gate, report, config } = await importAndServe(t, 'annotations', MANIFESTS, port);
  await check(t, gate, [
    // ssl-redirect (ingress-nginx's default true on a host with a TLS block), http-redirect-code's default 308
    { desc: 'ssl-redirect on a TLS host', host: 'tls.example', path: '/a/b?q=1', status: 308, location: 'https://tls.example/a/b?q=1' },
    {
      desc: "ssl-redirect after the allowlist (ipgate's order): a refused client learns nothing but 403",
      host: 'tls.example',
      path: '/a',
      from: '127.0.0.3',
      status: 403,
    },
    { desc: 'force-ssl-redirect without a TLS block', host: 'force.example', path: '/x', status: 308, location: 'https://force.example/x' },
    { desc: 'ssl-redirect "false" on a TLS host: served in plaintext', host: 'nossl.example', path: '/x', status: 200, seen: '/x|' },
    { desc: 'the TLS host of no-tls-redirect-locations: / redirected', host: 'acme.example', path: '/', status: 308 },
    {
      desc: "the ACME challenge (no-tls-redirect-locations' default) is served in plaintext",
      host: 'acme.example',
      path: '/.well-known/acme-challenge/tok',
      status: 200,
      seen: '/.well-known/acme-challenge/tok|',
    },
    // from-to-www-redirect: the other spelling redirected with the scheme, path and query; the host served
    {
      desc: 'from-to-www-redirect: www. added',
      host: 'www.shop.example',
      path: '/p?x=1',
      status: 308,
      location: 'http://shop.example/p?x=1',
    },
    { desc: 'from-to-www-redirect: the host itself served', host: 'shop.example', path: '/p', status: 200, seen: '/p|' },
    {
      desc: 'from-to-www-redirect: www. removed',
      host: 'blog.example',
      path: '/post/1',
      status: 308,
      location: 'http://www.blog.example/post/1',
    },
    {
      desc: 'permanent-redirect on the www host',
      host: 'www.blog.example',
      path: '/post/1',
      status: 301,
      location: 'https://new.example/',
    },
    // rewrite-target: the prefix forms
    { desc: '/api(/|$)(.*) with /$2: /api/users', host: 'rw.example', path: '/api/users?id=7', status: 200, seen: '/users?id=7|' },
    { desc: '/api(/|$)(.*) with /$2: /api', host: 'rw.example', path: '/api', status: 200, seen: '/|' },
    { desc: '/api(/|$)(.*) with /$2: /api/', host: 'rw.example', path: '/api/', status: 200, seen: '/|' },
    { desc: '/api(/|$)(.*) with /$2: /apix was not this location in ingress-nginx either', host: 'rw.example', path: '/apix', status: 404 },
    {
      desc: '/app(/|$)(.*) with /v2/$2 and x-forwarded-prefix /app',
      host: 'rw2.example',
      path: '/app/a/b',
      status: 200,
      seen: '/v2/a/b|/app',
    },
    { desc: '/app(/|$)(.*) with /v2/$2: /app', host: 'rw2.example', path: '/app', status: 200, seen: '/v2/|/app' },
    { desc: '/foo/?(.*) with /$1: /foo/bar', host: 'rw3.example', path: '/foo/bar', status: 200, seen: '/bar|' },
    { desc: '/foo/?(.*) with /$1: /foo', host: 'rw3.example', path: '/foo', status: 200, seen: '/|' },
    // listed, not approximated: no route for them
    { desc: 'rewrite-target / on /old (nginx sent every request as /): not routed', host: 'rw4.example', path: '/old/x', status: 404 },
    { desc: 'use-regex /items/[0-9]+: not routed', host: 'rx.example', path: '/items/12', status: 404 },
    { desc: 'use-regex: the plain path is a prefix', host: 'rx.example', path: '/plain/x', status: 200, seen: '/plain/x|' },
    { desc: 'CORS, snippet, ModSecurity: the route is served without them', host: 'extras.example', path: '/', status: 200 },
    { desc: 'auth-url: refused to every client (ipgate cannot ask the auth service)', host: 'authx.example', path: '/', status: 403 },
  ]);

  const listed = report.unconverted.map((f) => `${f.source} ${f.item}`);
  const P = 'nginx.ingress.kubernetes.io/';
  t.same(
    listed.sort(),
    [
      'Ingress web/authx nginx.ingress.kubernetes.io/auth-url',
      'Ingress web/extras nginx.ingress.kubernetes.io/configuration-snippet',
      'Ingress web/extras nginx.ingress.kubernetes.io/enable-cors',
      'Ingress web/extras nginx.ingress.kubernetes.io/enable-modsecurity',
      'Ingress web/rw4 spec.rules[0].http.paths[0]',
      'Ingress web/rx nginx.ingress.kubernetes.io/use-regex',
      'Ingress web/rx spec.rules[0].http.paths[0]',
      'Ingress web/tls spec.tls[0]',
      'Ingress web/nossl spec.tls[0]',
      'Ingress web/acme spec.tls[0]',
    ].sort(),
    'exactly these are listed (the TLS blocks: no --tls)',
  );
  const reason = (source: string, item: string): string =>
    report.unconverted.find((f) => f.source === `Ingress web/${source}` && f.item === item)?.reason ?? '';
  t.match(reason('rw4', 'spec.rules[0].http.paths[0]'), /sent EVERY request under this path upstream as "\/"/);
  t.match(reason('rx', 'spec.rules[0].http.paths[0]'), /evaluates no regular expression on a request/);
  t.match(reason('extras', `${P}enable-cors`), /no CORS headers/);
  t.match(reason('authx', `${P}auth-url`), /empty list ingress-nginx-refused \(403 to every client\)/);
  t.match(reason('extras', `${P}configuration-snippet`), /raw nginx directives/);
  t.match(reason('extras', `${P}enable-modsecurity`), /no web application firewall/);
  t.match(config, /# Ingress web\/shop nginx\.ingress\.kubernetes\.io\/from-to-www-redirect \(www\.shop\.example -> shop\.example\)\n/);
});

t.test(
  'the ConfigMap: http-redirect-code and force-ssl-redirect for every host, no-tls-redirect-locations exempt, proxy-body-size',
  { skip },
  async (t) => {
    const port = await freePort();
    const nginx = await startNginx(
      `http {\n  ${nginxHttpPreamble()}\n  server { listen 127.0.0.1:${port}; location / { return 200 "$request_uri|$http_x_forwarded_prefix"; } }\n}`,
      [port],
    );
    t.teardown(() => nginx.stop());
    const manifests =
      ingress('app', 'app.example', {}, ['/', '/healthz']) +
      ingress('off', 'off.example', { 'force-ssl-redirect': 'false' }, ['/']) +
      CONFIGMAP;
    const { port: gate, report } = await importAndServe(t, 'configmap', manifests, port);
    await check(t, gate, [
      {
        desc: 'force-ssl-redirect from the ConfigMap, with its 301',
        host: 'app.example',
        path: '/x?y',
        status: 301,
        location: 'https://app.example/x?y',
      },
      { desc: 'no-tls-redirect-locations /healthz: served', host: 'app.example', path: '/healthz', status: 200, seen: '/healthz|' },
      {
        desc: 'proxy-body-size "1k": a body of 1024 bytes passes',
        host: 'app.example',
        path: '/healthz',
        body: 'x'.repeat(1024),
        status: 200,
      },
      { desc: 'proxy-body-size "1k": 1025 bytes get 413', host: 'app.example', path: '/healthz', body: 'x'.repeat(1025), status: 413 },
      {
        desc: 'force-ssl-redirect "false" on the Ingress wins over the ConfigMap',
        host: 'off.example',
        path: '/x',
        status: 200,
        seen: '/x|',
      },
    ]);
    t.same(report.unconverted, [], 'the four ConfigMap keys are carried over');
  },
);
