/**
 * TLS termination on an HTTP listener (docs/tls.md), over real sockets with real peers: curl and
 * `openssl s_client` as clients, nginx as a TLS client in front, HAProxy sending PROXY v2 before
 * the ClientHello, certificates made with the openssl CLI (test/helpers/certs.ts). Every case
 * asserts what the peer saw and what ipgate counted.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import t, { type Test } from 'tap';
import { CertDir } from '../helpers/certs';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, freePort, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startHaproxy, startNginx } from '../helpers/peers';
import type { TlsTerminator } from '../../src/tls/terminate';
import { encodeProxyV2 } from '../../src/proxy-protocol/encoder';

const skip = missing('openssl') || missing('curl');

interface Run {
  code: number;
  out: string;
  err: string;
}

/** A child process, asynchronously (ipgate runs in this process: a sync spawn would block it). */
function run(cmd: string, args: string[], input = ''): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: 20_000, encoding: 'utf8' }, (err, out, errOut) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, out, err: errOut });
    });
    child.stdin!.end(input);
  });
}

/** A backend that answers every request with the headers it received, as JSON. */
async function backend(t: Test): Promise<number> {
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(req.headers));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  server.keepAliveTimeout = 30_000;
  return (server.address() as net.AddressInfo).port;
}

const certs = skip ? null : new CertDir();
const web = certs?.issue('web', { cn: 'web.test', dns: ['web.test', 'www.web.test'], kind: 'rsa' });
const ec = certs?.issue('ec', { cn: 'ec.test', dns: ['ec.test'], kind: 'ec' });
const wild = certs?.issue('wild', { cn: 'wild', dns: ['*.wild.test'], kind: 'ec' });
const cnOnly = certs?.issue('cnonly', { cn: 'cn-only.test', kind: 'ec' });
if (certs !== null) certs.ca('other');
const clientGood = certs?.issue('client', { cn: 'client-one', client: true, chain: false });
const clientOther = certs?.issue('stranger', { cn: 'stranger', client: true, ca: 'other', chain: false });

function stageOf(g: Started, name = 'web'): TlsTerminator {
  const l = g.app.listeners.find((x) => x.name === name)!;
  return (l as unknown as { tls: TlsTerminator }).tls;
}

function handshakes(g: Started, name = 'web'): Record<string, number> {
  return Object.fromEntries(stageOf(g, name).stats.handshakes);
}

async function gate(
  t: Test,
  tlsBlock: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  allow = ['127.0.0.0/8'],
): Promise<Started> {
  const up = await backend(t);
  const g = await startIpgate(
    {
      allowlists: { main: allow },
      listeners: [
        { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${up}`], tls: tlsBlock, ...extra },
      ],
    },
    'debug',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

const fourCerts = (): Record<string, unknown> => ({
  certificates: [
    { cert: web!.cert, key: web!.key, name: 'web' },
    { cert: ec!.cert, key: ec!.key, name: 'ec' },
    { cert: wild!.cert, key: wild!.key, name: 'wild' },
    { cert: cnOnly!.cert, key: cnOnly!.key, name: 'cnonly' },
  ],
});

/** The subject CN the server presented, per openssl s_client -brief. */
function peerCn(r: Run): string | null {
  const m = /Peer certificate: .*CN ?= ?([^\s,]+)/.exec(r.err + r.out);
  return m === null ? null : m[1]!;
}

function sClient(port: number, args: string[], brief = true): Promise<Run> {
  return run('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, ...(brief ? ['-brief'] : []), ...args]);
}

t.test('the certificate is chosen by SNI: exact, one-label wildcard, CN, default', { skip }, async (t) => {
  const g = await gate(t, fourCerts());
  const port = g.port();
  const rows: { desc: string; args: string[]; cn: string }[] = [
    { desc: 'exact SAN name (RSA)', args: ['-servername', 'web.test'], cn: 'web.test' },
    { desc: 'second SAN name of the same certificate', args: ['-servername', 'www.web.test'], cn: 'web.test' },
    { desc: 'exact name, other certificate (ECDSA)', args: ['-servername', 'ec.test'], cn: 'ec.test' },
    { desc: 'upper case and a trailing dot name the same host', args: ['-servername', 'EC.Test.'], cn: 'ec.test' },
    { desc: 'wildcard covers one label', args: ['-servername', 'a.wild.test'], cn: 'wild' },
    { desc: 'wildcard does not cover two labels: default', args: ['-servername', 'b.a.wild.test'], cn: 'web.test' },
    { desc: 'wildcard does not cover its parent: default', args: ['-servername', 'wild.test'], cn: 'web.test' },
    { desc: 'a certificate without SAN serves its CN', args: ['-servername', 'cn-only.test'], cn: 'cn-only.test' },
    { desc: 'unknown name: the default (first) certificate', args: ['-servername', 'nobody.test'], cn: 'web.test' },
    { desc: 'no SNI: the default certificate', args: ['-noservername'], cn: 'web.test' },
  ];
  for (const row of rows) {
    const r = await sClient(port, row.args);
    t.equal(peerCn(r), row.cn, row.desc);
  }
  t.equal(handshakes(g)['ok/TLSv1.3'], rows.length, 'every handshake counted ok/TLSv1.3');
});

t.test('curl over TLS: the backend sees https, the listener port and the real client', { skip }, async (t) => {
  const g = await gate(t, fourCerts(), { http: { forwarded: true } });
  const port = g.port();
  const r = await run('curl', [
    '-sS',
    '--interface',
    '127.0.0.7',
    '--cacert',
    certs!.file('ca.crt'),
    '--resolve',
    `web.test:${port}:127.0.0.1`,
    '-w',
    '\n%{http_code} %{ssl_verify_result} %{http_version}',
    `https://web.test:${port}/x`,
  ]);
  t.equal(r.code, 0, `curl succeeded: ${r.err}`);
  const [body, status] = r.out.split('\n');
  t.equal(
    status,
    '200 0 2',
    'status 200, the chain verified against the CA, HTTP/2 (ALPN h2: curl offers it, the listener serves it by default)',
  );
  const headers = JSON.parse(body!) as Record<string, string>;
  t.equal(headers['x-forwarded-proto'], 'https');
  t.equal(headers['x-forwarded-port'], String(port));
  t.equal(headers['x-real-ip'], '127.0.0.7');
  t.equal(headers['x-forwarded-for'], '127.0.0.7');
  t.match(headers.forwarded, /^for=127\.0\.0\.7;proto=https;host="?web\.test/);
  await waitFor(() => g.logs.find((l) => l.msg === 'access' && l.client === '127.0.0.7') !== undefined, 5000, 'access line');
  const line = g.logs.find((l) => l.msg === 'access' && l.client === '127.0.0.7')!;
  t.match(line.tls, { version: 'TLSv1.3', sni: 'web.test', resumed: false }, 'the access line carries the TLS facts');
  t.type((line.tls as { cipher: string }).cipher, 'string');
});

t.test(
  'one certificate for every name (no ClientHello read first): any name or none is served, the name the client sent is logged',
  { skip },
  async (t) => {
    const g = await gate(t, { certificates: [{ cert: ec!.cert, key: ec!.key, name: 'ec' }] });
    t.equal(
      stageOf(g).store.sniDecides,
      false,
      'the name cannot change the certificate: the stage reads no ClientHello before the handshake',
    );
    const port = g.port();
    const rows: { desc: string; client: string; url: string; resolve: string | null; sni: string | null }[] = [
      {
        desc: "the certificate's own name",
        client: '127.0.0.21',
        url: `https://ec.test:${port}/a`,
        resolve: `ec.test:${port}:127.0.0.1`,
        sni: 'ec.test',
      },
      {
        desc: 'a name it does not carry',
        client: '127.0.0.22',
        url: `https://other.test:${port}/b`,
        resolve: `other.test:${port}:127.0.0.1`,
        sni: 'other.test',
      },
      { desc: 'no SNI (an IP literal)', client: '127.0.0.23', url: `https://127.0.0.1:${port}/c`, resolve: null, sni: null },
    ];
    for (const row of rows) {
      const r = await run('curl', [
        '-sS',
        '-k',
        '--interface',
        row.client,
        ...(row.resolve !== null ? ['--resolve', row.resolve] : []),
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        row.url,
      ]);
      t.equal(r.out, '200', `${row.desc}: served (${r.err})`);
      await waitFor(
        () => g.logs.find((l) => l.msg === 'access' && l.client === row.client) !== undefined,
        5000,
        `${row.desc}: access line`,
      );
      const line = g.logs.find((l) => l.msg === 'access' && l.client === row.client)!;
      t.match(line.tls, { version: 'TLSv1.3', sni: row.sni, resumed: false }, `${row.desc}: the access line's sni is ${String(row.sni)}`);
    }
    t.equal(handshakes(g)['ok/TLSv1.3'], rows.length, 'every handshake counted ok/TLSv1.3');
  },
);

t.test('the allowlist is enforced per request over TLS: 403 for a denied client, connection kept', { skip }, async (t) => {
  const g = await gate(t, fourCerts(), {}, ['127.0.0.2/32']);
  const port = g.port();
  const args = (from: string): string[] => [
    '-sS',
    '--interface',
    from,
    '--cacert',
    certs!.file('ca.crt'),
    '--resolve',
    `web.test:${port}:127.0.0.1`,
    '-o',
    '/dev/null',
    '-o',
    '/dev/null',
    '-w',
    '%{http_code} %{num_connects}\n',
    `https://web.test:${port}/a`,
    `https://web.test:${port}/b`,
  ];
  const denied = await run('curl', args('127.0.0.9'));
  t.equal(denied.out, '403 1\n403 0\n', 'two 403s over one TLS connection');
  const allowed = await run('curl', args('127.0.0.2'));
  t.equal(allowed.out, '200 1\n200 0\n', 'the allowed client gets 200s');
});

t.test('HTTPS keep-alive: each access line counts its own response bytes on the wire', { skip }, async (t) => {
  // Over TLS the engine writes through a net.Socket (transport/byte-socket.ts NetByteSocket),
  // which counts the bytes it hands the socket: each request's count is its response's head and
  // body as the client received them, not the connection's running total.
  const g = await gate(t, fourCerts());
  const port = g.port();
  const paths = ['/a', '/bb?q=1', '/c'];
  const urls = paths.map((p) => `https://web.test:${port}${p}`);
  const r = await run('curl', [
    '-sS',
    '--http1.1', // HTTP/2 (curl's ALPN choice) is the h2 engine's, which counts DATA only
    '--cacert',
    certs!.file('ca.crt'),
    '--resolve',
    `web.test:${port}:127.0.0.1`,
    '-H',
    'x-pad: padding',
    ...urls.flatMap(() => ['-o', '/dev/null']),
    '-w',
    '%{num_connects} %{http_code} %{size_header} %{size_download}\n',
    ...urls,
  ]);
  const rows = r.out
    .trim()
    .split('\n')
    .map((l) => l.split(' ').map(Number));
  t.same(
    rows.map((x) => [x[0], x[1]]),
    [
      [1, 200],
      [0, 200],
      [0, 200],
    ],
    'three 200s over one TLS connection',
  );
  const lines = (): Record<string, unknown>[] => g.logs.lines.filter((l) => l.msg === 'access' && l.kind === 'http');
  await waitFor(() => lines().length === 3, 10_000, 'three access lines');
  const byPath = new Map(lines().map((l) => [l.path, l.bytesOut]));
  paths.forEach((path, i) => {
    const wire = rows[i]![2]! + rows[i]![3]!;
    t.ok(wire > 100, `response ${i + 1} has a head and a body (${wire} bytes)`);
    t.equal(byPath.get(path), wire, `${path}: bytesOut = the response's head and body as curl received them, not the running total`);
  });
  t.equal(new Set(lines().map((l) => l.conn)).size, 1, 'all three on one connection');
});

t.test('routes on a TLS listener: a Host no route serves gets 421, a path no route serves 404', { skip }, async (t) => {
  const up = await backend(t);
  const g = await gate(t, fourCerts(), {
    routes: [{ name: 'web', hosts: ['web.test'], paths: [{ path: '/app' }], upstreams: [`127.0.0.1:${up}`] }],
  });
  const port = g.port();
  const get = (host: string, path: string): Promise<Run> =>
    run('curl', [
      '-sS',
      '--cacert',
      certs!.file('ca.crt'),
      '--resolve',
      `web.test:${port}:127.0.0.1`,
      '-H',
      `Host: ${host}`,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      `https://web.test:${port}${path}`,
    ]);
  t.equal((await get('web.test', '/app/x')).out, '200', 'the route serves its host and path');
  t.equal((await get('www.web.test', '/app/x')).out, '421', 'a host the listener routes nowhere: 421 Misdirected Request');
  t.equal((await get('web.test', '/other')).out, '404', 'the host is served, the path is not: 404');
  const misses = Object.fromEntries(g.app.listeners[0]!.stats.routeMisses);
  t.same(misses, { route_no_host: 1, route_no_path: 1 }, 'both misses counted');
});

t.test('protocol versions, ALPN, unknown SNI refused', { skip }, async (t) => {
  const g = await gate(t, { ...fourCerts(), unknownSni: 'refuse' });
  const port = g.port();
  const rows: { desc: string; args: string[]; ok: boolean; match?: RegExp; reason?: string; full?: boolean }[] = [
    { desc: 'TLS 1.3 works', args: ['-servername', 'ec.test', '-tls1_3'], ok: true, match: /Protocol version: TLSv1\.3/ },
    { desc: 'TLS 1.2 works', args: ['-servername', 'ec.test', '-tls1_2'], ok: true, match: /Protocol version: TLSv1\.2/ },
    {
      desc: 'ALPN h2 is chosen from h2,http/1.1 (HTTP/2 on by default)',
      args: ['-servername', 'ec.test', '-alpn', 'h2,http/1.1'],
      ok: true,
      match: /ALPN protocol: h2/,
      full: true,
    },
    {
      desc: 'ALPN http/1.1 when the client offers only that',
      args: ['-servername', 'ec.test', '-alpn', 'http/1.1'],
      ok: true,
      match: /ALPN protocol: http\/1\.1/,
      full: true,
    },
    {
      desc: 'TLS 1.1 is refused',
      args: ['-servername', 'ec.test', '-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0'],
      ok: false,
      reason: 'tls_version',
    },
    { desc: 'an unknown name is refused', args: ['-servername', 'nobody.test'], ok: false, reason: 'tls_unknown_sni' },
    { desc: 'no SNI is refused', args: ['-noservername'], ok: false, reason: 'tls_unknown_sni' },
  ];
  for (const row of rows) {
    const before = handshakes(g);
    const r = await sClient(port, row.args, row.full !== true);
    if (row.ok) {
      t.equal(r.code, 0, `${row.desc}: handshake done`);
      t.match(r.err + r.out, row.match!, row.desc);
    } else {
      t.not(r.code, 0, `${row.desc}: handshake failed`);
      t.equal(peerCn(r), null, `${row.desc}: no certificate shown`);
      const after = handshakes(g);
      const key = Object.keys(after).find((k) => k.startsWith(`${row.reason}/`) && after[k] !== (before[k] ?? 0));
      t.ok(key, `${row.desc}: counted as ${row.reason} (${JSON.stringify(after)})`);
    }
  }
});

t.test('client certificates: required, optional', { skip }, async (t) => {
  const ca = certs!.file('ca.crt');
  for (const mode of ['required', 'optional'] as const) {
    const g = await gate(t, { certificates: [{ cert: ec!.cert, key: ec!.key }], clientCA: ca, clientCertificate: mode });
    const port = g.port();
    const curl = (extra: string[]): Promise<Run> =>
      run('curl', [
        '-sS',
        '--cacert',
        ca,
        '--resolve',
        `ec.test:${port}:127.0.0.1`,
        ...extra,
        '-w',
        '\n%{http_code}',
        `https://ec.test:${port}/`,
      ]);
    const rows: { desc: string; args: string[]; status: string | null; reason?: string; subject?: string }[] = [
      {
        desc: 'a certificate from clientCA',
        args: ['--cert', clientGood!.cert, '--key', clientGood!.key],
        status: '200',
        subject: 'CN=client-one',
      },
      {
        desc: 'a certificate from another CA',
        args: ['--cert', clientOther!.cert, '--key', clientOther!.key],
        status: null,
        reason: 'tls_client_cert_invalid',
      },
      mode === 'required'
        ? { desc: 'no certificate', args: [], status: null, reason: 'tls_client_cert_missing' }
        : { desc: 'no certificate (optional)', args: [], status: '200' },
    ];
    for (const row of rows) {
      const before = handshakes(g);
      const r = await curl(row.args);
      const desc = `${mode}: ${row.desc}`;
      if (row.status !== null) {
        t.equal(r.out.split('\n').pop(), row.status, `${desc}: ${r.err}`);
      } else {
        t.not(r.out.split('\n').pop(), '200', `${desc}: no response`);
        await waitFor(
          () => (handshakes(g)[`${row.reason}/TLSv1.3`] ?? 0) > (before[`${row.reason}/TLSv1.3`] ?? 0),
          5000,
          `${desc}: counted ${row.reason}`,
        );
        t.pass(`${desc}: counted as ${row.reason}`);
      }
      if (row.subject !== undefined) {
        await waitFor(
          () =>
            g.logs.find((l) => l.msg === 'access' && (l.tls as { clientCert?: string } | undefined)?.clientCert === row.subject) !==
            undefined,
          5000,
          'access line with the subject',
        );
        t.pass(`${desc}: the access line names the client certificate`);
      }
    }
  }
});

// With several pairs the stage reads the ClientHello itself before the handshake (to choose the
// certificate): the same failures, met while it reads, end with the same codes.
t.test('a handshake that stalls or is not TLS is closed and counted; the process lives on', { skip }, async (t) => {
  const setups = [
    { desc: 'one pair', tls: { certificates: [{ cert: ec!.cert, key: ec!.key }], handshakeTimeoutMs: 300 } },
    { desc: 'four pairs (the ClientHello read first)', tls: { ...fourCerts(), handshakeTimeoutMs: 300 } },
  ];
  for (const setup of setups) {
    const g = await gate(t, setup.tls);
    const port = g.port();
    // A real ClientHello's first 40 bytes (record header says 512 bytes follow).
    const hello = Buffer.from(`1603010200010001fc0303${'00'.repeat(29)}`, 'hex');
    const rows: { desc: string; send: Buffer | null; reason: string }[] = [
      { desc: 'a client that sends nothing', send: null, reason: 'tls_handshake_timeout' },
      { desc: 'half a ClientHello', send: hello, reason: 'tls_handshake_timeout' },
      { desc: 'plaintext HTTP on the TLS port', send: Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), reason: 'tls_not_handshake' },
      { desc: 'garbage bytes', send: Buffer.from('\x00\x01\x02\x03garbage\xff\xfe'.repeat(8), 'latin1'), reason: 'tls_not_handshake' },
      { desc: 'a client that leaves mid-handshake', send: hello, reason: 'tls_handshake_aborted' },
    ];
    for (const row of rows) {
      const key = `${row.reason}/unknown`;
      const before = handshakes(g)[key] ?? 0;
      await waitFor(() => g.app.listeners[0]!.connections.size === 0, 5000, 'the previous connection gone');
      const s = net.connect({ port, host: '127.0.0.1' });
      s.on('error', () => {});
      await new Promise((r) => s.once('connect', r));
      if (row.send !== null) s.write(row.send);
      if (row.reason === 'tls_handshake_aborted') {
        await waitFor(() => g.app.listeners[0]!.connections.size === 1, 5000, 'accepted');
        s.destroy();
      } else {
        const ms = await closed(s, 5000);
        t.ok(ms >= 0, `${setup.desc}, ${row.desc}: closed by ipgate`);
      }
      await waitFor(() => (handshakes(g)[key] ?? 0) === before + 1, 5000, `${row.desc}: ${key} counted (${JSON.stringify(handshakes(g))})`);
      t.pass(`${setup.desc}, ${row.desc}: counted as ${key}`);
    }
    await waitFor(() => g.app.listeners[0]!.connections.size === 0, 5000, 'no connection left open');
    const ok = await sClient(port, ['-servername', 'ec.test']);
    t.equal(peerCn(ok), 'ec.test', `${setup.desc}: a good client is still served`);
    const scrape = await g.app.metrics.scrape();
    t.match(scrape, /ipgate_tls_handshakes_total\{listener="web",result="tls_handshake_timeout",version="unknown"\} 2/);
    t.match(scrape, /ipgate_tls_handshake_duration_seconds_count\{listener="web"\} 6/);
    t.match(scrape, /ipgate_connections_closed_total\{listener="web",result="tls_not_handshake"\} 2/);
  }
});

t.test('sessions resume with a ticket', { skip }, async (t) => {
  const g = await gate(t, { certificates: [{ cert: ec!.cert, key: ec!.key }] });
  const port = g.port();
  const connect = (session?: Buffer): Promise<{ reused: boolean; session: Buffer }> =>
    new Promise((resolve, reject) => {
      const s = tls.connect({ port, host: '127.0.0.1', servername: 'ec.test', ca: certs!.read('ca.crt'), session });
      let ticket: Buffer | null = null;
      let reused = false;
      s.on('session', (b: Buffer) => {
        ticket = b;
      });
      s.on('error', reject);
      s.once('secureConnect', () => {
        reused = s.isSessionReused();
        s.write('GET / HTTP/1.1\r\nHost: ec.test\r\nConnection: close\r\n\r\n');
      });
      s.resume();
      s.once('close', () => resolve({ reused, session: ticket! }));
    });
  const first = await connect();
  t.equal(first.reused, false, 'a full handshake first');
  t.ok(first.session, 'the server sent a ticket');
  const second = await connect(first.session);
  t.equal(second.reused, true, 'the ticket resumes the session');
  t.equal(stageOf(g).stats.resumed, 1, 'counted as resumed');
  t.match(await g.app.metrics.scrape(), /ipgate_tls_resumed_sessions_total\{listener="web"\} 1/);
  // A ticket lasts nginx's and HAProxy's default session lifetime, not OpenSSL's 7200 s.
  for (const version of ['-tls1_2', '-tls1_3']) {
    // A request with Connection: close, and -ign_eof: s_client stays until ipgate closes, by which
    // time the TLS 1.3 ticket (sent after the handshake) has arrived.
    const r = await run(
      'openssl',
      ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'ec.test', version, '-ign_eof'],
      'GET / HTTP/1.1\r\nHost: ec.test\r\nConnection: close\r\n\r\n',
    );
    t.match(r.out, /TLS session ticket lifetime hint: 300 \(seconds\)/, `${version}: lifetime hint 300 s`);
  }
});

t.test(
  'a certificate swapped in a Secret volume is used for new handshakes; open connections keep theirs; a bad one is refused',
  { skip },
  async (t) => {
    const v1 = certs!.issue('rot1', { cn: 'rot.test', dns: ['rot.test'], kind: 'ec' });
    const v2 = certs!.issue('rot2', { cn: 'rot.test', dns: ['rot.test', 'v2.rot.test'], kind: 'rsa' });
    const vol = certs!.secretVolume('rot');
    vol.swap(fs.readFileSync(v1.cert), fs.readFileSync(v1.key));
    const g = await gate(t, { certificates: [{ cert: vol.cert, key: vol.key, name: 'rot' }], reloadIntervalMs: 100 });
    const port = g.port();
    const serial = (s: tls.TLSSocket): string => s.getPeerX509Certificate()!.serialNumber;
    const open = (): Promise<tls.TLSSocket> =>
      new Promise((resolve, reject) => {
        const s = tls.connect({ port, host: '127.0.0.1', servername: 'rot.test', ca: certs!.read('ca.crt') }, () => resolve(s));
        s.once('error', reject);
      });
    const get = (s: tls.TLSSocket): Promise<string> =>
      new Promise((resolve) => {
        let buf = '';
        const onData = (d: Buffer): void => {
          buf += d.toString();
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) return;
          const len = Number(/content-length: (\d+)/i.exec(buf)![1]);
          if (buf.length >= end + 4 + len) {
            s.off('data', onData);
            resolve(buf.split('\r\n')[0]!);
          }
        };
        s.on('data', onData);
        s.write('GET / HTTP/1.1\r\nHost: rot.test\r\n\r\n');
      });
    const kept = await open();
    t.teardown(() => kept.destroy());
    const serial1 = serial(kept);
    t.equal(await get(kept), 'HTTP/1.1 200 OK', 'keep-alive client served');

    vol.swap(fs.readFileSync(v2.cert), fs.readFileSync(v2.key));
    await waitFor(() => g.logs.find((l) => l.msg === 'TLS certificate reloaded: new handshakes use it') !== undefined, 5000, 'reload line');
    const fresh = await open();
    const serial2 = serial(fresh);
    fresh.destroy();
    t.not(serial2, serial1, 'a new handshake gets the new certificate');
    t.equal(serial2, new X509Certificate(fs.readFileSync(v2.cert)).serialNumber, 'the one swapped in');
    t.equal(await get(kept), 'HTTP/1.1 200 OK', 'the connection opened before the swap is still served');
    // ipgate_config_last_reload_successful{kind="certificate"} (issue 32 item 2): 1 and the swap's time.
    const certReload = /ipgate_config_last_reload_successful\{kind="certificate",source="web\/rot"\} (\d)/;
    const certAt = /ipgate_config_last_reload_successful_timestamp_seconds\{kind="certificate",source="web\/rot"\} ([\d.e+]+)/;
    const swapped = await g.app.metrics.scrape();
    t.equal(certReload.exec(swapped)?.[1], '1', "the pair's last reload: good");
    const swappedAt = Number(certAt.exec(swapped)?.[1]);
    t.ok(Math.abs(swappedAt - Date.now() / 1000) < 30, 'at the swap');

    // A corrupt replacement: a truncated certificate with the v2 key.
    vol.swap(fs.readFileSync(v2.cert).subarray(0, 200), fs.readFileSync(v2.key));
    await waitFor(
      () => g.logs.find((l) => l.msg === 'TLS certificate reload refused: the one in force stays') !== undefined,
      5000,
      'refusal line',
    );
    const refusal = g.logs.find((l) => l.msg === 'TLS certificate reload refused: the one in force stays')!;
    t.equal(refusal.file, vol.cert, 'the line names the file');
    t.match(refusal.reason, /does not parse|no PEM certificate/, 'and says why');
    t.equal(refusal.level, 'error');
    // A key that is not the certificate's.
    vol.swap(fs.readFileSync(v2.cert), fs.readFileSync(v1.key));
    await waitFor(
      () => g.logs.lines.filter((l) => l.msg === 'TLS certificate reload refused: the one in force stays').length === 2,
      5000,
      'second refusal',
    );
    t.match(
      g.logs.lines.filter((l) => l.msg === 'TLS certificate reload refused: the one in force stays')[1]!.reason,
      /is not the private key of the certificate/,
    );
    const after = await open();
    t.equal(serial(after), serial2, 'new handshakes still get the last good certificate');
    after.destroy();
    const scrape = await g.app.metrics.scrape();
    t.match(scrape, /ipgate_tls_certificate_reloads_total\{listener="web",result="ok"\} 1/);
    t.match(scrape, /ipgate_tls_certificate_reloads_total\{listener="web",result="refused"\} 2/);
    const notAfter = Math.floor(Date.parse(new X509Certificate(fs.readFileSync(v2.cert)).validTo) / 1000);
    t.match(scrape, new RegExp(`ipgate_tls_certificate_expiry_timestamp_seconds\\{listener="web",certificate="rot"\\} ${notAfter}`));
    t.equal(certReload.exec(scrape)?.[1], '0', 'refused: ipgate_config_last_reload_successful 0');
    t.equal(Number(certAt.exec(scrape)?.[1]), swappedAt, 'its last success time kept');
    // The good pair put back: 1 again.
    vol.swap(fs.readFileSync(v2.cert), fs.readFileSync(v2.key));
    await waitFor(async () => certReload.exec(await g.app.metrics.scrape())?.[1] === '1', 5000, 'good again');
  },
);

t.test('nginx as a TLS client in front of ipgate', { skip: skip || missing('nginx') }, async (t) => {
  const g = await gate(t, fourCerts());
  const port = g.port();
  const front = await freePort();
  const nginx = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  server {
    listen 127.0.0.1:${front};
    location / {
      proxy_pass https://127.0.0.1:${port};
      proxy_http_version 1.1;
      proxy_set_header Host web.test;
      proxy_ssl_server_name on;
      proxy_ssl_name web.test;
      proxy_ssl_verify on;
      proxy_ssl_trusted_certificate ${certs!.file('ca.crt')};
    }
  }
}`,
    [front],
  );
  t.teardown(() => nginx.stop());
  const r = await run('curl', ['-sS', `http://127.0.0.1:${front}/via-nginx`]);
  const headers = JSON.parse(r.out) as Record<string, string>;
  t.equal(headers['x-forwarded-proto'], 'https', 'the backend hears https');
  t.equal(headers['x-real-ip'], '127.0.0.1', 'nginx is the client (untrusted peer)');
  await waitFor(() => g.logs.find((l) => l.msg === 'access' && l.path === '/via-nginx') !== undefined, 5000, 'access line');
  t.match(
    g.logs.find((l) => l.msg === 'access' && l.path === '/via-nginx')!.tls,
    { sni: 'web.test' },
    'nginx sent SNI (proxy_ssl_server_name on)',
  );
});

t.test(
  'HAProxy sends PROXY v2 before the ClientHello: the backend sees the real client',
  { skip: skip || missing('haproxy') },
  async (t) => {
    const g = await gate(t, fourCerts(), { proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.1/32'] } });
    const port = g.port();
    const front = await freePort();
    const haproxy = await startHaproxy(
      `frontend f
  mode tcp
  bind 127.0.0.1:${front}
  default_backend b
backend b
  mode tcp
  server ipgate 127.0.0.1:${port} send-proxy-v2
`,
      [front],
    );
    t.teardown(() => haproxy.stop());
    const r = await run('curl', [
      '-sS',
      '--interface',
      '127.0.0.5',
      '--cacert',
      certs!.file('ca.crt'),
      '--resolve',
      `web.test:${front}:127.0.0.1`,
      `https://web.test:${front}/through-haproxy`,
    ]);
    t.equal(r.code, 0, r.err);
    const headers = JSON.parse(r.out) as Record<string, string>;
    t.equal(headers['x-real-ip'], '127.0.0.5', 'X-Real-IP is the client behind HAProxy');
    t.equal(headers['x-forwarded-for'], '127.0.0.5');
    t.equal(headers['x-forwarded-proto'], 'https');
    t.equal(handshakes(g)['ok/TLSv1.3'], 1, 'the handshake after the PROXY header succeeded');
  },
);

t.test('a PROXY v2 header and the ClientHello in one segment: the bytes after the header reach the handshake', { skip }, async (t) => {
  const g = await gate(t, fourCerts(), { proxyProtocol: { mode: 'required', trustedSources: ['127.0.0.1/32'] } }, ['198.51.100.0/24']);
  const port = g.port();
  const header = encodeProxyV2({ address: '198.51.100.23', port: 40001 }, { address: '203.0.113.1', port: 443 });
  const raw = net.connect({ port, host: '127.0.0.1' });
  await new Promise((r) => raw.once('connect', r));
  // Corked: the header and the ClientHello the TLS client writes go out in one writev.
  raw.cork();
  raw.write(header);
  const s = tls.connect({ socket: raw, servername: 'ec.test', ca: certs!.read('ca.crt') });
  process.nextTick(() => raw.uncork());
  await new Promise<void>((resolve, reject) => {
    s.once('secureConnect', () => resolve());
    s.once('error', reject);
  });
  s.write('GET /one-segment HTTP/1.1\r\nHost: ec.test\r\nConnection: close\r\n\r\n');
  let body = '';
  s.on('data', (d: Buffer) => {
    body += d.toString();
  });
  await new Promise((r) => s.once('close', r));
  const headers = JSON.parse(body.slice(body.indexOf('\r\n\r\n') + 4)) as Record<string, string>;
  t.equal(headers['x-real-ip'], '198.51.100.23', "the client is the PROXY header's source");
  t.equal(headers['x-forwarded-port'], '443', "X-Forwarded-Port is the port the client connected to (the header's destination)");
  t.equal(headers['x-forwarded-proto'], 'https');
});
