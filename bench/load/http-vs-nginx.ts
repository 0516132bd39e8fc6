/**
 * Load test: ipgate's HTTP path side by side with nginx doing the same job, in one run, on the same
 * machine, against the same backend. Results and how to read them: bench/README.md "HTTP path vs nginx".
 *
 *   npx tsc -p tsconfig.json && node dist/bench/load/http-vs-nginx.js
 *   BENCH_SECONDS=20 BENCH_CONNECTIONS=100 BENCH_CIDRS=1000 node dist/bench/load/http-vs-nginx.js
 *
 * The job, for both proxies: accept plain HTTP/1.1 keep-alive requests, check the client against
 * an allowlist of BENCH_CIDRS CIDRs (the client's /32 is the last one), resolve the real client
 * (nginx: realip with `real_ip_recursive on`; ipgate: trustedProxies), set X-Real-IP,
 * X-Forwarded-For/Proto/Host/Port, forward over a keep-alive upstream pool to an nginx backend
 * that answers `200 ok`. One process each (nginx: master_process off, one worker; ipgate: one
 * process, the compiled binary). Load: wrk (Debian package), BENCH_CONNECTIONS connections, 1
 * thread. Proxy CPU is read from /proc/<pid>/stat (utime + stime) before and after the measured
 * run and divided by the requests wrk completed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { freePort, waitPort } from './ports';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const CIDRS = Number(process.env.BENCH_CIDRS ?? 1000);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const ROOT = path.resolve(__dirname, '../../..');
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

/** 1,000 (or CIDRS) distinct CIDRs from 10.0.0.0/8 and 2001:db8::/32, then the client's /32 last. */
function allowlist(): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < CIDRS - 1; i++) {
    if (i % 4 === 3) out.push(`2001:db8:${(i >> 8).toString(16)}:${(i & 255).toString(16)}::/64`);
    else out.push(`10.${(i >> 8) & 255}.${i & 255}.0/24`);
  }
  out.push('127.0.0.1/32');
  return out;
}

function cpuTicks(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of the line)
}

function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

interface Run {
  requests: number;
  seconds: number;
  rps: number;
  p50: string;
  p99: string;
  non2xx: number;
  errors: string;
}

function wrk(port: number, seconds: number): Run {
  const r = spawnSync('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', `http://127.0.0.1:${port}/`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}`);
  const out = r.stdout;
  const m = /(\d+) requests in ([\d.]+)(m?s)/.exec(out);
  if (!m) throw new Error(`cannot parse wrk output:\n${out}`);
  const secs = m[3] === 'ms' ? Number(m[2]) / 1000 : Number(m[2]);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  return {
    requests: Number(m[1]),
    seconds: secs,
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0),
    p50: /50%\s+(\S+)/.exec(out)?.[1] ?? '?',
    p99: /99%\s+(\S+)/.exec(out)?.[1] ?? '?',
    non2xx,
    errors: /Socket errors: (.*)/.exec(out)?.[1] ?? 'none',
  };
}

function nginxConf(dir: string, body: string): string {
  for (const d of ['logs', 'tmp']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  const file = path.join(dir, 'nginx.conf');
  fs.writeFileSync(
    file,
    `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 4096; }
http {
  client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fcgi;
  uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi; access_log off;
  keepalive_requests 1000000;
${body}
}
`,
  );
  return file;
}

function start(cmd: string, args: string[]): ChildProcess {
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  return child;
}

interface Result {
  name: string;
  run: Run;
  cpuUsPerReq: number;
  cpuPct: number;
  rssMiB: number;
}

async function measure(name: string, pid: number, port: number): Promise<Result> {
  wrk(port, WARMUP);
  const before = cpuTicks(pid);
  const run = wrk(port, SECONDS);
  const ticks = cpuTicks(pid) - before;
  const cpuSeconds = ticks / CLK_TCK;
  return {
    name,
    run,
    cpuUsPerReq: (cpuSeconds * 1e6) / run.requests,
    cpuPct: (cpuSeconds / run.seconds) * 100,
    rssMiB: rss(pid) / 1048576,
  };
}

async function main(): Promise<void> {
  if (spawnSync('sh', ['-c', 'command -v wrk && command -v nginx']).status !== 0)
    throw new Error('needs wrk and nginx (apt-get install wrk nginx-light)');
  const main = path.join(ROOT, 'dist/src/main.js');
  if (!fs.existsSync(main)) throw new Error('build first: npx tsc -p tsconfig.json');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-bench-'));
  const children: ChildProcess[] = [];
  const stop = (): void =>
    children.forEach((c) => {
      c.kill('SIGKILL');
    });
  process.on('exit', stop);

  const backendPort = await freePort();
  const nginxPort = await freePort();
  const ipgatePort = await freePort();
  const cidrs = allowlist();

  // The backend: its own nginx, one worker, answering from memory.
  children.push(
    start('nginx', [
      '-p',
      path.join(tmp, 'backend'),
      '-c',
      nginxConf(
        path.join(tmp, 'backend'),
        `
  server { listen 127.0.0.1:${backendPort}; location / { return 200 "ok\\n"; } }`,
      ),
    ]),
  );

  // nginx as the proxy, configured for the same job.
  const allow = cidrs.map((c) => `    allow ${c};`).join('\n');
  const proxy = start('nginx', [
    '-p',
    path.join(tmp, 'proxy'),
    '-c',
    nginxConf(
      path.join(tmp, 'proxy'),
      `
  upstream backend { server 127.0.0.1:${backendPort}; keepalive 128; keepalive_timeout 60s; }
  server {
    listen 127.0.0.1:${nginxPort};
    set_real_ip_from 10.255.0.0/16;
    real_ip_header X-Forwarded-For;
    real_ip_recursive on;
    location / {
${allow}
      deny all;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Port $server_port;
      proxy_pass http://backend;
    }
  }`,
    ),
  ]);
  children.push(proxy);

  const configFile = path.join(tmp, 'ipgate.yaml');
  fs.writeFileSync(
    configFile,
    YAML.stringify({
      logging: { level: 'warn', format: 'json', access: false },
      admin: { listen: null },
      store: { type: 'memory' },
      allowlists: { bench: cidrs },
      listeners: [
        {
          name: 'bench',
          mode: 'http',
          listen: `127.0.0.1:${ipgatePort}`,
          allowlist: 'bench',
          upstreams: [`127.0.0.1:${backendPort}`],
          http: { trustedProxies: ['10.255.0.0/16'], maxRequestsPerConnection: 0 },
        },
      ],
    }),
  );
  // BENCH_NODE_ARGS, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`, to profile ipgate under this load.
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const gate = start(process.execPath, [...nodeArgs, main, '--config', configFile]);
  children.push(gate);

  await Promise.all([waitPort(backendPort), waitPort(nginxPort), waitPort(ipgatePort)]);
  // Both must answer 200 through the allowlist before anything is measured.
  for (const port of [nginxPort, ipgatePort]) {
    const probe = wrk(port, 1);
    if (probe.non2xx > 0) throw new Error(`proxy on ${port} answered non-2xx: check its allowlist`);
  }

  const results = [
    await measure('nginx 1.22 (1 worker)', proxy.pid!, nginxPort),
    await measure(`ipgate (node ${process.version})`, gate.pid!, ipgatePort),
  ];
  const cpus = os.cpus();
  console.log(`# http-vs-nginx: ${SECONDS}s, wrk -t1 -c${CONNECTIONS}, ${CIDRS} CIDRs, ${cpus.length} x ${cpus[0]?.model ?? '?'}`);
  console.log('| proxy | req/s | CPU us/request | proxy CPU % | p50 | p99 | non-2xx | socket errors | RSS MiB |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---|---:|');
  for (const r of results) {
    console.log(
      `| ${r.name} | ${r.run.rps.toFixed(0)} | ${r.cpuUsPerReq.toFixed(1)} | ${r.cpuPct.toFixed(0)} | ${r.run.p50} | ${r.run.p99} | ${r.run.non2xx} | ${r.run.errors} | ${r.rssMiB.toFixed(0)} |`,
    );
  }
  const [n, g] = results as [Result, Result];
  console.log(
    `\nipgate / nginx: req/s ${(g.run.rps / n.run.rps).toFixed(2)}x, CPU per request ${(g.cpuUsPerReq / n.cpuUsPerReq).toFixed(2)}x`,
  );
  gate.kill('SIGTERM'); // a clean exit writes a --cpu-prof profile
  await new Promise((r) => gate.once('exit', r));
  stop();
  fs.rmSync(tmp, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
