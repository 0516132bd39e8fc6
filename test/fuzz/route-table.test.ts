/**
 * Time-boxed property test of RouteTable (~2 s): random, overlapping route sets over a small
 * vocabulary of labels and path segments (so exact, wildcard, default, exact paths and nested
 * prefixes collide often, and some hosts get more than 8 paths: the Map branch), looked up with
 * random hosts (case, ":port", trailing dot) and plain paths (with and without a query), and
 * compared with a naive oracle written from docs/routes-and-sni.md: host precedence exact >
 * longest wildcard > default with no fallback, then exact path > longest "/"-boundary prefix.
 * Path normalisation has its own table test (test/unit/route/path.test.ts); here paths are plain.
 * Seeded: ROUTE_FUZZ_SEED replays, ROUTE_FUZZ_MS sets the budget.
 */
import t from 'tap';
import { RouteTable } from '../../src/route/route-table';
import type { PathSpec, RouteResult, RouteSpec } from '../../src/route/route-table';
import { prng } from '../helpers/prng';

const SEED = Number(process.env.ROUTE_FUZZ_SEED ?? Date.now() % 0x7fffffff);
const BUDGET_MS = Number(process.env.ROUTE_FUZZ_MS ?? 2000);
const rand = prng(SEED);
const int = (n: number): number => Math.floor(rand() * n);
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;

const LABELS = ['a', 'b', 'api', 'example', 'com', 'x-y', '_s'];
const SEGMENTS = ['api', 'v1', 'v2', 'x', 'admin', 'a.b'];

function name(): string {
  return Array.from({ length: 1 + int(4) }, () => pick(LABELS)).join('.');
}

function pathOf(depth: number): string {
  return `/${Array.from({ length: depth }, () => pick(SEGMENTS)).join('/')}`;
}

/** A valid route set: unique names, each host + path once. */
function routeSet(): RouteSpec[] {
  const routes: RouteSpec[] = [];
  const claimed = new Set<string>();
  const count = 1 + int(8);
  for (let i = 0; i < count; i++) {
    const hosts = [...new Set(Array.from({ length: 1 + int(2) }, () => (rand() < 0.1 ? '*' : rand() < 0.3 ? `*.${name()}` : name())))];
    let paths: PathSpec[] | undefined;
    if (rand() < 0.7) {
      const many = rand() < 0.15 ? 12 : 1 + int(4);
      paths = [];
      for (let k = 0; k < many; k++) {
        const p = rand() < 0.1 ? '/' : pathOf(1 + int(3));
        const match = rand() < 0.4 ? 'exact' : 'prefix';
        if (!paths.some((q) => q.path === p && q.match === match)) paths.push({ path: p, match });
      }
    }
    const keys = hosts.flatMap((h) => (paths ?? [{ path: '/', match: 'prefix' as const }]).map((p) => `${h} ${p.match} ${p.path}`));
    if (keys.some((k) => claimed.has(k))) continue;
    keys.forEach((k) => {
      claimed.add(k);
    });
    routes.push(paths === undefined ? { name: `r${i}`, hosts } : { name: `r${i}`, hosts, paths });
  }
  return routes;
}

/** The oracle: a loop over every route, as docs/routes-and-sni.md describes the decision. */
function oracle(routes: RouteSpec[], rawHost: string, target: string): string {
  let host = rawHost.split(':')[0]!.toLowerCase();
  if (host.endsWith('.')) host = host.slice(0, -1);
  const path = target.split('?')[0]!;
  const patterns = new Set(routes.flatMap((r) => r.hosts));
  let chosen: string | null = null;
  if (patterns.has(host)) chosen = host;
  else {
    for (const p of patterns) {
      if (p.startsWith('*.') && host.endsWith(p.slice(1)) && (chosen === null || p.length > chosen.length)) chosen = p;
    }
    if (chosen === null && patterns.has('*')) chosen = '*';
  }
  if (chosen === null) return 'route_no_host';
  const entries = routes.filter((r) => r.hosts.includes(chosen!)).flatMap((r) => (r.paths ?? [null]).map((p) => ({ r, p })));
  const exact = entries.find((e) => e.p !== null && e.p.match === 'exact' && e.p.path === path);
  if (exact) return `${exact.r.name} ${chosen} exact:${exact.p!.path}`;
  let best: { r: RouteSpec; p: PathSpec | null; length: number } | null = null;
  for (const e of entries) {
    if (e.p !== null && e.p.match === 'exact') continue;
    const pre = e.p === null ? '/' : e.p.path;
    const ok = pre === '/' || path === pre || path.startsWith(`${pre}/`);
    if (ok && (best === null || pre.length > best.length)) best = { r: e.r, p: e.p, length: pre.length };
  }
  if (best === null) return 'route_no_path';
  return `${best.r.name} ${chosen} ${best.p === null ? '(any)' : `prefix:${best.p.path}`}`;
}

function show(r: RouteResult): string {
  if (r.kind === 'miss') return r.reason;
  return `${r.route} ${r.host} ${r.path === null ? '(any)' : `${r.path.match}:${r.path.path}`}`;
}

function requestHost(routes: RouteSpec[]): string {
  let h =
    rand() < 0.6
      ? pick(routes.flatMap((r) => r.hosts))
          .replace(/^\*$/, name())
          .replace(/^\*\./, `${pick(LABELS)}.`)
      : name();
  if (rand() < 0.3) h = h.toUpperCase();
  if (rand() < 0.2) h += '.';
  if (rand() < 0.2) h += `:${int(65536)}`;
  return h;
}

t.test(`RouteTable agrees with the naive oracle (seed ${SEED}; replay with ROUTE_FUZZ_SEED=${SEED})`, async (t) => {
  const deadline = Date.now() + BUDGET_MS;
  let tables = 0;
  let lookups = 0;
  const outcomes = new Map<string, number>();
  let failure: string | null = null;
  while (Date.now() < deadline && failure === null) {
    const routes = routeSet();
    if (routes.length === 0) continue;
    const table = RouteTable.compile(routes);
    tables++;
    for (let k = 0; k < 50 && failure === null; k++) {
      const host = requestHost(routes);
      const fromRoute = routes.flatMap((r) => r.paths ?? []).map((p) => p.path);
      let path = rand() < 0.5 && fromRoute.length > 0 ? pick(fromRoute) : pathOf(int(4));
      if (rand() < 0.3) path = (path + pick(['/', '/x', 'x', '/admin/v1'])).replace(/\/+/g, '/');
      if (rand() < 0.2) path += '?q=/api';
      const got = show(table.lookup(host, path));
      const want = oracle(routes, host, path);
      const kind = got.startsWith('route_') ? got : got.split(' ')[2]!.split(':')[0]!;
      outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
      lookups++;
      if (got !== want)
        failure = `host ${JSON.stringify(host)} path ${JSON.stringify(path)}: table ${got}, oracle ${want}; routes ${JSON.stringify(routes)}`;
    }
  }
  t.equal(failure, null, 'every lookup agreed');
  t.ok(tables > 50 && lookups > 2500, `${tables} tables, ${lookups} lookups`);
  const seen = Object.fromEntries(outcomes);
  t.ok(
    ['exact', 'prefix', '(any)', 'route_no_path', 'route_no_host'].every((k) => (outcomes.get(k) ?? 0) > 0),
    `every kind of answer reached: ${JSON.stringify(seen)}`,
  );
});
