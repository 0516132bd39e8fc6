/**
 * `ipgate doctor --config`: listener certificates made by the openssl CLI (valid, expiring within
 * 14 days, expired, not yet valid, an expiring intermediate, a chain out of order, unreadable),
 * named by an ipgate config's `tls.certificates`; one row per situation, each asserting the
 * finding, its severity and the exit code. Then the same checks beside the cluster checks (a
 * loopback API server), and the ways the run itself cannot happen (exit 2).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { doctorMain } from '../../../src/doctor/cli';
import { analyseCertificates, EXPIRY_WARNING_DAYS } from '../../../src/doctor/analyse-certificates';
import { collectCertificates } from '../../../src/doctor/certificates';
import type { Finding, Severity } from '../../../src/doctor/finding';
import { TestCA, days } from '../../helpers/openssl-certs';
import { sink, startFakeApi, writeKubeconfig, type Route } from './fake-api';

const dir = t.testdir();
const root = TestCA.root(path.join(dir, 'ca'));
const leafOpts = { dns: ['web.example.com', '*.example.com'] };
const C = {
  valid: root.issue({ name: 'valid', key: 'p256', ...leafOpts }),
  validRsa: root.issue({ name: 'valid-rsa', key: 'rsa2048', ...leafOpts }),
  expiring: root.issue({ name: 'expiring', ...leafOpts, notAfter: days(EXPIRY_WARNING_DAYS - 7) }),
  justOutside: root.issue({ name: 'just-outside', ...leafOpts, notAfter: days(EXPIRY_WARNING_DAYS + 1) }),
  expired: root.issue({ name: 'expired', ...leafOpts, notBefore: days(-100), notAfter: days(-3) }),
  notYet: root.issue({ name: 'not-yet', ...leafOpts, notBefore: days(2), notAfter: days(90) }),
};
// An intermediate that expires in 5 days, signing a leaf valid for 60 (a chain only as good as its weakest link).
const shortInter = root.issue({ name: 'short-inter', ca: true, cn: 'short-lived intermediate', notAfter: days(5) });
const interCA = root.intermediate('issuing');
const chained = interCA.issue({ name: 'chained', ...leafOpts, notAfter: days(60) });
const reversed = path.join(dir, 'reversed.crt');
fs.writeFileSync(reversed, fs.readFileSync(interCA.cert, 'utf8') + fs.readFileSync(chained.cert, 'utf8'));
const weakChain = path.join(dir, 'weak-chain.crt');
fs.writeFileSync(weakChain, fs.readFileSync(C.valid.cert, 'utf8') + fs.readFileSync(shortInter.cert, 'utf8'));
const garbage = path.join(dir, 'garbage.crt');
fs.writeFileSync(garbage, 'not a certificate\n');
const encryptedKey = path.join(dir, 'encrypted.key');
execFileSync('openssl', ['pkey', '-in', C.valid.key, '-aes256', '-passout', 'pass:secret', '-out', encryptedKey]);

/** A bare path: a `cert` with no `key`; an issued pair: both. */
type Cert = string | { cert?: unknown; key?: string };

function writeConfig(name: string, listeners: Array<{ name: string; tls?: unknown; certs?: Cert[] }>): string {
  const file = path.join(dir, `${name}.yaml`);
  const doc = {
    listeners: listeners.map((l) => ({
      name: l.name,
      mode: 'http',
      listen: '127.0.0.1:0',
      ...(l.certs
        ? { tls: { certificates: l.certs.map((c) => (typeof c === 'string' ? { cert: c } : { cert: c.cert, key: c.key })) } }
        : {}),
      ...(l.tls !== undefined ? { tls: l.tls } : {}),
    })),
  };
  fs.writeFileSync(file, YAML.stringify(doc));
  return file;
}

interface Expect {
  id: string;
  severity: Severity;
  subject: string;
  says: RegExp;
}
interface Row {
  name: string;
  listeners: Array<{ name: string; tls?: unknown; certs?: Cert[] }>;
  exit: 0 | 1;
  has: Expect[];
  lacks?: string[];
}

const rows: Row[] = [
  {
    name: 'valid ECDSA and RSA certificates: ok, with names, key and end date',
    listeners: [{ name: 'web', certs: [C.valid, C.validRsa] }],
    exit: 0,
    has: [
      {
        id: 'tls.certificate.ok',
        severity: 'ok',
        subject: 'listener/web',
        says: /certificate 0 .*valid\.crt: web\.example\.com, \*\.example\.com; EC prime256v1; issued by CN=ipgate test root CA; valid until 20\d\d-.*Z \(90 days left\)/,
      },
      { id: 'tls.certificate.ok', severity: 'ok', subject: 'listener/web', says: /certificate 1 .*valid-rsa\.crt: .*RSA 2048/ },
    ],
    lacks: ['tls.certificate.expiring', 'tls.certificate.expired', 'tls.key.mismatch', 'tls.key.unreadable'],
  },
  {
    name: 'expires within 14 days: a warning, exit 0',
    listeners: [{ name: 'web', certs: [C.expiring] }],
    exit: 0,
    has: [
      {
        id: 'tls.certificate.expiring',
        severity: 'warn',
        subject: 'listener/web',
        says: /expiring\.crt expires .*, in 7 days \(warning at 14 days\)/,
      },
    ],
    lacks: ['tls.certificate.ok'],
  },
  {
    name: '15 days left: still ok',
    listeners: [{ name: 'web', certs: [C.justOutside] }],
    exit: 0,
    has: [{ id: 'tls.certificate.ok', severity: 'ok', subject: 'listener/web', says: /\(15 days left\)/ }],
    lacks: ['tls.certificate.expiring'],
  },
  {
    name: 'expired: an error, exit 1',
    listeners: [{ name: 'api', certs: [C.expired] }],
    exit: 1,
    has: [
      {
        id: 'tls.certificate.expired',
        severity: 'error',
        subject: 'listener/api',
        says: /expired\.crt expired 20\d\d-.*Z \(3 days ago\): clients refuse it/,
      },
    ],
  },
  {
    name: 'not yet valid: an error, exit 1',
    listeners: [{ name: 'api', certs: [C.notYet] }],
    exit: 1,
    has: [
      {
        id: 'tls.certificate.not-yet-valid',
        severity: 'error',
        subject: 'listener/api',
        says: /not-yet\.crt is not valid until .* \(in 2 days\)/,
      },
    ],
  },
  {
    name: 'a valid leaf whose intermediate expires in 5 days: a warning about the chain certificate',
    listeners: [{ name: 'web', certs: [{ cert: weakChain, key: C.valid.key }] }],
    exit: 0,
    has: [
      {
        id: 'tls.certificate.expiring',
        severity: 'warn',
        subject: 'listener/web',
        says: /chain certificate 2 \(CN=short-lived intermediate\) in .*weak-chain\.crt expires .*, in 5 days/,
      },
    ],
    lacks: ['tls.certificate.ok'],
  },
  {
    name: 'leaf + intermediate in order: ok with the chain counted',
    listeners: [{ name: 'web', certs: [{ cert: chained.chain, key: chained.key }] }],
    exit: 0,
    has: [
      {
        id: 'tls.certificate.ok',
        severity: 'ok',
        subject: 'listener/web',
        says: /issued by CN=ipgate test issuing; .*\(60 days left\); 1 chain certificate\(s\)/,
      },
    ],
  },
  {
    name: 'chain out of order: a warning',
    listeners: [{ name: 'web', certs: [{ cert: reversed, key: interCA.key }] }],
    exit: 0,
    has: [{ id: 'tls.certificate.chain-order', severity: 'warn', subject: 'listener/web', says: /not each the issuer of the one before/ }],
  },
  {
    name: 'missing and garbage certificate files: errors naming the file',
    listeners: [{ name: 'web', certs: [path.join(dir, 'gone', 'tls.crt'), garbage] }],
    exit: 1,
    has: [
      {
        id: 'tls.certificate.unreadable',
        severity: 'error',
        subject: 'listener/web',
        says: /certificate 0 .*gone\/tls\.crt: .*gone\/tls\.crt: cannot read certificate file: ENOENT/,
      },
      {
        id: 'tls.certificate.unreadable',
        severity: 'error',
        subject: 'listener/web',
        says: /certificate 1 .*garbage\.crt: .*not a PEM certificate/,
      },
    ],
  },
  {
    name: 'the key of another certificate: an error, exit 1',
    listeners: [{ name: 'web', certs: [{ cert: C.valid.cert, key: C.validRsa.key }] }],
    exit: 1,
    has: [
      {
        id: 'tls.key.mismatch',
        severity: 'error',
        subject: 'listener/web',
        says: /key of certificate 0 .*valid\.crt: .*valid-rsa\.key: this private key is not the certificate's/,
      },
    ],
    lacks: ['tls.certificate.ok'],
  },
  {
    name: 'a missing, an encrypted and a certificate-as-key key file: errors naming each',
    listeners: [
      {
        name: 'web',
        certs: [
          { cert: C.valid.cert, key: path.join(dir, 'gone.key') },
          { cert: C.valid.cert, key: encryptedKey },
          { cert: C.valid.cert, key: C.valid.cert },
        ],
      },
    ],
    exit: 1,
    has: [
      {
        id: 'tls.key.unreadable',
        severity: 'error',
        subject: 'listener/web',
        says: /key of certificate 0 .*gone\.key: cannot read private key file: ENOENT/,
      },
      {
        id: 'tls.key.unreadable',
        severity: 'error',
        subject: 'listener/web',
        says: /key of certificate 1 .*encrypted\.key: not a usable private key: the key is encrypted/,
      },
      {
        id: 'tls.key.unreadable',
        severity: 'error',
        subject: 'listener/web',
        says: /key of certificate 2 .*valid\.crt: not a private key: it holds a certificate/,
      },
    ],
  },
  {
    name: "a relative path is resolved against the config file's directory",
    listeners: [{ name: 'web', certs: [{ cert: path.relative(dir, C.valid.cert), key: path.relative(dir, C.valid.key) }] }],
    exit: 0,
    has: [
      {
        id: 'tls.certificate.ok',
        severity: 'ok',
        subject: 'listener/web',
        says: new RegExp(`certificate 0 ${C.valid.cert.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:`),
      },
    ],
  },
  {
    name: 'several listeners: each certificate its own finding; plain listeners ignored',
    listeners: [{ name: 'plain' }, { name: 'web', certs: [C.valid] }, { name: 'api', certs: [C.expired] }],
    exit: 1,
    has: [
      { id: 'tls.certificate.ok', severity: 'ok', subject: 'listener/web', says: /valid\.crt/ },
      { id: 'tls.certificate.expired', severity: 'error', subject: 'listener/api', says: /expired\.crt/ },
    ],
    lacks: ['tls.none'],
  },
  {
    name: 'no TLS listener: one info line',
    listeners: [{ name: 'plain' }],
    exit: 0,
    has: [{ id: 'tls.none', severity: 'info', subject: 'config ', says: /no listener has a tls block/ }],
  },
  {
    name: 'a tls block without usable certificate paths: an error quoting the value',
    listeners: [
      { name: 'web', tls: { certificates: [] } },
      { name: 'api', certs: [{ cert: 42, key: 'k' }] },
    ],
    exit: 1,
    has: [
      {
        id: 'tls.config.certificate-path',
        severity: 'error',
        subject: 'config ',
        says: /listeners\[0\]\.tls\.certificates \(listener web\): \[\]: expected a list of \{cert, key\}/,
      },
      {
        id: 'tls.config.certificate-path',
        severity: 'error',
        subject: 'config ',
        says: /listeners\[1\]\.tls\.certificates\[0\]\.cert \(listener api\): 42: expected a file path/,
      },
    ],
  },
];

async function runDoctor(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await doctorMain(args, { stdout, stderr, env: {}, timeoutMs: 2000 });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

rows.forEach((row, i) => {
  t.test(row.name, async (t) => {
    const config = writeConfig(`row-${i}`, row.listeners);
    const r = await runDoctor(['--config', config, '--no-cluster', '--json']);
    t.equal(r.code, row.exit, 'exit code');
    const report = JSON.parse(r.stdout) as { findings: Finding[]; exitCode: number };
    t.equal(report.exitCode, row.exit);
    for (const want of row.has) {
      const hit = report.findings.find(
        (f) => f.id === want.id && f.severity === want.severity && f.subject.startsWith(want.subject) && want.says.test(f.statement),
      );
      t.ok(hit, `${want.severity} ${want.id} on ${want.subject} matching ${want.says}`) ||
        t.comment(JSON.stringify(report.findings, null, 2));
      if (hit && hit.severity !== 'ok' && hit.severity !== 'info') t.ok(hit.fix, 'a warning or error says what to do');
    }
    for (const id of row.lacks ?? [])
      t.notOk(
        report.findings.some((f) => f.id === id),
        `no ${id}`,
      );
    t.notOk(
      report.findings.some((f) => f.id.startsWith('service.') || f.id.startsWith('kube-proxy')),
      '--no-cluster: no cluster findings',
    );
  });
});

t.test("analysis is judged at the view's instant: the same file, read at three moments", async (t) => {
  const config = writeConfig('instants', [{ name: 'web', certs: [C.valid] }]);
  const ids = (at: Date): string[] => analyseCertificates(collectCertificates(config, at)).map((f) => `${f.severity} ${f.id}`);
  t.same(ids(new Date()), ['ok tls.certificate.ok']);
  t.same(ids(days(80)), ['warn tls.certificate.expiring'], '10 days before the end');
  t.same(ids(days(91)), ['error tls.certificate.expired']);
  t.same(ids(days(-2)), ['error tls.certificate.not-yet-valid']);
});

t.test('human text: the certificate lines and the summary', async (t) => {
  const config = writeConfig('text', [
    { name: 'web', certs: [C.expiring] },
    { name: 'api', certs: [C.expired] },
  ]);
  const r = await runDoctor(['--config', config, '--no-cluster']);
  t.equal(r.code, 1);
  t.match(r.stdout, new RegExp(`^ipgate doctor: --no-cluster, --config ${config.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\n`));
  t.match(r.stdout, /\n\[warn\] {2}listener\/web: certificate 0 .*expiring\.crt expires .*\n {8}fix: renew the certificate/);
  t.match(
    r.stdout,
    /\n\[error\] listener\/api: certificate 0 .*expired\.crt expired .*\n {8}fix: .*\n {8}check: openssl x509 -in .*expired\.crt -noout/,
  );
  t.match(r.stdout, /\n1 error\(s\), 1 warning\(s\), 0 info, 0 ok\n$/);
});

t.test('with the cluster: certificate findings come after the cluster findings', async (t) => {
  const NS = 'ipgate';
  const routes: Record<string, Route> = {
    [`/api/v1/namespaces/${NS}/services/ipgate`]: 'service-nodeport-local.json',
    [`/api/v1/namespaces/${NS}/pods`]: 'podlist-daemonset-all-ready.json',
    [`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`]: 'endpointslicelist-all-ready.json',
    '/api/v1/nodes': 'nodelist-3.json',
    '/api/v1/namespaces/kube-system/configmaps/kube-proxy': 'configmap-kube-proxy-iptables.json',
  };
  const api = await startFakeApi(routes);
  t.teardown(() => api.close());
  const kubeconfig = writeKubeconfig(t.testdir(), api.url, 'doctor-token');
  const config = writeConfig('cluster', [{ name: 'web', certs: [C.expiring] }]);
  const r = await runDoctor(['--kubeconfig', kubeconfig, '--config', config, '--json']);
  t.equal(r.code, 0, r.stderr);
  const findings = (JSON.parse(r.stdout) as { findings: Finding[] }).findings;
  const cluster = findings.findIndex((f) => f.id === 'service.external-traffic-policy.local');
  const cert = findings.findIndex((f) => f.id === 'tls.certificate.expiring');
  t.ok(cluster >= 0 && cert > cluster, 'both present, the certificate after the cluster');
});

t.test('the run cannot happen: exit 2 naming the file or the flag', async (t) => {
  const notYaml = path.join(dir, 'not-yaml.yaml');
  fs.writeFileSync(notYaml, 'listeners: [\n');
  const noListeners = path.join(dir, 'no-listeners.yaml');
  fs.writeFileSync(noListeners, 'admin: {}\n');
  const cases: Array<{ name: string; args: string[]; says: RegExp; code?: string }> = [
    {
      name: 'config file missing',
      args: ['--config', path.join(dir, 'nope.yaml'), '--no-cluster'],
      says: /--config .*nope\.yaml: cannot read it: ENOENT/,
      code: 'IPGATE_DOCTOR_CONFIG',
    },
    {
      name: 'config not YAML',
      args: ['--config', notYaml, '--no-cluster'],
      says: /--config .*not-yaml\.yaml: not valid YAML/,
      code: 'IPGATE_DOCTOR_CONFIG',
    },
    {
      name: 'config without listeners',
      args: ['--config', noListeners, '--no-cluster'],
      says: /no "listeners" list: not an ipgate config/,
      code: 'IPGATE_DOCTOR_CONFIG',
    },
    {
      name: '--no-cluster alone',
      args: ['--no-cluster'],
      says: /--no-cluster leaves nothing to check: add --admin-url \(ipgate's \/readyz\) and\/or --config/,
    },
  ];
  for (const c of cases) {
    const r = await runDoctor(c.args);
    t.equal(r.code, 2, c.name);
    t.match(r.stderr, c.says, c.name);
    if (c.code) {
      const j = await runDoctor([...c.args, '--json']);
      t.equal((JSON.parse(j.stdout) as { error: { code: string } }).error.code, c.code, `${c.name}: JSON error code`);
    }
  }
});
