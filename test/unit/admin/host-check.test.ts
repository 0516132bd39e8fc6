/** The admin API's Host check (DNS rebinding): what is an address of the API, what is not. */
import t from 'tap';
import { HostAllowlist, hostPart } from '../../../src/admin/host-check';

const hosts = new HostAllowlist(['ipgate-admin.ipgate.svc', 'Admin.Example.']);

const rows: { what: string; host: string | undefined; ok: boolean }[] = [
  { what: 'IPv4 literal with port', host: '127.0.0.1:9901', ok: true },
  { what: 'IPv4 literal without port', host: '10.1.2.3', ok: true },
  { what: 'bracketed IPv6 with port', host: '[::1]:9901', ok: true },
  { what: 'bracketed IPv6 without port', host: '[fd00::1]', ok: true },
  { what: 'localhost with port', host: 'localhost:9901', ok: true },
  { what: 'LOCALHOST in capitals', host: 'LOCALHOST', ok: true },
  { what: 'an allowed name', host: 'ipgate-admin.ipgate.svc:9901', ok: true },
  { what: 'an allowed name in another case', host: 'IPGATE-ADMIN.ipgate.SVC', ok: true },
  { what: 'an allowed name with a trailing dot', host: 'ipgate-admin.ipgate.svc.:9901', ok: true },
  { what: 'a listed name written with a trailing dot and capitals', host: 'admin.example', ok: true },
  { what: 'no Host at all (HTTP/1.0; a browser always sends one)', host: undefined, ok: true },
  { what: 'a rebinding name', host: 'evil.example:9901', ok: false },
  { what: 'a suffix of an allowed name', host: 'svc', ok: false },
  { what: 'an allowed name as a prefix of another', host: 'ipgate-admin.ipgate.svc.evil.example', ok: false },
  { what: 'localhost as a label of another name', host: 'localhost.evil.example', ok: false },
  { what: 'an unbracketed IPv6', host: '::1', ok: false },
  { what: 'brackets around an IPv4', host: '[127.0.0.1]:9901', ok: false },
  { what: 'junk after the port', host: '127.0.0.1:9901x', ok: false },
  { what: 'an empty Host', host: '', ok: false },
  { what: 'a port alone', host: ':9901', ok: false },
  { what: 'an IPv4 look-alike name', host: '127.0.0.1.evil.example', ok: false },
];

t.test('Host values: IP literals, localhost and listed names pass; anything else is refused', async (t) => {
  for (const row of rows) t.equal(hosts.check(row.host).ok, row.ok, row.what);
});

t.test('the refusal quotes the Host and says how to allow a name', async (t) => {
  const v = hosts.check('evil.example:9901');
  t.same(v, {
    ok: false,
    message:
      'Host "evil.example:9901" is not an address of this admin API: use an IP address or localhost, or add the name to admin.allowedHosts',
  });
  const long = hosts.check('a'.repeat(5000));
  t.ok(!long.ok && long.message.length < 400, 'a huge Host is quoted truncated');
});

t.test('with no names allowed, only IP literals and localhost pass', async (t) => {
  const none = new HostAllowlist([]);
  t.ok(none.check('127.0.0.1:1').ok);
  t.ok(none.check('localhost').ok);
  t.notOk(none.check('ipgate-admin.ipgate.svc').ok);
});

t.test('hostPart splits the port off and says whether the host is an IP literal', async (t) => {
  t.same(hostPart('Example.COM:80'), { host: 'example.com', ip: false });
  t.same(hostPart('[2001:db8::1]:443'), { host: '2001:db8::1', ip: true });
  t.same(hostPart('192.0.2.1'), { host: '192.0.2.1', ip: true });
  t.equal(hostPart('[2001:db8::1'), null, 'unclosed bracket');
});
