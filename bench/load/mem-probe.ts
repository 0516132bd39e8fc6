/**
 * Where a Node process's memory is: preloaded into ipgate by compare.ts --mem-breakdown
 * (`node -r dist/bench/load/mem-probe.js ...`), it writes one JSON breakdown to
 * $IPGATE_MEM_PROBE_OUT each time the process gets SIGUSR2 (ipgate does not use that signal).
 *
 * What it reads, all in the process:
 * - process.memoryUsage() (rss, heapTotal, heapUsed, external, arrayBuffers) and
 *   v8.getHeapStatistics() (malloced_memory: V8's own malloc; external_memory);
 * - v8.getHeapSpaceStatistics(): per space, committed (space_size) and resident
 *   (physical_space_size) bytes: the young generation is new_space;
 * - /proc/self/smaps: every mapping's Rss, classed as file-backed (the node binary, libraries),
 *   glibc's main arena ([heap], brk), glibc's thread arenas (an anonymous read-write mapping at a
 *   64 MiB-aligned address followed by its PROT_NONE rest, together 64 MiB: glibc reserves each
 *   thread arena as HEAP_MAX_SIZE = 64 MiB on 64-bit and commits it as it grows), thread stacks
 *   ([stack] and the 8 MiB mappings with a guard page below) and the other anonymous mappings
 *   (V8's heap pages, large malloc blocks above the mmap threshold, V8's code range).
 * Linux only. Not part of ipgate: a benchmark aid. compare.ts signals the process it started only:
 * with `workers: N` the breakdown is the primary's, not its workers' (their RSS is in the RSS row).
 */
import fs from 'node:fs';
import { constants, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * The collector's pauses on the main thread since start, per kind: count and milliseconds. With
 * process.cpuUsage() beside them, the collector's share of the process's CPU (its concurrent
 * marking and sweeping on helper threads is in the CPU time, not in these pauses).
 */
const gc = { minor: { n: 0, ms: 0 }, major: { n: 0, ms: 0 }, other: { n: 0, ms: 0 } };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
    const k = kind === constants.NODE_PERFORMANCE_GC_MINOR ? gc.minor : kind === constants.NODE_PERFORMANCE_GC_MAJOR ? gc.major : gc.other;
    k.n++;
    k.ms += e.duration;
  }
}).observe({ entryTypes: ['gc'] });

interface Mapping {
  start: bigint;
  end: bigint;
  perms: string;
  path: string;
  inode: string;
  rss: number;
}

function mappings(): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | null = null;
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head !== null) {
      cur = { start: BigInt(`0x${head[1]}`), end: BigInt(`0x${head[2]}`), perms: head[3]!, inode: head[4]!, path: head[5]!, rss: 0 };
      out.push(cur);
    } else if (cur !== null && line.startsWith('Rss:')) {
      cur.rss = Number(line.split(/\s+/)[1]) * 1024;
    }
  }
  return out;
}

const ARENA = 64n * 1024n * 1024n;

export function breakdown(): Record<string, unknown> {
  const maps = mappings();
  const classes = { file: 0, mainArena: 0, threadArenas: 0, stacks: 0, otherAnon: 0 };
  let arenas = 0;
  const other: Array<{ kib: number; rssKib: number; perms: string }> = [];
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]!;
    if (m.inode !== '0' || (m.path !== '' && !m.path.startsWith('['))) {
      classes.file += m.rss;
    } else if (m.path === '[heap]') {
      classes.mainArena += m.rss;
    } else if (m.path === '[stack]') {
      classes.stacks += m.rss;
    } else {
      const next = maps[i + 1];
      const prev = maps[i - 1];
      const rest = next !== undefined && next.start === m.end && next.perms.startsWith('---') ? next.end - next.start : 0n;
      if (m.perms.startsWith('rw') && m.start % ARENA === 0n && m.end - m.start + rest === ARENA) {
        classes.threadArenas += m.rss;
        arenas++;
      } else if (
        m.perms.startsWith('rw') &&
        m.end - m.start === 8n * 1024n * 1024n &&
        prev !== undefined &&
        prev.end === m.start &&
        prev.perms.startsWith('---') &&
        prev.end - prev.start === 4096n
      ) {
        classes.stacks += m.rss; // a pthread stack with its guard page
      } else {
        classes.otherAnon += m.rss;
        other.push({ kib: Number(m.end - m.start) / 1024, rssKib: m.rss / 1024, perms: m.perms });
      }
    }
  }
  const spaces: Record<string, { committed: number; resident: number; used: number }> = {};
  for (const s of v8.getHeapSpaceStatistics()) {
    spaces[s.space_name] = { committed: s.space_size, resident: s.physical_space_size, used: s.space_used_size };
  }
  const h = v8.getHeapStatistics();
  return {
    node: process.version,
    execArgv: process.execArgv,
    env: { NODE_OPTIONS: process.env.NODE_OPTIONS ?? '', MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? '' },
    memoryUsage: process.memoryUsage(),
    heap: {
      malloced: h.malloced_memory,
      peakMalloced: h.peak_malloced_memory,
      external: h.external_memory,
      physical: h.total_physical_size,
      limit: h.heap_size_limit,
    },
    spaces,
    smaps: { ...classes, threadArenaCount: arenas },
    gc,
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
    /** The largest other anonymous mappings by resident size (what they are is read from their sizes). */
    largestOther: other.sort((a, b) => b.rssKib - a.rssKib).slice(0, 12),
  };
}

/**
 * IPGATE_MEM_PROBE_LIVE=1: after the breakdown, a full collection (twice: the first can leave
 * what weak callbacks free) and each space's used bytes again: what is live, as against garbage
 * not collected yet at the reading. It changes the process's memory for any later reading.
 * IPGATE_MEM_PROBE_SNAPSHOT=<file>: then a heap snapshot there (to compare two builds' live sets).
 */
function live(): Record<string, number> {
  v8.setFlagsFromString('--expose-gc');
  const gcNow = vm.runInNewContext('gc') as () => void;
  gcNow();
  gcNow();
  const used: Record<string, number> = {};
  for (const s of v8.getHeapSpaceStatistics()) used[s.space_name] = s.space_used_size;
  const snap = process.env.IPGATE_MEM_PROBE_SNAPSHOT;
  if (snap !== undefined && snap !== '') v8.writeHeapSnapshot(snap);
  return used;
}

const out = process.env.IPGATE_MEM_PROBE_OUT;
if (out !== undefined && out !== '') {
  process.on('SIGUSR2', () => {
    const b = breakdown();
    if (process.env.IPGATE_MEM_PROBE_LIVE === '1') b.liveUsed = live();
    fs.writeFileSync(`${out}.tmp`, JSON.stringify(b));
    fs.renameSync(`${out}.tmp`, out);
  });
}
