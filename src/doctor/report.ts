/** Human text and JSON renderings of a doctor run. */
import { countBySeverity, type Finding } from './finding';

interface ReportHeader {
  /** `ipgate/ipgate` */
  readonly service: string;
  /** Where the API access came from (kubeconfig + context, or in-cluster). */
  readonly source: string;
  readonly server: string;
}

const TAG: Record<Finding['severity'], string> = { ok: '[ok]   ', info: '[info] ', warn: '[warn] ', error: '[error]' };

export function renderText(header: ReportHeader, findings: readonly Finding[]): string {
  const title =
    header.service === '-'
      ? `ipgate doctor: ${header.source}`
      : `ipgate doctor: service ${header.service} via ${header.server} (${header.source})`;
  const lines: string[] = [title, ''];
  for (const f of findings) {
    lines.push(`${TAG[f.severity]} ${f.subject}: ${f.statement}`);
    if (f.fix) lines.push(`        fix: ${f.fix}`);
    if (f.check && f.severity !== 'ok') lines.push(`        check: ${f.check}`);
  }
  const c = countBySeverity(findings);
  lines.push('', `${c.error} error(s), ${c.warn} warning(s), ${c.info} info, ${c.ok} ok`);
  return `${lines.join('\n')}\n`;
}

export function renderJson(header: ReportHeader, findings: readonly Finding[], exitCode: number): string {
  return `${JSON.stringify({ ...header, findings, summary: countBySeverity(findings), exitCode }, null, 2)}\n`;
}

/** When the run could not happen (exit 2). */
export function renderFailureJson(code: string, message: string): string {
  return `${JSON.stringify({ error: { code, message }, exitCode: 2 }, null, 2)}\n`;
}
