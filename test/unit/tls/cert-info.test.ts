/**
 * readCertFile on certificates the openssl CLI made in a temp dir: RSA 2048, ECDSA P-256, a chain
 * (in order and reversed), windows in the past and future, and files that are not certificates.
 * Every fact is checked against what openssl itself prints for the same file.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import {
  CertInfoError,
  describeKey,
  keyMatches,
  readCertFile,
  readKeyFile,
  type CertFileInfo,
  type KeyInfo,
} from '../../../src/tls/cert-info';
import { parseSubjectAltName } from '../../../src/tls/subject-alt-name';
import { TestCA, days } from '../../helpers/openssl-certs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-cert-info-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const root = TestCA.root(path.join(dir, 'root'));
const inter = root.intermediate('issuing');
/** Whole seconds: X.509 times have no fractions. */
const sec = (d: Date): Date => new Date(Math.floor(d.getTime() / 1000) * 1000);
const past = { notBefore: sec(days(-400)), notAfter: sec(days(-30)) };
const future = { notBefore: sec(days(10)), notAfter: sec(days(100)) };

const rsa = root.issue({
  name: 'rsa',
  key: 'rsa2048',
  cn: 'rsa.example.com',
  dns: ['rsa.example.com', '*.rsa.example.com'],
  ip: ['127.0.0.1'],
});
const ec = root.issue({ name: 'ec', key: 'p256', cn: 'ec.example.com', dns: ['ec.example.com'] });
const chained = inter.issue({ name: 'chained', key: 'p256', cn: 'chained.example.com', dns: ['chained.example.com'] });
const expired = root.issue({ name: 'expired', dns: ['old.example.com'], ...past });
const notYet = root.issue({ name: 'not-yet', dns: ['new.example.com'], ...future });

function opensslPrint(file: string, ...what: string[]): string {
  return execFileSync('openssl', ['x509', '-in', file, '-noout', ...what], { encoding: 'utf8' }).trim();
}
function opensslFingerprint(file: string): string {
  return opensslPrint(file, '-fingerprint', '-sha256').replace(/^sha256 Fingerprint=/i, '');
}
function opensslDate(file: string, which: '-startdate' | '-enddate'): Date {
  return new Date(opensslPrint(file, which).replace(/^not(Before|After)=/, ''));
}

interface Good {
  name: string;
  file: string;
  cn: string;
  issuerCN: string;
  dns: string[];
  ip?: string[];
  key: KeyInfo;
  keyText: string;
  chain: number;
  ordered: boolean;
  window?: { notBefore: Date; notAfter: Date };
}

const reversed = path.join(dir, 'reversed.crt');
fs.writeFileSync(reversed, fs.readFileSync(inter.cert, 'utf8') + fs.readFileSync(chained.cert, 'utf8'));
const combined = path.join(dir, 'combined.pem');
fs.writeFileSync(combined, fs.readFileSync(ec.key, 'utf8') + fs.readFileSync(ec.cert, 'utf8'));

const good: Good[] = [
  {
    name: 'RSA 2048 leaf with DNS, wildcard and IP SANs',
    file: rsa.cert,
    cn: 'rsa.example.com',
    issuerCN: 'ipgate test root CA',
    dns: ['rsa.example.com', '*.rsa.example.com'],
    ip: ['127.0.0.1'],
    key: { type: 'rsa', bits: 2048 },
    keyText: 'RSA 2048',
    chain: 0,
    ordered: true,
  },
  {
    name: 'ECDSA P-256 leaf',
    file: ec.cert,
    cn: 'ec.example.com',
    issuerCN: 'ipgate test root CA',
    dns: ['ec.example.com'],
    key: { type: 'ec', curve: 'prime256v1' },
    keyText: 'EC prime256v1',
    chain: 0,
    ordered: true,
  },
  {
    name: 'leaf + intermediate chain in order',
    file: chained.chain,
    cn: 'chained.example.com',
    issuerCN: 'ipgate test issuing',
    dns: ['chained.example.com'],
    key: { type: 'ec', curve: 'prime256v1' },
    keyText: 'EC prime256v1',
    chain: 1,
    ordered: true,
  },
  {
    name: 'chain in the wrong order: the first block is taken as the leaf, order flagged',
    file: reversed,
    cn: 'ipgate test issuing',
    issuerCN: 'ipgate test root CA',
    dns: [],
    key: { type: 'ec', curve: 'prime256v1' },
    keyText: 'EC prime256v1',
    chain: 1,
    ordered: false,
  },
  {
    name: 'expired certificate: dates as issued with openssl ca -startdate/-enddate',
    file: expired.cert,
    cn: 'expired',
    issuerCN: 'ipgate test root CA',
    dns: ['old.example.com'],
    key: { type: 'ec', curve: 'prime256v1' },
    keyText: 'EC prime256v1',
    chain: 0,
    ordered: true,
    window: past,
  },
  {
    name: 'not yet valid certificate',
    file: notYet.cert,
    cn: 'not-yet',
    issuerCN: 'ipgate test root CA',
    dns: ['new.example.com'],
    key: { type: 'ec', curve: 'prime256v1' },
    keyText: 'EC prime256v1',
    chain: 0,
    ordered: true,
    window: future,
  },
  {
    name: 'key and certificate in one file (HAProxy crt style): the key block is skipped',
    file: combined,
    cn: 'ec.example.com',
    issuerCN: 'ipgate test root CA',
    dns: ['ec.example.com'],
    key: { type: 'ec', curve: 'prime256v1' },
    keyText: 'EC prime256v1',
    chain: 0,
    ordered: true,
  },
];

for (const row of good) {
  t.test(row.name, async (t) => {
    const info: CertFileInfo = readCertFile(row.file);
    t.equal(info.file, row.file);
    t.equal(info.leaf.commonName, row.cn);
    t.equal(info.leaf.subject, `CN=${row.cn}`);
    t.equal(info.leaf.issuer, `CN=${row.issuerCN}`);
    t.same(info.leaf.dnsNames, row.dns);
    t.same(info.leaf.ipAddresses, row.ip ?? []);
    t.same(info.leaf.key, row.key);
    t.equal(describeKey(info.leaf.key), row.keyText);
    t.equal(info.chain.length, row.chain);
    t.equal(info.chainOrdered, row.ordered);
    t.equal(info.leaf.selfSigned, false);
    // The same facts openssl prints for the first certificate of the file.
    t.equal(info.leaf.fingerprint256, opensslFingerprint(row.file));
    t.equal(info.leaf.notBefore.getTime(), opensslDate(row.file, '-startdate').getTime());
    t.equal(info.leaf.notAfter.getTime(), opensslDate(row.file, '-enddate').getTime());
    t.equal(
      info.leaf.serialNumber.toLowerCase(),
      opensslPrint(row.file, '-serial')
        .replace(/^serial=/, '')
        .toLowerCase(),
    );
    if (row.window) {
      t.equal(info.leaf.notBefore.getTime(), row.window.notBefore.getTime());
      t.equal(info.leaf.notAfter.getTime(), row.window.notAfter.getTime());
    }
  });
}

t.test('the root CA is recognised as self-signed', async (t) => {
  const info = readCertFile(root.cert);
  t.equal(info.leaf.selfSigned, true);
  t.equal(info.leaf.subject, info.leaf.issuer);
});

t.test('an RSA root and RSA 3072 key sizes are read from the key, not assumed', async (t) => {
  const rsaRoot = TestCA.root(path.join(dir, 'rsa-root'), 'rsa root', 'rsa3072');
  t.same(readCertFile(rsaRoot.cert).leaf.key, { type: 'rsa', bits: 3072 });
});

const garbage = path.join(dir, 'garbage.crt');
fs.writeFileSync(garbage, 'this is not a certificate\n');
const empty = path.join(dir, 'empty.crt');
fs.writeFileSync(empty, '');
const badBase64 = path.join(dir, 'bad-block.crt');
fs.writeFileSync(
  badBase64,
  `${fs.readFileSync(ec.cert, 'utf8')}-----BEGIN CERTIFICATE-----\nTUlJQm9vb29vb28=\n-----END CERTIFICATE-----\n`,
);
const der = path.join(dir, 'cert.der');
execFileSync('openssl', ['x509', '-in', ec.cert, '-outform', 'DER', '-out', der]);
const truncated = path.join(dir, 'truncated.crt');
const ecText = fs.readFileSync(ec.cert, 'utf8');
fs.writeFileSync(truncated, ecText.slice(0, 200) + ecText.slice(ecText.indexOf('-----END')));

const bad: Array<{ name: string; file: string; code: CertInfoError['code']; says: RegExp }> = [
  {
    name: 'a missing file',
    file: path.join(dir, 'nope.crt'),
    code: 'IPGATE_CERT_UNREADABLE',
    says: /cannot read certificate file: ENOENT/,
  },
  { name: 'a directory', file: dir, code: 'IPGATE_CERT_UNREADABLE', says: /cannot read certificate file: EISDIR/ },
  { name: 'an empty file', file: empty, code: 'IPGATE_CERT_NO_PEM', says: /not a PEM certificate: the file is empty/ },
  { name: 'a text file', file: garbage, code: 'IPGATE_CERT_NO_PEM', says: /no "-----BEGIN CERTIFICATE-----" block/ },
  { name: 'a DER certificate', file: der, code: 'IPGATE_CERT_NO_PEM', says: /no "-----BEGIN CERTIFICATE-----" block/ },
  {
    name: 'the private key given as the certificate',
    file: ec.key,
    code: 'IPGATE_CERT_NO_PEM',
    says: /holds a private key, not a certificate/,
  },
  {
    name: 'a second block that is not DER',
    file: badBase64,
    code: 'IPGATE_CERT_INVALID',
    says: /certificate 2 of 2 does not parse as X\.509/,
  },
  { name: 'a truncated block', file: truncated, code: 'IPGATE_CERT_INVALID', says: /certificate 1 of 1 does not parse/ },
];

for (const row of bad) {
  t.test(`refused: ${row.name}`, async (t) => {
    let err: unknown;
    try {
      readCertFile(row.file);
    } catch (e) {
      err = e;
    }
    t.type(err, CertInfoError);
    const e = err as CertInfoError;
    t.equal(e.code, row.code);
    t.equal(e.file, row.file);
    t.ok(e.message.startsWith(`${row.file}: `), 'the message names the file first');
    t.match(e.message, row.says);
  });
}

const sanRows: Array<{ name: string; text: string | undefined; dns: string[]; ip: string[] }> = [
  { name: 'absent extension', text: undefined, dns: [], ip: [] },
  {
    name: 'DNS and IP entries',
    text: 'DNS:a.example, DNS:*.b.example, IP Address:127.0.0.1, IP Address:::1',
    dns: ['a.example', '*.b.example'],
    ip: ['127.0.0.1', '::1'],
  },
  { name: 'other kinds are skipped', text: 'email:x@example.com, DNS:a.example, URI:https://x/', dns: ['a.example'], ip: [] },
  {
    name: 'a quoted value cannot smuggle in a second entry',
    text: 'DNS:"evil.example, DNS:victim.example", DNS:ok.example',
    dns: ['evil.example, DNS:victim.example', 'ok.example'],
    ip: [],
  },
  { name: 'escaped quote inside a quoted value', text: 'DNS:"a\\"b", DNS:c', dns: ['a"b', 'c'], ip: [] },
];
for (const row of sanRows) {
  t.test(`subjectAltName: ${row.name}`, async (t) => {
    t.same(parseSubjectAltName(row.text), { dns: row.dns, ip: row.ip });
  });
}

const encrypted = path.join(dir, 'encrypted.key');
execFileSync('openssl', ['pkey', '-in', ec.key, '-aes256', '-passout', 'pass:secret', '-out', encrypted]);
const pkcs1 = path.join(dir, 'pkcs1.key');
execFileSync('openssl', ['pkey', '-in', rsa.key, '-traditional', '-out', pkcs1]);
const encryptedTraditional = path.join(dir, 'encrypted-traditional.key');
execFileSync('openssl', ['pkey', '-in', rsa.key, '-traditional', '-aes256', '-passout', 'pass:secret', '-out', encryptedTraditional]);
const truncatedKey = path.join(dir, 'truncated.key');
const keyText = fs.readFileSync(ec.key, 'utf8');
fs.writeFileSync(truncatedKey, keyText.slice(0, 60) + keyText.slice(keyText.indexOf('-----END')));

const keyRows: Array<{ name: string; cert: string; key: string; matches?: boolean; code?: CertInfoError['code']; says?: RegExp }> = [
  { name: 'the RSA pair (PKCS#8)', cert: rsa.cert, key: rsa.key, matches: true },
  { name: 'the RSA key as PKCS#1 (BEGIN RSA PRIVATE KEY)', cert: rsa.cert, key: pkcs1, matches: true },
  { name: 'the ECDSA pair', cert: ec.cert, key: ec.key, matches: true },
  { name: 'the leaf of a chain file with its key', cert: chained.chain, key: chained.key, matches: true },
  { name: 'an ECDSA certificate with another ECDSA key', cert: ec.cert, key: chained.key, matches: false },
  { name: 'an RSA certificate with an ECDSA key', cert: rsa.cert, key: ec.key, matches: false },
  {
    name: 'a missing key file',
    cert: ec.cert,
    key: path.join(dir, 'nope.key'),
    code: 'IPGATE_KEY_UNREADABLE',
    says: /cannot read private key file: ENOENT/,
  },
  { name: 'an encrypted key (PKCS#8)', cert: ec.cert, key: encrypted, code: 'IPGATE_KEY_INVALID', says: /the key is encrypted/ },
  {
    name: 'an encrypted key (traditional, Proc-Type)',
    cert: rsa.cert,
    key: encryptedTraditional,
    code: 'IPGATE_KEY_INVALID',
    says: /the key is encrypted/,
  },
  {
    name: 'a truncated key block',
    cert: ec.cert,
    key: truncatedKey,
    code: 'IPGATE_KEY_INVALID',
    says: /not a usable private key: does not parse/,
  },
  {
    name: 'a certificate given as the key',
    cert: ec.cert,
    key: ec.cert,
    code: 'IPGATE_KEY_INVALID',
    says: /not a private key: it holds a certificate/,
  },
  {
    name: 'a text file given as the key',
    cert: ec.cert,
    key: garbage,
    code: 'IPGATE_KEY_INVALID',
    says: /no "-----BEGIN \.\.\. PRIVATE KEY-----" block/,
  },
];
for (const row of keyRows) {
  t.test(`private key: ${row.name}`, async (t) => {
    const info = readCertFile(row.cert);
    if (row.code === undefined) {
      t.equal(keyMatches(info, readKeyFile(row.key)), row.matches);
      return;
    }
    let err: unknown;
    try {
      readKeyFile(row.key);
    } catch (e) {
      err = e;
    }
    t.type(err, CertInfoError);
    t.equal((err as CertInfoError).code, row.code);
    t.ok((err as CertInfoError).message.startsWith(`${row.key}: `), 'the message names the file first');
    t.match((err as CertInfoError).message, row.says!);
  });
}
