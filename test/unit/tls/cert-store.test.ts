/**
 * The certificate store's SNI lookup (src/tls/cert-store.ts): exact names, `*.` wildcards covering
 * one label (RFC 6125, not the route table's rule), the default or a refusal, configured hosts
 * over the certificate's names, the first pair winning a shared name. And the peer-verify door
 * (src/tls/peer-verify.ts) still finds what it reads on this Node.
 */
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import pino from 'pino';
import t from 'tap';
import { CertStore } from '../../../src/tls/cert-store';
import { verifyErrorAvailable } from '../../../src/tls/peer-verify';
import type { TlsConfig } from '../../../src/schema/tls';
import { CertDir } from '../../helpers/certs';

const certs = new CertDir();
const a = certs.issue('a', { cn: 'a.test', dns: ['a.test', 'www.a.test'] });
const w = certs.issue('w', { cn: 'w', dns: ['*.w.test'] });
const b = certs.issue('b', { cn: 'b.test', dns: ['a.test', 'b.test'] });
const log = pino({ level: 'silent' });

function store(unknownSni: 'first' | 'refuse', extra: Partial<TlsConfig['certificates'][number]> = {}): CertStore {
  return new CertStore(
    'web',
    {
      certificates: [
        { cert: a.cert, key: a.key, hosts: null, name: 'a' },
        { cert: w.cert, key: w.key, hosts: null, name: 'w' },
        { cert: b.cert, key: b.key, hosts: null, name: 'b', ...extra },
      ],
      unknownSni,
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.3',
      clientCA: null,
      clientCertificate: 'none',
      handshakeTimeoutMs: 1000,
      sessionTickets: true,
      reloadIntervalMs: 1000,
    },
    log,
  );
}

t.test('lookup', async (t) => {
  const s = store('first');
  const ctx = (i: number): tls.SecureContext => (s as unknown as { entries: { context: tls.SecureContext }[] }).entries[i]!.context;
  const rows: { desc: string; name: string; want: number | null }[] = [
    { desc: 'exact', name: 'a.test', want: 0 },
    { desc: 'exact, second SAN', name: 'www.a.test', want: 0 },
    { desc: 'a name in two certificates: the first in the config', name: 'a.test', want: 0 },
    { desc: 'only the third has it', name: 'b.test', want: 2 },
    { desc: 'case-insensitive', name: 'B.TEST', want: 2 },
    { desc: 'one trailing dot', name: 'b.test.', want: 2 },
    { desc: 'wildcard: one label', name: 'x.w.test', want: 1 },
    { desc: 'wildcard: not two labels', name: 'y.x.w.test', want: null },
    { desc: 'wildcard: not the parent', name: 'w.test', want: null },
    { desc: 'wildcard: not an empty label', name: '.w.test', want: null },
    { desc: 'unknown', name: 'c.test', want: null },
  ];
  for (const row of rows) {
    const got = s.lookup(row.name);
    t.equal(got, row.want === null ? null : ctx(row.want), row.desc);
  }
  t.equal(s.hasFallback, true, 'default: a miss gets the first certificate');
  t.equal(s.initial, ctx(0), "the initial context is the default pair's");
  const r = store('refuse');
  t.equal(r.hasFallback, false, 'refuse: no fallback');
  t.not(
    r.initial,
    (r as unknown as { entries: { context: tls.SecureContext }[] }).entries[0]!.context,
    'refuse: the initial context has no certificate',
  );
  const hosts = store('first', { hosts: ['only.test'] });
  t.equal(hosts.lookup('b.test'), null, "configured hosts replace the certificate's names");
  t.not(hosts.lookup('only.test'), null, 'and are served');
  t.same(
    s.expiries().map((e) => e.label),
    ['a', 'w', 'b'],
    'expiry per pair, labelled by name',
  );
});

t.test('whether the SNI name can change the certificate (terminate.ts reads the ClientHello first only then)', async (t) => {
  const one = (unknownSni: 'first' | 'refuse'): CertStore =>
    new CertStore(
      'web',
      {
        certificates: [{ cert: a.cert, key: a.key, hosts: null, name: 'a' }],
        unknownSni,
        minVersion: 'TLSv1.2',
        maxVersion: 'TLSv1.3',
        clientCA: null,
        clientCertificate: 'none',
        handshakeTimeoutMs: 1000,
        sessionTickets: false,
        reloadIntervalMs: 1000,
      },
      log,
    );
  const rows: { desc: string; store: CertStore; decides: boolean }[] = [
    { desc: 'one pair, unknown names get it: every lookup gives the initial context', store: one('first'), decides: false },
    { desc: 'one pair, unknown names refused: a miss must switch nothing and fail', store: one('refuse'), decides: true },
    { desc: 'three pairs: the name picks one', store: store('first'), decides: true },
    { desc: 'three pairs, refuse', store: store('refuse'), decides: true },
  ];
  for (const row of rows) t.equal(row.store.sniDecides, row.decides, row.desc);
  const single = rows[0]!.store;
  for (const name of ['a.test', 'www.a.test', 'unknown.test']) {
    t.equal(single.lookup(name) ?? single.initial, single.initial, `one pair, first: ${name} ends on the initial context`);
  }
});

t.test('the session id context: one per listener and client-certificate setting, the same in every worker', async (t) => {
  if (!fs.existsSync(certs.file('other.crt'))) certs.ca('other');
  const caFile = certs.file('bundle.pem');
  fs.writeFileSync(caFile, certs.read('ca.crt'));
  const make = (listener: string, clientCertificate: 'none' | 'optional' | 'required', clientCA: string | null): CertStore =>
    new CertStore(
      listener,
      {
        certificates: [{ cert: a.cert, key: a.key, hosts: null, name: 'a' }],
        unknownSni: 'first',
        minVersion: 'TLSv1.2',
        maxVersion: 'TLSv1.3',
        clientCA,
        clientCertificate,
        handshakeTimeoutMs: 1000,
        sessionTickets: true,
        reloadIntervalMs: 1000,
      },
      log,
    );
  const base = make('web', 'required', caFile);
  t.match(base.sessionIdContext(), /^[0-9a-f]{32}$/, '32 hex characters (OpenSSL takes at most 32 bytes)');
  t.equal(
    make('web', 'required', caFile).sessionIdContext(),
    base.sessionIdContext(),
    'another store of the same listener (another worker): the same',
  );
  const rows: { desc: string; store: CertStore }[] = [
    { desc: 'another listener', store: make('api', 'required', caFile) },
    { desc: 'optional instead of required', store: make('web', 'optional', caFile) },
    { desc: 'no client certificates', store: make('web', 'none', null) },
  ];
  for (const row of rows) t.not(row.store.sessionIdContext(), base.sessionIdContext(), `${row.desc}: another`);
  const before = base.sessionIdContext();
  fs.writeFileSync(caFile, Buffer.concat([certs.read('ca.crt'), certs.read('other.crt')]));
  base.poll();
  t.not(base.sessionIdContext(), before, 'a reloaded CA bundle: another (sessions made under the old one do not resume)');
});

t.test('the verify result is where peer-verify.ts reads it (fails on a Node that moved it)', async (t) => {
  const s = store('first');
  let seen: boolean | null = null;
  const server = net.createServer((raw) => {
    const sock = new tls.TLSSocket(raw, { isServer: true, secureContext: s.initial, requestCert: true });
    sock.on('error', () => {});
    sock.once('secure', () => {
      seen = verifyErrorAvailable(sock);
      sock.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => {
    const c = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false });
    c.on('error', () => {});
    c.once('close', () => resolve());
  });
  await new Promise<void>((r) => server.close(() => r()));
  t.equal(seen, true, 'the TLSWrap handle has verifyError() after the handshake');
});
