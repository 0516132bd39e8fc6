/**
 * Load benchmark: ipgate side by side with nginx and HAProxy doing the same job on the same machine.
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/compare.js [--rounds 3] [--duration 6]
 *       [--proxies ipgate,nginx,haproxy] [--workloads http,http-denied,http-rate,tcp,tcp-ppin,bulk,idle]
 *       (TLS, not in the default set: https-handshake-ecdsa, https-handshake-rsa, https-keepalive,
 *       https-h2: h2load, --connections connections x 10 streams each, HTTP/2 over TLS)
 *       (ipgate and base only: http-routes-1, http-routes-100: the http workload through a listener
 *       with 1 route, and with 100 routes (exact and wildcard hosts, prefix and exact paths), the
 *       same traffic (Host: app.example.com, one exact route without paths); their ratio is the
 *       route table's cost at 100 routes, docs/routes-and-sni.md "Cost")
 *       [--rate 3000]   (http-rate: offered requests/s, via hey)
 *       [--cidrs 1000] [--workers 1|N|auto] [--proxy-cpus 0] [--load-cpus 1] [--idle 9000]
 *       [--baseline /other/checkout/dist/src/main.js]   (A/B: that build runs as proxy "base")
 *       [--base-env NAME=VALUE]   (environment for "base" only: A/B of a setting on one build)
 *       [--base-workers 1]   (`workers` for "base" only: with --baseline dist/src/main.js --workers auto,
 *       the workers factor of one build, both interleaved in the same rounds)
 *       [--base-engine relay]   (`http.engine` for "base" only: an older build whose default differs)
 *       [--admin on|off]   (default on: ipgate runs its admin API, as the chart and the demo do, and is
 *       scraped (/metrics) and probed (/readyz) once a second during its samples, as Prometheus and
 *       the kubelet would; off: admin.listen null)
 *       [--variant v1:NAME=VALUE ...]   (proxies v1..v4: this build with NAME=VALUE in its environment,
 *       repeatable per variant: several settings A/B against `ipgate` in the same rounds)
 *       [--mem-breakdown on|live]   (preload bench/load/mem-probe.js into ipgate, base and the variants and
 *       print where their memory is right after the load: V8 spaces, glibc arenas, file-backed pages;
 *       live: then a full collection in each and the V8 spaces' used bytes again, live against garbage)
 *       [--mem-snapshots DIR]   (with --mem-breakdown live: each one's heap snapshot, DIR/<proxy>.heapsnapshot)
 *       [--settle 10]   (read every proxy's RSS again after that many idle seconds)
 *       [--warmup 2]   (seconds of unmeasured load per proxy and workload before round 1: JIT warm-up)
 *       [--image-env auto|on|off]   (on: every ipgate runs in the Docker image's environment, its
 *       runtime stage's ENV: jemalloc preloaded, MALLOC_ARENA_MAX, NODE_OPTIONS; off: Node's defaults;
 *       auto, the default: on when this Node is the image's major (the pod as shipped), off on
 *       another (as an operator runs it from source); --env, --base-env and --variant apply over it)
 *       (IPGATE_BENCH_MEMORY_LIMIT_MIB=512 in --env, --base-env or a --variant: that ipgate starts as
 *       under a container memory limit of 512 MiB, as Node sizes its heap from it: underMemoryLimit)
 *       (`--workloads mixed`: http, http-denied, https-keepalive, https-handshake-ecdsa, tcp, tcp-ppin,
 *       bulk: the mixed run after which "RSS after the run" is read, issue 31)
 *       [--separate-process default|true|false] [--base-separate-process default|true|false]
 *       (`admin.separateProcess` for "ipgate" / "base": the process-model A/B on one build)
 *       (proxies `ipgate-http-proxy` / `ipgate-relay`: this build with that `http.engine` (`ipgate-undici`: the
 *       removed engine's name, which runs the relay since 2026-12-01); `ipgate`
 *       and `base` run the build's default engine)
 *       (minimal forwarders, what an engine alone costs: HTTP `node-min`, `undici-min`,
 *       `undici-stream-min`, `relay-min`, `http-raw-min` (libuv handles, also `http-denied`), `http-parse-min` (the same with ipgate's parser on both heads); TCP `tcp-min` (net.Socket), `tcp-raw-min` (libuv handles))
 *   BENCH_WRK_OUT=FILE appends wrk's whole report of each sample to FILE (its latency distribution:
 *   50/75/90/99 %, max), for reading a tail beyond the p50 and p99 printed here.
 *
 * The job (same for all three): an allowlist of `--cidrs` CIDRs (127.0.0.1/32 sits in the middle of
 * the list, so linear scanners pay half a scan), HTTP with X-Real-IP / X-Forwarded-For and an
 * upstream keep-alive pool, TCP with an outbound PROXY header (nginx 1.22 stream can only send v1;
 * HAProxy and ipgate send v2), TCP with an inbound PROXY v2 header from a trusted peer, bulk TCP.
 * The denied workload uses a second listener whose list excludes 127.0.0.1 (wrk cannot bind a
 * source address). All three answer it 403 at their defaults: nginx and HAProxy keep the
 * connection after a 403, and so does ipgate (`http.denied.keepAlive`, default true). Peers are
 * never changed to match ipgate. The proxy under test is pinned to `--proxy-cpus`; wrk, the backends and the
 * connection driver to `--load-cpus`. Proxies are interleaved per round (these machines are noisy:
 * ratios of interleaved runs are what count). Work per proxy CPU-second comes from /proc/<pid>/stat
 * (utime + stime of the proxy process and its children, i.e. every worker).
 *
 * TLS workloads (opt-in with --workloads): the proxies terminate TLS with one certificate made by
 * the openssl CLI at start (ECDSA P-256 and RSA 2048, self-signed, the same files for all three)
 * and forward plaintext to the HTTP backend as in `http`. nginx (`listen ... ssl`) and HAProxy
 * (`bind ... ssl crt`) run at their TLS defaults (protocols, ciphers, session cache / tickets:
 * nothing set). `https-handshake-*`: the connection driver in TLS mode, every connection a full
 * handshake (no session offered) and one request with `Connection: close` (see runDriver for why
 * neither wrk nor `openssl s_time`); `https-keepalive`: wrk over https with keep-alive on the
 * ECDSA listener (after the handshake the key type does not matter). A build whose config has no listener `tls` block refuses to start, and the run stops
 * saying so: no numbers are made up for it.
 *
 * `https-h2`: HTTP/2 from the client (ALPN h2) on the ECDSA certificate, h2load with
 * `--connections` connections and 10 concurrent streams on each (`-m 10`), the same GET as `http`
 * forwarded over HTTP/1.1 to the backend. nginx 1.22 `listen ... ssl http2` (1.25 writes it
 * `http2 on`), HAProxy `bind ... ssl crt ... alpn h2,http/1.1`, ipgate's TLS listener (HTTP/2 is on
 * by default), each at its HTTP/2 defaults (nginx: 128 streams, HAProxy: 100, ipgate: 128).
 *
 * Peers: apt-get install nginx-light libnginx-mod-stream haproxy wrk iperf3 hey openssl nghttp2-client
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import nodeTls from 'node:tls';
import { descendants } from './proc';

const ROOT = path.resolve(__dirname, '../../..');
const MAIN = path.join(ROOT, 'dist/src/main.js');
const CLK_TCK = 100;
const PAGE = 4096;

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  rounds: number;
  duration: number;
  proxies: string[];
  workloads: string[];
  cidrs: number;
  workers: string;
  proxyCpus: string;
  loadCpus: string;
  idle: number;
  connections: number;
  /** Extra ipgate environment, e.g. NODE_CLUSTER_SCHED_POLICY=none. */
  env: Record<string, string>;
  cpuProf: string | null;
  /** A second ipgate build (its dist/src/main.js) run as proxy `base` for A/B of a change. */
  baseline: string | null;
  /** Environment for `base` only, over `env` (A/B of a setting on one build: --baseline dist/src/main.js). */
  baseEnv: Record<string, string>;
  /** `workers` for `base` only (the workers factor on one build: --workers auto --base-workers 1). */
  baseWorkers: string | null;
  /** Offered load of the http-rate workload, requests per second over all connections. */
  rate: number;
  /** `http.engine` for `base` only (an older build whose default engine differs): null, its default. */
  baseEngine: string | null;
  /** Run ipgate's admin API (scraped and probed during samples). */
  admin: boolean;
  /** `admin.separateProcess` for "ipgate" and "base" (null: the build's default). */
  separate: boolean | null;
  baseSeparate: boolean | null;
  /** Preload bench/load/mem-probe.js into ipgate and base and report where their memory is after the load. */
  memBreakdown: boolean;
  /** --mem-breakdown live: each probed ipgate also reports its V8 spaces after a full collection. */
  memLive: boolean;
  /** --mem-snapshots DIR: with --mem-breakdown live, a heap snapshot of each probed ipgate there. */
  memSnapshots: string | null;
  /** Environment per variant proxy (v1..v4: this build), from --variant vN:NAME=VALUE. */
  variantEnv: Record<string, Record<string, string>>;
  /** Seconds idle after the load before RSS is read a second time (0: not read again). */
  settle: number;
  /** Run every ipgate (ipgate, base, the variants, ipgate-*) in the image's environment (imageEnv); null: auto. */
  imageEnv: boolean | null;
  /** Seconds of unmeasured load per proxy and workload before round 1 (0: none). */
  warmup: number;
}

/** Whether `proxy` runs `workload`: the floors only their own, the routes workloads ipgate's builds only. */
function runs(proxy: string, workload: string): boolean {
  if (HTTP_ONLY.has(proxy))
    return workload === 'http' || workload === 'http-rate' || (HTTP_DENIES.has(proxy) && workload === 'http-denied');
  if (TCP_ONLY.has(proxy)) return workload === 'tcp' || workload === 'tcp-ppin';
  return !workload.startsWith('http-routes') || proxy === 'ipgate' || proxy === 'base';
}

/** One sample of `workload` against the proxy whose ports start at `p` (o.duration seconds). */
async function measure(workload: string, p: number, o: Options, dir: string): Promise<Sample> {
  switch (workload) {
    case 'http':
      return wrk(p + L.http, o);
    case 'http-denied':
      return wrk(p + L.httpDenied, o);
    case 'http-routes-1':
      return wrk(p + L.routes1, o, false, ROUTED_HOST);
    case 'http-routes-100':
      return wrk(p + L.routes100, o, false, ROUTED_HOST);
    case 'http-rate':
      return hey(p + L.http, o);
    case 'tcp':
      return driver(p + L.tcp, o, 'plain');
    case 'tcp-ppin':
      return driver(p + L.tcpPpin, o, 'ppin');
    case 'bulk':
      return iperf(p + L.bulk, o);
    case 'https-h2':
      return h2load(p + L.httpsH2, o, dir);
    case 'https-handshake-ecdsa':
    case 'https-handshake-rsa':
    case 'https-keepalive': {
      const w = TLS_WORKLOADS[workload]!;
      return w.handshakes ? driver(p + w.listener, o, 'tls') : wrk(p + w.listener, o, true);
    }
    default:
      throw new Error(`unknown workload ${workload}`);
  }
}

const ADMIN_TOKEN = 'bench-admin-token-0123456789';

/**
 * The environment the Docker image runs ipgate in: the runtime stage's ENV (the stage after the
 * Dockerfile's last FROM), read from the Dockerfile so the bench cannot drift from it. Operators run
 * the image, so its p99 and RSS are ipgate's with these (bench/README.md "The image's environment and a warm-up in
 * compare.ts"). LD_PRELOAD names the image's link to Debian's jemalloc; here it is this machine's
 * libjemalloc2, found as the image's RUN finds it (`dpkg -L`), and without it LD_PRELOAD is dropped
 * with a warning (RSS then reads as glibc's malloc).
 */
function imageEnv(): Record<string, string> {
  if (imageEnvCache !== null) return imageEnvCache;
  const text = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const runtime = text.slice(text.lastIndexOf('\nFROM '));
  const env: Record<string, string> = {};
  for (const line of runtime.split('\n')) {
    if (!line.startsWith('ENV ')) continue;
    for (const m of line.slice(4).matchAll(/(\w+)=("((?:[^"\\]|\\.)*)"|\S*)/g)) env[m[1]!] = m[3] ?? m[2]!;
  }
  if (env.LD_PRELOAD !== undefined) {
    const found = spawnSync('dpkg', ['-L', 'libjemalloc2'], { encoding: 'utf8' })
      .stdout?.split('\n')
      .find((f) => /\/libjemalloc\.so\.2$/.test(f));
    if (found !== undefined && fs.existsSync(found)) env.LD_PRELOAD = found;
    else {
      process.stderr.write(
        "compare: no libjemalloc2 on this machine (apt-get install libjemalloc2): ipgate runs without the image's LD_PRELOAD\n",
      );
      delete env.LD_PRELOAD;
    }
  }
  imageEnvCache = env;
  return env;
}
let imageEnvCache: Record<string, string> | null = null;

/** Whether this Node is the image's major (the Dockerfile's `ARG NODE_IMAGE=node:<major>-...`). */
function isImageMajor(): boolean {
  const m = /^ARG NODE_IMAGE=node:(\d+)-/m.exec(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
  return m !== null && m[1] === process.versions.node.split('.')[0];
}

function triState(v: string): boolean | null {
  return v === 'true' ? true : v === 'false' ? false : null;
}

/** NAME=VALUE (the value may itself contain '=', as NODE_OPTIONS=--x=1 does). */
function splitEnv(v: string): [string, string] {
  const i = v.indexOf('=');
  return i < 0 ? [v, ''] : [v.slice(0, i), v.slice(i + 1)];
}

/**
 * `--workloads mixed`: every kind of traffic an edge pod carries (issue 31's "mixed run"), after
 * which the RSS an operator sizes the pod for is read: allowed and denied HTTP, keep-alive HTTPS,
 * new TLS connections, short TCP with PROXY v2 out and in+out, bulk TCP.
 */
const MIXED = ['http', 'http-denied', 'https-keepalive', 'https-handshake-ecdsa', 'tcp', 'tcp-ppin', 'bulk'];

function parseOptions(argv: string[]): Options {
  const o: Options = {
    rounds: 3,
    duration: 6,
    proxies: ['ipgate', 'nginx', 'haproxy'],
    workloads: ['http', 'http-denied', 'tcp', 'tcp-ppin', 'bulk', 'idle'],
    cidrs: 1000,
    workers: '1',
    proxyCpus: '0',
    loadCpus: '1',
    idle: 9000,
    connections: 50,
    env: {},
    cpuProf: null,
    baseline: null,
    baseEnv: {},
    baseWorkers: null,
    rate: 3000,
    baseEngine: null,
    admin: true,
    separate: null,
    baseSeparate: null,
    memBreakdown: false,
    memLive: false,
    memSnapshots: null,
    variantEnv: {},
    settle: 0,
    imageEnv: null,
    warmup: 2,
  };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]!;
    const v = argv[i + 1] ?? '';
    switch (k) {
      case '--rounds':
        o.rounds = Number(v);
        break;
      case '--duration':
        o.duration = Number(v);
        break;
      case '--proxies':
        o.proxies = v.split(',');
        break;
      case '--workloads':
        o.workloads = v.split(',').flatMap((w) => (w === 'mixed' ? MIXED : [w]));
        break;
      case '--cidrs':
        o.cidrs = Number(v);
        break;
      case '--workers':
        o.workers = v;
        break;
      case '--proxy-cpus':
        o.proxyCpus = v;
        break;
      case '--load-cpus':
        o.loadCpus = v;
        break;
      case '--idle':
        o.idle = Number(v);
        break;
      case '--connections':
        o.connections = Number(v);
        break;
      case '--env': {
        const [a, b] = splitEnv(v);
        o.env[a] = b;
        break;
      }
      case '--rate':
        o.rate = Number(v);
        break;
      case '--base-env': {
        const [a, b] = splitEnv(v);
        o.baseEnv[a] = b;
        break;
      }
      case '--cpu-prof':
        o.cpuProf = v;
        break;
      case '--baseline':
        o.baseline = v;
        break;
      case '--base-workers':
        o.baseWorkers = v;
        break;
      case '--base-engine':
        o.baseEngine = v;
        break;
      case '--admin':
        o.admin = v !== 'off';
        break;
      case '--warmup':
        o.warmup = Number(v);
        break;
      case '--image-env':
        o.imageEnv = v === 'auto' ? null : v !== 'off';
        break;
      case '--separate-process':
        o.separate = triState(v);
        break;
      case '--base-separate-process':
        o.baseSeparate = triState(v);
        break;
      case '--mem-breakdown':
        o.memBreakdown = v !== 'off';
        o.memLive = v === 'live';
        break;
      case '--mem-snapshots':
        o.memSnapshots = v;
        break;
      case '--variant': {
        // v1:NAME=VALUE (repeatable): proxy v1 is this build with NAME=VALUE in its environment.
        const colon = v.indexOf(':');
        const name = v.slice(0, colon);
        if (!/^v[1-4]$/.test(name)) throw new Error(`--variant ${v}: the name must be v1..v4`);
        const [a, b] = splitEnv(v.slice(colon + 1));
        o.variantEnv[name] = { ...o.variantEnv[name], [a]: b };
        if (!o.proxies.includes(name)) o.proxies.push(name);
        break;
      }
      case '--settle':
        o.settle = Number(v);
        break;
      default:
        throw new Error(`unknown option ${k}`);
    }
  }
  if (o.baseline !== null && !o.proxies.includes('base')) o.proxies.push('base');
  return o;
}

// ---------------------------------------------------------------------------------------------
// Ports and the allowlist

// IPGATE_BENCH_PORT_BASE moves every port (two runs side by side, e.g. one per Node major).
const BASE = Number(process.env.IPGATE_BENCH_PORT_BASE ?? 18000);
const BACKEND = { http: BASE + 1, pp: BASE + 2, iperf: BASE + 3, hold: BASE + 4 };
/** Per proxy: base + offset per workload listener. */
const PROXY_BASE: Record<string, number> = {
  ipgate: BASE + 100,
  nginx: BASE + 200,
  haproxy: BASE + 300,
  base: BASE + 400,
  'node-min': BASE + 500,
  'undici-min': BASE + 600,
  'ipgate-undici': BASE + 700,
  'undici-stream-min': BASE + 800,
  'ipgate-http-proxy': BASE + 900,
  'tcp-min': BASE + 1000,
  'tcp-raw-min': BASE + 1100,
  'relay-min': BASE + 1200,
  'http-raw-min': BASE + 1800,
  'http-parse-min': BASE + 1900,
  'ipgate-relay': BASE + 1300,
  // This build with the environment of --variant vN:NAME=VALUE (several settings A/B in one run).
  v1: BASE + 1400,
  v2: BASE + 1500,
  v3: BASE + 1600,
  v4: BASE + 1700,
};
/** HTTP-only minimal forwarders (bench/load/http-engines.ts): the engine's cost without ipgate around
 * it; `relay-min` (bench/load/http-relay-min.ts) is a relay without node:http (llhttp in wasm). */
const HTTP_ONLY = new Set(['node-min', 'undici-min', 'undici-stream-min', 'relay-min', 'http-raw-min', 'http-parse-min']);
/** HTTP-only forwarders that also answer the `http-denied` workload (a prebuilt 403 per request). */
const HTTP_DENIES = new Set(['http-raw-min', 'http-parse-min']);
/** TCP-only minimal forwarders: two Node sockets and pipe() (bench/load/tcp-min.ts), or the
 * same on libuv handles without net.Socket (bench/load/tcp-raw-min.ts). */
const TCP_ONLY = new Set(['tcp-min', 'tcp-raw-min']);
const L = {
  http: 0,
  httpDenied: 1,
  tcp: 2,
  tcpPpin: 3,
  bulk: 4,
  idle: 5,
  httpsEcdsa: 6,
  httpsRsa: 7,
  routes1: 8,
  routes100: 9,
  httpsH2: 10,
} as const;
/** TLS workloads: the listener each uses and whether every request opens a new connection. */
const TLS_WORKLOADS: Record<string, { listener: number; handshakes: boolean }> = {
  'https-handshake-ecdsa': { listener: L.httpsEcdsa, handshakes: true },
  'https-handshake-rsa': { listener: L.httpsRsa, handshakes: true },
  'https-keepalive': { listener: L.httpsEcdsa, handshakes: false },
  'https-h2': { listener: L.httpsH2, handshakes: false },
};
/** The name in the certificates and the SNI the TLS driver sends. */
const TLS_NAME = 'bench.ipgate.test';
/** The Host the routes workloads send: one exact route without paths, in both tables. */
const ROUTED_HOST = 'app.example.com';

/** `n` routes for the routes workloads: the traffic's route and n - 1 others of every kind. */
function benchRoutes(n: number): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [{ name: 'app', hosts: [ROUTED_HOST] }];
  for (let i = 1; i < n; i++) {
    out.push({
      name: `r${i}`,
      hosts: [`h${i}.example.com`, `*.t${i}.example.com`],
      paths: [
        { path: `/api${i}`, match: 'prefix' },
        { path: '/health', match: 'exact' },
      ],
    });
  }
  return out;
}
/** The admin API's port, per ipgate proxy: base + this. */
const ADMIN_OFFSET = 90;

/** `n` distinct random-ish CIDRs outside 127/8 (deterministic), with 127.0.0.1/32 in the middle. */
function makeCidrs(n: number): { allow: string[]; deny: string[] } {
  const out: string[] = [];
  const seen = new Set<string>();
  let x = 0x9e3779b9;
  while (out.length < n - 1) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    const a = 1 + ((x >>> 24) % 223);
    if (a === 127 || a === 10) continue;
    const prefix = 16 + (x & 15);
    const ip = ((a << 24) | (x & 0x00ffffff)) >>> 0;
    const net_ = prefix === 32 ? ip : (ip & (~0 << (32 - prefix))) >>> 0;
    const cidr = `${net_ >>> 24}.${(net_ >>> 16) & 255}.${(net_ >>> 8) & 255}.${net_ & 255}/${prefix}`;
    if (seen.has(cidr)) continue;
    seen.add(cidr);
    out.push(cidr);
  }
  const deny = out.slice();
  const allow = out.slice();
  allow.splice(Math.floor(allow.length / 2), 0, '127.0.0.1/32');
  return { allow, deny };
}

/** One certificate + key per key type, the same files for every proxy (HAProxy: both in one file). */
interface TlsFiles {
  ecdsa: { cert: string; key: string; pem: string };
  rsa: { cert: string; key: string; pem: string };
}

/** Self-signed server certificates made by the openssl CLI (wrk does not verify them). */
function makeCertificates(dir: string): TlsFiles {
  const one = (name: string, keyArgs: string[]): { cert: string; key: string; pem: string } => {
    const cert = path.join(dir, `${name}.crt`);
    const key = path.join(dir, `${name}.key`);
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        ...keyArgs,
        '-nodes',
        '-sha256',
        '-days',
        '30',
        '-subj',
        `/CN=${TLS_NAME}`,
        '-addext',
        `subjectAltName=DNS:${TLS_NAME},IP:127.0.0.1`,
        '-keyout',
        key,
        '-out',
        cert,
      ],
      { stdio: 'ignore' },
    );
    const pem = path.join(dir, `${name}.pem`);
    fs.writeFileSync(pem, fs.readFileSync(cert, 'utf8') + fs.readFileSync(key, 'utf8'));
    return { cert, key, pem };
  };
  return { ecdsa: one('ecdsa-p256', ['ec', '-pkeyopt', 'ec_paramgen_curve:P-256']), rsa: one('rsa-2048', ['rsa:2048']) };
}

// ---------------------------------------------------------------------------------------------
// Processes

interface Proc {
  name: string;
  child: ChildProcess;
  output: () => string;
}

const procs: Proc[] = [];

/**
 * The command line that runs `cmd` as if its container had a memory limit of `mib`: Node sizes V8's
 * heap from min(MemTotal, the cgroup's limit) (uv_get_total_memory / uv_get_constrained_memory),
 * so a pod with `resources.limits.memory: 512Mi` gets a smaller old generation, a lower heap growing
 * factor and smaller semi-spaces than the same image on a host without a limit. Emulated without
 * touching any cgroup: a private mount namespace (unshare -m, root) in which /proc/meminfo says
 * MemTotal is `mib` (the host's cgroup has no limit here). Only what Node reads at start changes;
 * nothing enforces the limit.
 */
function underMemoryLimit(full: string[], mib: number, dir: string): string[] {
  const meminfo = path.join(dir, `meminfo-${mib}`);
  fs.writeFileSync(meminfo, fs.readFileSync('/proc/meminfo', 'utf8').replace(/^MemTotal:.*$/m, `MemTotal: ${mib * 1024} kB`));
  // exec keeps the pid: unshare execs sh, sh execs the command (the pid compare.ts samples).
  return ['unshare', '-m', 'sh', '-c', `mount --bind ${meminfo} /proc/meminfo && exec "$@"`, 'sh', ...full];
}

function start(name: string, cmd: string, args: string[], cpus: string | null, env: NodeJS.ProcessEnv = {}, cwd?: string): Proc {
  let full = cpus === null ? [cmd, ...args] : ['taskset', '-c', cpus, cmd, ...args];
  const limit = Number(env.IPGATE_BENCH_MEMORY_LIMIT_MIB ?? 0);
  if (limit > 0) full = underMemoryLimit(full, limit, os.tmpdir());
  const child = spawn(full[0]!, full.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env }, cwd });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out = (out + c.toString()).slice(-20000);
  });
  child.stderr!.on('data', (c: Buffer) => {
    out = (out + c.toString()).slice(-20000);
  });
  const p = { name, child, output: () => out };
  procs.push(p);
  return p;
}

async function stopAll(): Promise<void> {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  await sleep(200);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function waitPort(port: number, p: Proc, ms = 15000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (p.child.exitCode !== null) throw new Error(`${p.name} exited: ${p.output()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${p.name}: port ${port} not listening: ${p.output()}`);
    await sleep(100);
  }
}

/** utime + stime (+ children's) of pid and its descendants, seconds. */
function cpuSeconds(pid: number): number {
  let ticks = 0;
  for (const id of [pid, ...descendants(pid)]) {
    try {
      const stat = fs.readFileSync(`/proc/${id}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // exited
    }
  }
  return ticks / CLK_TCK;
}

function rssBytes(pid: number): number {
  let pages = 0;
  for (const id of [pid, ...descendants(pid)]) {
    try {
      pages += Number(fs.readFileSync(`/proc/${id}/statm`, 'utf8').split(' ')[1]);
    } catch {
      // exited
    }
  }
  return pages * PAGE;
}

// ---------------------------------------------------------------------------------------------
// Configs

function backendNginx(dir: string): string {
  return `load_module /usr/lib/nginx/modules/ngx_stream_module.so;
daemon off; master_process off; worker_processes 1; pid ${dir}/backend.pid;
error_log ${dir}/backend-error.log error;
worker_rlimit_nofile 20000;
events { worker_connections 10000; }
http {
  client_body_temp_path ${dir}/tmp; proxy_temp_path ${dir}/tmp; fastcgi_temp_path ${dir}/tmp; uwsgi_temp_path ${dir}/tmp; scgi_temp_path ${dir}/tmp;
  access_log off; keepalive_requests 1000000; keepalive_timeout 120s;
  server { listen 127.0.0.1:${BACKEND.http}; location / { return 200 "ok\\n"; } }
}
stream {
  server { listen 127.0.0.1:${BACKEND.pp} proxy_protocol; return "ok $proxy_protocol_addr\\n"; }
}
`;
}

function nginxConfig(dir: string, p: number, tls: TlsFiles | null): string {
  // nginx's TLS defaults (1.22: ssl_protocols TLSv1 - TLSv1.3, ssl_ciphers HIGH:!aNULL:!MD5, no
  // shared session cache, tickets on): only the certificate is set. keepalive_requests and
  // keepalive_timeout at their defaults too (1000 and 75 s; until 2026-12-03 23:30 UTC this set
  // 1,000,000 and 120 s, so nginx never closed a client connection while ipgate closes one after
  // 1,000 requests as nginx does by default: bench/README.md "nginx at its defaults in compare.ts").
  const https = (port: number, f: { cert: string; key: string }): string =>
    `  server { listen 127.0.0.1:${port} ssl; ssl_certificate ${f.cert}; ssl_certificate_key ${f.key}; location / { if ($allowed = 0) { return 403; } proxy_pass http://backend; } }\n`;
  const tlsServers =
    tls === null
      ? ''
      : https(p + L.httpsEcdsa, tls.ecdsa) +
        https(p + L.httpsRsa, tls.rsa) +
        `  server { listen 127.0.0.1:${p + L.httpsH2} ssl http2; ssl_certificate ${tls.ecdsa.cert}; ssl_certificate_key ${tls.ecdsa.key}; location / { if ($allowed = 0) { return 403; } proxy_pass http://backend; } }\n`;
  return `load_module /usr/lib/nginx/modules/ngx_stream_module.so;
daemon off; master_process off; worker_processes 1; pid ${dir}/nginx.pid;
error_log ${dir}/nginx-error.log error;
worker_rlimit_nofile 20000;
events { worker_connections 19900; }
http {
  client_body_temp_path ${dir}/tmp; proxy_temp_path ${dir}/tmp; fastcgi_temp_path ${dir}/tmp; uwsgi_temp_path ${dir}/tmp; scgi_temp_path ${dir}/tmp;
  access_log off;
  geo $allowed { default 0; include ${dir}/allow.geo; }
  geo $allowed_denied { default 0; include ${dir}/deny.geo; }
  upstream backend { server 127.0.0.1:${BACKEND.http}; keepalive 128; }
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_set_header Host $host;
  proxy_set_header X-Real-IP $remote_addr;
  proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
  proxy_set_header X-Forwarded-Proto $scheme;
  server { listen 127.0.0.1:${p + L.http}; location / { if ($allowed = 0) { return 403; } proxy_pass http://backend; } }
  server { listen 127.0.0.1:${p + L.httpDenied}; location / { if ($allowed_denied = 0) { return 403; } proxy_pass http://backend; } }
${tlsServers}}
stream {
  server { listen 127.0.0.1:${p + L.tcp}; include ${dir}/allow.access; proxy_protocol on; proxy_pass 127.0.0.1:${BACKEND.pp}; }
  server { listen 127.0.0.1:${p + L.tcpPpin} proxy_protocol; set_real_ip_from 127.0.0.0/8; include ${dir}/allow.access; proxy_protocol on; proxy_pass 127.0.0.1:${BACKEND.pp}; }
  server { listen 127.0.0.1:${p + L.bulk}; include ${dir}/allow.access; proxy_pass 127.0.0.1:${BACKEND.iperf}; }
  server { listen 127.0.0.1:${p + L.idle}; include ${dir}/allow.access; proxy_pass 127.0.0.1:${BACKEND.hold}; }
}
`;
}

function haproxyConfig(dir: string, p: number, tls: TlsFiles | null): string {
  // HAProxy's TLS defaults (2.6: TLSv1.2 minimum, OpenSSL's ciphers, its session cache and
  // tickets): only the certificate (cert + key in one PEM, its usual form) is set.
  const https = (name: string, port: number, pem: string, alpn = ''): string => `frontend ${name}
  bind 127.0.0.1:${port} ssl crt ${pem}${alpn}
  http-request deny deny_status 403 unless { src -f ${dir}/allow.lst }
  http-request set-header X-Real-IP %[src]
  option forwardfor
  default_backend be_http
`;
  const tlsFrontends =
    tls === null
      ? ''
      : https('https_ecdsa', p + L.httpsEcdsa, tls.ecdsa.pem) +
        https('https_rsa', p + L.httpsRsa, tls.rsa.pem) +
        https('https_h2', p + L.httpsH2, tls.ecdsa.pem, ' alpn h2,http/1.1');
  return `global
  nbthread 1
  maxconn 9900
  ulimit-n 20000
defaults
  mode http
  timeout connect 5s
  timeout client 120s
  timeout server 120s
  timeout http-keep-alive 120s
  option http-keep-alive
frontend http
  bind 127.0.0.1:${p + L.http}
  http-request deny deny_status 403 unless { src -f ${dir}/allow.lst }
  http-request set-header X-Real-IP %[src]
  option forwardfor
  default_backend be_http
frontend http_denied
  bind 127.0.0.1:${p + L.httpDenied}
  http-request deny deny_status 403 unless { src -f ${dir}/deny.lst }
  http-request set-header X-Real-IP %[src]
  option forwardfor
  default_backend be_http
${tlsFrontends}backend be_http
  http-reuse always
  server s1 127.0.0.1:${BACKEND.http}
listen tcp
  mode tcp
  bind 127.0.0.1:${p + L.tcp}
  tcp-request connection reject unless { src -f ${dir}/allow.lst }
  server s1 127.0.0.1:${BACKEND.pp} send-proxy-v2
listen tcp_ppin
  mode tcp
  bind 127.0.0.1:${p + L.tcpPpin} accept-proxy
  tcp-request session reject unless { src -f ${dir}/allow.lst }
  server s1 127.0.0.1:${BACKEND.pp} send-proxy-v2
listen bulk
  mode tcp
  bind 127.0.0.1:${p + L.bulk}
  tcp-request connection reject unless { src -f ${dir}/allow.lst }
  server s1 127.0.0.1:${BACKEND.iperf}
listen idle
  mode tcp
  bind 127.0.0.1:${p + L.idle}
  tcp-request connection reject unless { src -f ${dir}/allow.lst }
  server s1 127.0.0.1:${BACKEND.hold}
`;
}

function ipgateConfig(
  p: number,
  allow: string[],
  deny: string[],
  workers: string,
  engine: string | null,
  admin: boolean,
  separate: boolean | null,
  tls: TlsFiles | null,
): Record<string, unknown> {
  // The listener `tls` block of docs/tls.md, at its defaults but for the certificate.
  const https = (name: string, port: number, f: { cert: string; key: string }): Record<string, unknown> => ({
    name,
    mode: 'http',
    listen: `127.0.0.1:${port}`,
    allowlist: 'bench',
    upstreams: [`127.0.0.1:${BACKEND.http}`],
    ...http,
    tls: { certificates: [{ cert: f.cert, key: f.key }] },
  });
  const http = engine === null ? {} : { http: { engine } }; // null: the build's default
  const tcp = (name: string, port: number, upstream: number, out: string, ppin: boolean): Record<string, unknown> => ({
    name,
    mode: 'tcp',
    listen: `127.0.0.1:${port}`,
    allowlist: 'bench',
    upstreams: [`127.0.0.1:${upstream}`],
    outboundProxyProtocol: out,
    ...(ppin ? { proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.0/8'] } } : {}),
  });
  return {
    workers: workers === 'auto' ? 'auto' : Number(workers),
    logging: { level: 'warn', format: 'json', access: false },
    admin: admin
      ? { listen: `127.0.0.1:${p + ADMIN_OFFSET}`, ...(separate === null ? {} : { separateProcess: separate }) }
      : { listen: null },
    store: { type: 'memory' },
    allowlists: { bench: allow, denied: deny },
    listeners: [
      {
        name: 'http',
        mode: 'http',
        listen: `127.0.0.1:${p + L.http}`,
        allowlist: 'bench',
        upstreams: [`127.0.0.1:${BACKEND.http}`],
        ...http,
      },
      {
        name: 'http-denied',
        mode: 'http',
        listen: `127.0.0.1:${p + L.httpDenied}`,
        allowlist: 'denied',
        upstreams: [`127.0.0.1:${BACKEND.http}`],
        ...http,
      },
      tcp('tcp', p + L.tcp, BACKEND.pp, 'v2', false),
      tcp('tcp-ppin', p + L.tcpPpin, BACKEND.pp, 'v2', true),
      tcp('bulk', p + L.bulk, BACKEND.iperf, 'none', false),
      tcp('idle', p + L.idle, BACKEND.hold, 'none', false),
      ...(tls === null
        ? []
        : [
            https('https-ecdsa', p + L.httpsEcdsa, tls.ecdsa),
            https('https-rsa', p + L.httpsRsa, tls.rsa),
            https('https-h2', p + L.httpsH2, tls.ecdsa),
          ]),
      {
        name: 'http-routes-1',
        mode: 'http',
        listen: `127.0.0.1:${p + L.routes1}`,
        allowlist: 'bench',
        upstreams: [`127.0.0.1:${BACKEND.http}`],
        routes: benchRoutes(1),
        ...http,
      },
      {
        name: 'http-routes-100',
        mode: 'http',
        listen: `127.0.0.1:${p + L.routes100}`,
        allowlist: 'bench',
        upstreams: [`127.0.0.1:${BACKEND.http}`],
        routes: benchRoutes(100),
        ...http,
      },
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// Load generators

/** GET /metrics and /readyz once a second each (Prometheus and the kubelet, at a high rate). */
function startScraper(port: number): NodeJS.Timeout {
  const get = (path: string): void => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }, (res) => res.resume());
    req.on('error', () => undefined);
  };
  return setInterval(() => {
    get('/metrics');
    get('/readyz');
  }, 1000);
}

interface Sample {
  /** Work units per second (requests, connections, bits). */
  rate: number;
  p50ms: number | null;
  p99ms: number | null;
  /** wrk only (its Lua `done` hook): the tail where a collector's pause shows first. */
  p999ms?: number | null;
  errors: number;
  /** TLS driver: the protocol and cipher the proxy chose (each peer at its own defaults). */
  tls?: string;
}

/** A wrk script whose `done` hook prints the 99.9th percentile (wrk's --latency stops at 99), written once. */
function wrkTailScript(): string {
  if (tailScript === null) {
    tailScript = path.join(os.tmpdir(), 'ipgate-bench-p999.lua');
    fs.writeFileSync(
      tailScript,
      'done = function(summary, latency, requests)\n  io.write(string.format("p99.9 %d us\\n", latency:percentile(99.9)))\nend\n',
    );
  }
  return tailScript;
}
let tailScript: string | null = null;

/**
 * wrk; `https`: keep-alive over TLS (wrk 4.1 negotiates TLS 1.2 with every server here). Not used
 * for new handshakes: with `Connection: close` wrk reconnects with SSL_clear() and resumes the
 * previous session (nginx's `$ssl_session_reused` said `r` for 613 of 615 connections), so it
 * measures resumptions; the TLS driver below makes full ones.
 */
function wrk(port: number, o: Options, https = false, host: string | null = null): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const c = spawn('taskset', [
      '-c',
      o.loadCpus,
      'wrk',
      '-t1',
      `-c${o.connections}`,
      `-d${o.duration}s`,
      '--latency',
      '-s',
      wrkTailScript(),
      ...(host === null ? [] : ['-H', `Host: ${host}`]),
      `${https ? 'https' : 'http'}://127.0.0.1:${port}/`,
    ]);
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr.on('data', (d: Buffer) => (out += d.toString()));
    c.once('exit', () => {
      if (process.env.BENCH_WRK_OUT) fs.appendFileSync(process.env.BENCH_WRK_OUT, `--- ${port}\n${out}`);
      const rate = /Requests\/sec:\s+([\d.]+)/.exec(out);
      if (!rate) return reject(new Error(`wrk: ${out}`));
      const lat = (pct: string): number | null => {
        const m = new RegExp(`\\s${pct}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
        if (!m) return null;
        const v = Number(m[1]);
        return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
      };
      const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out);
      const p999 = /^p99\.9 (\d+) us$/m.exec(out);
      const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      resolve({
        rate: Number(rate[1]),
        p50ms: lat('50'),
        p99ms: lat('99'),
        p999ms: p999 ? Number(p999[1]) / 1000 : null,
        errors: (errs ? errs.slice(1).reduce((n, x) => n + Number(x), 0) : 0) + (non2xx ? Number(non2xx[1]) * 0 : 0),
      });
    });
  });
}

/**
 * http-rate: the same keep-alive requests at a fixed offered rate (hey, Debian package: `-q` per
 * connection), below ipgate's single-core capacity, so every proxy serves the same load and the
 * latencies compare service times, not the queue a saturated closed loop (wrk) builds in front of
 * the slower proxy.
 */
function hey(port: number, o: Options): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const perConnection = o.rate / o.connections;
    const c = spawn('taskset', [
      '-c',
      o.loadCpus,
      'hey',
      '-z',
      `${o.duration}s`,
      '-c',
      String(o.connections),
      '-q',
      perConnection.toFixed(3),
      `http://127.0.0.1:${port}/`,
    ]);
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr.on('data', (d: Buffer) => (out += d.toString()));
    c.once('exit', () => {
      const rate = /Requests\/sec:\s+([\d.]+)/.exec(out);
      if (!rate) return reject(new Error(`hey: ${out}`));
      const lat = (pct: string): number | null => {
        const m = new RegExp(`\\s${pct}% in ([\\d.]+) secs`).exec(out);
        return m ? Number(m[1]) * 1000 : null;
      };
      const ok = /\[200\]\s+(\d+) responses/.exec(out);
      const all = [...out.matchAll(/\[(\d+)\]\s+(\d+) responses/g)].reduce((n, m) => n + Number(m[2]), 0);
      const errors = [...out.matchAll(/^\s+\[(\d+)\]\s+Get /gm)].reduce((n, m) => n + Number(m[1]), 0);
      resolve({ rate: Number(rate[1]), p50ms: lat('50'), p99ms: lat('99'), errors: errors + all - (ok ? Number(ok[1]) : 0) });
    });
  });
}

/**
 * https-h2: h2load (Debian nghttp2-client) for `--duration` seconds, `--connections` connections,
 * 10 concurrent streams each, one thread on the load CPUs; latencies from its per-request log.
 */
function h2load(port: number, o: Options, dir: string): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const log = path.join(dir, `h2load-${port}.log`);
    const c = spawn('taskset', [
      '-c',
      o.loadCpus,
      'h2load',
      '-t1',
      `-c${o.connections}`,
      '-m10',
      `-D${o.duration}`,
      `--log-file=${log}`,
      `https://127.0.0.1:${port}/`,
    ]);
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr.on('data', (d: Buffer) => (out += d.toString()));
    c.once('exit', () => {
      const rate = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(out);
      const reqs = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out);
      const codes = /status codes: (\d+) 2xx/.exec(out);
      const proto = /Application protocol: (\S+)/.exec(out);
      if (rate === null || reqs === null) return reject(new Error(`h2load: ${out}`));
      let lat: number[] = [];
      try {
        lat = fs
          .readFileSync(log, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => Number(l.split('\t')[2]) / 1000)
          .sort((a, b) => a - b);
        fs.rmSync(log);
      } catch {
        // no log: no latencies
      }
      const pct = (q: number): number | null => (lat.length === 0 ? null : lat[Math.min(lat.length - 1, Math.floor(q * lat.length))]!);
      const done = Number(reqs[3]);
      resolve({
        rate: Number(rate[1]),
        p50ms: pct(0.5),
        p99ms: pct(0.99),
        errors: Number(reqs[5]) + Number(reqs[6]) + (done - Number(codes?.[1] ?? 0)),
        tls: proto?.[1] ?? undefined,
      });
    });
  });
}

/** The short-connection driver runs in a child pinned to the load CPUs (this file with `--driver`). */
type DriverMode = 'plain' | 'ppin' | 'tls';

function driver(port: number, o: Options, mode: DriverMode): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const c = spawn('taskset', [
      '-c',
      o.loadCpus,
      process.execPath,
      __filename,
      '--driver',
      String(port),
      String(o.duration),
      String(o.connections),
      mode,
    ]);
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr.on('data', (d: Buffer) => (out += d.toString()));
    c.once('exit', () => {
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as Sample);
      } catch {
        reject(new Error(`driver: ${out}`));
      }
    });
  });
}

/** PROXY v2 header: 127.0.0.1:40000 -> 127.0.0.1:443, TCP over IPv4. */
const PPV2 = Buffer.concat([
  Buffer.from('0d0a0d0a000d0a515549540a', 'hex'),
  Buffer.from([0x21, 0x11, 0x00, 0x0c]),
  Buffer.from([127, 0, 0, 1, 127, 0, 0, 1, 0x9c, 0x40, 0x01, 0xbb]),
]);

/**
 * `tls`: each connection is a new TLS connection with a full handshake (Node's client offers no
 * session unless given one; TLS 1.3 by default, SNI bench.ipgate.test), then one
 * `GET / HTTP/1.1` with `Connection: close` through the proxy to the backend; it counts when the
 * answer is a 200. The same client for every proxy. Not `openssl s_time -new`: it runs one
 * connection at a time (the proxy mostly idles) and its `-www` request has no Host header, which
 * ipgate answers 400 without a trip upstream, so the proxies would not do the same job.
 */
const TLS_REQUEST = Buffer.from(`GET / HTTP/1.1\r\nHost: ${TLS_NAME}\r\nConnection: close\r\n\r\n`);
const HTTP_200 = Buffer.from('HTTP/1.1 200 ');

function runDriver(port: number, seconds: number, concurrency: number, mode: DriverMode): void {
  let negotiated: string | undefined;
  const lat: number[] = [];
  let errors = 0;
  let done = 0;
  const end = Date.now() + seconds * 1000;
  const one = (): void => {
    if (Date.now() >= end) {
      if (--concurrency === 0) finish();
      return;
    }
    const t0 = process.hrtime.bigint();
    let got = false;
    let s: net.Socket;
    if (mode === 'tls') {
      const t = nodeTls.connect({ port, host: '127.0.0.1', servername: TLS_NAME, rejectUnauthorized: false }, () => {
        negotiated = `${t.getProtocol() ?? '?'} ${t.getCipher().name}`;
        t.write(TLS_REQUEST);
      });
      s = t;
      let first = true;
      s.on('data', (d: Buffer) => {
        if (first) got = d.subarray(0, HTTP_200.length).equals(HTTP_200);
        first = false;
      });
    } else {
      s = net.connect({ port, host: '127.0.0.1' });
      if (mode === 'ppin') s.write(PPV2);
      s.on('data', () => {
        got = true;
      });
    }
    s.on('error', () => {
      errors++;
    });
    s.on('end', () => s.destroy());
    s.on('close', () => {
      if (got) {
        done++;
        if ((done & 7) === 0) lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
      } else {
        errors++;
      }
      one();
    });
  };
  const t0 = Date.now();
  const finish = (): void => {
    lat.sort((a, b) => a - b);
    const pct = (q: number): number | null => (lat.length === 0 ? null : lat[Math.min(lat.length - 1, Math.floor(q * lat.length))]!);
    const secs = (Date.now() - t0) / 1000;
    process.stdout.write(`${JSON.stringify({ rate: done / secs, p50ms: pct(0.5), p99ms: pct(0.99), errors, tls: negotiated })}\n`);
  };
  for (let i = 0; i < concurrency; i++) one();
}

function iperf(port: number, o: Options): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const c = spawn('taskset', ['-c', o.loadCpus, 'iperf3', '-c', '127.0.0.1', '-p', String(port), '-t', String(o.duration), '-J']);
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.once('exit', () => {
      try {
        const j = JSON.parse(out) as { end: { sum_received: { bits_per_second: number } } };
        resolve({ rate: j.end.sum_received.bits_per_second, p50ms: null, p99ms: null, errors: 0 });
      } catch {
        reject(new Error(`iperf3: ${out.slice(0, 2000)}`));
      }
    });
  });
}

/** Hold backend: accepts and keeps connections open (for the idle workload); a child process (fds). */
function runHold(port: number): void {
  const socks = new Set<net.Socket>();
  net
    .createServer((s) => {
      socks.add(s);
      s.on('error', () => undefined);
      s.on('close', () => socks.delete(s));
    })
    .listen(port, '127.0.0.1');
}

/** Open `n` idle connections through the proxy, each with a byte sent so the upstream is dialled. */
async function idle(port: number, pid: number, n: number): Promise<{ held: number; rssPerConn: number; base: number }> {
  const base = rssBytes(pid);
  const socks: net.Socket[] = [];
  let failed = 0;
  for (let i = 0; i < n; i += 200) {
    await Promise.all(
      Array.from(
        { length: Math.min(200, n - i) },
        () =>
          new Promise<void>((resolve) => {
            const s = net.connect({ port, host: '127.0.0.1' });
            s.once('connect', () => {
              s.write('x');
              socks.push(s);
              resolve();
            });
            s.once('error', () => {
              failed++;
              resolve();
            });
          }),
      ),
    );
  }
  await sleep(2000);
  const alive = socks.filter((s) => !s.destroyed).length;
  const rss = rssBytes(pid);
  for (const s of socks) s.destroy();
  await sleep(1500);
  void failed;
  return { held: alive, rssPerConn: alive > 0 ? (rss - base) / alive : 0, base };
}

// ---------------------------------------------------------------------------------------------
// Main

interface Result {
  proxy: string;
  workload: string;
  round: number;
  sample: Sample;
  cpu: number;
}

const UNITS: Record<string, string> = {
  http: 'req/s',
  'http-rate': 'req/s',
  'http-denied': 'req/s',
  tcp: 'conn/s',
  'tcp-ppin': 'conn/s',
  bulk: 'Gbit/s',
  'https-handshake-ecdsa': 'handshake/s',
  'https-handshake-rsa': 'handshake/s',
  'https-keepalive': 'req/s',
  'http-routes-1': 'req/s',
  'http-routes-100': 'req/s',
  'https-h2': 'req/s',
};

/**
 * This process (every thread of it) goes to the load CPUs too: it scrapes ipgate's admin API once
 * a second, reads the drivers' output and samples /proc, and unpinned the kernel may run that on
 * the proxy's core, where it preempts the proxy under test (only ipgate is scraped, so only its
 * tail would carry it). Children started without a CPU list inherit this.
 */
function pinSelf(cpus: string): void {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', cpus, String(process.pid)], { stdio: 'ignore' });
  } catch (e) {
    process.stderr.write(`warning: could not pin this process to CPUs ${cpus}: ${(e as Error).message}\n`);
  }
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  pinSelf(o.loadCpus);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-bench-'));
  fs.mkdirSync(path.join(dir, 'tmp'));
  const { allow, deny } = makeCidrs(o.cidrs);
  fs.writeFileSync(path.join(dir, 'allow.lst'), `${allow.join('\n')}\n`);
  fs.writeFileSync(path.join(dir, 'deny.lst'), `${deny.join('\n')}\n`);
  fs.writeFileSync(path.join(dir, 'allow.geo'), allow.map((c) => `${c} 1;`).join('\n'));
  fs.writeFileSync(path.join(dir, 'deny.geo'), deny.map((c) => `${c} 1;`).join('\n'));
  fs.writeFileSync(path.join(dir, 'allow.access'), `${allow.map((c) => `allow ${c};`).join('\n')}\ndeny all;\n`);
  process.on('exit', () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  });
  const tlsRun = o.workloads.some((w) => w in TLS_WORKLOADS);
  const tls = tlsRun ? makeCertificates(dir) : null;

  // Backends on the load CPUs.
  fs.writeFileSync(path.join(dir, 'backend.conf'), backendNginx(dir));
  const be = start(
    'backend-nginx',
    'nginx',
    ['-p', dir, '-c', path.join(dir, 'backend.conf'), '-e', path.join(dir, 'backend-error.log')],
    o.loadCpus,
  );
  // iperf3 only for the bulk workload (a run without it needs no iperf3 installed).
  const ip = o.workloads.includes('bulk') ? start('iperf3-server', 'iperf3', ['-s', '-p', String(BACKEND.iperf)], o.loadCpus) : null;
  const hold = start('hold', process.execPath, [__filename, '--hold', String(BACKEND.hold)], o.loadCpus);
  await Promise.all([
    waitPort(BACKEND.http, be),
    waitPort(BACKEND.pp, be),
    ...(ip === null ? [] : [waitPort(BACKEND.iperf, ip)]),
    waitPort(BACKEND.hold, hold),
  ]);

  const pcpus = o.workers === '1' ? o.proxyCpus : `${o.proxyCpus}`;
  const proxies: Record<string, Proc> = {};
  for (const name of o.proxies) {
    const p = PROXY_BASE[name]!;
    if (name === 'nginx') {
      fs.writeFileSync(path.join(dir, 'nginx.conf'), nginxConfig(dir, p, tls));
      proxies[name] = start(name, 'nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'nginx-error.log')], pcpus);
    } else if (HTTP_ONLY.has(name)) {
      const args =
        name === 'relay-min'
          ? [path.join(__dirname, 'http-relay-min.js'), String(p + L.http), String(BACKEND.http)]
          : name === 'http-raw-min' || name === 'http-parse-min'
            ? [
                path.join(__dirname, 'http-raw-min.js'),
                String(p + L.http),
                String(p + L.httpDenied),
                String(BACKEND.http),
                ...(name === 'http-parse-min' ? ['parse'] : []),
              ]
            : [path.join(__dirname, 'http-engines.js'), name.replace('-min', ''), String(p + L.http), String(BACKEND.http)];
      proxies[name] = start(name, process.execPath, args, pcpus);
      await waitPort(p + L.http, proxies[name]!);
      continue;
    } else if (TCP_ONLY.has(name)) {
      proxies[name] = start(
        name,
        process.execPath,
        [path.join(__dirname, `${name}.js`), String(p + L.tcp), String(p + L.tcpPpin), String(BACKEND.pp)],
        pcpus,
      );
      await waitPort(p + L.tcpPpin, proxies[name]!);
      continue;
    } else if (name === 'haproxy') {
      fs.writeFileSync(path.join(dir, 'haproxy.cfg'), haproxyConfig(dir, p, tls));
      proxies[name] = start(name, 'haproxy', ['-db', '-f', path.join(dir, 'haproxy.cfg')], pcpus);
    } else {
      const file = path.join(dir, `${name}.json`);
      // `ipgate-undici` / `ipgate-http-proxy`: the same build with that `http.engine` on its HTTP
      // listeners; `ipgate` and `base` as an operator runs them (the default engine). Until
      // 2026-11-29 19:00 UTC `ipgate` was pinned to http-proxy here although undici had become
      // the default: the "ipgate" HTTP rows before that are the http-proxy engine's.
      const engine =
        name === 'ipgate-undici'
          ? 'undici'
          : name === 'ipgate-http-proxy'
            ? 'http-proxy'
            : name === 'ipgate-relay'
              ? 'relay'
              : name === 'base'
                ? o.baseEngine
                : null;
      const workers = name === 'base' && o.baseWorkers !== null ? o.baseWorkers : o.workers;
      fs.writeFileSync(
        file,
        JSON.stringify(ipgateConfig(p, allow, deny, workers, engine, o.admin, name === 'base' ? o.baseSeparate : o.separate, tls)),
      );
      const main = name === 'base' ? o.baseline! : MAIN;
      // V8 flags NODE_OPTIONS refuses (e.g. --heap-growing-percent) go on the command line:
      // `--variant v1:IPGATE_BENCH_NODE_ARGS=--heap-growing-percent=30` (space-separated).
      const nodeArgs = (o.variantEnv[name]?.IPGATE_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
      const args = [
        ...nodeArgs,
        ...(o.cpuProf && name === 'ipgate' ? ['--cpu-prof', `--cpu-prof-dir=${o.cpuProf}`] : []),
        ...(o.memBreakdown ? ['-r', path.join(__dirname, 'mem-probe.js')] : []),
        main,
        'run',
        '--config',
        file,
      ];
      const env = {
        ...((o.imageEnv ?? isImageMajor()) ? imageEnv() : {}),
        ...o.env,
        IPGATE_ADMIN_TOKEN: ADMIN_TOKEN,
        IPGATE_MEM_PROBE_OUT: path.join(dir, `${name}.mem.json`),
        ...(o.memLive ? { IPGATE_MEM_PROBE_LIVE: '1' } : {}),
        ...(o.memLive && o.memSnapshots !== null
          ? { IPGATE_MEM_PROBE_SNAPSHOT: path.join(path.resolve(o.memSnapshots), `${name}.heapsnapshot`) }
          : {}),
      };
      proxies[name] = start(
        name,
        process.execPath,
        args,
        pcpus,
        name === 'base' ? { ...env, ...o.baseEnv } : { ...env, ...o.variantEnv[name] },
      );
    }
    try {
      await waitPort(p + L.http, proxies[name]!);
      await waitPort(p + L.idle, proxies[name]!);
      if (tls !== null) await waitPort(p + L.httpsRsa, proxies[name]!);
      if (tls !== null) await waitPort(p + L.httpsH2, proxies[name]!);
    } catch (err) {
      if (tls !== null && name !== 'nginx' && name !== 'haproxy') {
        throw new Error(
          `${name} did not start with its TLS listeners (a build without TLS termination, issue 18, refuses ` +
            `the listener "tls" key): no TLS numbers for it; run the TLS workloads with --proxies nginx,haproxy to see the peers alone.\n${(err as Error).message}`,
        );
      }
      throw err;
    }
  }

  const results: Result[] = [];
  const idleResults: Array<{ proxy: string; held: number; rssPerConn: number; base: number }> = [];
  const load = o.workloads.filter((w) => w !== 'idle');
  if (o.warmup > 0) {
    // Not measured: each proxy runs each of its workloads for --warmup seconds before round 1, so
    // that round does not time V8 compiling ipgate (and the Node floors) against C that needs no
    // compiling; the rounds measure a proxy that has been serving, as one in production has.
    for (const workload of load) {
      for (const proxy of o.proxies) {
        if (runs(proxy, workload)) await measure(workload, PROXY_BASE[proxy]!, { ...o, duration: o.warmup }, dir);
      }
    }
    process.stderr.write(`warm-up done: ${o.warmup} s per proxy and workload\n`);
  }
  for (let round = 1; round <= o.rounds; round++) {
    // The two routes workloads are compared with each other: which runs first alternates by round.
    const a = load.indexOf('http-routes-1');
    const b = load.indexOf('http-routes-100');
    const inRound = round % 2 === 0 && a >= 0 && b >= 0 ? load.map((w, i) => (i === a ? load[b]! : i === b ? load[a]! : w)) : load;
    for (const workload of inRound) {
      // Rotate the order per round so no proxy always runs first (page cache, thermal, neighbours).
      const order = o.proxies.map((_, i) => o.proxies[(i + round + load.indexOf(workload)) % o.proxies.length]!);
      for (const proxy of order) {
        if (!runs(proxy, workload)) continue;
        const p = PROXY_BASE[proxy]!;
        const pid = proxies[proxy]!.child.pid!;
        const c0 = cpuSeconds(pid);
        const scraper =
          o.admin && !HTTP_ONLY.has(proxy) && !TCP_ONLY.has(proxy) && proxy !== 'nginx' && proxy !== 'haproxy'
            ? startScraper(p + ADMIN_OFFSET)
            : null;
        const sample = await measure(workload, p, o, dir);
        if (scraper !== null) clearInterval(scraper);
        const cpu = cpuSeconds(pid) - c0;
        results.push({ proxy, workload, round, sample, cpu });
        process.stderr.write(
          `round ${round} ${workload.padEnd(11)} ${proxy.padEnd(7)} ${fmtRate(workload, sample.rate).padStart(10)} ${UNITS[workload]}  cpu ${cpu.toFixed(2)} s  p50 ${fmtMs(sample.p50ms)} p99 ${fmtMs(sample.p99ms)}  errors ${sample.errors}${sample.tls ? `  ${sample.tls}` : ''}\n`,
        );
        await sleep(500);
      }
    }
  }
  // RSS of each proxy (its whole process tree) right after the load: the memory an operator sizes for.
  const rssAfter: Record<string, number> = {};
  for (const proxy of o.proxies) {
    const pid = proxies[proxy]!.child.pid!;
    const rss = rssBytes(pid); // the process and its descendants
    rssAfter[proxy] = rss;
    process.stderr.write(
      `rss after load ${proxy.padEnd(8)} ${(rss / 1048576).toFixed(1)} MiB (${1 + descendants(pid).length} process(es))\n`,
    );
  }
  const breakdowns: Record<string, MemBreakdown> = {};
  if (o.memBreakdown) {
    for (const proxy of o.proxies.filter((x) => x === 'ipgate' || x === 'base' || x.startsWith('ipgate-') || /^v[1-4]$/.test(x))) {
      const b = await memBreakdown(proxies[proxy]!, path.join(dir, `${proxy}.mem.json`));
      if (b !== null) breakdowns[proxy] = b;
    }
  }
  // The same after --settle seconds without traffic (V8's memory reducer, glibc's trims on free).
  const rssSettled: Record<string, number> = {};
  if (o.settle > 0) {
    await sleep(o.settle * 1000);
    for (const proxy of o.proxies) rssSettled[proxy] = rssBytes(proxies[proxy]!.child.pid!);
  }
  if (o.workloads.includes('idle')) {
    for (const proxy of o.proxies.filter((x) => !HTTP_ONLY.has(x) && !TCP_ONLY.has(x))) {
      const r = await idle(PROXY_BASE[proxy]! + L.idle, proxies[proxy]!.child.pid!, o.idle);
      idleResults.push({ proxy, ...r });
      process.stderr.write(
        `idle ${proxy}: held ${r.held}/${o.idle}, RSS ${(r.base / 1048576).toFixed(1)} MiB + ${(r.rssPerConn / 1024).toFixed(1)} KiB/conn\n`,
      );
    }
  }
  report(o, results, idleResults, rssAfter, rssSettled, breakdowns);
  if (o.cpuProf) {
    // The profile is written as the process exits: wait for it (a drain takes up to its timeout).
    const child = proxies.ipgate?.child;
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(30_000)]);
    }
  }
  await stopAll();
}

function fmtRate(workload: string, rate: number): string {
  return workload === 'bulk' ? (rate / 1e9).toFixed(2) : rate.toFixed(0);
}
/** A latency, or '-' where the workload has none (bulk: iperf3 reports throughput only). */
function fmtMs(v: number | null): string {
  return v === null || Number.isNaN(v) ? '-' : `${v.toFixed(2)} ms`;
}
const median = (xs: number[]): number => {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** What bench/load/mem-probe.ts writes (the fields the report reads). */
interface MemBreakdown {
  memoryUsage: NodeJS.MemoryUsage;
  heap: { malloced: number; limit: number };
  spaces: Record<string, { committed: number; resident: number; used: number }>;
  smaps: { file: number; mainArena: number; threadArenas: number; threadArenaCount: number; stacks: number; otherAnon: number };
  gc: Record<'minor' | 'major' | 'other', { n: number; ms: number }>;
  cpuMs: number;
  /** --mem-breakdown live: used bytes per V8 space after a full collection. */
  liveUsed?: Record<string, number>;
}

/** Ask the preloaded probe for its breakdown (SIGUSR2) and wait for the file it writes. */
async function memBreakdown(p: Proc, file: string): Promise<MemBreakdown | null> {
  fs.rmSync(file, { force: true });
  p.child.kill('SIGUSR2');
  for (let i = 0; i < 300; i++) {
    if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')) as MemBreakdown;
    await sleep(100);
  }
  process.stderr.write(`${p.name}: no memory breakdown from the probe within 30 s\n`);
  return null;
}

/** The breakdown table, one column per probed proxy, MiB. */
function breakdownRows(breakdowns: Record<string, MemBreakdown>): string[] {
  const names = Object.keys(breakdowns);
  if (names.length === 0) return [];
  const mib = (n: number): string => (n / 1048576).toFixed(1);
  const row = (label: string, f: (b: MemBreakdown) => string): string =>
    `| ${label} | ${names.map((n) => f(breakdowns[n]!)).join(' | ')} |`;
  const space = (b: MemBreakdown, name: string): { committed: number; resident: number; used: number } =>
    b.spaces[name] ?? { committed: 0, resident: 0, used: 0 };
  const v8Resident = (b: MemBreakdown): number => Object.values(b.spaces).reduce((a, s) => a + s.resident, 0);
  const nonNew = (b: MemBreakdown): number => v8Resident(b) - space(b, 'new_space').resident;
  return [
    '',
    `| memory after the load, MiB (bench/load/mem-probe.ts) | ${names.join(' | ')} |`,
    `|---|${names.map(() => '---|').join('')}`,
    row('RSS (process.memoryUsage)', (b) => mib(b.memoryUsage.rss)),
    row("V8's heap limit (from the host's or the emulated limit's memory, or flags)", (b) => mib(b.heap.limit)),
    row('file-backed (node binary, libraries)', (b) => mib(b.smaps.file)),
    row('V8 new space, resident (committed)', (b) => `${mib(space(b, 'new_space').resident)} (${mib(space(b, 'new_space').committed)})`),
    row('V8 other spaces, resident (used)', (b) => `${mib(nonNew(b))} (${mib(b.memoryUsage.heapUsed - space(b, 'new_space').used)})`),
    row('glibc main arena ([heap])', (b) => mib(b.smaps.mainArena)),
    row('glibc thread arenas (count)', (b) => `${mib(b.smaps.threadArenas)} (${b.smaps.threadArenaCount})`),
    row('thread stacks', (b) => mib(b.smaps.stacks)),
    // V8 maps its heap pages itself (mmap, not malloc): they are among the anonymous mappings.
    // The rest of the anonymous mappings less V8's resident spaces: V8's pooled free pages, large
    // malloc blocks (above the mmap threshold), the code range's touched pages; may read below 0
    // where a space's pages are counted by V8 but not yet touched.
    row('other anonymous less the V8 spaces', (b) => mib(b.smaps.otherAnon - v8Resident(b))),
    row('of which: external / arrayBuffers (live)', (b) => `${mib(b.memoryUsage.external)} / ${mib(b.memoryUsage.arrayBuffers)}`),
    row("V8's own malloc", (b) => mib(b.heap.malloced)),
    // Per space at the reading, then (--mem-breakdown live) after a full collection: garbage
    // waiting for the next mark-compact against what the process holds.
    ...['old_space', 'code_space', 'large_object_space', 'map_space', 'trusted_space'].flatMap((n) =>
      names.some((x) => breakdowns[x]!.spaces[n] !== undefined)
        ? [
            row(`V8 ${n} used${names.some((x) => breakdowns[x]!.liveUsed) ? ' (live after a full GC)' : ''}`, (b) =>
              b.liveUsed ? `${mib(space(b, n).used)} (${mib(b.liveUsed[n] ?? 0)})` : mib(space(b, n).used),
            ),
          ]
        : [],
    ),
    // Pauses on the main thread since start (startup included), against the process's CPU time.
    row('GC pauses: scavenges / mark-compacts (count)', (b) => `${b.gc.minor.n} / ${b.gc.major.n}`),
    row('GC pause ms / process CPU ms (share)', (b) => {
      const ms = b.gc.minor.ms + b.gc.major.ms + b.gc.other.ms;
      return `${ms.toFixed(0)} / ${b.cpuMs.toFixed(0)} (${((100 * ms) / b.cpuMs).toFixed(1)}%)`;
    }),
  ];
}

function report(
  o: Options,
  results: Result[],
  idleResults: Array<{ proxy: string; held: number; rssPerConn: number; base: number }>,
  rssAfter: Record<string, number>,
  rssSettled: Record<string, number>,
  breakdowns: Record<string, MemBreakdown>,
): void {
  const lines: string[] = [];
  lines.push(
    `\n${new Date().toISOString()} ${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}, node ${process.version}, ` +
      `${o.cidrs} CIDRs, ipgate workers ${o.workers}, proxy cpus ${o.proxyCpus}, load cpus ${o.loadCpus}, ${o.rounds} rounds x ${o.duration} s, ${o.connections} connections, ` +
      `warm-up ${o.warmup} s, ipgate's environment: ${
        (o.imageEnv ?? isImageMajor())
          ? `the image's (${Object.entries(imageEnv())
              .map(([k, v]) => `${k}=${v}`)
              .join(' ')})`
          : "Node's defaults"
      }`,
  );
  lines.push('');
  lines.push(
    '| workload | proxy | throughput | p50 | p99 | proxy CPU s | work / CPU s | ipgate / this (per CPU s, median of rounds) | this / nginx (same) |',
  );
  lines.push('|---|---|---|---|---|---|---|---|---|');
  const workloads = [...new Set(results.map((r) => r.workload))];
  for (const w of workloads) {
    const eff = (proxy: string, round: number): number => {
      const r = results.find((x) => x.proxy === proxy && x.workload === w && x.round === round);
      return r ? (r.sample.rate * o.duration) / Math.max(r.cpu, 0.01) : NaN;
    };
    for (const proxy of o.proxies) {
      const rs = results.filter((r) => r.workload === w && r.proxy === proxy);
      if (rs.length === 0) continue;
      const rate = median(rs.map((r) => r.sample.rate));
      const cpu = median(rs.map((r) => r.cpu));
      // Work done in the run (rate x duration) per CPU-second the proxy spent on it.
      const per = median(rs.map((r) => (r.sample.rate * o.duration) / Math.max(r.cpu, 0.01)));
      const ratios =
        proxy === 'ipgate' || !o.proxies.includes('ipgate')
          ? ''
          : (() => {
              const rr = rs.map((r) => eff('ipgate', r.round) / eff(proxy, r.round));
              return `${median(rr).toFixed(2)} (${Math.min(...rr).toFixed(2)}-${Math.max(...rr).toFixed(2)})`;
            })();
      // Per round, so each proxy is compared with nginx's run next to it (ipgate-undici vs nginx).
      const vsNginx =
        proxy === 'nginx' || !o.proxies.includes('nginx')
          ? ''
          : (() => {
              const rr = rs.map((r) => eff(proxy, r.round) / eff('nginx', r.round));
              return `${median(rr).toFixed(2)} (${Math.min(...rr).toFixed(2)}-${Math.max(...rr).toFixed(2)})`;
            })();
      lines.push(
        `| ${w} | ${proxy} | ${fmtRate(w, rate)} ${UNITS[w]} | ${fmtMs(median(rs.map((r) => r.sample.p50ms ?? NaN)))} | ` +
          `${fmtMs(median(rs.map((r) => r.sample.p99ms ?? NaN)))} | ${cpu.toFixed(2)} | ${fmtRate(w, per)} | ${ratios} | ${vsNginx} |`,
      );
    }
  }
  // Latency against nginx's in the same round (per round, then median and range).
  if (o.proxies.includes('nginx')) {
    const rows: string[] = [];
    for (const w of workloads) {
      for (const proxy of o.proxies.filter((x) => x !== 'nginx')) {
        const ratio = (get: (s: Sample) => number | null | undefined): number[] =>
          results
            .filter((r) => r.workload === w && r.proxy === proxy && typeof get(r.sample) === 'number')
            .flatMap((r) => {
              const n = results.find((x) => x.proxy === 'nginx' && x.workload === w && x.round === r.round);
              const mine = get(r.sample);
              const theirs = n === undefined ? null : get(n.sample);
              return typeof mine === 'number' && typeof theirs === 'number' && theirs > 0 ? [mine / theirs] : [];
            });
        const cell = (rr: number[]): string =>
          rr.length === 0 ? '' : `${median(rr).toFixed(2)} (${Math.min(...rr).toFixed(2)}-${Math.max(...rr).toFixed(2)})`;
        const p99 = ratio((s) => s.p99ms);
        const p50 = ratio((s) => s.p50ms);
        const shape = ratio((s) => (s.p99ms != null && s.p50ms != null && s.p50ms > 0 ? s.p99ms / s.p50ms : null));
        if (p99.length > 0)
          rows.push(`| ${w} | ${proxy} | ${cell(p99)} | ${cell(ratio((s) => s.p999ms))} | ${cell(p50)} | ${cell(shape)} |`);
      }
    }
    if (rows.length > 0)
      lines.push(
        '',
        '| workload | proxy | p99 / nginx p99 (same round, median (range)) | p99.9 / nginx p99.9 (wrk workloads) | p50 / nginx p50 | (p99 / p50) / nginx (p99 / p50) |',
        '|---|---|---|---|---|---|',
        ...rows,
        '',
        // Little's law: every workload keeps its connections busy, so a proxy's latency at the
        // median follows its own rate (bench/README.md "The p99 at saturation: the rate and the shape of the tail").
        "At saturation each workload keeps a fixed number of requests in flight, so a proxy's p50 is about that number over its " +
          "own rate (Little's law): p50 / nginx p50 is about nginx's rate over this proxy's, and the last column is what " +
          'is left of the p99 ratio, the shape of the tail (p99 / nginx p99 = the two columns multiplied).',
      );
  }
  // Throughput against `base` in the same round: with --base-workers, the workers factor.
  if (o.proxies.includes('base') && o.proxies.includes('ipgate')) {
    const rows: string[] = [];
    for (const w of workloads) {
      const rr = results
        .filter((r) => r.workload === w && r.proxy === 'ipgate')
        .flatMap((r) => {
          const b = results.find((x) => x.proxy === 'base' && x.workload === w && x.round === r.round);
          return b && b.sample.rate > 0 ? [r.sample.rate / b.sample.rate] : [];
        });
      if (rr.length > 0) rows.push(`| ${w} | ${rr.map((x) => x.toFixed(2)).join(', ')} | ${median(rr).toFixed(2)} |`);
    }
    const what = o.baseWorkers === null ? '' : ` (ipgate workers ${o.workers}, base workers ${o.baseWorkers})`;
    if (rows.length > 0) lines.push('', `| workload | throughput ipgate / base per round${what} | median |`, '|---|---|---|', ...rows);
  }
  // 100 routes against 1 route, same proxy, same round: the route table's cost (target within 5%).
  for (const proxy of o.proxies) {
    const pairs = results
      .filter((r) => r.workload === 'http-routes-100' && r.proxy === proxy)
      .flatMap((r) => {
        const one = results.find((x) => x.proxy === proxy && x.workload === 'http-routes-1' && x.round === r.round);
        return one && one.sample.rate > 0 && one.cpu > 0 && r.cpu > 0
          ? [{ rate: r.sample.rate / one.sample.rate, work: r.sample.rate / r.cpu / (one.sample.rate / one.cpu) }]
          : [];
      });
    if (pairs.length === 0) continue;
    const fmt = (xs: number[]): string => `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(3)}-${Math.max(...xs).toFixed(3)})`;
    lines.push(
      '',
      `| ${proxy}: 100 routes / 1 route, per round | throughput | work per CPU s |`,
      '|---|---|---|',
      `| median (range), ${pairs.length} rounds | ${fmt(pairs.map((x) => x.rate))} | ${fmt(pairs.map((x) => x.work))} |`,
    );
  }
  // RSS after the whole run, each proxy beside the others (issue 31: the pod's size after mixed traffic).
  const rssNames = o.proxies.filter((x) => rssAfter[x] !== undefined);
  if (rssNames.length > 0) {
    lines.push(
      '',
      `| RSS after the run (${[...new Set(results.map((r) => r.workload))].join(', ')}) | ${rssNames.join(' | ')} |`,
      `|---|${rssNames.map(() => '---|').join('')}`,
      `| MiB, whole process tree | ${rssNames.map((x) => (rssAfter[x]! / 1048576).toFixed(1)).join(' | ')} |`,
    );
    if (o.settle > 0) {
      lines.push(`| MiB, ${o.settle} s later, idle | ${rssNames.map((x) => ((rssSettled[x] ?? NaN) / 1048576).toFixed(1)).join(' | ')} |`);
    }
  }
  lines.push(...breakdownRows(breakdowns));
  if (idleResults.length > 0) {
    lines.push('');
    lines.push('| idle TCP connections | held | RSS before | RSS per connection |');
    lines.push('|---|---|---|---|');
    for (const r of idleResults) {
      lines.push(`| ${r.proxy} | ${r.held} | ${(r.base / 1048576).toFixed(1)} MiB | ${(r.rssPerConn / 1024).toFixed(1)} KiB |`);
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

if (process.argv[2] === '--driver') {
  runDriver(Number(process.argv[3]), Number(process.argv[4]), Number(process.argv[5]), process.argv[6] as DriverMode);
} else if (process.argv[2] === '--hold') {
  runHold(Number(process.argv[3]));
} else if (require.main === module) {
  main().catch(async (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    await stopAll();
    process.exit(1);
  });
}
