/** Command-line options shared by the load benchmarks (bench/load/*.ts). */

/** The value after `name` on the command line (`--conns 1000`), or `def` when it is not there. */
export function arg(name: string, def: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1]! : def;
}
