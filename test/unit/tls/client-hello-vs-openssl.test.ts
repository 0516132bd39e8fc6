/**
 * Differential test: readClientHello against OpenSSL's own ClientHello parser. The router picks
 * the backend and the allowlist from our SNI, the backend reads the same bytes with its TLS
 * library (docs/routes-and-sni.md, "Strict, because the backend reads the same bytes"); so
 * whenever OpenSSL reads a server name or an ALPN list from a hello we accept, ours must be the
 * same (after our lower-casing and trailing-dot removal). We may refuse more than OpenSSL does;
 * we must never read a different name.
 *
 * Real hellos come from Node's TLS client (OpenSSL) captured on a plain TCP server on loopback;
 * seeded mutations of them (TLS_DIFF_SEED to replay) and the fixture vectors are then written to
 * a Node TLS server on loopback whose SNICallback / ALPNCallback record what OpenSSL parsed.
 */
import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { readClientHello } from '../../../src/tls/client-hello';
import { asciiLower } from '../../../src/route/host-name';
import { prng } from '../../helpers/prng';
import { FIXTURES } from '../../helpers/root';
import { VALID } from '../../fixtures/tls/client-hello-vectors';

const SEED = Number(process.env.TLS_DIFF_SEED ?? Date.now() % 0x7fffffff);
const MUTANTS = Number(process.env.TLS_DIFF_MUTANTS ?? 150);
const rand = prng(SEED);
const int = (n: number): number => Math.floor(rand() * n);
const TLS_DIR = path.join(FIXTURES, 'k8s/tls');

async function listen(server: net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

/** The bytes Node's TLS client (OpenSSL) sends first, read until the reader has a whole hello. */
async function captureNodeHello(options: tls.ConnectionOptions): Promise<Buffer> {
  const server = net.createServer();
  const port = await listen(server);
  const client = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...options });
  client.on('error', () => {});
  try {
    const [socket] = (await once(server, 'connection')) as [net.Socket];
    let acc = Buffer.alloc(0);
    for await (const chunk of socket) {
      acc = Buffer.concat([acc, chunk as Buffer]);
      if (readClientHello(acc).kind !== 'need_more') break;
    }
    socket.destroy();
    const r = readClientHello(acc);
    return acc.subarray(0, r.kind === 'done' ? r.length : acc.length);
  } finally {
    client.destroy();
    server.close();
  }
}

interface Seen {
  sni: string | null;
  alpn: string[] | null;
}

t.test(`readClientHello reads the SNI and ALPN OpenSSL reads (seed ${SEED}; replay with TLS_DIFF_SEED=${SEED})`, async (t) => {
  const captures = [
    await captureNodeHello({ servername: 'diff.example', ALPNProtocols: ['h2', 'http/1.1'] }),
    await captureNodeHello({ servername: 'Mixed.Case.Example', ALPNProtocols: ['http/1.1'] }),
    await captureNodeHello({ servername: 'tls12.example', maxVersion: 'TLSv1.2', ALPNProtocols: ['x'] }),
  ];
  const inputs: { name: string; bytes: Buffer }[] = captures.map((bytes, k) => ({ name: `node capture ${k}`, bytes }));
  for (const row of VALID) inputs.push({ name: row.name, bytes: row.bytes });
  for (let k = 0; k < MUTANTS; k++) {
    const base = captures[int(captures.length)]!;
    const bytes = Buffer.from(base);
    // Aim at the extensions (where SNI and ALPN live): bytes past the fixed part of the hello.
    const at = 60 + int(bytes.length - 60);
    bytes[at] = rand() < 0.5 ? int(256) : (bytes[at]! + (rand() < 0.5 ? 1 : 255)) & 0xff;
    inputs.push({ name: `mutant ${k} (byte ${at})`, bytes });
  }

  let seen: Seen = { sni: null, alpn: null };
  const context = tls.createSecureContext({
    cert: fs.readFileSync(path.join(TLS_DIR, 'server.crt')),
    key: fs.readFileSync(path.join(TLS_DIR, 'server.key')),
  });
  const server = tls.createServer({
    SNICallback: (name, cb) => {
      seen.sni = name;
      cb(null, context);
    },
    // OpenSSL calls this while it processes the hello (before a HelloRetryRequest); SNICallback
    // runs only when a certificate is chosen, so the name is taken here too.
    ALPNCallback: ({ servername, protocols }) => {
      seen.alpn = protocols;
      if (typeof servername === 'string' && servername.length > 0) seen.sni = servername;
      return protocols[0];
    },
    cert: fs.readFileSync(path.join(TLS_DIR, 'server.crt')),
    key: fs.readFileSync(path.join(TLS_DIR, 'server.key')),
  });
  server.on('tlsClientError', () => {});
  const port = await listen(server);

  const differences: string[] = [];
  let sniCompared = 0;
  let alpnCompared = 0;
  let strictlyRefused = 0;
  try {
    for (const input of inputs) {
      seen = { sni: null, alpn: null };
      const ours = readClientHello(input.bytes);
      const socket = net.connect({ host: '127.0.0.1', port });
      await once(socket, 'connect');
      socket.write(input.bytes);
      // OpenSSL has processed the whole hello once the server answers (ServerHello, HelloRetryRequest
      // or an alert) or closes; nothing from the server is read before that.
      await Promise.race([once(socket, 'data'), once(socket, 'close')]);
      socket.destroy();
      if (seen.sni !== null) {
        let theirs = asciiLower(seen.sni);
        if (theirs.endsWith('.')) theirs = theirs.slice(0, -1);
        if (ours.kind === 'done') {
          sniCompared++;
          if (ours.sni !== theirs)
            differences.push(`${input.name}: SNI ours ${JSON.stringify(ours.sni)}, OpenSSL ${JSON.stringify(seen.sni)}`);
        } else if (ours.kind === 'error') {
          strictlyRefused++;
        } else {
          differences.push(`${input.name}: OpenSSL read a name from a hello we call incomplete`);
        }
      } else if (ours.kind === 'done' && ours.sni !== null && seen.alpn !== null) {
        // OpenSSL got as far as ALPN without seeing a server name that we saw.
        differences.push(`${input.name}: we read SNI ${JSON.stringify(ours.sni)}, OpenSSL none`);
      }
      if (seen.alpn !== null && ours.kind === 'done') {
        alpnCompared++;
        // Node hands ALPNCallback its ids decoded as 'ascii' (high bit dropped); ours are latin1
        // (lossless), so compare through the same decoding.
        const ourAscii = ours.alpn.map((id) => Buffer.from(id, 'latin1').toString('ascii'));
        if (JSON.stringify(ourAscii) !== JSON.stringify(seen.alpn))
          differences.push(`${input.name}: ALPN ours ${JSON.stringify(ours.alpn)}, OpenSSL ${JSON.stringify(seen.alpn)}`);
      }
    }
  } finally {
    server.close();
  }
  for (const d of differences) t.comment(d);
  t.same(differences, [], `no hello read differently (seed ${SEED})`);
  t.ok(
    sniCompared >= captures.length,
    `${sniCompared} server names compared with OpenSSL's, ${alpnCompared} ALPN lists; ${strictlyRefused} hellos OpenSSL took that we refuse`,
  );
  t.ok(alpnCompared >= captures.length, 'ALPN compared for at least the captures');
});
