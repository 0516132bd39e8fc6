/**
 * `ipgate doctor --config FILE`: the listener certificates an ipgate config names, read from this
 * machine's files (run it where they are mounted: `kubectl exec ... -- ipgate doctor --config
 * /etc/ipgate/config.yaml --no-cluster`, or in CI against the files a deploy ships).
 *
 * The config is read as YAML and walked loosely rather than through the config loader, so a
 * config the loader would refuse for another reason still gets its certificates checked, and a
 * doctor built before a field existed reads what it can. The `tls` block's shape is docs/tls.md's:
 * `listeners[].tls.certificates[]` of `{cert, key}` PEM paths, the first being the default.
 * Each certificate file is read whole (leaf and chain) and its key checked against the leaf.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { CertInfoError, keyMatches, readCertFile, readKeyFile, type CertFileInfo } from '../tls/cert-info';
import { DoctorError } from './errors';

interface CertificateRef {
  readonly listener: string;
  /** Index in the listener's `tls.certificates`. */
  readonly index: number;
  /** As written in the config. */
  readonly configured: string;
  /** Resolved against the config file's directory (as an allowlist's `file` is). */
  readonly file: string;
  /** The pair's `key`, resolved the same way; null when the entry names none. */
  readonly keyFile: string | null;
}

/** The private key beside a readable certificate: fine, or what is wrong with it. */
type KeyRead = { readonly state: 'ok' } | { readonly state: 'unreadable' | 'mismatch'; readonly reason: string };

export type CertificateRead =
  | (CertificateRef & { readonly state: 'ok'; readonly info: CertFileInfo; readonly key: KeyRead | null })
  | (CertificateRef & { readonly state: 'unreadable'; readonly reason: string });

export interface CertificatesView {
  readonly configFile: string;
  /** The instant the validity windows are judged against. */
  readonly checkedAt: Date;
  /** Listeners with a `tls` block, in config order. */
  readonly tlsListeners: readonly string[];
  readonly certificates: readonly CertificateRead[];
  /** `listeners[i].tls...` entries that are not usable paths: shown, not guessed at. */
  readonly malformed: readonly string[];
}

type Loose = Record<string, unknown>;
const isObj = (v: unknown): v is Loose => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Throws DoctorError (exit 2) when the config file itself cannot be read or is not YAML. */
export function collectCertificates(configFile: string, checkedAt: Date = new Date()): CertificatesView {
  let raw: unknown;
  try {
    raw = YAML.parse(fs.readFileSync(configFile, 'utf8'));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why =
      e.code?.startsWith('E') && !e.code.startsWith('ERR_') ? `cannot read it: ${e.code}` : `not valid YAML: ${e.message.split('\n')[0]}`;
    throw new DoctorError('IPGATE_DOCTOR_CONFIG', `--config ${configFile}: ${why}`, { cause: err });
  }
  if (!isObj(raw) || !Array.isArray(raw.listeners)) {
    throw new DoctorError('IPGATE_DOCTOR_CONFIG', `--config ${configFile}: no "listeners" list: not an ipgate config`);
  }
  const baseDir = path.dirname(path.resolve(configFile));
  const tlsListeners: string[] = [];
  const refs: CertificateRef[] = [];
  const malformed: string[] = [];
  raw.listeners.forEach((listener: unknown, i: number) => {
    if (!isObj(listener) || listener.tls === undefined || listener.tls === null) return;
    const name = typeof listener.name === 'string' ? listener.name : `listeners[${i}]`;
    tlsListeners.push(name);
    const certs = isObj(listener.tls) ? listener.tls.certificates : undefined;
    if (!Array.isArray(certs) || certs.length === 0) {
      malformed.push(
        `listeners[${i}].tls.certificates (listener ${name}): ${JSON.stringify(certs ?? null)}: expected a list of {cert, key}`,
      );
      return;
    }
    certs.forEach((c: unknown, j: number) => {
      const cert = isObj(c) ? c.cert : undefined;
      if (typeof cert !== 'string' || cert === '') {
        malformed.push(
          `listeners[${i}].tls.certificates[${j}].cert (listener ${name}): ${JSON.stringify(cert ?? null)}: expected a file path`,
        );
        return;
      }
      const key = isObj(c) && typeof c.key === 'string' && c.key !== '' ? path.resolve(baseDir, c.key) : null;
      refs.push({ listener: name, index: j, configured: cert, file: path.resolve(baseDir, cert), keyFile: key });
    });
  });
  const certificates = refs.map((ref): CertificateRead => {
    try {
      const info = readCertFile(ref.file);
      return { ...ref, state: 'ok', info, key: ref.keyFile === null ? null : checkKey(info, ref.keyFile) };
    } catch (err) {
      if (err instanceof CertInfoError) return { ...ref, state: 'unreadable', reason: err.message };
      throw err;
    }
  });
  return { configFile, checkedAt, tlsListeners, certificates, malformed };
}

function checkKey(info: CertFileInfo, keyFile: string): KeyRead {
  try {
    return keyMatches(info, readKeyFile(keyFile))
      ? { state: 'ok' }
      : { state: 'mismatch', reason: `${keyFile}: this private key is not the certificate's (its public key differs)` };
  } catch (err) {
    if (err instanceof CertInfoError) return { state: 'unreadable', reason: err.message };
    throw err;
  }
}
