import t from 'tap';
import type { Test } from 'tap';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { TLS_REASONS } from '../../../src/tls/codes';
import type { TlsReason } from '../../../src/tls/codes';
import { DEFAULT_MAX_HELLO_LENGTH, readClientHello, tlsVersionName } from '../../../src/tls/client-hello';
import type { ClientHelloResult } from '../../../src/tls/client-hello';
import { ANNOTATED, clientHello, ext, INCOMPLETE, INVALID, sniExt, VALID } from '../../fixtures/tls/client-hello-vectors';
import { missing } from '../../helpers/peers';

/** The comparable part of a result (length and consumed are checked apart). */
function view(r: ClientHelloResult): unknown {
  if (r.kind === 'error') return { kind: 'error', reason: r.reason };
  if (r.kind === 'need_more') return { kind: 'need_more' };
  const { sni, alpn, legacyVersion, supportedVersions, maxVersion, recordVersion, ech } = r;
  return { kind: 'done', sni, alpn, legacyVersion, supportedVersions, maxVersion, recordVersion, ech };
}

/** Every prefix shorter than `upTo` that is not need_more, as "n:kind". */
function earlyAnswers(bytes: Buffer, upTo: number): string[] {
  const wrong: string[] = [];
  for (let n = 0; n < upTo; n++) {
    const r = readClientHello(bytes.subarray(0, n));
    if (r.kind !== 'need_more') wrong.push(`${n}:${r.kind}`);
  }
  return wrong;
}

t.test('valid hellos', async (t) => {
  for (const row of VALID) {
    t.test(row.name, async (t) => {
      const input = Buffer.from(row.bytes);
      const r = readClientHello(input);
      t.same(view(r), row.expect, 'reads the expected name, protocols and versions');
      t.same(input, row.bytes, 'the input is not modified');
      if (r.kind !== 'done') return;
      t.equal(r.consumed, 0, 'consumes nothing: the bytes go to the backend untouched');
      t.equal(r.length, input.length, 'length covers exactly the records of the hello');
      t.same(earlyAnswers(input, input.length), [], 'every shorter prefix asks for more');
      // The hello inside a larger buffer, followed by early data: same answer, same length.
      const followed = Buffer.concat([input, Buffer.from('17030300050102030405', 'hex')]);
      const r2 = readClientHello(followed);
      t.same(view(r2), row.expect, 'bytes after the hello do not change the answer');
      t.equal(r2.kind === 'done' ? r2.length : -1, input.length, 'and length still ends at the hello');
    });
  }
});

t.test('invalid hellos: one reason each, decided as early as the bytes allow', async (t) => {
  for (const row of INVALID) {
    t.test(row.name, async (t) => {
      const r = readClientHello(row.bytes);
      t.same(view(r), row.expect, `refused with ${row.expect.kind === 'error' ? row.expect.reason : '?'}`);
      if (r.kind === 'error') t.ok(r.message.length > 0 && r.message.length <= 200, `a short message: ${r.message}`);
      // Prefixes are need_more or already this same error: the answer cannot depend on the TCP split.
      for (let n = 0; n < row.bytes.length; n++) {
        const p = readClientHello(row.bytes.subarray(0, n));
        if (p.kind === 'need_more') continue;
        t.same(view(p), row.expect, `prefix ${n} already answers the same`);
        break;
      }
    });
  }
});

t.test('incomplete input asks for more', async (t) => {
  for (const row of INCOMPLETE) t.same(view(readClientHello(row.bytes)), row.expect, row.name);
});

t.test('the caps', async (t) => {
  const big = clientHello({ extensions: [sniExt('cap.example'), ext(21, Buffer.alloc(3000))] });
  t.equal(readClientHello(big).kind, 'done', 'a 3 KB hello passes the default cap');
  const r = readClientHello(big, { maxHelloLength: 2048 });
  t.same(view(r), { kind: 'error', reason: 'tls_too_large' }, 'and is refused under maxHelloLength 2048');
  t.equal(readClientHello(big.subarray(0, 9), { maxHelloLength: 2048 }).kind, 'error', 'from its first 9 bytes, before the body arrives');
  t.equal(DEFAULT_MAX_HELLO_LENGTH, 16384, 'the default is one full record');
});

t.test('the annotated fixture decodes field by field', async (t) => {
  const r = readClientHello(ANNOTATED);
  t.equal(r.kind === 'done' && r.sni, 'a.example', 'the trailing dot is dropped');
  t.equal(r.kind === 'done' && r.length, 78, '5 record + 4 handshake + 69 body bytes');
});

t.test('version names', async (t) => {
  t.same([0x0300, 0x0301, 0x0302, 0x0303, 0x0304, 0x7f1c].map(tlsVersionName), [
    'SSLv3',
    'TLSv1',
    'TLSv1.1',
    'TLSv1.2',
    'TLSv1.3',
    '0x7f1c',
  ]);
});

t.test('the reason catalogue', async (t) => {
  // The listener's own, and the handshake watch's (test/unit/tls/retry-hello.test.ts, server-hello.test.ts).
  const listenerOnly: TlsReason[] = [
    'tls_truncated',
    'tls_timeout',
    'tls_hrr_sni_changed',
    'tls_hrr_alpn_changed',
    'tls_hrr_hello_changed',
    'tls_hrr_unexpected',
    'tls_bad_server_hello',
  ];
  for (const [code, sentence] of Object.entries(TLS_REASONS)) {
    t.match(code, /^tls_[a-z0-9_]+$/, `${code} is a bounded snake_case label`);
    t.match(sentence, /^[A-Z].*\.$/, `${code} reads as a sentence`);
  }
  t.ok(Object.isFrozen(TLS_REASONS), 'the catalogue cannot be altered at runtime');
  const seen = new Set(INVALID.map((row) => (row.expect.kind === 'error' ? row.expect.reason : '')));
  const readerLevel = Object.keys(TLS_REASONS)
    .filter((c) => !listenerOnly.includes(c as TlsReason))
    .sort();
  t.same([...seen].sort(), readerLevel, 'the invalid vectors exercise every reader-level code');
});

/**
 * Runs a real TLS client against a plain TCP server on loopback and feeds what it sends, read by
 * read, to the reader as the listener will: concatenate, call again, stop at the first answer.
 */
async function capture(
  bin: string,
  args: (port: number) => string[],
): Promise<{ result: ClientHelloResult; bytes: Buffer; reads: number }> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  const child = spawn(bin, args(port), { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = once(child, 'exit').then(() => {
    throw new Error(`${bin} exited before sending a ClientHello: ${stderr}`);
  });
  try {
    const [socket] = (await Promise.race([once(server, 'connection'), exited])) as [net.Socket];
    let acc = Buffer.alloc(0);
    let reads = 0;
    const result = await Promise.race([
      new Promise<ClientHelloResult>((resolve, reject) => {
        socket.on('data', (chunk: Buffer) => {
          reads++;
          acc = Buffer.concat([acc, chunk]);
          const r = readClientHello(acc);
          if (r.kind !== 'need_more') resolve(r);
        });
        socket.on('end', () => reject(new Error(`${bin} closed before a complete ClientHello (${acc.length} bytes)`)));
        socket.on('error', reject);
      }),
      exited,
    ]);
    socket.destroy();
    return { result, bytes: acc, reads };
  } finally {
    exited.catch(() => {});
    child.kill('SIGKILL');
    server.close();
  }
}

function splitsAgree(t: Test, bytes: Buffer, result: ClientHelloResult): void {
  const wrong: string[] = [];
  const whole = JSON.stringify(view(result));
  for (let n = 1; n < bytes.length; n++) {
    // Two reads split at n, as TCP may deliver them: the first must ask for more or be the answer.
    const first = readClientHello(bytes.subarray(0, n));
    if (first.kind !== 'need_more' && JSON.stringify(view(first)) !== whole) wrong.push(`${n}`);
  }
  t.same(wrong, [], `no split of the ${bytes.length} captured bytes changes the answer`);
}

type Row = {
  name: string;
  bin: 'openssl' | 'curl';
  args: (port: number) => string[];
  check: (t: Test, r: Extract<ClientHelloResult, { kind: 'done' }>) => void;
};
const long = Array.from({ length: 60 }, (_, i) => `proto${i}xxxxxxxxxx`).join(',');
const REAL: Row[] = [
  {
    name: 'openssl s_client with SNI and ALPN',
    bin: 'openssl',
    args: (port) => ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'Sni.Example', '-alpn', 'h2,http/1.1'],
    check: (t, r) => {
      t.equal(r.sni, 'sni.example', 'SNI lower-cased');
      t.same(r.alpn, ['h2', 'http/1.1'], 'ALPN in order');
      t.equal(r.maxVersion, 0x0304, 'offers TLS 1.3');
      t.ok(r.supportedVersions.includes(0x0303), 'and TLS 1.2');
    },
  },
  {
    name: 'openssl s_client without SNI, TLS 1.2 only',
    bin: 'openssl',
    args: (port) => ['s_client', '-connect', `127.0.0.1:${port}`, '-noservername', '-tls1_2'],
    check: (t, r) => {
      t.equal(r.sni, null, 'no SNI');
      t.equal(r.maxVersion, 0x0303, 'TLS 1.2 at most');
      t.same(r.alpn, [], 'no ALPN');
    },
  },
  {
    name: 'openssl s_client with a trailing-dot SNI',
    bin: 'openssl',
    args: (port) => ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'dot.example.'],
    check: (t, r) => t.equal(r.sni, 'dot.example', 'the trailing dot is dropped'),
  },
  {
    name: 'openssl s_client sending its hello in 512-byte records',
    bin: 'openssl',
    args: (port) => ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', 'split.example', '-max_send_frag', '512', '-alpn', long],
    check: (t, r) => {
      t.equal(r.sni, 'split.example', 'SNI read across records');
      t.equal(r.alpn.length, 60, 'all 60 ALPN ids read across records');
      t.ok(r.length > 1024, `the hello took ${r.length} bytes, three records`);
    },
  },
  {
    name: 'curl with SNI (--resolve)',
    bin: 'curl',
    args: (port) => ['-sk', '--max-time', '10', '--resolve', `curl.example:${port}:127.0.0.1`, `https://curl.example:${port}/`],
    check: (t, r) => {
      t.equal(r.sni, 'curl.example', 'SNI from the URL host');
      t.ok(r.alpn.includes('http/1.1'), `ALPN offered: ${r.alpn.join(',')}`);
    },
  },
  {
    name: 'curl to an IP address sends no SNI',
    bin: 'curl',
    args: (port) => ['-sk', '--max-time', '10', `https://127.0.0.1:${port}/`],
    check: (t, r) => t.equal(r.sni, null, 'RFC 6066: no IP literal in SNI, so none at all'),
  },
];

t.test('real ClientHellos from openssl s_client and curl over loopback', async (t) => {
  for (const row of REAL) {
    const skip = missing(row.bin);
    t.test(row.name, { skip }, async (t) => {
      const { result, bytes, reads } = await capture(row.bin, row.args);
      t.equal(result.kind, 'done', `read in ${reads} read(s): ${result.kind === 'error' ? result.message : result.kind}`);
      if (result.kind !== 'done') return;
      t.equal(result.consumed, 0, 'nothing consumed');
      t.ok(result.length <= bytes.length, 'length within what was read');
      row.check(t, result);
      splitsAgree(t, bytes.subarray(0, result.length), result);
    });
  }
});
