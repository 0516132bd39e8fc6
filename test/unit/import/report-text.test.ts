/**
 * The report's first line (src/cli/import.ts `summary`): counts that add up and read well at zero
 * (issue 32 item 5: "0 converted into 0 routes and 1 allowlist").
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { reportText, summary } from '../../../src/cli/import';
import { convertIngressNginx, DEFAULT_OPTIONS, type ImportReport } from '../../../src/import/ingress-nginx';
import { addDocuments, emptySet } from '../../../src/import/objects';
import { FIXTURES } from '../../helpers/root';

const report = (over: Partial<Omit<ImportReport, 'skipped'>> & { read?: number; converted?: number; skipped?: number }): ImportReport => ({
  ingresses: { read: over.read ?? 0, converted: over.converted ?? 0, skipped: over.skipped ?? 0 },
  routes: over.routes ?? 0,
  allowlists: over.allowlists ?? 0,
  refused: over.refused ?? [],
  unconverted: over.unconverted ?? [],
  notes: over.notes ?? [],
  skipped: [],
  ignored: [],
});
const f = { source: 'Ingress a/b', item: 'x', reason: 'y' };

const ROWS: Array<{ what: string; r: ImportReport; line: string }> = [
  { what: 'nothing read', r: report({}), line: 'no Ingress read' },
  { what: 'one skipped, nothing converted', r: report({ read: 1, skipped: 1 }), line: '1 Ingress read: none converted, 1 skipped' },
  {
    what: 'one that made no route (every path listed)',
    r: report({ read: 1, unconverted: [f] }),
    line: '1 Ingress read: none converted, 1 made no route; 1 item not carried over',
  },
  {
    what: 'every count',
    r: report({ read: 3, converted: 1, skipped: 1, routes: 2, allowlists: 1, unconverted: [f, f], notes: [f] }),
    line: '3 Ingresses read: 1 converted into 2 routes and 1 allowlist, 1 skipped, 1 made no route; 2 items not carried over, 1 note',
  },
  {
    what: 'refused',
    r: report({ read: 1, converted: 1, routes: 1, refused: [f], notes: [f, f] }),
    line: '1 Ingress read: 1 converted into 1 route; refused (1 reason), 2 notes',
  },
];
for (const row of ROWS) {
  t.test(row.what, async (t) => {
    t.equal(summary(row.r), row.line);
  });
}

t.test('no Ingress of the class: the line the issue quoted is gone', async (t) => {
  const set = emptySet();
  const file = path.join(FIXTURES, 'ingress-nginx', '07-ingress-classes.yaml');
  addDocuments(set, fs.readFileSync(file, 'utf8'), file);
  const r = convertIngressNginx(
    { ingresses: set.ingresses, services: [], configMap: null, servicesFrom: 'file' },
    { ...DEFAULT_OPTIONS, ingressClass: 'haproxy' },
  );
  t.equal(r.report.allowlists, 0, 'no config, no allowlist counted');
  t.equal(reportText(r.report).split('\n')[0], 'ipgate import: 3 Ingresses read: none converted, 3 skipped');
});
