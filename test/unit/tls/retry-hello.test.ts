/**
 * readRetryHello (src/tls/retry-hello.ts): what may follow a HelloRetryRequest from the client,
 * and which changes to the second ClientHello close the connection. Table-driven; every row is
 * also read from each of its prefixes, which must ask for more or already give the same answer.
 */
import t from 'tap';
import { readClientHello, type ClientHelloDone } from '../../../src/tls/client-hello';
import { MAX_EARLY_DATA_HELD, readRetryHello, type RetryHelloResult } from '../../../src/tls/retry-hello';
import { alpnExt, clientHello, ext, hex, sniExt, versionsExt } from '../../fixtures/tls/client-hello-vectors';

const EARLY_DATA = ext(42, Buffer.alloc(0));
const ECH = ext(0xfe0d, Buffer.alloc(8, 1));
const CCS = hex('14 0303 0001 01');

function hello(...extensions: Buffer[]): Buffer {
  return clientHello({ extensions })!;
}

function read(bytes: Buffer): ClientHelloDone {
  const r = readClientHello(bytes);
  if (r.kind !== 'done') throw new Error(`fixture: ${JSON.stringify(r)}`);
  return r;
}

const STANDARD = [sniExt('www.example.com'), alpnExt('h2', 'http/1.1'), versionsExt(0x0304, 0x0303)];
const FIRST = hello(...STANDARD);
const FIRST_EARLY = hello(...STANDARD, EARLY_DATA);
const SECOND = hello(...STANDARD, ext(44, hex('0004 c0c0c0c0'))); // a cookie added: allowed

function appData(n: number): Buffer {
  return Buffer.concat([hex('17 0303'), Buffer.from([n >> 8, n & 0xff]), Buffer.alloc(n, 0x5a)]);
}

type Expect = { kind: 'done'; length: number } | { kind: 'error'; reason: string } | { kind: 'need_more' };

interface Row {
  name: string;
  first?: Buffer;
  bytes: Buffer;
  expect: Expect;
}

const ROWS: Row[] = [
  { name: 'the same hello with a cookie (and a new key share)', bytes: SECOND, expect: { kind: 'done', length: SECOND.length } },
  {
    name: 'the compatibility ChangeCipherSpec, then the hello',
    bytes: Buffer.concat([CCS, SECOND]),
    expect: { kind: 'done', length: 6 + SECOND.length },
  },
  {
    name: 'bytes after the hello are not part of it',
    bytes: Buffer.concat([SECOND, CCS, hex('17 0303 0001 00')]),
    expect: { kind: 'done', length: SECOND.length },
  },
  {
    name: 'SNI in upper case with a trailing dot: the same name',
    bytes: hello(sniExt('WWW.Example.COM.'), alpnExt('h2', 'http/1.1'), versionsExt(0x0304, 0x0303)),
    expect: { kind: 'done', length: -1 },
  },
  {
    name: 'early data offered: 0-RTT records, then the CCS and the hello',
    first: FIRST_EARLY,
    bytes: Buffer.concat([appData(100), appData(16000), CCS, SECOND]),
    expect: { kind: 'done', length: 105 + 16005 + 6 + SECOND.length },
  },
  {
    name: 'SNI changed',
    bytes: hello(sniExt('admin.example.com'), alpnExt('h2', 'http/1.1'), versionsExt(0x0304, 0x0303)),
    expect: { kind: 'error', reason: 'tls_hrr_sni_changed' },
  },
  {
    name: 'SNI dropped',
    bytes: hello(alpnExt('h2', 'http/1.1'), versionsExt(0x0304, 0x0303)),
    expect: { kind: 'error', reason: 'tls_hrr_sni_changed' },
  },
  {
    name: 'SNI added where the first had none',
    first: hello(versionsExt(0x0304)),
    bytes: hello(sniExt('admin.example.com'), versionsExt(0x0304)),
    expect: { kind: 'error', reason: 'tls_hrr_sni_changed' },
  },
  {
    name: 'ALPN in another order',
    bytes: hello(sniExt('www.example.com'), alpnExt('http/1.1', 'h2'), versionsExt(0x0304, 0x0303)),
    expect: { kind: 'error', reason: 'tls_hrr_alpn_changed' },
  },
  {
    name: 'ALPN dropped',
    bytes: hello(sniExt('www.example.com'), versionsExt(0x0304, 0x0303)),
    expect: { kind: 'error', reason: 'tls_hrr_alpn_changed' },
  },
  {
    name: 'supported_versions changed',
    bytes: hello(sniExt('www.example.com'), alpnExt('h2', 'http/1.1'), versionsExt(0x0303)),
    expect: { kind: 'error', reason: 'tls_hrr_hello_changed' },
  },
  {
    name: 'legacy_version changed',
    bytes: clientHello({ legacyVersion: 0x0301, extensions: STANDARD }),
    expect: { kind: 'error', reason: 'tls_hrr_hello_changed' },
  },
  { name: 'encrypted_client_hello added', bytes: hello(...STANDARD, ECH), expect: { kind: 'error', reason: 'tls_hrr_hello_changed' } },
  { name: 'two ChangeCipherSpecs', bytes: Buffer.concat([CCS, CCS, SECOND]), expect: { kind: 'error', reason: 'tls_hrr_unexpected' } },
  {
    name: 'a ChangeCipherSpec of value 2',
    bytes: Buffer.concat([hex('14 0303 0001 02'), SECOND]),
    expect: { kind: 'error', reason: 'tls_hrr_unexpected' },
  },
  {
    name: 'a ChangeCipherSpec of 2 bytes',
    bytes: Buffer.concat([hex('14 0303 0002 0101'), SECOND]),
    expect: { kind: 'error', reason: 'tls_hrr_unexpected' },
  },
  { name: 'an alert', bytes: hex('15 0303 0002 02 2f'), expect: { kind: 'error', reason: 'tls_hrr_unexpected' } },
  {
    name: 'application data without early_data offered',
    bytes: Buffer.concat([appData(10), SECOND]),
    expect: { kind: 'error', reason: 'tls_hrr_unexpected' },
  },
  { name: 'plaintext', bytes: Buffer.from('GET / HTTP/1.1\r\n'), expect: { kind: 'error', reason: 'tls_hrr_unexpected' } },
  {
    name: 'early data past the cap',
    first: FIRST_EARLY,
    bytes: Buffer.concat([appData(16000), appData(16000)]),
    expect: { kind: 'error', reason: 'tls_too_large' },
  },
  {
    name: 'an early data record above 2^14 + 256',
    first: FIRST_EARLY,
    bytes: hex('17 0303 4101'),
    expect: { kind: 'error', reason: 'tls_record_overflow' },
  },
  {
    name: 'a ServerHello-typed handshake message',
    bytes: Buffer.concat([hex('16 0303 0004 02000000')]),
    expect: { kind: 'error', reason: 'tls_not_client_hello' },
  },
  {
    name: 'a malformed second hello (two names)',
    bytes: hello(sniExt('www.example.com', 'admin.example.com')),
    expect: { kind: 'error', reason: 'tls_bad_sni' },
  },
  { name: 'half a hello', bytes: SECOND.subarray(0, 40), expect: { kind: 'need_more' } },
  { name: 'the CCS alone', bytes: CCS, expect: { kind: 'need_more' } },
  { name: 'nothing', bytes: Buffer.alloc(0), expect: { kind: 'need_more' } },
];

function view(r: RetryHelloResult): Expect {
  if (r.kind === 'done') return { kind: 'done', length: r.length };
  if (r.kind === 'error') return { kind: 'error', reason: r.reason };
  return { kind: 'need_more' };
}

t.test('what may follow a HelloRetryRequest', async (t) => {
  for (const row of ROWS) {
    const first = read(row.first ?? FIRST);
    const input = Buffer.from(row.bytes);
    const r = readRetryHello(input, first);
    const want = row.expect.kind === 'done' && row.expect.length === -1 ? { kind: 'done', length: input.length } : row.expect;
    t.same(view(r), want, row.name);
    t.same(input, row.bytes, `${row.name}: the input is not modified`);
    if (r.kind === 'error') t.ok(r.message.length > 0 && r.message.length <= 200, `${row.name}: says why (${r.message})`);
    for (let n = 0; n < input.length; n++) {
      const p = readRetryHello(input.subarray(0, n), first);
      if (p.kind === 'need_more') continue;
      t.same(view(p), view(r), `${row.name}: prefix ${n} already gives the final answer`);
      break;
    }
  }
});

t.test('the early data cap', async (t) => {
  t.equal(MAX_EARLY_DATA_HELD, 17408, '16 KiB (nginx and OpenSSL max_early_data) and 1 KiB of record overhead');
  const first = read(FIRST_EARLY);
  const fits = Buffer.concat([appData(16384), appData(MAX_EARLY_DATA_HELD - 16389 - 5), SECOND]);
  t.equal(readRetryHello(fits, first).kind, 'done', 'early data up to the cap, then the hello: checked');
  const over = Buffer.concat([appData(16384), appData(MAX_EARLY_DATA_HELD - 16389 - 4).subarray(0, 5)]);
  t.same(
    view(readRetryHello(over, first)),
    { kind: 'error', reason: 'tls_too_large' },
    'one byte more: refused on the record header, before its bytes arrive',
  );
});
