import t from 'tap';
import * as ppjs from 'proxy-protocol-js';
import { decodeProxyHeader } from '../../../src/proxy-protocol/decoder';
import type { ProxyAddress, Tlv } from '../../../src/proxy-protocol/decoder';
import { encodeProxyV1, encodeProxyV2, encodeProxyV2Local, ProxyEncodeError } from '../../../src/proxy-protocol/encoder';
import { VALID } from '../../fixtures/proxy-protocol/vectors';

function fixture(name: string): Buffer {
  const row = VALID.find((v) => v.name === name);
  if (!row) throw new Error(`no fixture ${name}`);
  return row.bytes;
}

const SPEC_SRC = { address: '192.168.0.1', port: 56324 };
const SPEC_DST = { address: '192.168.0.11', port: 443 };

t.test('encoder output is byte-identical to the annotated fixtures', async (t) => {
  t.same(encodeProxyV1(SPEC_SRC, SPEC_DST), fixture('v1 TCP4, the spec example'));
  t.same(encodeProxyV2(SPEC_SRC, SPEC_DST), fixture('v2 PROXY TCP over IPv4'));
  t.same(
    encodeProxyV2({ address: '2001:db8::1', port: 50000 }, { address: '2001:db8:1::abcd', port: 22 }),
    fixture('v2 PROXY TCP over IPv6'),
  );
  t.same(encodeProxyV2Local(), fixture('v2 LOCAL with no address block (health check)'));
});

interface RoundTrip {
  name: string;
  src: ProxyAddress;
  dst: ProxyAddress;
  family: 'tcp4' | 'tcp6';
  want: [ProxyAddress, ProxyAddress];
}

const ROUND_TRIPS: RoundTrip[] = [
  {
    name: 'IPv4 to IPv4',
    src: { address: '203.0.113.9', port: 51000 },
    dst: { address: '10.1.2.3', port: 8443 },
    family: 'tcp4',
    want: [
      { address: '203.0.113.9', port: 51000 },
      { address: '10.1.2.3', port: 8443 },
    ],
  },
  {
    name: 'IPv6 to IPv6',
    src: { address: '2001:db8::dead:beef', port: 1 },
    dst: { address: '::1', port: 65535 },
    family: 'tcp6',
    want: [
      { address: '2001:db8::dead:beef', port: 1 },
      { address: '::1', port: 65535 },
    ],
  },
  {
    name: 'ports 0 and 65535',
    src: { address: '0.0.0.0', port: 0 },
    dst: { address: '255.255.255.255', port: 65535 },
    family: 'tcp4',
    want: [
      { address: '0.0.0.0', port: 0 },
      { address: '255.255.255.255', port: 65535 },
    ],
  },
  {
    name: 'mixed families: both written as IPv6, IPv4 one v4-mapped',
    src: { address: '198.51.100.7', port: 4000 },
    dst: { address: '2001:db8::2', port: 443 },
    family: 'tcp6',
    want: [
      { address: '198.51.100.7', port: 4000 },
      { address: '2001:db8::2', port: 443 },
    ],
  },
  {
    name: 'a v4-mapped socket address is the IPv4 client',
    src: { address: '::ffff:198.51.100.7', port: 4000 },
    dst: { address: '10.0.0.1', port: 80 },
    family: 'tcp4',
    want: [
      { address: '198.51.100.7', port: 4000 },
      { address: '10.0.0.1', port: 80 },
    ],
  },
  {
    name: 'non-canonical IPv6 input decodes canonical',
    src: { address: '2001:DB8:0:0:0:0:0:1', port: 5 },
    dst: { address: 'fe80::1', port: 6 },
    family: 'tcp6',
    want: [
      { address: '2001:db8::1', port: 5 },
      { address: 'fe80::1', port: 6 },
    ],
  },
];

t.test('round trip through our decoder', async (t) => {
  for (const row of ROUND_TRIPS) {
    for (const [version, encode] of [
      [1, encodeProxyV1],
      [2, encodeProxyV2],
    ] as const) {
      const bytes = encode(row.src, row.dst);
      const r = decodeProxyHeader(bytes);
      t.same(
        r.kind === 'done' && {
          length: r.length,
          family: r.header.family,
          version: r.header.version,
          source: r.header.source,
          destination: r.header.destination,
        },
        { length: bytes.length, family: row.family, version, source: row.want[0], destination: row.want[1] },
        `v${version} ${row.name}`,
      );
    }
  }

  const tlvs: Tlv[] = [
    { type: 0x01, value: Buffer.from('h2') },
    { type: 0x02, value: Buffer.from('example.com') },
    { type: 0x04, value: Buffer.alloc(0) },
    { type: 0xe0, value: Buffer.alloc(300, 7) },
  ];
  const bytes = encodeProxyV2(SPEC_SRC, SPEC_DST, tlvs);
  const r = decodeProxyHeader(bytes);
  t.same(r.kind === 'done' && r.header.tlvs, tlvs, 'TLVs come back in order, byte for byte');
  t.equal(bytes.readUInt16BE(14), bytes.length - 16, 'len counts the address block and the TLVs');
});

t.test('cross-check: proxy-protocol-js parses what we encode', async (t) => {
  const v1 = ppjs.V1ProxyProtocol.parse(encodeProxyV1(SPEC_SRC, SPEC_DST).toString('latin1'));
  t.same(
    [v1.inetProtocol, v1.source.ipAddress, v1.source.port, v1.destination.ipAddress, v1.destination.port, v1.data],
    ['TCP4', '192.168.0.1', 56324, '192.168.0.11', 443, ''],
  );

  const v1six = ppjs.V1ProxyProtocol.parse(
    encodeProxyV1({ address: '2001:db8::1', port: 1 }, { address: '10.0.0.1', port: 2 }).toString('latin1'),
  );
  t.same([v1six.inetProtocol, v1six.source.ipAddress, v1six.destination.ipAddress], ['TCP6', '2001:db8::1', '::ffff:10.0.0.1']);

  const v2 = ppjs.V2ProxyProtocol.parse(encodeProxyV2(SPEC_SRC, SPEC_DST, [{ type: 1, value: Buffer.from('h2') }]));
  t.equal(v2.command, ppjs.Command.PROXY);
  t.equal(v2.transportProtocol, ppjs.TransportProtocol.STREAM);
  t.equal(v2.addressFamilyType, ppjs.AddressFamilyType.INET);
  const a4 = v2.proxyAddress as ppjs.IPv4ProxyAddress;
  t.same(
    [a4.sourceAddress.address, a4.sourcePort, a4.destinationAddress.address, a4.destinationPort],
    [[192, 168, 0, 1], 56324, [192, 168, 0, 11], 443],
  );
  t.same(Buffer.from(v2.data ?? []), Buffer.from('010002' + '6832', 'hex'), 'the bytes after the address block are our TLV');

  const v26 = ppjs.V2ProxyProtocol.parse(encodeProxyV2({ address: '10.0.0.1', port: 7 }, { address: '2001:db8::2', port: 8 }));
  const a6 = v26.proxyAddress as ppjs.IPv6ProxyAddress;
  t.equal(v26.addressFamilyType, ppjs.AddressFamilyType.INET6);
  t.same(
    [
      Buffer.from(a6.sourceAddress.address).toString('hex'),
      a6.sourcePort,
      Buffer.from(a6.destinationAddress.address).toString('hex'),
      a6.destinationPort,
    ],
    ['00000000000000000000ffff0a000001', 7, '20010db8000000000000000000000002', 8],
  );

  const local = ppjs.V2ProxyProtocol.parse(encodeProxyV2Local());
  t.same([local.command, local.addressFamilyType], [ppjs.Command.LOCAL, ppjs.AddressFamilyType.UNSPEC]);
});

t.test('cross-check: we decode what proxy-protocol-js encodes', async (t) => {
  const payload = 'GET / HTTP/1.1\r\n\r\n';
  const v1 = new ppjs.V1ProxyProtocol(
    ppjs.INETProtocol.TCP4,
    new ppjs.Peer('127.0.0.1', 12345),
    new ppjs.Peer('192.0.2.1', 54321),
    payload,
  ).build();
  const r1 = decodeProxyHeader(Buffer.from(v1, 'latin1'));
  t.same(
    r1.kind === 'done' && [r1.length, r1.header.source, r1.header.destination],
    [v1.length - payload.length, { address: '127.0.0.1', port: 12345 }, { address: '192.0.2.1', port: 54321 }],
    'v1 TCP4 with payload',
  );

  const v1six = new ppjs.V1ProxyProtocol(ppjs.INETProtocol.TCP6, new ppjs.Peer('2001:db8::10', 1), new ppjs.Peer('::1', 2)).build();
  const r1six = decodeProxyHeader(Buffer.from(v1six, 'latin1'));
  t.same(r1six.kind === 'done' && [r1six.header.family, r1six.header.source?.address, r1six.header.destination?.address], [
    'tcp6',
    '2001:db8::10',
    '::1',
  ]);

  // Its v2 encoder leaves `data` out of the length field, so `data` is payload after the header.
  const four = new ppjs.IPv4ProxyAddress(
    ppjs.IPv4Address.createFrom([127, 0, 0, 1]),
    12345,
    ppjs.IPv4Address.createFrom([192, 0, 2, 1]),
    54321,
  );
  const v2 = Buffer.from(new ppjs.V2ProxyProtocol(ppjs.Command.PROXY, ppjs.TransportProtocol.STREAM, four, Buffer.from(payload)).build());
  const r2 = decodeProxyHeader(v2);
  t.same(
    r2.kind === 'done' && [r2.length, r2.header.family, r2.header.source, r2.header.destination],
    [28, 'tcp4', { address: '127.0.0.1', port: 12345 }, { address: '192.0.2.1', port: 54321 }],
    'v2 TCP4, payload left after 28 bytes',
  );

  const six = new ppjs.IPv6ProxyAddress(
    ppjs.IPv6Address.createFrom([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
    443,
    ppjs.IPv6Address.createFrom([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 9]),
    8443,
  );
  const r6 = decodeProxyHeader(Buffer.from(new ppjs.V2ProxyProtocol(ppjs.Command.PROXY, ppjs.TransportProtocol.STREAM, six).build()));
  t.same(
    r6.kind === 'done' && [r6.length, r6.header.family, r6.header.source, r6.header.destination],
    [52, 'tcp6', { address: '2001:db8::1', port: 443 }, { address: '10.0.0.9', port: 8443 }],
    'v2 TCP6 with a v4-mapped destination',
  );

  const rl = decodeProxyHeader(Buffer.from(new ppjs.V2ProxyProtocol(ppjs.Command.LOCAL, ppjs.TransportProtocol.STREAM, four).build()));
  t.same(rl.kind === 'done' && [rl.length, rl.header.command, rl.header.source], [28, 'local', null], 'v2 LOCAL with an address block');

  const udp = decodeProxyHeader(Buffer.from(new ppjs.V2ProxyProtocol(ppjs.Command.PROXY, ppjs.TransportProtocol.DGRAM, four).build()));
  t.same(udp.kind === 'error' && udp.reason, 'pp_bad_transport', 'v2 UDP is refused: ipgate proxies TCP only');
});

t.test('encodeProxyV2Local returns a fresh buffer each call', async (t) => {
  const first = encodeProxyV2Local();
  first.fill(0);
  t.same(encodeProxyV2Local(), fixture('v2 LOCAL with no address block (health check)'));
});

t.test('invalid input is a bug in the caller: it throws ERR_PP_ENCODE_INPUT', async (t) => {
  const ok = { address: '10.0.0.1', port: 80 };
  const bad: [string, () => unknown][] = [
    ['host name', () => encodeProxyV1({ address: 'localhost', port: 1 }, ok)],
    ['three-octet IPv4', () => encodeProxyV2(ok, { address: '10.0.1', port: 1 })],
    ['zone id', () => encodeProxyV2({ address: 'fe80::1%eth0', port: 1 }, ok)],
    ['undefined address (closed socket)', () => encodeProxyV1({ address: undefined as unknown as string, port: 1 }, ok)],
    ['negative port', () => encodeProxyV1({ address: '10.0.0.2', port: -1 }, ok)],
    ['port 65536', () => encodeProxyV2(ok, { address: '10.0.0.2', port: 65536 })],
    ['fractional port', () => encodeProxyV2(ok, { address: '10.0.0.2', port: 1.5 })],
    ['TLV type 256', () => encodeProxyV2(ok, ok, [{ type: 256, value: Buffer.alloc(0) }])],
    ['TLVs over 65535 bytes', () => encodeProxyV2(ok, ok, [{ type: 1, value: Buffer.alloc(65535 - 12 - 3 + 1) }])],
  ];
  for (const [name, call] of bad) t.throws(call, { name: 'TypeError', code: 'ERR_PP_ENCODE_INPUT' }, name);
  t.ok(new ProxyEncodeError('x') instanceof TypeError);
  t.doesNotThrow(() => encodeProxyV2(ok, ok, [{ type: 1, value: Buffer.alloc(65535 - 12 - 3) }]), 'the largest legal header encodes');
});

t.test('the last-address memo never leaks bytes between calls (repeat, change, failed parse, mapped)', async (t) => {
  const rows: Array<[string, ProxyAddress, ProxyAddress]> = [
    ['first', { address: '10.0.0.1', port: 1 }, { address: '10.0.0.9', port: 2 }],
    ['same addresses again', { address: '10.0.0.1', port: 1 }, { address: '10.0.0.9', port: 2 }],
    ['source changes, destination repeats', { address: '10.0.0.2', port: 3 }, { address: '10.0.0.9', port: 2 }],
    ['mapped source after plain', { address: '::ffff:10.0.0.3', port: 3 }, { address: '10.0.0.9', port: 2 }],
    ['IPv6 source, IPv4 destination', { address: '2001:db8::1', port: 4 }, { address: '10.0.0.9', port: 2 }],
  ];
  for (const [why, src, dst] of rows) {
    for (const enc of [encodeProxyV1, encodeProxyV2]) {
      const r = decodeProxyHeader(enc(src, dst));
      t.equal(r.kind, 'done', why);
      if (r.kind !== 'done') continue;
      const plain = (a: string): string => a.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, '$1');
      const mixed = src.address.includes(':') && !src.address.startsWith('::ffff:');
      t.equal(plain(r.header.source!.address), plain(src.address), `${why}: source (${enc.name})`);
      t.equal(plain(r.header.destination!.address), mixed ? dst.address : plain(dst.address), `${why}: destination (${enc.name})`);
    }
  }
  // A parse that fails half way may have written into the slot: the next call must re-parse.
  encodeProxyV2({ address: '10.0.0.5', port: 1 }, { address: '10.0.0.9', port: 2 });
  t.throws(() => encodeProxyV2({ address: '10.0.7.x', port: 1 }, { address: '10.0.0.9', port: 2 }), { code: 'ERR_PP_ENCODE_INPUT' });
  const r = decodeProxyHeader(encodeProxyV2({ address: '10.0.0.5', port: 1 }, { address: '10.0.0.9', port: 2 }));
  t.equal(r.kind === 'done' ? r.header.source!.address : null, '10.0.0.5', 'after a failed parse the same source encodes correctly');
});
