/**
 * The Dockerfile read as Docker reads it, for the image tests (there is no Docker engine here):
 * logical instructions (continuation lines joined, comments dropped, also inside a continued RUN)
 * and the instructions of one stage.
 */

export interface Instruction {
  keyword: string;
  args: string;
}

/** Every instruction of the file, in order. */
export function instructions(dockerfile: string): Instruction[] {
  const logical: string[] = [];
  let current = '';
  for (const raw of dockerfile.split('\n')) {
    if (/^\s*#/.test(raw)) continue; // also inside a continued RUN, as Docker reads it
    const line = raw.replace(/\s+$/, '');
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    current += line;
    if (current.trim()) logical.push(current.trim());
    current = '';
  }
  return logical.map((l) => {
    const m = /^(\S+)\s*(.*)$/.exec(l)!;
    return { keyword: m[1]!.toUpperCase(), args: m[2]! };
  });
}

/** Instructions of a Dockerfile stage (`FROM ... AS name` up to the next FROM). */
export function stage(dockerfile: string, name: string): Instruction[] {
  const all = instructions(dockerfile);
  const start = all.findIndex((i) => i.keyword === 'FROM' && new RegExp(`\\bAS\\s+${name}$`, 'i').test(i.args));
  if (start < 0) throw new Error(`no stage ${name}`);
  const end = all.findIndex((i, n) => n > start && i.keyword === 'FROM');
  return all.slice(start, end < 0 ? undefined : end);
}

/** The shell commands of the stage's RUN instructions, split on `;` and `&&`. */
export function commands(instructions: Instruction[]): string[] {
  return instructions
    .filter((i) => i.keyword === 'RUN')
    .flatMap((i) => i.args.split(/;|&&/))
    .map((c) => c.trim())
    .filter(Boolean);
}
