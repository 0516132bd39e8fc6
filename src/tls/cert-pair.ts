/**
 * Reading one certificate + key pair (and a client CA bundle) from PEM files, checked the way a
 * handshake would use them: every PEM block parses, the key is the leaf certificate's, and the
 * names the leaf serves are known. Used by config validation (validate.ts: a bad file at start-up
 * is a config error) and by the certificate store (cert-store.ts: a bad file at reload is refused
 * and the old pair stays). Returns a result or the reason as a sentence; never throws.
 */
import { createHash, type X509Certificate } from 'node:crypto';
import { asciiLower, hostNameProblem } from '../route/host-name';
import { pemCertificates, pemPrivateKey, readPemFile } from './pem';
import { parseSubjectAltName } from './subject-alt-name';

/** A pair as read and checked: the bytes OpenSSL gets, and what the store and metrics need. */
export interface CertPair {
  certPem: Buffer;
  keyPem: Buffer;
  /** The leaf certificate (the first PEM block of the cert file). */
  leaf: X509Certificate;
  /** Certificates in the file (leaf + intermediates). */
  chainLength: number;
  /** `rsa`, `ec`, `ed25519`, ... (the key's type). */
  keyType: string;
  /** The leaf's DNS names: its subjectAltName DNS entries, else its CN; lower-case. */
  names: string[];
  /** Leaf notAfter, seconds since the epoch. */
  notAfter: number;
  /** sha256 of cert file + key file: the same bytes are never reloaded twice. */
  hash: string;
}

/** The certificates of a PEM file, or why not. */
function parseCertificates(pem: Buffer, file: string): readonly X509Certificate[] | string {
  const r = pemCertificates(pem);
  if (r.ok) return r.certs;
  if (r.problem === 'no_pem') return `${file} holds no PEM certificate ("-----BEGIN CERTIFICATE-----")`;
  return `${file}: certificate ${r.index + 1} does not parse (${r.cause.message})`;
}

function read(file: string): Buffer | string {
  const r = readPemFile(file);
  return Buffer.isBuffer(r) ? r : `cannot read ${file}: ${r.unreadable}`;
}

/** Read and check a pair; `certFile` / `keyFile` are absolute paths. */
export function loadCertPair(certFile: string, keyFile: string): CertPair | string {
  const certPem = read(certFile);
  if (typeof certPem === 'string') return certPem;
  const keyPem = read(keyFile);
  if (typeof keyPem === 'string') return keyPem;
  const certs = parseCertificates(certPem, certFile);
  if (typeof certs === 'string') return certs;
  const k = pemPrivateKey(keyPem);
  if (!k.ok) return `${keyFile} is not a usable private key (PEM, unencrypted): ${k.says}`;
  const key = k.key;
  const leaf = certs[0]!;
  if (!leaf.checkPrivateKey(key)) {
    return `${keyFile} is not the private key of the certificate in ${certFile} (subject ${JSON.stringify(leaf.subject.replace(/\n/g, ', '))})`;
  }
  return {
    certPem,
    keyPem,
    leaf,
    chainLength: certs.length,
    keyType: key.asymmetricKeyType ?? 'unknown',
    names: certificateNames(leaf),
    notAfter: Math.floor(Date.parse(leaf.validTo) / 1000),
    hash: createHash('sha256').update(certPem).update('\0').update(keyPem).digest('hex'),
  };
}

/** A client CA bundle: its bytes, once every block parses. */
export function loadCaBundle(file: string): { pem: Buffer; count: number; hash: string } | string {
  const pem = read(file);
  if (typeof pem === 'string') return pem;
  const certs = parseCertificates(pem, file);
  if (typeof certs === 'string') return certs;
  return { pem, count: certs.length, hash: createHash('sha256').update(pem).digest('hex') };
}

/**
 * The DNS names a certificate serves: the subjectAltName's DNS entries (RFC 6125 6.4.4: when there
 * are any, the CN is not looked at), else the subject's CN if it is a host name. Lower-case.
 */
function certificateNames(cert: X509Certificate): string[] {
  const names = parseSubjectAltName(cert.subjectAltName).dns.map(asciiLower);
  if (names.length > 0) return names;
  const cn = /^CN=(.*)$/m.exec(cert.subject);
  if (cn !== null && hostPattern(asciiLower(cn[1]!)) === null) names.push(asciiLower(cn[1]!));
  return names;
}

/**
 * Why a certificate host pattern is unusable, or null: an exact host name, or `*.` + a host name
 * of at least two labels (`*.example.com`; `*.com` would cover a whole TLD).
 */
export function hostPattern(name: string): string | null {
  if (name.startsWith('*.')) {
    const rest = name.slice(2);
    const why = hostNameProblem(rest);
    if (why !== null) return `after "*." must come a host name; ${JSON.stringify(rest)} ${why}`;
    if (!rest.includes('.')) return 'a wildcard must cover a name of at least two labels ("*.example.com")';
    return null;
  }
  if (name.includes('*')) return 'a wildcard is only allowed as the whole first label ("*.example.com")';
  return hostNameProblem(name);
}
