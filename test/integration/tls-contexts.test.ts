/**
 * What each TLS handshake's context decides (docs/tls.md "Certificates", "Client certificates",
 * "Renegotiation"), over real sockets with real peers: curl and `openssl s_client` as clients,
 * nginx as the reference server for renegotiation, certificates made with the openssl CLI.
 *
 *   - The certificate of the name asked for, whatever the key types and their order: on Node 20
 *     an SNICallback's context was applied by copying its certificate onto the connection, and
 *     the default pair's certificate of another key type stayed beside it (issue 27).
 */
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import t, { type Test } from 'tap';
import { CertDir } from '../helpers/certs';
import { startIpgate, type Started } from '../helpers/ipgate';
import { closed, waitFor } from '../helpers/net';
import { missing } from '../helpers/peers';
import { run, type RunResult } from '../helpers/tls-nginx';
import type { TlsTerminator } from '../../src/tls/terminate';

const skip = missing('openssl') || missing('curl');

const certs = skip ? null : new CertDir();
const ec = certs?.issue('ec', { cn: 'ec.example', dns: ['ec.example'], kind: 'ec' });
const rsa = certs?.issue('rsa', { cn: 'rsa.example', dns: ['rsa.example'], kind: 'rsa' });

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
  const g = await startIpgate({
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${up}`], tls: tlsBlock }],
  }, 'debug');
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
          const r = await run('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-brief', version, '-sigalgs', sigalgs,
            ...(row.name === null ? ['-noservername'] : ['-servername', row.name])]);
          t.equal(peerCn(r), row.want, `${order.desc}, ${version}, ${sigalgs === RSA_FIRST ? 'RSA-PSS' : 'ECDSA'} preferred, SNI ${row.name ?? 'none'}: ${row.want}'s certificate`);
        }
      }
      // A client that verifies RSA signatures only, asking for the ECDSA name: no certificate of
      // another name answers for it; the handshake fails, as with nginx's context switch.
      const rsaOnly = await run('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-brief', version, '-sigalgs', 'rsa_pss_rsae_sha256:rsa_pkcs1_sha256',
        '-servername', 'ec.example']);
      t.equal(peerCn(rsaOnly), null, `${order.desc}, ${version}, an RSA-only client asking for ec.example is shown no certificate (${peerCn(rsaOnly)})`);
    }
    // curl, which verifies the name: both names over both versions.
    for (const name of ['rsa.example', 'ec.example']) {
      for (const version of [['--tlsv1.2', '--tls-max', '1.2'], ['--tlsv1.3']]) {
        const r = await run('curl', ['-sS', ...version, '--cacert', certs!.file('ca.crt'), '--resolve', `${name}:${port}:127.0.0.1`,
          '-o', '/dev/null', '-w', '%{http_code} %{ssl_verify_result}', `https://${name}:${port}/`]);
        t.equal(r.stdout, '200 0', `${order.desc}, curl ${version[0]} ${name}: the name verified (${r.stderr.trim()})`);
      }
    }
  }
});

t.test('a ClientHello split into one-byte writes: the certificate of its name, the handshake timeout still applies', { skip }, async (t) => {
  const g = await gate(t, { certificates: [{ cert: ec!.cert, key: ec!.key }, { cert: rsa!.cert, key: rsa!.key }], handshakeTimeoutMs: 2000 });
  // A real TLS 1.2 ClientHello for rsa.example, caught from Node's client by a listener that
  // keeps the first bytes it gets (TLS 1.2: the server's Certificate message is readable).
  const catcher = net.createServer();
  await new Promise<void>((r) => catcher.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => catcher.close(() => r())));
  const helloBytes = new Promise<Buffer>((resolve) => catcher.once('connection', (s) => s.once('data', (d: Buffer) => { resolve(d); s.destroy(); })));
  const c = tls.connect({ port: (catcher.address() as net.AddressInfo).port, host: '127.0.0.1', servername: 'rsa.example', maxVersion: 'TLSv1.2' });
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
  s.on('data', (d: Buffer) => { got = Buffer.concat([got, d]); });
  for (let i = 0; i < hello.length; i++) {
    await new Promise<void>((r) => s.write(hello.subarray(i, i + 1), () => r()));
  }
  await waitFor(() => got.includes(rsaDer), 5000, 'the server\'s first flight carries the rsa.example certificate');
  t.notOk(got.includes(ecDer), `the ${hello.length}-byte hello, one byte per write, got rsa.example's certificate and not the default`);
  // The client never finishes: the handshake timeout closes it and counts it.
  const ms = await closed(s, 5000);
  t.ok(ms >= 0, 'closed by the handshake timeout');
  await waitFor(() => (Object.fromEntries(stage(g).stats.handshakes)['tls_handshake_timeout/unknown'] ?? 0) === 1, 5000, 'counted');
  t.pass('counted as tls_handshake_timeout');
});
