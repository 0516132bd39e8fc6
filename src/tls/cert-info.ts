/**
 * Facts about a PEM certificate file (a leaf, optionally followed by its chain), read with the
 * PEM reader the listeners load certificates with (pem.ts): who it is for, who issued it, when it is valid, what key it
 * carries. Used by `ipgate doctor` (expiry findings, src/doctor/analyse-certificates.ts); no
 * data-path code depends on it.
 *
 * Failures throw CertInfoError naming the file and saying what is wrong (unreadable, no PEM
 * certificate, a block that does not parse), the way a config error names the field: the caller
 * turns it into a finding or a log line.
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { pemCertificates, pemPrivateKey, readPemFile, type KeyProblem } from './pem';
import { parseSubjectAltName } from './subject-alt-name';

type CertInfoErrorCode =
  | 'IPGATE_CERT_UNREADABLE' // the file cannot be read (missing, permissions, a directory)
  | 'IPGATE_CERT_NO_PEM' // no "-----BEGIN CERTIFICATE-----" block in it (empty, DER, a key file)
  | 'IPGATE_CERT_INVALID' // a CERTIFICATE block that does not parse as X.509
  | 'IPGATE_KEY_UNREADABLE' // the private key file cannot be read
  | 'IPGATE_KEY_INVALID'; // not an unencrypted PEM private key

export class CertInfoError extends Error {
  constructor(
    readonly code: CertInfoErrorCode,
    readonly file: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${file}: ${message}`, options);
    this.name = 'CertInfoError';
  }
}

/** The public key of a certificate: RSA with its modulus size, EC with its curve, or another type. */
export type KeyInfo =
  | { readonly type: 'rsa' | 'rsa-pss'; readonly bits: number }
  | { readonly type: 'ec'; readonly curve: string }
  | { readonly type: string };

export interface CertFacts {
  /** RFC 2253-like one-line form of the subject: `CN=web.example.com, O=Example`. */
  readonly subject: string;
  /** The subject's CN, when it has one. */
  readonly commonName: string | null;
  readonly issuer: string;
  /** DNS names of the subjectAltName extension, as written (wildcards kept). */
  readonly dnsNames: readonly string[];
  /** IP addresses of the subjectAltName extension. */
  readonly ipAddresses: readonly string[];
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** SHA-256 of the DER encoding, `AB:CD:...` (what `openssl x509 -fingerprint -sha256` prints). */
  readonly fingerprint256: string;
  readonly serialNumber: string;
  readonly key: KeyInfo;
  /** Self-signed (issuer = subject and the signature verifies with its own key). */
  readonly selfSigned: boolean;
}

export interface CertFileInfo {
  readonly file: string;
  /** The first certificate: the one a TLS server presents as its own. */
  readonly leaf: CertFacts;
  /** The certificates after it, in file order (intermediates, sometimes the root). */
  readonly chain: readonly CertFacts[];
  /**
   * Whether each certificate is issued by the next one (checked by signature). False for a chain
   * in the wrong order or with a foreign certificate; true when there is no chain.
   */
  readonly chainOrdered: boolean;
  /** The leaf's PEM block, for checks against it (keyMatches). */
  readonly leafPem: string;
}

/** Read and describe a PEM certificate file. Throws CertInfoError (naming the file) on failure. */
export function readCertFile(file: string): CertFileInfo {
  const pem = readPemFile(file);
  if (!Buffer.isBuffer(pem)) {
    throw new CertInfoError('IPGATE_CERT_UNREADABLE', file, `cannot read certificate file: ${pem.unreadable}`, { cause: pem.cause });
  }
  return describePem(pem.toString('latin1'), file);
}

/** Describe PEM text (`source` names it in errors). */
function describePem(text: string, source: string): CertFileInfo {
  const r = pemCertificates(text);
  if (!r.ok && r.problem === 'no_pem') {
    const hint =
      text.length === 0
        ? 'the file is empty'
        : text.includes('PRIVATE KEY-----')
          ? 'it holds a private key, not a certificate'
          : 'no "-----BEGIN CERTIFICATE-----" block';
    throw new CertInfoError('IPGATE_CERT_NO_PEM', source, `not a PEM certificate: ${hint}`);
  }
  if (!r.ok) {
    throw new CertInfoError(
      'IPGATE_CERT_INVALID',
      source,
      `certificate ${r.index + 1} of ${r.count} does not parse as X.509: ${r.cause.message}`,
      { cause: r.cause },
    );
  }
  const { blocks, certs } = r;
  let chainOrdered = true;
  for (let i = 0; i + 1 < certs.length; i++) {
    if (!issuedBy(certs[i]!, certs[i + 1]!)) chainOrdered = false;
  }
  const [leaf, ...chain] = certs.map(facts);
  return { file: source, leaf: leaf!, chain, chainOrdered, leafPem: blocks[0]! };
}

/**
 * Read a PEM private key file (PKCS#8, PKCS#1 or SEC1). An encrypted key is refused: a listener's
 * key is read without a passphrase. Throws CertInfoError naming the file.
 */
export function readKeyFile(file: string): KeyObject {
  const pem = readPemFile(file);
  if (!Buffer.isBuffer(pem)) {
    throw new CertInfoError('IPGATE_KEY_UNREADABLE', file, `cannot read private key file: ${pem.unreadable}`, { cause: pem.cause });
  }
  const r = pemPrivateKey(pem);
  if (!r.ok) throw new CertInfoError('IPGATE_KEY_INVALID', file, `${KEY_PROBLEM[r.problem]}: ${r.says}`, { cause: r.cause });
  return r.key;
}

/** What a key file is not, by its problem. */
const KEY_PROBLEM: Readonly<Record<KeyProblem, string>> = {
  certificate: 'not a private key',
  no_pem: 'not a PEM private key',
  encrypted: 'not a usable private key',
  invalid: 'not a usable private key',
};

/** Whether `key` is the private half of the file's leaf certificate. */
export function keyMatches(info: CertFileInfo, key: KeyObject): boolean {
  return new X509Certificate(info.leafPem).checkPrivateKey(key);
}

function issuedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  // checkIssued compares names (and key identifiers); verify proves the signature.
  return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

function facts(cert: X509Certificate): CertFacts {
  const san = parseSubjectAltName(cert.subjectAltName);
  const subjectLines = cert.subject.split('\n').filter((l) => l !== '');
  const cn = subjectLines.find((l) => l.startsWith('CN='));
  return {
    subject: subjectLines.join(', '),
    commonName: cn !== undefined ? cn.slice(3) : null,
    issuer: cert.issuer
      .split('\n')
      .filter((l) => l !== '')
      .join(', '),
    dnsNames: san.dns,
    ipAddresses: san.ip,
    notBefore: new Date(cert.validFrom),
    notAfter: new Date(cert.validTo),
    fingerprint256: cert.fingerprint256,
    serialNumber: cert.serialNumber,
    key: keyInfo(cert),
    selfSigned: cert.checkIssued(cert) && cert.verify(cert.publicKey),
  };
}

function keyInfo(cert: X509Certificate): KeyInfo {
  const key = cert.publicKey;
  const type = key.asymmetricKeyType ?? 'unknown';
  const details = key.asymmetricKeyDetails ?? {};
  if ((type === 'rsa' || type === 'rsa-pss') && details.modulusLength !== undefined) return { type, bits: details.modulusLength };
  if (type === 'ec' && details.namedCurve !== undefined) return { type, curve: details.namedCurve };
  return { type };
}

/** `RSA 2048`, `EC prime256v1`, `ed25519`: for statements and logs. */
export function describeKey(key: KeyInfo): string {
  if ('bits' in key) return `${key.type.toUpperCase()} ${key.bits}`;
  if ('curve' in key) return `EC ${key.curve}`;
  return key.type;
}
