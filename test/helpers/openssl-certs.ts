/**
 * Certificates made by the real `openssl` CLI in a temp dir, for tests: a CA, intermediates,
 * leaves with RSA or ECDSA keys and any validity window.
 *
 * Validity windows in the past or future come from `openssl ca -startdate/-enddate` (OpenSSL 3.0,
 * Debian 12, has no `x509 -not_before`), so no clock faking is needed.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type KeyKind = 'rsa2048' | 'rsa3072' | 'p256' | 'p384';

export interface IssueOptions {
  /** File stem inside the CA's directory: NAME.key, NAME.crt, NAME.chain.crt. */
  name: string;
  key?: KeyKind;
  cn?: string;
  /** subjectAltName DNS entries. */
  dns?: string[];
  ip?: string[];
  notBefore?: Date;
  notAfter?: Date;
  /** Issue a CA certificate (an intermediate) rather than a server leaf. */
  ca?: boolean;
}

export interface Issued {
  readonly key: string;
  /** The certificate alone. */
  readonly cert: string;
  /** The certificate followed by its issuers up to (not including) the root. */
  readonly chain: string;
}

const DAY = 86_400_000;

const LEAF_EXT = [
  'basicConstraints = critical, CA:FALSE',
  'keyUsage = critical, digitalSignature, keyEncipherment',
  'extendedKeyUsage = serverAuth, clientAuth',
  'subjectKeyIdentifier = hash',
  'authorityKeyIdentifier = keyid',
];
const INTERMEDIATE_EXT = [
  'basicConstraints = critical, CA:TRUE, pathlen:0',
  'keyUsage = critical, keyCertSign, cRLSign',
  'subjectKeyIdentifier = hash',
  'authorityKeyIdentifier = keyid',
];

function openssl(args: string[], cwd: string): string {
  return execFileSync('openssl', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `openssl ca` dates: GeneralizedTime, YYYYMMDDHHMMSSZ. */
function asn1Time(d: Date): string {
  return d
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

export function generateKey(file: string, kind: KeyKind): void {
  const args =
    kind === 'rsa2048' || kind === 'rsa3072'
      ? ['-algorithm', 'RSA', '-pkeyopt', `rsa_keygen_bits:${kind === 'rsa2048' ? 2048 : 3072}`]
      : ['-algorithm', 'EC', '-pkeyopt', `ec_paramgen_curve:${kind === 'p256' ? 'P-256' : 'P-384'}`];
  openssl(['genpkey', ...args, '-out', file], path.dirname(file));
}

/** A certificate authority in its own directory; `issue` signs leaves or intermediates with it. */
export class TestCA {
  readonly dir: string;
  readonly key: string;
  readonly cert: string;
  /** The certificates between this CA and the root, this CA first (empty for the root). */
  private readonly upChain: readonly string[];

  private constructor(dir: string, key: string, cert: string, upChain: readonly string[]) {
    this.dir = dir;
    this.key = key;
    this.cert = cert;
    this.upChain = upChain;
    fs.writeFileSync(path.join(dir, 'index.txt'), '');
    fs.writeFileSync(path.join(dir, 'serial'), `${(Date.now() % 1e12).toString(16).padStart(16, '0')}\n`);
    fs.mkdirSync(path.join(dir, 'issued'), { recursive: true });
    fs.writeFileSync(
      path.join(dir, 'ca.cnf'),
      [
        '[ca]',
        'default_ca = test_ca',
        '[test_ca]',
        `dir = ${dir}`,
        'database = $dir/index.txt',
        'new_certs_dir = $dir/issued',
        'serial = $dir/serial',
        `certificate = ${cert}`,
        `private_key = ${key}`,
        'default_md = sha256',
        'policy = policy_any',
        'unique_subject = no',
        'email_in_dn = no',
        'copy_extensions = none',
        '[policy_any]',
        'commonName = supplied',
        '',
      ].join('\n'),
    );
  }

  /** A self-signed root CA (ECDSA P-256 unless said otherwise), valid ten years from yesterday. */
  static root(
    dir: string = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-ca-')),
    cn = 'ipgate test root CA',
    key: KeyKind = 'p256',
  ): TestCA {
    fs.mkdirSync(dir, { recursive: true });
    const keyFile = path.join(dir, 'ca.key');
    const certFile = path.join(dir, 'ca.crt');
    generateKey(keyFile, key);
    openssl(
      [
        'req',
        '-x509',
        '-new',
        '-key',
        keyFile,
        '-sha256',
        '-days',
        '3650',
        '-subj',
        `/CN=${cn}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
        '-out',
        certFile,
      ],
      dir,
    );
    return new TestCA(dir, keyFile, certFile, []);
  }

  /** An intermediate CA signed by this one, in a subdirectory. */
  intermediate(name: string, key: KeyKind = 'p256'): TestCA {
    const issued = this.issue({ name, key, cn: `ipgate test ${name}`, ca: true });
    const dir = path.join(this.dir, `${name}.ca`);
    fs.mkdirSync(dir);
    return new TestCA(dir, issued.key, issued.cert, [issued.cert, ...this.upChain]);
  }

  issue(opts: IssueOptions): Issued {
    const stem = path.join(this.dir, opts.name);
    const keyFile = `${stem}.key`;
    const csr = `${stem}.csr`;
    const certFile = `${stem}.crt`;
    generateKey(keyFile, opts.key ?? 'p256');
    openssl(['req', '-new', '-key', keyFile, '-subj', `/CN=${opts.cn ?? opts.name}`, '-out', csr], this.dir);
    const ext = `${stem}.ext`;
    const san = [...(opts.dns ?? []).map((d) => `DNS:${d}`), ...(opts.ip ?? []).map((a) => `IP:${a}`)];
    fs.writeFileSync(
      ext,
      ['[ext]', ...(opts.ca ? INTERMEDIATE_EXT : LEAF_EXT), ...(san.length > 0 ? [`subjectAltName = ${san.join(', ')}`] : []), ''].join(
        '\n',
      ),
    );
    const now = Date.now();
    const notBefore = opts.notBefore ?? new Date(now - DAY);
    const notAfter = opts.notAfter ?? new Date(now + 90 * DAY);
    openssl(
      [
        'ca',
        '-batch',
        '-notext',
        '-config',
        path.join(this.dir, 'ca.cnf'),
        '-in',
        csr,
        '-out',
        certFile,
        '-startdate',
        asn1Time(notBefore),
        '-enddate',
        asn1Time(notAfter),
        '-extfile',
        ext,
        '-extensions',
        'ext',
      ],
      this.dir,
    );
    const chainFile = `${stem}.chain.crt`;
    const chainParts = [certFile, ...this.upChain].map((f) => fs.readFileSync(f, 'utf8'));
    fs.writeFileSync(chainFile, chainParts.join(''));
    return { key: keyFile, cert: certFile, chain: chainFile };
  }
}

export const days = (n: number): Date => new Date(Date.now() + n * DAY);
