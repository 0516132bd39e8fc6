/**
 * The measuring loop the micro-benchmarks share (bench/micro/*.ts; in a sub-folder so run-all.ts
 * does not run it as a benchmark): `warmup` calls, then `runs` runs of `iterations` calls; the
 * median wall ns/op, its min..max across runs, and the median process CPU ns/op (less skewed when
 * other processes share the machine).
 */
export interface Measured {
  median: number;
  min: number;
  max: number;
  cpu: number;
}

export function measure(fn: () => void, warmup: number, iterations: number, runs: number): Measured {
  for (let k = 0; k < warmup; k++) fn();
  const perOp: number[] = [];
  const cpuPerOp: number[] = [];
  for (let run = 0; run < runs; run++) {
    const cpu0 = process.cpuUsage();
    const start = process.hrtime.bigint();
    for (let k = 0; k < iterations; k++) fn();
    perOp.push(Number(process.hrtime.bigint() - start) / iterations);
    const cpu = process.cpuUsage(cpu0);
    cpuPerOp.push(((cpu.user + cpu.system) * 1000) / iterations);
  }
  perOp.sort((a, b) => a - b);
  cpuPerOp.sort((a, b) => a - b);
  return { median: perOp[Math.floor(runs / 2)]!, min: perOp[0]!, max: perOp[runs - 1]!, cpu: cpuPerOp[Math.floor(runs / 2)]! };
}
