/**
 * The `tls:` block of an HTTP listener (src/schema/tls.ts, validate-tls.ts): defaults, paths
 * relative to the config file, and every refusal naming the field and quoting the value. The
 * files are made by the openssl CLI (test/helpers/certs.ts).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ConfigError } from '../../../src/config/errors';
import { buildConfig, configWarnings, parseConfig } from '../../../src/config/load';
import { CertDir } from '../../helpers/certs';

const certs = new CertDir();
const ec = certs.issue('ec', { cn: 'ec.test', dns: ['ec.test'] });
const rsa = certs.issue('rsa', { cn: 'rsa.test', dns: ['rsa.test'], kind: 'rsa' });
fs.writeFileSync(certs.file('garbage.crt'), '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
fs.writeFileSync(certs.file('empty.crt'), 'hello\n');
const encryptedKey = certs.file('encrypted.key');
execFileSync('openssl', ['pkey', '-in', ec.key, '-aes256', '-passout', 'pass:secret', '-out', encryptedKey]);

const http = (tls: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  allowlists: { main: ['10.0.0.0/8'] },
  admin: { listen: null },
  listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:7100'], tls, ...extra }],
});

function problems(raw: unknown): string[] {
  try {
    buildConfig(raw);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
}

t.test('defaults: plaintext without tls; with tls every option filled in', async (t) => {
  const plain = buildConfig(http(undefined));
  t.equal(plain.listeners[0]!.tls, null, 'no tls: null');
  const c = buildConfig(http({ certificates: [{ cert: ec.cert, key: ec.key }] }));
  t.same(c.listeners[0]!.tls, {
    certificates: [{ cert: ec.cert, key: ec.key, hosts: null, name: null }],
    unknownSni: 'first',
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.3',
    clientCA: null,
    clientCertificate: 'none',
    handshakeTimeoutMs: 10_000,
    sessionTickets: true,
    reloadIntervalMs: 2000,
  });
});

t.test('relative paths are relative to the config file', async (t) => {
  const file = path.join(certs.dir, 'ipgate.yaml');
  const c = parseConfig(
    `
allowlists: {main: [10.0.0.0/8]}
admin: {listen: null}
listeners:
  - {name: web, mode: http, listen: "127.0.0.1:0", allowlist: main, upstreams: ["127.0.0.1:7100"],
     tls: {certificates: [{cert: ec.crt, key: ec.key}], clientCA: ca.crt, clientCertificate: optional}}
`,
    file,
  );
  t.equal(c.listeners[0]!.tls!.certificates[0]!.cert, ec.cert);
  t.equal(c.listeners[0]!.tls!.certificates[0]!.key, ec.key);
  t.equal(c.listeners[0]!.tls!.clientCA, certs.file('ca.crt'));
});

const cert = (o: Record<string, unknown> = {}): Record<string, unknown> => ({ cert: ec.cert, key: ec.key, ...o });
const rows: { desc: string; raw: Record<string, unknown>; problem: string }[] = [
  {
    desc: 'a missing certificate file',
    raw: http({ certificates: [cert({ cert: '/nonexistent/tls.crt' })] }),
    problem: 'listeners[0].tls.certificates[0].cert: "/nonexistent/tls.crt": cannot read /nonexistent/tls.crt: ENOENT',
  },
  {
    desc: 'a missing key file',
    raw: http({ certificates: [cert({ key: '/nonexistent/tls.key' })] }),
    problem: 'listeners[0].tls.certificates[0].key: "/nonexistent/tls.key": cannot read /nonexistent/tls.key: ENOENT',
  },
  {
    desc: "a key that is not the certificate's",
    raw: http({ certificates: [cert({ key: rsa.key })] }),
    problem: `listeners[0].tls.certificates[0].key: ${JSON.stringify(rsa.key)}: ${rsa.key} is not the private key of the certificate in ${ec.cert}`,
  },
  {
    desc: 'a PEM block that does not parse',
    raw: http({ certificates: [cert({ cert: certs.file('garbage.crt') })] }),
    problem: `listeners[0].tls.certificates[0].cert: ${JSON.stringify(certs.file('garbage.crt'))}: ${certs.file('garbage.crt')}: certificate 1 does not parse`,
  },
  {
    desc: 'a file without a certificate',
    raw: http({ certificates: [cert({ cert: certs.file('empty.crt') })] }),
    problem: `holds no PEM certificate`,
  },
  {
    desc: 'a key file that is a certificate',
    raw: http({ certificates: [cert({ key: ec.cert })] }),
    problem: `listeners[0].tls.certificates[0].key: ${JSON.stringify(ec.cert)}: ${ec.cert} is not a usable private key (PEM, unencrypted): it holds a certificate`,
  },
  {
    desc: 'an encrypted key (said as such: the PEM reader doctor uses, src/tls/pem.ts)',
    raw: http({ certificates: [cert({ key: encryptedKey })] }),
    problem: `listeners[0].tls.certificates[0].key: ${JSON.stringify(encryptedKey)}: ${encryptedKey} is not a usable private key (PEM, unencrypted): the key is encrypted`,
  },
  {
    desc: 'required client certificates without clientCA',
    raw: http({ certificates: [cert()], clientCertificate: 'required' }),
    problem: 'listeners[0].tls.clientCertificate: "required": needs listeners[0].tls.clientCA',
  },
  {
    desc: 'a client CA file that is not PEM',
    raw: http({ certificates: [cert()], clientCA: certs.file('empty.crt'), clientCertificate: 'optional' }),
    problem: `listeners[0].tls.clientCA: ${JSON.stringify(certs.file('empty.crt'))}: ${certs.file('empty.crt')} holds no PEM certificate`,
  },
  {
    desc: 'tls on a tcp listener',
    raw: http({ certificates: [cert()] }, { mode: 'tcp' }),
    problem: 'listeners[0].tls: {certificates: [1 item]}: is for mode: http listeners',
  },
  {
    desc: 'minVersion above maxVersion',
    raw: http({ certificates: [cert()], minVersion: 'TLSv1.3', maxVersion: 'TLSv1.2' }),
    problem: 'listeners[0].tls.minVersion: "TLSv1.3": is above tls.maxVersion "TLSv1.2"',
  },
  {
    desc: 'TLS 1.1 is not a choice',
    raw: http({ certificates: [cert()], minVersion: 'TLSv1.1' }),
    problem: 'listeners[0].tls.minVersion: "TLSv1.1": must be one of "TLSv1.2", "TLSv1.3"',
  },
  {
    desc: 'no certificate',
    raw: http({ certificates: [] }),
    problem: 'listeners[0].tls.certificates: []: must NOT have fewer than 1 items',
  },
  {
    desc: 'a misspelt option',
    raw: http({ certificates: [cert()], unkownSni: 'refuse' }),
    problem: 'listeners[0].tls.unkownSni: "refuse": unknown key',
  },
  {
    desc: 'a wildcard inside a name',
    raw: http({ certificates: [cert({ hosts: ['a.*.example.com'] })] }),
    problem: 'listeners[0].tls.certificates[0].hosts[0]: "a.*.example.com": a wildcard is only allowed as the whole first label',
  },
  {
    desc: 'a wildcard over a top-level domain',
    raw: http({ certificates: [cert({ hosts: ['*.com'] })] }),
    problem: 'listeners[0].tls.certificates[0].hosts[0]: "*.com": a wildcard must cover a name of at least two labels',
  },
  {
    desc: 'an IP address as a host',
    raw: http({ certificates: [cert({ hosts: ['10.0.0.1'] })] }),
    problem: 'listeners[0].tls.certificates[0].hosts[0]: "10.0.0.1": is an IP address, not a host name',
  },
  {
    desc: 'two certificates with one name',
    raw: http({ certificates: [cert({ name: 'a' }), cert({ name: 'a' })] }),
    problem: 'listeners[0].tls.certificates[1].name: "a": is also the name of certificates[0]',
  },
];

t.test('refused, naming the field and quoting the value', async (t) => {
  for (const row of rows) {
    const p = problems(row.raw);
    t.ok(
      p.some((x) => x.includes(row.problem)),
      `${row.desc}: ${JSON.stringify(p)}`,
    );
  }
});

t.test('warnings: a client CA without client certificates', async (t) => {
  const c = buildConfig(http({ certificates: [cert()], clientCA: certs.file('ca.crt') }));
  t.ok(
    configWarnings(c).some((w) => w.startsWith('listeners[0].tls.clientCA') && w.includes('is ignored')),
    'warned',
  );
});
