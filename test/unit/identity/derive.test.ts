/** derive.ts: the identity decision table the listener and /v1/explain share. */
import t from 'tap';
import { afterHeader, beforeHeader } from '../../../src/identity/derive';
import { decodeProxyHeader } from '../../../src/proxy-protocol/decoder';
import { encodeProxyV2, encodeProxyV2Local } from '../../../src/proxy-protocol/encoder';

const V1 = Buffer.from('PROXY TCP4 203.0.113.7 192.0.2.1 5555 443\r\nhello');
const V2 = Buffer.concat([encodeProxyV2({ address: '203.0.113.8', port: 1 }, { address: '192.0.2.1', port: 2 }), Buffer.from('x')]);
const LOCAL = encodeProxyV2Local();
const PLAIN = Buffer.from('GET / HTTP/1.1\r\n');
const BAD = Buffer.from('PROXY TCP4 203.0.113.07 192.0.2.1 5555 443\r\n');

t.test('before any byte', async (t) => {
  t.match(beforeHeader('off', false), { ok: true, via: 'socket', label: 'none/off' }, 'off: the socket is the client');
  t.match(beforeHeader('off', true), { ok: true, label: 'none/off' }, 'off: trust is irrelevant');
  t.match(
    beforeHeader('required', false),
    { ok: false, reason: 'pp_untrusted', version: 'none' },
    'required: untrusted peers closed unread',
  );
  t.equal(beforeHeader('required', true), null, 'required + trusted: read a header');
  t.equal(beforeHeader('optional', false), null, 'optional: read (an untrusted header must be refused)');
});

t.test('after the decoder answers', async (t) => {
  const rows: Array<[string, Buffer, 'optional' | 'required', boolean, Record<string, unknown>]> = [
    [
      'v1 from a trusted peer: the header source',
      V1,
      'required',
      true,
      { ok: true, via: 'proxy-v1', label: 'v1/ok', source: { address: '203.0.113.7', port: 5555 }, headerLength: V1.length - 5 },
    ],
    ['v2 from a trusted peer', V2, 'optional', true, { ok: true, via: 'proxy-v2', label: 'v2/ok', source: { address: '203.0.113.8' } }],
    [
      'v2 LOCAL: the socket',
      LOCAL,
      'required',
      true,
      { ok: true, via: 'socket', label: 'v2/local', source: null, headerLength: LOCAL.length },
    ],
    ['v1 from an untrusted peer: refused', V1, 'optional', false, { ok: false, reason: 'pp_untrusted', version: 'v1' }],
    ['v2 from an untrusted peer: refused', V2, 'optional', false, { ok: false, reason: 'pp_untrusted', version: 'v2' }],
    [
      'a malformed header from an untrusted peer: pp_untrusted, the parser is not revealed',
      BAD,
      'optional',
      false,
      { ok: false, reason: 'pp_untrusted' },
    ],
    ['a malformed header from a trusted peer: its code', BAD, 'required', true, { ok: false, reason: 'pp_bad_address', version: 'v1' }],
    ['plain bytes, required: pp_missing', PLAIN, 'required', true, { ok: false, reason: 'pp_missing', version: 'none' }],
    [
      'plain bytes from an untrusted peer, optional: the socket',
      PLAIN,
      'optional',
      false,
      { ok: true, via: 'socket', label: 'none/none', headerLength: 0 },
    ],
    [
      'plain bytes from a trusted peer, optional: admitted, counted apart',
      PLAIN,
      'optional',
      true,
      { ok: true, via: 'socket', label: 'none/trusted_none' },
    ],
  ];
  for (const [name, buf, mode, trusted, want] of rows) {
    const r = decodeProxyHeader(buf);
    if (r.kind === 'more') throw new Error(`${name}: incomplete fixture`);
    t.match(afterHeader(r, buf[0]!, mode, trusted), want, name);
  }
});
