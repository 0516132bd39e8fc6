/**
 * The checks of a listener's `tls` block the schema cannot express (schema/tls.ts): the files
 * exist and hold what they should (PEM certificates, a key that is the certificate's), host
 * patterns are host names, the options agree with each other. Paths are made absolute here
 * (relative to the config file, as `allowlists.*.file`). Every problem names the field and
 * quotes the value.
 */
import path from 'node:path';
import { loadCaBundle, loadCertPair, hostPattern } from '../tls/cert-pair';
import { problem } from '../schema/problem';
import type { ListenerConfig } from '../schema/config';

/** `files` false: the files are named but not read (a config written where they are not). */
export function checkTls(
  at: string,
  l: ListenerConfig,
  rawTls: unknown,
  baseDir: string | null,
  problems: string[],
  warnings: string[],
  files = true,
): void {
  // Ajv leaves an absent `tls` absent; the loaded config always has the field.
  if (l.tls === undefined) l.tls = null;
  const t = l.tls;
  if (t === null) return;
  if (l.mode !== 'http') {
    problems.push(problem(`${at}.tls`, rawTls, `is for mode: http listeners (TLS termination), but ${at}.mode is "${l.mode}"`));
    return;
  }
  const abs = (file: string): string => path.resolve(baseDir ?? process.cwd(), file);
  if (t.clientCA !== null) {
    const written = t.clientCA;
    t.clientCA = abs(written);
    const ca = files ? loadCaBundle(t.clientCA) : null;
    if (typeof ca === 'string') problems.push(problem(`${at}.tls.clientCA`, written, ca));
  }
  if (t.clientCertificate !== 'none' && t.clientCA === null) {
    problems.push(
      problem(`${at}.tls.clientCertificate`, t.clientCertificate, `needs ${at}.tls.clientCA (the CAs client certificates must chain to)`),
    );
  }
  if (t.clientCertificate === 'none' && t.clientCA !== null) {
    warnings.push(
      problem(`${at}.tls.clientCA`, t.clientCA, 'is ignored: tls.clientCertificate is "none" (no client certificate is asked for)'),
    );
  }
  if (t.minVersion > t.maxVersion) {
    problems.push(problem(`${at}.tls.minVersion`, t.minVersion, `is above tls.maxVersion "${t.maxVersion}"`));
  }
  const labels = new Map<string, number>();
  t.certificates.forEach((c, i) => {
    const here = `${at}.tls.certificates[${i}]`;
    const label = c.name ?? String(i);
    const seen = labels.get(label);
    if (seen !== undefined)
      problems.push(problem(`${here}.name`, label, `is also the name of certificates[${seen}] (names are metric labels: one each)`));
    labels.set(label, i);
    (c.hosts ?? []).forEach((h, j) => {
      const why = hostPattern(h.toLowerCase());
      if (why !== null) problems.push(problem(`${here}.hosts[${j}]`, h, why));
    });
    const cert = c.cert;
    const key = c.key;
    c.cert = abs(cert);
    c.key = abs(key);
    if (!files) return;
    const pair = loadCertPair(c.cert, c.key);
    if (typeof pair === 'string') {
      const field = pair.startsWith(c.key) || pair.startsWith(`cannot read ${c.key}:`) ? 'key' : 'cert';
      problems.push(problem(`${here}.${field}`, field === 'key' ? key : cert, pair));
      return;
    }
    if (c.hosts === null && pair.names.length === 0 && i > 0) {
      warnings.push(
        problem(
          `${here}.cert`,
          cert,
          'names no DNS host (no subjectAltName DNS entry or host-name CN) and is not the default: no client can reach it; give it hosts',
        ),
      );
    }
    if (pair.notAfter * 1000 < Date.now()) {
      warnings.push(problem(`${here}.cert`, cert, `expired on ${pair.leaf.validTo}`));
    }
  });
}
