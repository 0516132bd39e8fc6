/**
 * Real TLS backends for SNI routing tests: nginx `listen ... ssl` on loopback, each server with its
 * own self-signed certificate made here with the openssl CLI, answering every request with what it
 * saw: the SNI it got ($ssl_server_name), its own name, and the PROXY header's client address
 * when it listens with `proxy_protocol`. Clients: curl and openssl s_client (real peers).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { tmpDir } from './ipgate';
import { freePort } from './net';
import { nginxHttpPreamble, startNginx, type Peer } from './peers';

export interface Cert {
  cert: string;
  key: string;
}

/** A self-signed ECDSA P-256 certificate for `names` (CN = the first), valid for a day. */
export function makeCert(dir: string, names: readonly string[]): Cert {
  const base = path.join(dir, names[0]!.replace(/\*/g, 'star'));
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-days',
      '1',
      '-keyout',
      `${base}.key`,
      '-out',
      `${base}.crt`,
      '-subj',
      `/CN=${names[0]}`,
      '-addext',
      `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl req: ${r.stderr}`);
  return { cert: `${base}.crt`, key: `${base}.key` };
}

export interface TlsServer {
  /** The backend's own name, in every answer (`backend=<id>`). */
  id: string;
  /** Names in its certificate. */
  names: string[];
  /** Listen with `proxy_protocol` (answers carry `pp=$proxy_protocol_addr`). */
  proxyProtocol?: boolean;
}

export interface TlsBackends {
  nginx: Peer;
  /** Port and certificate of each server, by id. */
  port: Record<string, number>;
  cert: Record<string, Cert>;
}

/** One nginx with a TLS server per entry, each on its own port with its own certificate. */
export async function startTlsBackends(servers: readonly TlsServer[]): Promise<TlsBackends> {
  const dir = tmpDir('ipgate-tls-backends-');
  const port: Record<string, number> = {};
  const cert: Record<string, Cert> = {};
  const blocks: string[] = [];
  for (const s of servers) {
    port[s.id] = await freePort();
    cert[s.id] = makeCert(dir, s.names);
    blocks.push(`server {
    listen 127.0.0.1:${port[s.id]} ssl${s.proxyProtocol ? ' proxy_protocol' : ''};
    ssl_certificate ${cert[s.id]!.cert};
    ssl_certificate_key ${cert[s.id]!.key};
    default_type text/plain;
    return 200 "backend=${s.id} sni=$ssl_server_name${s.proxyProtocol ? ' pp=$proxy_protocol_addr' : ''}\\n";
  }`);
  }
  const nginx = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  ${blocks.join('\n  ')}
}`,
    Object.values(port),
  );
  return { nginx, port, cert };
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run a client (curl, openssl) to completion, stdin closed or given. */
export function run(cmd: string, args: string[], input = ''): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(input);
  });
}

/** `curl https://<name>:<port>/` resolved to 127.0.0.1, from `source`, trusting `ca` only. */
export function curlTls(name: string, port: number, ca: string, source = '127.0.0.1'): Promise<RunResult> {
  return run('curl', [
    '-sS',
    '--max-time',
    '10',
    '--interface',
    source,
    '--resolve',
    `${name}:${port}:127.0.0.1`,
    '--cacert',
    ca,
    `https://${name}:${port}/`,
  ]);
}

/**
 * `openssl s_client` to 127.0.0.1:<port> from `source`, with `-servername name` (null:
 * `-noservername`), sending one HTTP request: stdout holds the peer's certificate subject and
 * the answer.
 */
export function sClient(port: number, name: string | null, source = '127.0.0.1'): Promise<RunResult> {
  const sni = name === null ? ['-noservername'] : ['-servername', name];
  return run(
    'openssl',
    ['s_client', '-connect', `127.0.0.1:${port}`, '-bind', `${source}:0`, ...sni, '-ign_eof', '-quiet', '-verify_quiet'],
    `GET / HTTP/1.1\r\nHost: ${name ?? 'none'}\r\nConnection: close\r\n\r\n`,
  );
}

export function readPem(file: string): string {
  return fs.readFileSync(file, 'utf8');
}
