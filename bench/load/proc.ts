/** /proc helpers shared by the load benchmarks (bench/load/*.ts). Linux only. */
import fs from 'node:fs';

/**
 * Every live descendant of `pid` (children, their children, ...), found by walking /proc for
 * parent pids. ipgate with the admin API on runs as a primary and cluster workers, so its CPU and
 * memory are those of the whole tree.
 */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d), ...descendants(Number(d)));
    } catch {
      // gone
    }
  }
  return out;
}
