/**
 * Issue 27 item 5 over real sockets: the controller ConfigMap that turned into an open door.
 * `use-proxy-protocol: "true"` plus `use-forwarded-headers: "true"`, no `proxy-real-ip-cidr`, and a
 * global whitelist of 127.0.0.2. The compiled `ipgate import ingress-nginx` reads it; ipgate runs
 * the written config (only the listen address and the upstream are moved to loopback) in front of a
 * real nginx backend that logs what it was told; HAProxy is the load balancer (`send-proxy-v2`).
 *
 * The forged request: a client outside the allowlist (127.0.0.3) sends its own PROXY header
 * naming 198.51.100.9 and `X-Forwarded-For: 127.0.0.2`. The old import trusted every peer's
 * PROXY header and X-Forwarded-For, so it got 200 and the backend logged 127.0.0.2. ingress-nginx
 * took the PROXY header's source (`real_ip_header proxy_protocol`); so does the import now, and it
 * writes no trust-all range unless asked.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import YAML from 'yaml';
import { request } from '../helpers/http';
import { MAIN, startIpgate, tmpDir, type Started } from '../helpers/ipgate';
import { closed, connect, freePort, readAll, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startHaproxy, startNginx, type Peer } from '../helpers/peers';

const skip = missing('nginx') || missing('haproxy');

const MANIFESTS = `
apiVersion: v1
kind: ConfigMap
metadata: {name: ingress-nginx-controller, namespace: ingress-nginx}
data:
  use-proxy-protocol: "true"
  use-forwarded-headers: "true"
  whitelist-source-range: "127.0.0.2/32"
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop, creationTimestamp: "2024-03-01T10:00:00Z"}
spec:
  ingressClassName: nginx
  rules:
    - host: shop.example.com
      http:
        paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]
`;

const dir = tmpDir('ipgate-import-trust-');
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const manifests = path.join(dir, 'ingress-nginx.yaml');
fs.writeFileSync(manifests, MANIFESTS);

function runImport(flags: string[]): { status: number | null; stderr: string; out: string; config: Record<string, unknown> | null } {
  const out = path.join(dir, `ipgate-${flags.join('_').replace(/[^a-z0-9]+/gi, '-') || 'as-written'}.yaml`);
  const r = spawnSync(process.execPath, [MAIN, 'import', 'ingress-nginx', '-f', manifests, '-o', out, ...flags], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  const written = fs.existsSync(out) ? (YAML.parse(fs.readFileSync(out, 'utf8')) as Record<string, unknown>) : null;
  return { status: r.status, stderr: r.stderr, out, config: written };
}

let backend: Peer;
let backendPort: number;
const backendLog = (): string => fs.readFileSync(path.join(backend.dir, 'logs', 'backend.log'), 'utf8');

t.before(async () => {
  if (skip) return;
  backendPort = await freePort();
  // The backend trusts what it is told, as the issue's did: it logs X-Real-IP and X-Forwarded-For.
  backend = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  log_format told '$request_uri|$http_x_real_ip|$http_x_forwarded_for';
  server {
    listen 127.0.0.1:${backendPort};
    access_log logs/backend.log told;
    location / { return 200 "web|$http_x_real_ip|$http_x_forwarded_for"; }
  }
}`,
    [backendPort],
  );
});
t.teardown(() => backend?.stop());

/** ipgate on the imported config, moved to loopback. */
async function serve(t: Test, config: Record<string, unknown>): Promise<Started> {
  const c = structuredClone(config) as { listeners: Array<Record<string, unknown> & { routes: Array<{ upstreams: string[] }> }> };
  for (const l of c.listeners) {
    l.listen = '127.0.0.1:0';
    for (const r of l.routes)
      r.upstreams = r.upstreams.map((u) => (u === 'web.shop.svc.cluster.local:80' ? `127.0.0.1:${backendPort}` : u));
  }
  const g = await startIpgate(c as unknown as Record<string, unknown>, 'warn');
  t.teardown(() => g.app.shutdown(0));
  return g;
}

/** A client that writes its own PROXY v1 header, then an HTTP request; the raw reply (or '' when closed unanswered). */
async function forged(port: number, from: string, proxySource: string, xff: string, marker: string): Promise<string> {
  const s = await connect({ port, localAddress: from });
  s.write(
    `PROXY TCP4 ${proxySource} 127.0.0.1 40000 8080\r\nGET /${marker} HTTP/1.1\r\nHost: shop.example.com\r\nX-Forwarded-For: ${xff}\r\nConnection: close\r\n\r\n`,
  );
  return (await readAll(s)).toString('latin1');
}

/** Wait until the backend has logged `marker`'s request (nginx logs after the response is sent). */
async function logged(marker: string): Promise<string> {
  await waitFor(() => backendLog().includes(`/${marker}|`), 10_000, `the backend's log line for /${marker}`);
  return backendLog()
    .split('\n')
    .find((l) => l.startsWith(`/${marker}|`))!;
}

t.test('as written: the import refuses, naming the flags; no config that trusts everyone exists', { skip }, async (t) => {
  const r = runImport([]);
  if (r.config !== null) {
    // A build that writes this config anyway must at least not admit the forged request.
    const g = await serve(t, r.config);
    const reply = await forged(g.port(), '127.0.0.3', '198.51.100.9', '127.0.0.2', 'as-written');
    t.match(reply, /^HTTP\/1\.1 403 /, `the forged PROXY source + X-Forwarded-For is refused (got ${reply.split('\r\n')[0]})`);
  }
  t.equal(r.status, 3, 'exit 3: refused');
  t.equal(r.config, null, 'no config written');
  t.match(
    r.stderr,
    /proxy-real-ip-cidr: not set: ingress-nginx's default 0\.0\.0\.0\/0 trusts every IPv4 peer to name the client in a PROXY header/,
  );
  t.match(r.stderr, /--proxy-real-ip-cidr 10\.0\.0\.0\/24 .* or --trust-all-proxies/);
  t.match(r.stderr, /ipgate import: refused, no config written/);
});

t.test('--trust-all-proxies: the PROXY header names the client, X-Forwarded-For never does', { skip }, async (t) => {
  const r = runImport(['--trust-all-proxies']);
  t.equal(r.status, 0, r.stderr);
  const l = (r.config!.listeners as Array<Record<string, Record<string, unknown>>>)[0]!;
  t.same(l.proxyProtocol, { mode: 'required', trustedSources: ['0.0.0.0/0'] }, 'the trust-all range, as asked');
  t.equal(l.http!.trustedProxies, undefined, 'no X-Forwarded-For is trusted');
  t.match(r.stderr, /--trust-all-proxies "0\.0\.0\.0\/0": written as asked/);
  const g = await serve(t, r.config!);

  const reply = await forged(g.port(), '127.0.0.3', '198.51.100.9', '127.0.0.2', 'forged');
  t.match(reply, /^HTTP\/1\.1 403 /, "the issue's forged request: refused, decided on 198.51.100.9");
  const allowed = await forged(g.port(), '127.0.0.3', '127.0.0.2', '198.51.100.9', 'proxy-decides');
  t.match(allowed, /^HTTP\/1\.1 200 /, 'a PROXY source in the allowlist gets through, whatever X-Forwarded-For says');
  t.match(allowed, /web\|127\.0\.0\.2\|127\.0\.0\.2$/, 'the backend is told the PROXY source, never the X-Forwarded-For the client wrote');
  t.equal(await logged('proxy-decides'), '/proxy-decides|127.0.0.2|127.0.0.2');
  t.notMatch(backendLog(), /\/forged\|/, 'the forged request never reached the backend');
});

t.test("--proxy-real-ip-cidr with the balancer: HAProxy's PROXY source decides; a client's own header is closed", { skip }, async (t) => {
  const r = runImport(['--proxy-real-ip-cidr', '127.0.0.1/32']);
  t.equal(r.status, 0, r.stderr);
  const l = (r.config!.listeners as Array<Record<string, Record<string, unknown>>>)[0]!;
  t.same(l.proxyProtocol, { mode: 'required', trustedSources: ['127.0.0.1/32'] });
  t.equal(l.http!.trustedProxies, undefined);
  const g = await serve(t, r.config!);
  const lbPort = await freePort();
  const lb = await startHaproxy(
    `frontend fe
  mode tcp
  bind 127.0.0.1:${lbPort}
  default_backend be
backend be
  mode tcp
  server ipgate 127.0.0.1:${g.port()} send-proxy-v2 source 127.0.0.1
`,
    [lbPort],
  );
  t.teardown(() => lb.stop());

  const viaLb = (from: string, xff: string, marker: string) =>
    request({ port: lbPort, localAddress: from, path: `/${marker}`, headers: { host: 'shop.example.com', 'x-forwarded-for': xff } });
  const ok = await viaLb('127.0.0.2', '198.51.100.9', 'lb-allowed');
  t.equal(ok.status, 200, 'the allowlisted client through the balancer');
  t.equal(ok.body, 'web|127.0.0.2|127.0.0.2', 'the backend is told the client the balancer saw');
  const denied = await viaLb('127.0.0.3', '127.0.0.2', 'lb-forged');
  t.equal(denied.status, 403, 'another client naming the allowlisted address in X-Forwarded-For: refused by its PROXY source');

  const direct = await connect({ port: g.port(), localAddress: '127.0.0.3' });
  direct.write('PROXY TCP4 127.0.0.2 127.0.0.1 40000 8080\r\nGET /direct HTTP/1.1\r\nHost: shop.example.com\r\nConnection: close\r\n\r\n');
  const got: Buffer[] = [];
  direct.on('data', (c: Buffer) => got.push(c));
  await closed(direct);
  t.equal(
    Buffer.concat(got).length,
    0,
    'a client that is not the balancer, with a PROXY header naming the allowlisted address: closed unanswered (pp_untrusted)',
  );

  t.equal(await logged('lb-allowed'), '/lb-allowed|127.0.0.2|127.0.0.2');
  t.notMatch(backendLog(), /\/(lb-forged|direct)\|/, 'neither reached the backend');
});

t.test("--proxy-real-ip-cidr outside the ConfigMap's proxy-real-ip-cidr is refused", { skip }, async (t) => {
  const narrow = path.join(dir, 'narrow.yaml');
  fs.writeFileSync(
    narrow,
    MANIFESTS.replace('use-forwarded-headers: "true"', 'use-forwarded-headers: "true"\n  proxy-real-ip-cidr: "10.0.0.0/16"'),
  );
  const r = spawnSync(process.execPath, [MAIN, 'import', 'ingress-nginx', '-f', narrow, '--proxy-real-ip-cidr', '127.0.0.1/32'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  t.equal(r.status, 3);
  t.equal(r.stdout, '', 'no config written');
  t.match(
    r.stderr,
    /--proxy-real-ip-cidr "127\.0\.0\.1\/32": outside the ConfigMap's proxy-real-ip-cidr "10\.0\.0\.0\/16": ingress-nginx never believed a PROXY header from it/,
  );
});
