/**
 * `ipgate doctor --no-cluster --admin-url URL` against a running ipgate (in process, the admin API
 * on a loopback port, a real listener): `--help` says doctor reports /readyz; without a cluster that
 * is what it does, through the compiled CLI's own entry point and its exit codes.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { doctorMain } from '../../src/doctor/cli';
import type { Finding } from '../../src/doctor/finding';
import { TOKEN, startAdminGate } from '../helpers/admin-api';
import { refusingPort } from '../helpers/net';

function sink(): { write(s: string): boolean; text(): string } {
  let out = '';
  return {
    write: (s: string) => {
      out += s;
      return true;
    },
    text: () => out,
  };
}

async function doctor(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await doctorMain(args, { stdout, stderr, env, timeoutMs: 2000 });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

t.test("--no-cluster --admin-url: ipgate's /readyz and its checks, no Kubernetes API asked", async (t) => {
  const g = await startAdminGate(t, {
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
  });
  // No kubeconfig anywhere: a run that touched the Kubernetes API would fail (exit 2).
  const env = { HOME: t.testdir(), IPGATE_ADMIN_TOKEN: TOKEN };
  const r = await doctor(['--no-cluster', '--admin-url', g.base, '--admin-token-env', 'IPGATE_ADMIN_TOKEN', '--json'], env);
  t.equal(r.stderr, '', 'nothing on stderr');
  t.equal(r.code, 0, 'ready: exit 0');
  const report = JSON.parse(r.stdout) as { findings: Finding[]; source: string; service: string; exitCode: number };
  t.equal(report.service, '-');
  t.equal(report.source, `--no-cluster, --admin-url ${g.base}`);
  t.match(
    report.findings.find((f) => f.id === 'ipgate.ready'),
    { severity: 'ok', statement: /ipgate \/readyz answered HTTP 200/ },
  );
  t.match(
    report.findings.find((f) => f.id === 'ipgate.check.listeners'),
    { severity: 'ok', statement: /listeners: 1 listener\(s\) bound/ },
    "ipgate's own checks, one finding each",
  );
  t.match(
    report.findings.find((f) => f.id === 'ipgate.check.store'),
    { severity: 'ok', statement: /store: file store .* loaded/ },
  );
  t.notOk(
    report.findings.some((f) => f.id.startsWith('service.') || f.id.startsWith('kube-proxy')),
    'no cluster findings',
  );

  const text = await doctor(['--no-cluster', '--admin-url', g.base], env);
  t.equal(text.code, 0);
  t.match(text.stdout, /^ipgate doctor: --no-cluster, --admin-url http:\/\/127\.0\.0\.1:\d+\n/);
  t.match(text.stdout, /\[ok\] {4}ipgate: ipgate \/readyz answered HTTP 200/);
});

t.test('--no-cluster --admin-url with --config: both reports in one run; an unreachable admin API is a warning', async (t) => {
  const dir = t.testdir();
  const config = path.join(dir, 'config.yaml');
  fs.writeFileSync(config, 'listeners: []\n');
  const closed = `http://127.0.0.1:${refusingPort(t)}`;
  const r = await doctor(['--no-cluster', '--admin-url', closed, '--config', config, '--json'], { HOME: dir });
  t.equal(r.code, 0, 'a warning is no error');
  const report = JSON.parse(r.stdout) as { findings: Finding[]; source: string };
  t.equal(report.source, `--no-cluster, --admin-url ${closed}, --config ${config}`);
  t.match(
    report.findings.find((f) => f.id === 'ipgate.admin-unreachable'),
    { severity: 'warn', statement: /ECONNREFUSED/, fix: /port-forward svc\/<release>-ipgate-admin 9901/ },
  );
});

t.test('--no-cluster with nothing to check is a usage error naming both flags', async (t) => {
  const r = await doctor(['--no-cluster'], { HOME: t.testdir() });
  t.equal(r.code, 2);
  t.match(r.stderr, /--no-cluster leaves nothing to check: add --admin-url \(ipgate's \/readyz\) and\/or --config \(certificates\)/);
});
