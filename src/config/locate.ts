/**
 * Where in the YAML a config problem is: `nginx -t` names the file and the line
 * (`... in /etc/nginx/nginx.conf:12`), and so does every problem ipgate reports about a file it
 * parsed (load.ts appends ` in FILE:LINE`).
 *
 * A problem starts with its path (errors.ts `problem`: `listeners[1].proxyProtocol.mode: ...`), so
 * the line is found by walking that path through the parsed document (the `yaml` package keeps
 * each node's source range; a LineCounter turns an offset into a line). A path that leaves the
 * document (a required key that is missing, an entry of a list file) gives the line of the
 * deepest node it reached: the mapping the key is missing from. Allowlist names may contain dots
 * (`allowlists.a.b`), so at a mapping the longest key made of the next segments wins.
 */
import { isMap, isPair, isScalar, isSeq, type Document, type LineCounter, type Node, type Pair } from 'yaml';

/** The segments of a problem's path: `a.b[2].c` -> ['a', 'b', 2, 'c']; null when it is no config path. */
function pathSegments(path: string): (string | number)[] | null {
  if (path === '' || path.startsWith('(') || /\s/.test(path.replace(/\([^)]*\)/g, ''))) return null;
  const out: (string | number)[] = [];
  let i = 0;
  while (i < path.length) {
    const c = path[i];
    if (c === '.') {
      i++;
      continue;
    }
    if (c === '(') return out; // `file(lists/a.yaml)[3]`, `configMap(ns/name:key)`: another document's
    if (c === '[') {
      const end = path.indexOf(']', i);
      if (end < 0) return null;
      const n = Number(path.slice(i + 1, end));
      if (!Number.isInteger(n)) return null;
      out.push(n);
      i = end + 1;
      continue;
    }
    let j = i;
    while (j < path.length && path[j] !== '.' && path[j] !== '[' && path[j] !== '(') j++;
    out.push(path.slice(i, j));
    i = j;
  }
  return out;
}

/** The path at the start of a problem (`path: value: message`), or null. */
function problemPath(problem: string): string | null {
  const at = problem.indexOf(': ');
  return at <= 0 ? null : problem.slice(0, at);
}

/**
 * The 1-based line of the node at `path` in `doc` (the key's line for a mapping entry), or of the
 * deepest node on the way; null when the path does not start in the document.
 */
export function lineOf(doc: Document, counter: LineCounter, path: (string | number)[]): number | null {
  let node: unknown = doc.contents;
  let line: number | null = null;
  const lineAt = (n: unknown): number | null => {
    const range = (n as { range?: [number, number, number] } | null)?.range;
    return range ? counter.linePos(range[0]).line : null;
  };
  for (let i = 0; i < path.length; i++) {
    const seg = path[i]!;
    if (typeof seg === 'number') {
      if (!isSeq(node)) break;
      const item = node.items[seg];
      if (item === undefined) break;
      node = item;
      line = lineAt(item) ?? line;
      continue;
    }
    if (!isMap(node)) break;
    // The longest run of segments that is one key (a list name with dots).
    let found: Pair | null = null;
    let used = 0;
    let key = '';
    for (let k = i; k < path.length && typeof path[k] === 'string'; k++) {
      key = k === i ? seg : `${key}.${path[k] as string}`;
      const pair = node.items.find((p) => isPair(p) && keyText(p) === key) as Pair | undefined;
      if (pair !== undefined) {
        found = pair;
        used = k - i;
      }
    }
    if (found === null) break;
    i += used;
    line = lineAt(found.key) ?? line;
    node = found.value;
  }
  return line ?? lineAt(doc.contents);
}

function keyText(p: Pair): string | null {
  const k = p.key as Node | null;
  if (isScalar(k)) return String(k.value);
  return null;
}

/**
 * `problems` with ` in FILE:LINE` (or ` at line LINE` without a file name) after each one whose
 * path is found in `doc`. A problem that names another document (a list file, a ConfigMap: its
 * path has a `(...)` part) or already ends with a location keeps its text.
 */
export function withLines(problems: readonly string[], doc: Document, counter: LineCounter, file: string | undefined): string[] {
  const located = problems.map((p, i) => {
    const path = problemPath(p);
    if (path === null || path.includes('(') || LOCATED.test(p)) return { p, line: 0, i };
    const segs = pathSegments(path);
    const line = segs === null || segs.length === 0 ? null : lineOf(doc, counter, segs);
    return line === null ? { p, line: 0, i } : { p: `${p}${location(file, line)}`, line, i };
  });
  // In the file's order, as a reader goes through it (those without a line first, as they were).
  located.sort((a, b) => a.line - b.line || a.i - b.i);
  return located.map((x) => x.p);
}

/** ` in FILE:LINE`, or ` at line LINE` when the text had no file name. */
export function location(file: string | undefined, line: number): string {
  return file !== undefined ? ` in ${file}:${line}` : ` at line ${line}`;
}

const LOCATED = / (?:in \S+:\d+|at line \d+)$/;
