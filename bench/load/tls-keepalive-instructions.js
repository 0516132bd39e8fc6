// Instructions per HTTPS keep-alive request (or per plaintext one, for the difference), counted by
// callgrind in ipgate alone: an HTTP listener with `tls` (a fresh ECDSA certificate from the
// openssl CLI), a backend in this process, 50 TLS connections opened once and kept, WARM requests
// uninstrumented, then N counted. The client and the backend are not under valgrind. Prints the
// total per request and the kept callgrind output (with --perf-basic-prof: /tmp/perf-PID.map names
// the JIT's code). bench/README.md "HTTPS keep-alive: the socket's byte count".
// usage: node bench/load/tls-keepalive-instructions.js NODE dist/src/main.js [N 20000] [WARM 20000] [tls|plain]
// BENCH_NODE_FLAGS="--predictable --random-seed=1 --hash-seed=1" runs the JIT and the collector on
// the main thread (runs of one build then agree within a few per cent; counted as they run there).
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');

const [NODE, MAIN] = [process.argv[2], path.resolve(process.argv[3])];
const N = Number(process.argv[4] ?? 20000);
const WARM = Number(process.argv[5] ?? 20000);
const MODE = process.argv[6] ?? 'tls';
const CONNECTIONS = 50;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-tls-ka-'));
execFileSync(
  'openssl',
  [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'k.pem',
    '-out',
    'c.pem',
    '-days',
    '1',
    '-subj',
    '/CN=bench.test',
  ],
  { cwd: dir, stdio: 'ignore' },
);

const backend = http.createServer({ keepAliveTimeout: 60_000 }, (_q, r) => r.end('ok'));
backend.listen(0, '127.0.0.1', () => {
  const listen = 18700 + Math.floor(Math.random() * 200);
  fs.writeFileSync(
    path.join(dir, 'ipgate.json'),
    JSON.stringify({
      logging: { level: 'warn', access: false },
      admin: { listen: null },
      store: { type: 'memory' },
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: `127.0.0.1:${listen}`,
          allowlist: 'main',
          upstreams: [`127.0.0.1:${backend.address().port}`],
          ...(MODE === 'tls' ? { tls: { certificates: [{ cert: path.join(dir, 'c.pem'), key: path.join(dir, 'k.pem') }] } } : {}),
        },
      ],
    }),
  );
  const out = path.join(dir, 'callgrind.out');
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      `--callgrind-out-file=${out}`,
      NODE,
      '--perf-basic-prof',
      ...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter((f) => f !== ''),
      MAIN,
      '--config',
      path.join(dir, 'ipgate.json'),
    ],
    {
      stdio: ['ignore', 'ignore', 'ignore'],
    },
  );
  const conns = [];
  const open = () =>
    Promise.all(
      Array.from(
        { length: CONNECTIONS },
        () =>
          new Promise((resolve, reject) => {
            const s =
              MODE === 'tls'
                ? tls.connect({ port: listen, host: '127.0.0.1', servername: 'bench.test', rejectUnauthorized: false })
                : net.connect(listen, '127.0.0.1');
            const c = { s, buf: '', next: null };
            s.on(MODE === 'tls' ? 'secureConnect' : 'connect', resolve);
            s.on('data', (d) => {
              c.buf += d.toString('latin1');
              for (let i = c.buf.indexOf('\r\n\r\nok'); i >= 0; i = c.buf.indexOf('\r\n\r\nok')) {
                if (!c.buf.startsWith('HTTP/1.1 200')) throw new Error(`not a 200: ${c.buf.slice(0, 100)}`);
                c.buf = c.buf.slice(i + 6);
                c.next();
              }
            });
            s.on('error', reject);
            conns.push(c);
          }),
      ),
    );
  const load = (total) => {
    let left = total;
    return Promise.all(
      conns.map(
        (c) =>
          new Promise((resolve) => {
            c.next = () => {
              if (left <= 0) return resolve();
              left--;
              c.s.write('GET / HTTP/1.1\r\nHost: bench.test\r\n\r\n');
            };
            c.next();
          }),
      ),
    );
  };
  const up = () => {
    const s = net.connect(listen, '127.0.0.1');
    s.on('connect', () => {
      s.destroy();
      run().catch((e) => {
        console.error(e);
        child.kill('SIGKILL');
        process.exit(1);
      });
    });
    s.on('error', () => setTimeout(up, 500));
  };
  setTimeout(up, 1000);
  async function run() {
    await open();
    await load(WARM);
    execFileSync('callgrind_control', ['-i', 'on', String(child.pid)], { stdio: 'ignore' });
    await load(N);
    execFileSync('callgrind_control', ['-i', 'off', String(child.pid)], { stdio: 'ignore' });
    for (const c of conns) c.s.destroy();
    child.kill('SIGTERM');
    child.once('exit', () => {
      const text = fs.readFileSync(out, 'utf8');
      const m = /^totals:\s+(\d+)/m.exec(text) ?? /^summary:\s+(\d+)/m.exec(text);
      console.log(
        `${execFileSync(NODE, ['--version']).toString().trim()} ${MODE}: ${Math.round(Number(m[1]) / N)} instructions/request (${N} after ${WARM}); kept ${out}, perf map /tmp/perf-${child.pid}.map`,
      );
      backend.close();
      process.exit(0);
    });
  }
});
