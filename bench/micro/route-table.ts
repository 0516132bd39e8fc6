/**
 * Micro-benchmark of the route table (src/route/route-table.ts): one lookup per HTTP request on a
 * listener with routes, one per connection on an SNI-routing TCP listener. Plain node:
 *
 *   npx tsc -p tsconfig.json && node dist/bench/micro/route-table.js
 *
 * Tables of 1, 100 and 10,000 exact hosts, each with four paths (prefix "/", prefix "/api",
 * prefix "/api/v1/admin", exact "/health"), plus one wildcard host per ten exact ones and a
 * default "*". 1,024 pre-generated requests per case, cycled. Host and path are decoded from
 * bytes on every lookup (`latin1Slice`), as the HTTP parser hands over fresh strings whose hash
 * V8 has not cached yet; the "floor" row is that decoding alone, so lookup cost = row - floor.
 * The "16 hot hosts" row repeats the first lookup over 16 hosts only: the gap between the two is
 * cache misses (1,024 hosts' entries do not stay in cache on a shared VM), not the algorithm.
 * The "linear scan" row is a naive loop over the routes (what the table replaces), for contrast.
 * "126-label Host" is the longest valid Host through the wildcard walk; "Host check" is the
 * engine's validation of a Host (forward/http/request-host.ts), paid per request before the lookup.
 * Method as pp-decode.ts: warm-up, RUNS runs, median ns/op and min..max; checksum printed.
 */
import { requestHost } from '../../src/forward/http/request-host';
import { RouteTable } from '../../src/route/route-table';
import type { RouteSpec } from '../../src/route/route-table';
import { prng } from '../../test/helpers/prng';
import { measure as measureLoop, type Measured } from './lib/measure';

const WARMUP = 200_000;
const ITERATIONS = 500_000;
const RUNS = 7;
const INPUTS = 1024;
const SIZES = [1, 100, 10_000];

const rand = prng(20261202);
const int = (n: number): number => Math.floor(rand() * n);

function exactHost(i: number): string {
  return `svc-${i}.team${i % 97}.example.com`;
}

function routesOf(n: number): RouteSpec[] {
  const routes: RouteSpec[] = [];
  for (let i = 0; i < n; i++) {
    routes.push({
      name: `r${i}`,
      hosts: [exactHost(i)],
      paths: [
        { path: '/', match: 'prefix' },
        { path: '/api', match: 'prefix' },
        { path: '/api/v1/admin', match: 'prefix' },
        { path: '/health', match: 'exact' },
      ],
    });
  }
  for (let i = 0; i < Math.max(1, n / 10); i++) routes.push({ name: `w${i}`, hosts: [`*.tenant${i}.example.net`] });
  routes.push({ name: 'default', hosts: ['*'] });
  return routes;
}

type Req = [host: Buffer, path: Buffer];
/** A fresh string from bytes, as the HTTP parser gives one (Buffer#latin1Slice, untyped in @types/node). */
const latin1 = (b: Buffer): string => (b as Buffer & { latin1Slice(start: number, end: number): string }).latin1Slice(0, b.length);
const bytes = (s: string): Buffer => Buffer.from(s, 'latin1');

/** INPUTS requests over `distinct` of the n hosts (all n by default), cycled by the timing loop. */
function requests(n: number, make: (i: number) => [string, string], distinct = n): Req[] {
  const chosen = Array.from({ length: Math.min(n, distinct) }, () => int(n));
  return Array.from({ length: INPUTS }, (_, k) => {
    const [h, p] = make(chosen[k % chosen.length]!);
    return [bytes(h), bytes(p)];
  });
}

let sink = 0;

function measure(fn: () => void): Measured {
  return measureLoop(fn, WARMUP, ITERATIONS, RUNS);
}

function row(name: string, fn: () => void): void {
  const { median, min, max, cpu } = measure(fn);
  console.log(`| ${name} | ${median.toFixed(0)} (${cpu.toFixed(0)}) | ${min.toFixed(0)}..${max.toFixed(0)} |`);
}

function httpCase(table: RouteTable, reqs: Req[], expect: string): () => void {
  // Sanity: every input is the outcome the row claims to measure.
  for (const [h, p] of reqs) {
    const r = table.lookup(latin1(h), latin1(p));
    const got = r.kind === 'match' ? `${r.hostMatch}:${r.path?.match ?? 'any'}:${r.path?.path ?? ''}` : r.reason;
    if (got !== expect) throw new Error(`bench input ${h.toString()} ${p.toString()} gives ${got}, not ${expect}`);
  }
  let k = 0;
  return () => {
    const [h, p] = reqs[k++ & (INPUTS - 1)]!;
    const r = table.lookup(latin1(h), latin1(p));
    sink += r.kind === 'match' ? r.routeIndex : -1;
  };
}

/** The loop the table replaces: every route, every host pattern, every path. */
function linearScan(routes: RouteSpec[], host: string, path: string): number {
  const h = host.toLowerCase().split(':')[0]!;
  let best = -1;
  let bestLength = -1;
  for (let i = 0; i < routes.length; i++) {
    const r = routes[i]!;
    for (const pattern of r.hosts) {
      if (!(pattern === h || (pattern.startsWith('*.') && h.endsWith(pattern.slice(1))))) continue;
      for (const p of r.paths ?? [{ path: '/', match: 'prefix' }]) {
        const ok = p.match === 'exact' ? path === p.path : path === p.path || path.startsWith(p.path === '/' ? '/' : `${p.path}/`);
        if (ok && p.path.length > bestLength) {
          best = i;
          bestLength = p.path.length;
        }
      }
    }
  }
  return best;
}

console.log(
  `node ${process.version}, ${process.arch}; ${WARMUP} warmup, ${RUNS} runs x ${ITERATIONS} ops; median ns/lookup, host and path decoded from bytes in every op`,
);
for (const n of SIZES) {
  const routes = routesOf(n);
  const http = RouteTable.compile(routes);
  const sni = RouteTable.compile(
    routes.map((r) => ({ name: r.name, hosts: r.hosts })),
    { kind: 'sni' },
  );
  const wild = Math.max(1, n / 10);
  console.log(`\n${n} exact hosts x 4 paths + ${wild} wildcard hosts + default (${routes.length} routes)\n`);
  console.log('| case | ns/op median (CPU) | min..max |');
  console.log('|---|---:|---:|');
  const prefixReqs = requests(n, (i) => [exactHost(i), `/api/v1/admin/users/${i}?page=2`]);
  row(
    'floor: decode host + path only',
    (() => {
      let k = 0;
      return () => {
        const [h, p] = prefixReqs[k++ & (INPUTS - 1)]!;
        sink += latin1(h).length + latin1(p).length;
      };
    })(),
  );
  row('exact host, longest of 3 prefixes', httpCase(http, prefixReqs, 'exact:prefix:/api/v1/admin'));
  row(
    'the same, 16 hot hosts (small working set)',
    httpCase(
      http,
      requests(n, (i) => [exactHost(i), `/api/v1/admin/users/${i}?page=2`], 16),
      'exact:prefix:/api/v1/admin',
    ),
  );
  row(
    'exact host, exact path',
    httpCase(
      http,
      requests(n, (i) => [exactHost(i), '/health']),
      'exact:exact:/health',
    ),
  );
  row(
    'exact host, root prefix',
    httpCase(
      http,
      requests(n, (i) => [exactHost(i), '/index.html']),
      'exact:prefix:/',
    ),
  );
  row(
    'Host with upper case, :port, trailing dot',
    httpCase(
      http,
      requests(n, (i) => [`${exactHost(i).toUpperCase()}.:8443`, '/api/x']),
      'exact:prefix:/api',
    ),
  );
  row(
    'path needing normalisation (./, //, %61)',
    httpCase(
      http,
      requests(n, (i) => [exactHost(i), '/api/./v1//%61dmin/x']),
      'exact:prefix:/api/v1/admin',
    ),
  );
  row(
    'wildcard host, 5 labels',
    httpCase(
      http,
      requests(wild, (i) => [`a.b.tenant${i}.example.net`, '/x']),
      'wildcard:any:',
    ),
  );
  row(
    'unknown host -> default',
    httpCase(
      http,
      requests(n, (i) => [`nope-${i}.example.org`, '/x']),
      'default:any:',
    ),
  );
  // Nearly the wildcard walk's worst case a valid Host can be (253 characters, 126 labels): looked up at
  // the wildcard suffix lengths only (was: a slice and a hash per label; a 16 KB Host cost ~97 ms
  // of CPU per request end to end, bench/README.md "Route table").
  row(
    '126-label Host of 253 characters -> default',
    httpCase(
      http,
      requests(n, (i) => [`${'a.'.repeat(125)}b${String(i % 100).padStart(2, '0')}`, '/x']),
      'default:any:',
    ),
  );
  const hostReqs = requests(n, (i) => [`${exactHost(i)}:8443`, '/']);
  row(
    'Host check (forward/http/request-host.ts), name:port',
    (() => {
      let k = 0;
      return () => {
        const [h] = hostReqs[k++ & (INPUTS - 1)]!;
        const r = requestHost(['Host', latin1(h)], null);
        sink += typeof r === 'string' ? r.length : -1;
      };
    })(),
  );
  const sniReqs = requests(n, (i) => [exactHost(i), '']);
  row(
    'SNI table, exact name',
    (() => {
      let k = 0;
      return () => {
        const [h] = sniReqs[k++ & (INPUTS - 1)]!;
        const r = sni.lookupHost(latin1(h));
        sink += r.kind === 'match' ? r.routeIndex : -1;
      };
    })(),
  );
  if (n <= 10_000) {
    const scanReqs = prefixReqs.map(([h, p]) => [h.toString('latin1'), p.toString('latin1').split('?')[0]!] as const);
    let k = 0;
    const scanIterations = n >= 10_000 ? 200 : n >= 100 ? 20_000 : ITERATIONS;
    const start = process.hrtime.bigint();
    for (let j = 0; j < scanIterations; j++) {
      const [h, p] = scanReqs[k++ & (INPUTS - 1)]!;
      sink += linearScan(routes, h, p);
    }
    const ns = Number(process.hrtime.bigint() - start) / scanIterations;
    console.log(`| linear scan over the routes (contrast, ${scanIterations} ops, no warm-up) | ${ns.toFixed(0)} | - |`);
  }
}
console.log(`\n(checksum ${sink})`);
