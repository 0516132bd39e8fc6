/**
 * What each TLS handshake's context decides (docs/tls.md "Certificates", "Client certificates",
 * "Renegotiation"), over real sockets with real peers: curl and `openssl s_client` as clients,
 * nginx as the reference server for renegotiation, certificates made with the openssl CLI.
 *
 *   - The certificate of the name asked for, whatever the key types and their order: on Node 20
 *     an SNICallback's context was applied by copying its certificate onto the connection, and
 *     the default pair's certificate of another key type stayed beside it (issue 27).
 *   - Sessions resume on a client-certificate listener (a session id context is set), and one
 *     made before a client-CA change does not resume after it.
 *   - A client-initiated TLS 1.2 renegotiation is refused (no_renegotiation, as nginx), counted
 *     and logged at debug.
 */
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import t, { type Test } from 'tap';
import { CertDir } from '../helpers/certs';
import { startIpgate, tmpDir, type Started } from '../helpers/ipgate';
import { closed, freePort, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startNginx } from '../helpers/peers';
import { run, type RunResult } from '../helpers/tls-nginx';
import type { TlsTerminator } from '../../src/tls/terminate';

const skip = missing('openssl') || missing('curl');

const certs = skip ? null : new CertDir();
const ec = certs?.issue('ec', { cn: 'ec.example', dns: ['ec.example'], kind: 'ec' });
const rsa = certs?.issue('rsa', { cn: 'rsa.example', dns: ['rsa.example'], kind: 'rsa' });
if (certs !== null) certs.ca('other');
const client = certs?.issue('client', { cn: 'client-one', client: true, chain: false });

/** A backend that answers `ok`, closed at teardown. */
async function backend(t: Test): Promise<number> {
  const server = http.createServer((_req, res) => res.end('ok\n'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

function stage(g: Started): TlsTerminator {
  return (g.app.listeners[0] as unknown as { tls: TlsTerminator }).tls;
}

async function gate(t: Test, tlsBlock: Record<string, unknown>): Promise<Started> {
  const up = await backend(t);
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${up}`], tls: tlsBlock }],
    },
    'debug',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

/** The subject CN of the certificate the server presented, per `s_client -brief`; null: none. */
function peerCn(r: RunResult): string | null {
  return /Peer certificate: .*CN ?= ?([^\s,]+)/.exec(r.stderr + r.stdout)?.[1] ?? null;
}

t.test('the certificate of the name asked for, whatever the key types and their order', { skip }, async (t) => {
  const ecPair = { cert: ec!.cert, key: ec!.key, name: 'ec' };
  const rsaPair = { cert: rsa!.cert, key: rsa!.key, name: 'rsa' };
  const orders = [
    { desc: 'ECDSA first', tls: { certificates: [ecPair, rsaPair] }, first: 'ec.example' },
    { desc: 'RSA first', tls: { certificates: [rsaPair, ecPair] }, first: 'rsa.example' },
  ];
  // A client's signature algorithms decide which of the certificates on a connection OpenSSL
  // signs with: an ECDSA-preferring client (the default) and one preferring RSA-PSS.
  const ECDSA_FIRST = 'ecdsa_secp256r1_sha256:rsa_pss_rsae_sha256:rsa_pkcs1_sha256';
  const RSA_FIRST = 'rsa_pss_rsae_sha256:rsa_pkcs1_sha256:ecdsa_secp256r1_sha256';
  for (const order of orders) {
    const g = await gate(t, order.tls);
    const port = g.port();
    for (const version of ['-tls1_2', '-tls1_3']) {
      for (const sigalgs of [ECDSA_FIRST, RSA_FIRST]) {
        const rows: { name: string | null; want: string }[] = [
          { name: 'rsa.example', want: 'rsa.example' },
          { name: 'ec.example', want: 'ec.example' },
          { name: 'unknown.example', want: order.first },
          { name: null, want: order.first },
        ];
        for (const row of rows) {
          const r = await run('openssl', [
            's_client',
            '-connect',
            `127.0.0.1:${port}`,
            '-brief',
            version,
            '-sigalgs',
            sigalgs,
            ...(row.name === null ? ['-noservername'] : ['-servername', row.name]),
          ]);
          t.equal(
            peerCn(r),
            row.want,
            `${order.desc}, ${version}, ${sigalgs === RSA_FIRST ? 'RSA-PSS' : 'ECDSA'} preferred, SNI ${row.name ?? 'none'}: ${row.want}'s certificate`,
          );
        }
      }
      // A client that verifies RSA signatures only, asking for the ECDSA name: no certificate of
      // another name answers for it; the handshake fails, as with nginx's context switch.
      const rsaOnly = await run('openssl', [
        's_client',
        '-connect',
        `127.0.0.1:${port}`,
        '-brief',
        version,
        '-sigalgs',
        'rsa_pss_rsae_sha256:rsa_pkcs1_sha256',
        '-servername',
        'ec.example',
      ]);
      t.equal(
        peerCn(rsaOnly),
        null,
        `${order.desc}, ${version}, an RSA-only client asking for ec.example is shown no certificate (${peerCn(rsaOnly)})`,
      );
    }
    // curl, which verifies the name: both names over both versions.
    for (const name of ['rsa.example', 'ec.example']) {
      for (const version of [['--tlsv1.2', '--tls-max', '1.2'], ['--tlsv1.3']]) {
        const r = await run('curl', [
          '-sS',
          ...version,
          '--cacert',
          certs!.file('ca.crt'),
          '--resolve',
          `${name}:${port}:127.0.0.1`,
          '-o',
          '/dev/null',
          '-w',
          '%{http_code} %{ssl_verify_result}',
          `https://${name}:${port}/`,
        ]);
        t.equal(r.stdout, '200 0', `${order.desc}, curl ${version[0]} ${name}: the name verified (${r.stderr.trim()})`);
      }
    }
  }
});

/** `openssl s_client` with the client certificate; one request; the session written or read. */
function sClientSession(port: number, version: string, session: { out?: string; in?: string }, cert = client!): Promise<RunResult> {
  return run(
    'openssl',
    [
      's_client',
      '-connect',
      `127.0.0.1:${port}`,
      '-servername',
      'ec.example',
      version,
      '-CAfile',
      certs!.file('ca.crt'),
      '-cert',
      cert.cert,
      '-key',
      cert.key,
      '-ign_eof',
      ...(session.out !== undefined ? ['-sess_out', session.out] : []),
      ...(session.in !== undefined ? ['-sess_in', session.in] : []),
    ],
    // s_client reads until ipgate closes (Connection: close), so a TLS 1.3 ticket, sent after the
    // handshake, has arrived before it writes -sess_out.
    'GET / HTTP/1.1\r\nHost: ec.example\r\nConnection: close\r\n\r\n',
  );
}

/** "New, TLSv1.3, Cipher is ..." / "Reused, ...": s_client's session line. */
function sessionLine(r: RunResult): string {
  return /^(New|Reused), (TLSv[\d.]+)/m.exec(r.stdout)?.[1] ?? `no session line (exit ${r.code}): ${r.stderr.trim().split('\n').pop()}`;
}

t.test(
  'client certificates: sessions resume (curl, s_client), and none made before a client-CA change resumes after it',
  { skip },
  async (t) => {
    const dir = tmpDir('ipgate-client-ca-');
    const caFile = path.join(dir, 'client-ca.pem');
    fs.writeFileSync(caFile, certs!.read('ca.crt'));
    const g = await gate(t, {
      certificates: [{ cert: ec!.cert, key: ec!.key }],
      clientCA: caFile,
      clientCertificate: 'required',
      reloadIntervalMs: 100,
    });
    const port = g.port();
    const s = stage(g);

    // curl keeps the session of its first connection and offers it on the next (each request
    // closes its connection): 200, 000, 200 on Node 20 without a session id context, a silent full
    // handshake on Node 24. (curl uses a TLS 1.3 session once, and Node's server, unlike nginx,
    // sends no new ticket on a resumed connection: the third connection makes a new session.)
    // HTTP/1.1: over HTTP/2 (ALPN h2, on by default) curl would send all three on one connection.
    const curl = await run('curl', [
      '-sS',
      '--http1.1',
      '--cacert',
      certs!.file('ca.crt'),
      '--cert',
      client!.cert,
      '--key',
      client!.key,
      '--resolve',
      `ec.example:${port}:127.0.0.1`,
      '-H',
      'Connection: close',
      '-o',
      '/dev/null',
      '-o',
      '/dev/null',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code} ',
      `https://ec.example:${port}/a`,
      `https://ec.example:${port}/b`,
      `https://ec.example:${port}/c`,
    ]);
    t.equal(curl.stdout, '200 200 200 ', `curl: three requests over three connections served (${curl.stderr.trim()})`);
    const accessTls = (p: string): { resumed?: boolean; clientCert?: string } | undefined =>
      g.logs.find((l) => l.msg === 'access' && l.path === p)?.tls as { resumed?: boolean; clientCert?: string } | undefined;
    await waitFor(() => accessTls('/c') !== undefined, 5000, 'three access lines');
    t.match(accessTls('/a'), { resumed: false, clientCert: 'CN=client-one' }, 'the first connection: a full handshake');
    t.match(
      accessTls('/b'),
      { resumed: true, clientCert: 'CN=client-one' },
      'the second resumed its session, with the verified client certificate',
    );
    t.equal(s.stats.resumed, 1, 'counted as resumed');

    const sessions: Record<string, string> = {};
    for (const version of ['-tls1_2', '-tls1_3']) {
      sessions[version] = path.join(dir, `session${version}.pem`);
      const first = await sClientSession(port, version, { out: sessions[version] });
      t.equal(sessionLine(first), 'New', `s_client ${version}: a full handshake first`);
      t.match(first.stdout, /HTTP\/1\.1 200/, `s_client ${version}: served`);
      const again = await sClientSession(port, version, { in: sessions[version] });
      t.equal(sessionLine(again), 'Reused', `s_client ${version}: the saved session resumes`);
      t.match(again.stdout, /HTTP\/1\.1 200/, `s_client ${version}: served on the resumed session`);
    }

    // The CA bundle changes: the same CA plus another. The client still verifies, but a session
    // made under the old bundle is not resumed: a full handshake verifies its certificate again.
    const resumedBefore = s.stats.resumed;
    fs.writeFileSync(caFile, Buffer.concat([certs!.read('ca.crt'), certs!.read('other.crt')]));
    await waitFor(() => g.logs.find((l) => l.msg === 'TLS client CA reloaded') !== undefined, 5000, 'the CA reloaded');
    for (const version of ['-tls1_2', '-tls1_3']) {
      const after = await sClientSession(port, version, { in: sessions[version] });
      t.equal(sessionLine(after), 'New', `s_client ${version}: the session from before the CA change is not resumed`);
      t.match(after.stdout, /HTTP\/1\.1 200/, `s_client ${version}: served after a full handshake`);
    }
    t.equal(s.stats.resumed, resumedBefore, 'no resumption counted across the CA change');

    // Sessions made under the new bundle resume again; then the bundle drops the client's CA:
    // such a session must not let the client in.
    const fresh = path.join(dir, 'session-fresh.pem');
    await sClientSession(port, '-tls1_3', { out: fresh });
    t.equal(sessionLine(await sClientSession(port, '-tls1_3', { in: fresh })), 'Reused', 'a session under the new bundle resumes');
    const invalidBefore = Object.fromEntries(s.stats.handshakes)['tls_client_cert_invalid/TLSv1.3'] ?? 0;
    fs.writeFileSync(caFile, certs!.read('other.crt'));
    await waitFor(() => g.logs.lines.filter((l) => l.msg === 'TLS client CA reloaded').length === 2, 5000, 'the CA reloaded again');
    const refused = await sClientSession(port, '-tls1_3', { in: fresh });
    t.notMatch(refused.stdout, /HTTP\/1\.1 200/, "a session from before the client's CA was removed does not get the client in");
    t.not(sessionLine(refused), 'Reused', 'and is not resumed');
    await waitFor(
      () => (Object.fromEntries(s.stats.handshakes)['tls_client_cert_invalid/TLSv1.3'] ?? 0) === invalidBefore + 1,
      5000,
      'counted tls_client_cert_invalid',
    );
    t.pass('the full handshake verified the certificate against the new CA and refused it');
  },
);

interface Interactive {
  /** Everything s_client wrote (stdout and stderr). */
  output: () => string;
  write: (s: string) => void;
  exited: Promise<number | null>;
}

/** An interactive `openssl s_client` (command letters on: `R` renegotiates), killed at teardown. */
function interactive(t: Test, port: number): Interactive {
  const child = spawn(
    'openssl',
    ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'ec.example', '-tls1_2', '-CAfile', certs!.file('ca.crt')],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  child.stdin.on('error', () => {}); // s_client may have exited (EPIPE)
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { output: () => out, write: (s) => child.stdin.write(s), exited };
}

/**
 * The renegotiation exchange against a server on `port`: a request on the first handshake, `R`,
 * then a second request; s_client ends either way (the server closes after the second request,
 * or s_client gives up on the refused renegotiation).
 */
async function renegotiate(t: Test, port: number): Promise<{ code: number | null; output: string }> {
  const c = interactive(t, port);
  await waitFor(() => /Verify return code: 0/.test(c.output()), 10_000, 's_client handshake');
  c.write('GET /first HTTP/1.1\r\nHost: ec.example\r\n\r\n');
  await waitFor(() => /HTTP\/1\.1 200/.test(c.output()), 10_000, 'first response');
  c.write('R\n');
  await waitFor(() => c.output().includes('RENEGOTIATING'), 10_000, 's_client renegotiating');
  c.write('GET /second HTTP/1.1\r\nHost: ec.example\r\nConnection: close\r\n\r\n');
  const code = await c.exited;
  return { code, output: c.output() };
}

t.test(
  'a client-initiated TLS 1.2 renegotiation is refused as nginx refuses it, counted and logged at debug',
  { skip: skip || missing('nginx') },
  async (t) => {
    const g = await gate(t, { certificates: [{ cert: ec!.cert, key: ec!.key }] });
    const port = g.port();
    const got = await renegotiate(t, port);
    t.match(got.output, /no renegotiation/, 's_client: the server refused (no_renegotiation alert)');
    t.not(got.code, 0, 's_client gives up');
    t.equal((got.output.match(/HTTP\/1\.1 200/g) ?? []).length, 1, 'only the request before the attempt was served');
    t.equal(stage(g).stats.renegotiationsRefused, 1, 'counted once');
    t.match(await g.app.metrics.scrape(), /ipgate_tls_renegotiations_refused_total\{listener="web"\} 1/);
    const line = g.logs.find((l) => l.msg === 'TLS renegotiation refused');
    t.match(line, { level: 'debug', client: '127.0.0.1', peer: '127.0.0.1' }, 'one debug line with the client');
    t.same(Object.fromEntries(stage(g).stats.handshakes), { 'ok/TLSv1.2': 1 }, 'the refused attempt is no handshake of its own');

    // nginx (1.22, OpenSSL 3.0), the reference: the same answer to the same exchange.
    const front = await freePort();
    const nginx = await startNginx(
      `http {
  ${nginxHttpPreamble()}
  server {
    listen 127.0.0.1:${front} ssl;
    ssl_certificate ${ec!.cert};
    ssl_certificate_key ${ec!.key};
    return 200 "ok\\n";
  }
}`,
      [front],
    );
    t.teardown(() => nginx.stop());
    const ref = await renegotiate(t, front);
    t.match(ref.output, /no renegotiation/, 'nginx: the same no_renegotiation refusal');
    t.equal((ref.output.match(/HTTP\/1\.1 200/g) ?? []).length, 1, 'nginx: only the first request served');
  },
);

t.test(
  'a ClientHello split into one-byte writes: the certificate of its name, the handshake timeout still applies',
  { skip },
  async (t) => {
    const g = await gate(t, {
      certificates: [
        { cert: ec!.cert, key: ec!.key },
        { cert: rsa!.cert, key: rsa!.key },
      ],
      handshakeTimeoutMs: 2000,
    });
    // A real TLS 1.2 ClientHello for rsa.example, caught from Node's client by a listener that
    // keeps the first bytes it gets (TLS 1.2: the server's Certificate message is readable).
    const catcher = net.createServer();
    await new Promise<void>((r) => catcher.listen(0, '127.0.0.1', r));
    t.teardown(() => new Promise<void>((r) => catcher.close(() => r())));
    const helloBytes = new Promise<Buffer>((resolve) =>
      catcher.once('connection', (s) =>
        s.once('data', (d: Buffer) => {
          resolve(d);
          s.destroy();
        }),
      ),
    );
    const c = tls.connect({
      port: (catcher.address() as net.AddressInfo).port,
      host: '127.0.0.1',
      servername: 'rsa.example',
      maxVersion: 'TLSv1.2',
    });
    c.on('error', () => {});
    const hello = await helloBytes;
    c.destroy();
    const rsaDer = new X509Certificate(fs.readFileSync(rsa!.cert)).raw;
    const ecDer = new X509Certificate(fs.readFileSync(ec!.cert)).raw;

    const s = net.connect({ port: g.port(), host: '127.0.0.1' });
    s.setNoDelay(true);
    s.on('error', () => {});
    await new Promise((r) => s.once('connect', r));
    let got = Buffer.alloc(0);
    s.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
    });
    for (let i = 0; i < hello.length; i++) {
      await new Promise<void>((r) => s.write(hello.subarray(i, i + 1), () => r()));
    }
    await waitFor(() => got.includes(rsaDer), 5000, "the server's first flight carries the rsa.example certificate");
    t.notOk(got.includes(ecDer), `the ${hello.length}-byte hello, one byte per write, got rsa.example's certificate and not the default`);
    // The client never finishes: the handshake timeout closes it and counts it.
    const ms = await closed(s, 5000);
    t.ok(ms >= 0, 'closed by the handshake timeout');
    await waitFor(() => (Object.fromEntries(stage(g).stats.handshakes)['tls_handshake_timeout/unknown'] ?? 0) === 1, 5000, 'counted');
    t.pass('counted as tls_handshake_timeout');
  },
);
