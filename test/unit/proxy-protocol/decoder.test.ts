import t from 'tap';
import type { Test } from 'tap';
import { decodeProxyHeader } from '../../../src/proxy-protocol/decoder';
import type { DecodeOptions, DecodeResult } from '../../../src/proxy-protocol/decoder';
import { hex, INVALID, NOT_PROXY, VALID } from '../../fixtures/proxy-protocol/vectors';
import type { Vector } from '../../fixtures/proxy-protocol/vectors';

/** A plain, comparable view of a result (TLV values as hex). */
function view(result: DecodeResult): unknown {
  if (result.kind !== 'done') return result.kind === 'error' ? { kind: 'error', reason: result.reason } : { kind: result.kind };
  const h = result.header;
  return {
    kind: 'done',
    length: result.length,
    header: { ...h, tlvs: h.tlvs.map((tlv) => ({ type: tlv.type, value: tlv.value.toString('hex') })) },
  };
}

/** Kinds returned for each prefix length 0..bytes.length, as "n:kind" for the ones not wanted. */
function prefixesNot(bytes: Buffer, upTo: number, kind: DecodeResult['kind'], options?: DecodeOptions): string[] {
  const wrong: string[] = [];
  for (let n = 0; n < upTo; n++) {
    const r = decodeProxyHeader(bytes.subarray(0, n), options);
    if (r.kind !== kind) wrong.push(`${n}:${r.kind}`);
  }
  return wrong;
}

/** Delivers `bytes` one byte at a time, concatenating, as the listener does with TCP segments. */
function deliverByteByByte(bytes: Buffer, options?: DecodeOptions): { result: DecodeResult; after: number; early: string[] } {
  let acc = Buffer.alloc(0);
  const early: string[] = [];
  for (let k = 0; k < bytes.length; k++) {
    acc = Buffer.concat([acc, bytes.subarray(k, k + 1)]);
    const result = decodeProxyHeader(acc, options);
    if (result.kind !== 'more') return { result, after: k + 1, early };
  }
  return { result: { kind: 'more' }, after: bytes.length, early };
}

t.test('valid headers', async (t) => {
  for (const row of VALID) {
    t.test(row.name, async (t) => {
      const input = Buffer.from(row.bytes);
      const result = decodeProxyHeader(input, row.options);
      t.same(view(result), row.expect, 'decodes to the expected header and length');
      t.same(input, row.bytes, 'input bytes are not modified');
      if (result.kind !== 'done' || row.expect.kind !== 'done') return;

      t.ok(result.length <= input.length, 'length never exceeds the buffer');
      t.equal(input.length - result.length, row.bytes.length - row.expect.length, 'bytes after the header are left as payload');

      t.same(prefixesNot(input, result.length, 'more', row.options), [], 'every strict prefix of the header is "more"');

      const delivered = deliverByteByByte(input, row.options);
      t.equal(delivered.after, result.length, 'byte-by-byte delivery completes exactly at the last header byte');
      t.same(view(delivered.result), row.expect, 'byte-by-byte delivery gives the same header');

      // Node hands out chunks that are views into a shared pool, at a non-zero byteOffset.
      const pooled = Buffer.concat([Buffer.from('garbage-before'), input]).subarray(14);
      t.same(view(decodeProxyHeader(pooled, row.options)), row.expect, 'same result from a buffer at a non-zero byteOffset');
    });
  }
});

t.test('invalid headers are errors with the expected reason, decided as early as certain', async (t) => {
  for (const row of INVALID) {
    t.test(row.name, async (t) => {
      const result = decodeProxyHeader(row.bytes, row.options);
      t.same(view(result), { kind: row.expect.kind, ...(row.expect.kind === 'error' ? { reason: row.expect.reason } : {}) });
      if (result.kind === 'error') t.match(result.message, /\S/, 'carries a message');
      assertDecidedOnce(t, row);
    });
  }
});

t.test('plain traffic is "none", decided at the first byte that leaves both signatures', async (t) => {
  for (const row of NOT_PROXY) {
    t.test(row.name, async (t) => {
      t.equal(decodeProxyHeader(row.bytes).kind, 'none');
      assertDecidedOnce(t, row);
    });
  }
});

/**
 * Finds the first prefix length that is not 'more': every shorter prefix is 'more', every longer
 * one (up to the whole row) gives the same kind and reason. Checks `decidedAt` when the row pins it.
 */
function assertDecidedOnce(t: Test, row: Vector): void {
  const results: DecodeResult[] = [];
  for (let n = 0; n <= row.bytes.length; n++) results.push(decodeProxyHeader(row.bytes.subarray(0, n), row.options));
  const first = results.findIndex((r) => r.kind !== 'more');
  if (first === -1) return void t.fail('is decided within the row bytes');
  const decided = view(results[first]!);
  const changed = results
    .slice(first)
    .map(view)
    .findIndex((v) => JSON.stringify(v) !== JSON.stringify(decided));
  t.equal(changed, -1, 'once decided, longer inputs keep the same answer');
  const expect = row.expect;
  if ((expect.kind === 'error' || expect.kind === 'none') && expect.decidedAt !== undefined) {
    t.equal(first, expect.decidedAt, `decided after exactly ${expect.decidedAt} bytes`);
  }
}

t.test('edge cases', async (t) => {
  t.equal(decodeProxyHeader(Buffer.alloc(0)).kind, 'more', 'an empty buffer needs more');
  t.equal(decodeProxyHeader(Buffer.from('P')).kind, 'more', '"P" may start v1');
  t.equal(decodeProxyHeader(Buffer.from([0x0d])).kind, 'more', 'CR may start v2');

  const line = 'PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n';
  const big = Buffer.concat([Buffer.from(line), Buffer.alloc(4096, 0x41)]);
  const r = decodeProxyHeader(big);
  t.same(r.kind === 'done' && r.length, line.length, 'the 107-byte limit is on the line, not on the payload after it');

  const tlvValue = Buffer.alloc(4096 - 16 - 12 - 3, 0x61);
  const atCap = Buffer.concat([
    hex`0d0a0d0a000d0a515549540a 21 11`,
    Buffer.from([(4096 - 16) >> 8, (4096 - 16) & 0xff]),
    hex`0a000001 0a000002 0001 0002 e0`,
    Buffer.from([tlvValue.length >> 8, tlvValue.length & 0xff]),
    tlvValue,
  ]);
  const capped = decodeProxyHeader(atCap);
  t.same(capped.kind === 'done' && capped.length, 4096, 'a v2 header of exactly the default 4096-byte cap is accepted');
  const lower = decodeProxyHeader(atCap, { maxV2Length: 4095 });
  t.same(lower.kind === 'error' && lower.reason, 'pp_too_long', 'and rejected when the cap is one byte lower');
  const higher = decodeProxyHeader(atCap.subarray(0, 16), { maxV2Length: 65551 });
  t.equal(higher.kind, 'more', 'a raised cap waits for the body instead');
});

t.test('TLV values are copies, not views of the read buffer', async (t) => {
  const row = VALID.find((v) => v.name.includes('ALPN'))!;
  const input = Buffer.from(row.bytes);
  const r = decodeProxyHeader(input);
  if (r.kind !== 'done') return t.fail('expected done');
  input.fill(0);
  t.equal(r.header.tlvs[0]!.value.toString(), 'h2', 'reusing the read buffer does not change a decoded TLV');
});
