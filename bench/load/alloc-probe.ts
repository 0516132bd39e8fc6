/**
 * Bytes allocated on the JS heap in a window, exactly: preloaded into ipgate by
 * denied-instructions.ts --alloc (`node --expose-gc -r dist/bench/load/alloc-probe.js ...`). The
 * first SIGUSR2 opens the window, the second closes it and writes one JSON line to
 * $IPGATE_ALLOC_PROBE_OUT (ipgate does not use that signal; compare.ts's mem-probe is not loaded
 * beside this one).
 *
 * Why it is exact: V8 keeps no running total of allocation, but every byte allocated is either
 * still in the heap at the end of the window or was freed by a collection inside it. So both ends
 * force a full collection (gc(), --expose-gc) and v8.GCProfiler records the heap's used bytes
 * (SizeOfObjects: the young generation up to its allocation top included) before and after every
 * collection in between: allocated = sum over collections of (used before it - used after the
 * previous one), the last term being the forced one at the end. Nothing is sampled or estimated;
 * what the probe itself allocates in the window (its signal handler) is a few hundred bytes over
 * the whole window. What is not counted: ArrayBuffer backing stores outside the heap (Buffer
 * pools: memory a scavenge does not have to copy; their JS wrappers are counted).
 *
 * The collector's pauses are in the same record (cost, microseconds, main thread), and with
 * $IPGATE_ALLOC_PROBE_SAMPLE=<bytes> the window is also a sampling heap profile that keeps the
 * samples of objects the collector freed (inspector HeapProfiler, includeObjectsCollectedBy*GC),
 * summed per function (self bytes, scaled to the exact total) into the same JSON: where the
 * allocation comes from. Sampling slows the process; the exact total is taken in runs without it.
 * Not part of ipgate: a benchmark aid.
 */
import fs from 'node:fs';
import inspector from 'node:inspector';
import v8 from 'node:v8';

interface GcStat {
  gcType: string;
  cost: number;
  beforeGC: { heapStatistics: { usedHeapSize: number } };
  afterGC: { heapStatistics: { usedHeapSize: number } };
}

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const OUT = process.env.IPGATE_ALLOC_PROBE_OUT ?? '';
const SAMPLE = Number(process.env.IPGATE_ALLOC_PROBE_SAMPLE ?? '0');
const forceGc = (globalThis as { gc?: () => void }).gc;

let profiler: v8.GCProfiler | null = null;
let usedAtStart = 0;
let session: inspector.Session | null = null;

function post(method: string, params?: object): Promise<unknown> {
  return new Promise((resolve, reject) => session!.post(method, params, (e, r) => (e ? reject(e) : resolve(r))));
}

/** Self bytes per function (`name file:line`), sampled, largest first. */
function bySource(root: ProfileNode): Array<[string, number]> {
  const sums = new Map<string, number>();
  const walk = (n: ProfileNode): void => {
    if (n.selfSize > 0) {
      const url = n.callFrame.url.replace(/^.*\/(dist|node_modules)\//, '$1/');
      const key = `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`;
      sums.set(key, (sums.get(key) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c);
  };
  walk(root);
  return [...sums].sort((a, b) => b[1] - a[1]);
}

async function close(): Promise<void> {
  let sampled: Array<[string, number]> | null = null;
  if (session !== null) {
    const r = (await post('HeapProfiler.stopSampling')) as { profile: { head: ProfileNode } };
    sampled = bySource(r.profile.head);
    session.disconnect();
    session = null;
  }
  forceGc!();
  const stats = profiler!.stop()!.statistics as unknown as GcStat[];
  profiler = null;
  let allocated = 0;
  let prev = usedAtStart;
  const gcs: Record<string, { n: number; us: number }> = {};
  for (const s of stats) {
    allocated += s.beforeGC.heapStatistics.usedHeapSize - prev;
    prev = s.afterGC.heapStatistics.usedHeapSize;
    const g = (gcs[s.gcType] ??= { n: 0, us: 0 });
    g.n++;
    g.us += s.cost;
  }
  const last = stats[stats.length - 1];
  // The forced collection at the end is the probe's, not the load's: its pause is left out.
  if (last !== undefined) {
    gcs[last.gcType]!.n--;
    gcs[last.gcType]!.us -= last.cost;
  }
  // Written whole, then renamed: the reader polls for the file (denied-instructions.ts fileAppears)
  // and read a half-written one as empty JSON under CI's load (2026-12-04, Node 24).
  fs.writeFileSync(`${OUT}.tmp`, `${JSON.stringify({ allocated, gcs, sampled })}\n`);
  fs.renameSync(`${OUT}.tmp`, OUT);
}

process.on('SIGUSR2', () => {
  if (profiler === null) {
    if (forceGc === undefined) throw new Error('alloc-probe needs --expose-gc');
    forceGc();
    usedAtStart = v8.getHeapStatistics().used_heap_size;
    profiler = new v8.GCProfiler();
    profiler.start();
    if (SAMPLE > 0) {
      session = new inspector.Session();
      session.connect();
      void post('HeapProfiler.startSampling', {
        samplingInterval: SAMPLE,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      }).then(() => fs.writeFileSync(`${OUT}.open`, ''));
    } else {
      fs.writeFileSync(`${OUT}.open`, '');
    }
    return;
  }
  void close();
});
