/**
 * ipgate's own view: the admin API's /readyz answer, and whatever self-checks it reports in a
 * `checks` array (their shape is loose on purpose: they are added over time).
 */
import type { Finding, Severity } from './finding';
import type { AdminView } from './snapshot';

/** `adminService`: the admin Service's name when known (the chart's `<data Service>-admin`). */
function portForwardFix(adminService: string | null): string {
  return `reach the admin API from where doctor runs, e.g. kubectl -n <ns> port-forward svc/${adminService ?? '<release>-ipgate-admin'} 9901 and --admin-url http://127.0.0.1:9901`;
}

export function analyseAdmin(admin: AdminView | null, findings: Finding[], adminService: string | null = null): void {
  const subject = 'ipgate';
  if (admin === null) {
    findings.push({
      id: 'ipgate.not-checked',
      severity: 'info',
      subject,
      statement: "ipgate's own view not checked (pass --admin-url and --admin-token-env)",
    });
    return;
  }
  if (admin.tokenProblem) {
    findings.push({
      id: 'ipgate.admin-token',
      severity: 'warn',
      subject,
      statement: admin.tokenProblem,
      fix: 'export the admin token in that variable',
    });
  }
  if (admin.error !== undefined || admin.status === undefined) {
    findings.push({
      id: 'ipgate.admin-unreachable',
      severity: 'warn',
      subject,
      statement: `cannot reach ipgate's admin API at ${admin.url}: ${admin.error ?? 'no response'}`,
      fix: portForwardFix(adminService),
    });
    return;
  }
  if (admin.status === 401 || admin.status === 403) {
    findings.push({
      id: 'ipgate.admin-unauthorized',
      severity: 'warn',
      subject,
      statement: `ipgate's admin API refused the token (HTTP ${admin.status}) at ${admin.url}`,
      fix: "pass the admin token through --admin-token-env (the variable's name, not the token)",
    });
    return;
  }
  const body = admin.body;
  const obj = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : null;
  if (admin.status === 421) {
    // The admin API answers only Hosts that are IP literals, localhost or listed names (DNS rebinding).
    findings.push({
      id: 'ipgate.admin-host-refused',
      severity: 'warn',
      subject,
      statement: `ipgate's admin API refused the host name of ${admin.url} (HTTP 421)${obj && typeof obj.message === 'string' ? `: ${oneLine(obj.message)}` : ''}`,
      fix: 'add the name to admin.allowedHosts (the chart lists the admin Service names), or use an IP address or localhost in --admin-url',
    });
    return;
  }
  const ready = admin.status >= 200 && admin.status < 300;
  const detail =
    obj && typeof obj.status === 'string'
      ? ` (status "${obj.status}")`
      : typeof body === 'string' && body !== ''
        ? `: ${oneLine(body)}`
        : '';
  findings.push({
    id: ready ? 'ipgate.ready' : 'ipgate.not-ready',
    severity: ready ? 'ok' : 'error',
    subject,
    statement: `ipgate /readyz answered HTTP ${admin.status}${detail}: ${ready ? 'ready' : 'not ready'}`,
    ...(ready ? {} : { fix: "read ipgate's logs and the checks below; kubectl describe pod for probe failures" }),
  });
  const checks = obj && Array.isArray(obj.checks) ? obj.checks : [];
  for (const [i, raw] of checks.entries()) findings.push(checkFinding(raw, i));
}

function checkFinding(raw: unknown, index: number): Finding {
  if (raw === null || typeof raw !== 'object') {
    return { id: 'ipgate.check', severity: 'info', subject: 'ipgate', statement: `check ${index}: ${oneLine(JSON.stringify(raw))}` };
  }
  const c = raw as Record<string, unknown>;
  const name = firstString(c, ['name', 'id', 'check']) ?? `check ${index}`;
  const text = firstString(c, ['message', 'statement', 'summary', 'detail', 'description']);
  const fix = firstString(c, ['fix', 'remedy', 'hint']);
  const rest = text ?? oneLine(JSON.stringify(c.detail ?? c.details ?? c));
  const severity = checkSeverity(c);
  const needsFix = severity === 'warn' || severity === 'error';
  return {
    id: `ipgate.check.${name.replace(/[^A-Za-z0-9_.-]+/g, '-').toLowerCase()}`,
    severity,
    subject: 'ipgate',
    statement: `${name}: ${rest}`,
    ...(fix ? { fix } : needsFix ? { fix: "see ipgate's logs and metrics for this check, and docs/real-ip.md" } : {}),
  };
}

function checkSeverity(c: Record<string, unknown>): Severity {
  const s = String(c.severity ?? c.status ?? c.level ?? '').toLowerCase();
  if (['ok', 'pass', 'passed', 'healthy', 'up'].includes(s)) return 'ok';
  if (['warn', 'warning', 'degraded'].includes(s)) return 'warn';
  if (['error', 'fail', 'failed', 'failing', 'critical', 'down'].includes(s)) return 'error';
  if (s === 'info') return 'info';
  if (c.ok === true) return 'ok';
  if (c.ok === false) return 'warn';
  return 'info';
}

function firstString(c: Record<string, unknown>, keys: string[]): string | undefined {
  for (const k of keys) if (typeof c[k] === 'string' && c[k] !== '') return oneLine(c[k] as string);
  return undefined;
}

function oneLine(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > 300 ? `${t.slice(0, 297)}...` : t;
}
