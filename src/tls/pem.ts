/**
 * The one PEM reader: a file's bytes, its CERTIFICATE blocks parsed as X.509, a private key. Used
 * by the certificate store and config validation (cert-pair.ts) and by `ipgate doctor`
 * (cert-info.ts), so what a listener loads and what doctor describes are split and parsed the same
 * way. Results, never exceptions: each caller words a failure its own way (a config sentence, a
 * CertInfoError with a code).
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import fs from 'node:fs';

/** Why a file could not be read: the errno code (`ENOENT`, `EISDIR`, ...) or the error's message. */
interface UnreadableFile {
  readonly unreadable: string;
  readonly cause: unknown;
}

/** A file's bytes, or why they cannot be read. */
export function readPemFile(file: string): Buffer | UnreadableFile {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    return { unreadable: (err as NodeJS.ErrnoException).code ?? (err as Error).message, cause: err };
  }
}

/**
 * A CERTIFICATE block in RFC 7468's textual encoding. Only these count; other blocks (a private
 * key concatenated into the same file) are skipped.
 */
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

type PemCertificates =
  | {
      readonly ok: true;
      /** Each block's text, in file order (the first is the leaf a server presents). */
      readonly blocks: readonly string[];
      readonly certs: readonly X509Certificate[];
    }
  /** No CERTIFICATE block at all. */
  | { readonly ok: false; readonly problem: 'no_pem' }
  /** Block `index` (from 0) of `count` does not parse as X.509. */
  | { readonly ok: false; readonly problem: 'invalid'; readonly index: number; readonly count: number; readonly cause: Error };

/** The certificates of PEM text (latin1 for bytes: base64 and labels are ASCII). */
export function pemCertificates(pem: Buffer | string): PemCertificates {
  const blocks = (typeof pem === 'string' ? pem : pem.toString('latin1')).match(PEM_CERTIFICATE);
  if (blocks === null) return { ok: false, problem: 'no_pem' };
  const certs: X509Certificate[] = [];
  for (let i = 0; i < blocks.length; i++) {
    try {
      certs.push(new X509Certificate(blocks[i]!));
    } catch (err) {
      return { ok: false, problem: 'invalid', index: i, count: blocks.length, cause: err as Error };
    }
  }
  return { ok: true, blocks, certs };
}

type PemPrivateKey =
  | { readonly ok: true; readonly key: KeyObject }
  | { readonly ok: false; readonly problem: KeyProblem; readonly says: string; readonly cause?: Error };

export type KeyProblem =
  | 'certificate' // a certificate where the key was expected
  | 'no_pem' // no PRIVATE KEY block (empty, DER, text)
  | 'encrypted' // a passphrase would be needed
  | 'invalid'; // a PRIVATE KEY block OpenSSL does not parse

/**
 * A PEM private key (PKCS#8, PKCS#1 or SEC1). An encrypted one is refused: a listener's key is
 * read without a passphrase. `says` is the reason as a phrase, for the caller's sentence.
 */
export function pemPrivateKey(pem: Buffer): PemPrivateKey {
  if (!pem.includes('PRIVATE KEY-----')) {
    return pem.includes('-----BEGIN CERTIFICATE-----')
      ? { ok: false, problem: 'certificate', says: 'it holds a certificate' }
      : { ok: false, problem: 'no_pem', says: 'no "-----BEGIN ... PRIVATE KEY-----" block' };
  }
  // PKCS#8 `ENCRYPTED PRIVATE KEY`, or a traditional key with `Proc-Type: 4,ENCRYPTED`: OpenSSL's
  // error without a passphrase differs between Node versions, the label does not.
  if (pem.includes('ENCRYPTED PRIVATE KEY-----') || pem.includes('Proc-Type: 4,ENCRYPTED')) {
    return { ok: false, problem: 'encrypted', says: 'the key is encrypted (a listener key must be unencrypted)' };
  }
  try {
    return { ok: true, key: createPrivateKey({ key: pem, format: 'pem' }) };
  } catch (err) {
    return { ok: false, problem: 'invalid', says: `does not parse: ${(err as Error).message}`, cause: err as Error };
  }
}
