/**
 * Listener certificates (collected by certificates.ts) to Findings: pure, judged at the view's
 * `checkedAt`. Every certificate in a file counts: an intermediate that expires breaks clients as
 * surely as the leaf.
 */
import { describeKey, type CertFacts } from '../tls/cert-info';
import type { CertificatesView, CertificateRead } from './certificates';
import type { Finding } from './finding';

/**
 * Warn this many days before a certificate's notAfter. cert-manager renews at two thirds of the
 * lifetime (30 days before the end of a 90-day certificate) and ACME clients typically at 30 days,
 * so 14 days left means a renewal has already failed for two weeks: time to look, not yet an outage.
 */
export const EXPIRY_WARNING_DAYS = 14;

const DAY_MS = 86_400_000;

const RENEW_FIX =
  'renew the certificate and replace the file (cert-manager: kubectl describe certificate <name>, then the CertificateRequest and Issuer); ' +
  'ipgate reloads a changed certificate file without a restart';

export function analyseCertificates(view: CertificatesView): Finding[] {
  const findings: Finding[] = [];
  for (const m of view.malformed) {
    findings.push({
      id: 'tls.config.certificate-path',
      severity: 'error',
      subject: `config ${view.configFile}`,
      statement: `${m}: the listener has no certificate file to check`,
      fix: 'give each entry of tls.certificates a cert and a key path (docs/tls.md)',
    });
  }
  if (view.tlsListeners.length === 0) {
    findings.push({
      id: 'tls.none',
      severity: 'info',
      subject: `config ${view.configFile}`,
      statement: 'no listener has a tls block: no certificate to check',
    });
  }
  for (const c of view.certificates) analyseOne(c, view.checkedAt, findings);
  return findings;
}

function analyseOne(c: CertificateRead, now: Date, findings: Finding[]): void {
  const subject = `listener/${c.listener}`;
  const where = `certificate ${c.index} ${c.file}`;
  const check = `openssl x509 -in ${c.file} -noout -subject -issuer -dates -ext subjectAltName`;
  if (c.state === 'unreadable') {
    findings.push({
      id: 'tls.certificate.unreadable',
      severity: 'error',
      subject,
      statement: `cannot use ${where}: ${c.reason}`,
      fix: "point tls.certificates[].cert at a readable PEM certificate (in Kubernetes: the mounted Secret's tls.crt, helm value tls.secrets)",
      check: `ls -lL ${c.file}`,
    });
    return;
  }
  const { leaf, chain } = c.info;
  const all: Array<{ label: string; cert: CertFacts }> = [
    { label: where, cert: leaf },
    ...chain.map((cert, i) => ({ label: `chain certificate ${i + 2} (${cert.subject}) in ${c.file}`, cert })),
  ];
  let problem = false;
  for (const { label, cert } of all) {
    const left = (cert.notAfter.getTime() - now.getTime()) / DAY_MS;
    if (cert.notBefore.getTime() > now.getTime()) {
      problem = true;
      findings.push({
        id: 'tls.certificate.not-yet-valid',
        severity: 'error',
        subject,
        statement: `${label} is not valid until ${iso(cert.notBefore)} (in ${daysText((cert.notBefore.getTime() - now.getTime()) / DAY_MS)}): clients refuse it`,
        fix: 'check the clock of the issuer and of this node, or install a certificate that is valid now',
        check,
      });
    } else if (left <= 0) {
      problem = true;
      findings.push({
        id: 'tls.certificate.expired',
        severity: 'error',
        subject,
        statement: `${label} expired ${iso(cert.notAfter)} (${daysText(-left)} ago): clients refuse it`,
        fix: RENEW_FIX,
        check,
      });
    } else if (left <= EXPIRY_WARNING_DAYS) {
      problem = true;
      findings.push({
        id: 'tls.certificate.expiring',
        severity: 'warn',
        subject,
        statement: `${label} expires ${iso(cert.notAfter)}, in ${daysText(left)} (warning at ${EXPIRY_WARNING_DAYS} days)`,
        fix: RENEW_FIX,
        check,
      });
    }
  }
  if (c.key !== null && c.key.state !== 'ok') {
    problem = true;
    findings.push({
      id: c.key.state === 'mismatch' ? 'tls.key.mismatch' : 'tls.key.unreadable',
      severity: 'error',
      subject,
      statement: `key of ${where}: ${c.key.reason}: the listener cannot serve this pair`,
      fix:
        c.key.state === 'mismatch'
          ? "point key at the private key the certificate was issued for (a Secret's tls.key beside its tls.crt)"
          : 'point tls.certificates[].key at a readable, unencrypted PEM private key',
      check: `openssl pkey -in ${c.keyFile ?? '<key>'} -pubout | openssl sha256; openssl x509 -in ${c.file} -noout -pubkey | openssl sha256`,
    });
  }
  if (!c.info.chainOrdered) {
    problem = true;
    findings.push({
      id: 'tls.certificate.chain-order',
      severity: 'warn',
      subject,
      statement: `${where}: the certificates after the first are not each the issuer of the one before: clients that need the intermediates may fail to build a path`,
      fix: "write the file as the leaf first, then each issuer in turn (cert-manager's tls.crt already is)",
      check,
    });
  }
  if (!problem) {
    const names = leaf.dnsNames.length > 0 ? leaf.dnsNames.join(', ') : `no DNS names (${leaf.subject})`;
    findings.push({
      id: 'tls.certificate.ok',
      severity: 'ok',
      subject,
      statement:
        `${where}: ${names}; ${describeKey(leaf.key)}; issued by ${leaf.issuer}; ` +
        `valid until ${iso(leaf.notAfter)} (${daysText((leaf.notAfter.getTime() - now.getTime()) / DAY_MS)} left)` +
        (chain.length > 0 ? `; ${chain.length} chain certificate(s)` : ''),
    });
  }
}

function iso(d: Date): string {
  return d.toISOString().replace(/\.000Z$/, 'Z');
}

/** `3.5 days`, `1 day`, `17 hours` */
function daysText(days: number): string {
  if (days < 1) {
    const hours = Math.max(1, Math.round(days * 24));
    return `${hours} hour${hours === 1 ? '' : 's'}`;
  }
  const rounded = Math.round(days * 10) / 10;
  return `${rounded} day${rounded === 1 ? '' : 's'}`;
}
