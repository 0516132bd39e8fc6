/**
 * SharedReadBuffer (transport/raw-socket.ts): the read buffer RawSockets and TlsByteSockets share,
 * which the next read overwrites; `copy` hands each read over in a Buffer of its own, through views
 * of the buffer kept by length.
 */
import t from 'tap';
import { SharedReadBuffer } from '../../../src/transport/raw-socket';

const pattern = (b: Buffer, seed: number, n = b.length): void => {
  for (let i = 0; i < n; i++) b[i] = (i * 7 + seed) & 0xff;
};

t.test('the first n bytes, in a buffer the next read does not touch', async (t) => {
  const shared = new SharedReadBuffer(64 * 1024);
  for (const n of [1, 2, 100, 4095, 4096, 4097, 16 * 1024, 64 * 1024]) {
    pattern(shared.bytes, 3);
    const want = Buffer.from(shared.bytes.subarray(0, n));
    const got = shared.copy(n);
    t.equal(got.length, n, `${n}: its length`);
    t.ok(got.equals(want), `${n}: its bytes`);
    shared.bytes.fill(n & 0xff, 0, n);
    t.ok(got.equals(want), `${n}: unchanged when the shared buffer is read into again`);
  }
});

t.test('a kept view reads what the buffer holds now; lengths that share a slot each get their own', async (t) => {
  const shared = new SharedReadBuffer(4096);
  pattern(shared.bytes, 1);
  const first = shared.copy(100);
  pattern(shared.bytes, 9);
  const again = shared.copy(100);
  t.ok(again.equals(shared.bytes.subarray(0, 100)), 'the second read of 100 bytes is the new bytes');
  t.notOk(again.equals(first), 'not the first read kept');
  // 100 and 356 fall in the same slot (modulo 256): each copy has its own length and bytes.
  for (const n of [356, 100, 356, 612, 100]) {
    pattern(shared.bytes, n);
    const c = shared.copy(n);
    t.equal(c.length, n, `${n} bytes`);
    t.ok(c.equals(shared.bytes.subarray(0, n)), `${n}: the bytes`);
  }
});
