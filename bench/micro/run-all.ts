/**
 * `npm run bench`: every micro-benchmark in this folder, one child process each (so one bench's JIT
 * state and garbage do not colour the next), in sequence.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const only = process.argv.slice(2);
const files = fs
  .readdirSync(__dirname)
  .filter((f) => f.endsWith('.js') && f !== path.basename(__filename))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
let failed = 0;
for (const f of files) {
  process.stdout.write(`\n=== ${f.replace(/\.js$/, '')} (node ${process.version}) ===\n`);
  const r = spawnSync(process.execPath, [path.join(__dirname, f)], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exitCode = failed > 0 ? 1 : 0;
