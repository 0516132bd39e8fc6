/**
 * `ipgate import ingress-nginx` (the compiled binary) on what it must not guess: which ConfigMap is
 * the controller's when the input holds two candidates or two copies, and whom to trust when the
 * command line narrows the ConfigMap's proxy-real-ip-cidr (usage errors, exit 3 with the reasons
 * in the JSON report). Apart from import-cli.test.ts, which spawns a process per fixture.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import type { ImportReport } from '../../src/import/ingress-nginx';
import { ROOT, runIpgate } from '../helpers/ipgate';

const FIXTURES = path.join(ROOT, 'test/fixtures/ingress-nginx');

const ipgate = runIpgate;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-import-flags-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));

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
