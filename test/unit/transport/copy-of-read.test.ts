/**
 * copyOfRead (transport/raw-socket.ts): what RawSocket and TlsByteSocket hand the engine from the
 * read buffer every socket shares, which the next read overwrites.
 */
import t from 'tap';
import { copyOfRead } from '../../../src/transport/raw-socket';

t.test('the first n bytes, in a buffer the next read does not touch', async (t) => {
  const shared = Buffer.allocUnsafeSlow(64 * 1024);
  for (let i = 0; i < shared.length; i++) shared[i] = (i * 7 + 3) & 0xff;
  for (const n of [1, 2, 100, 4095, 4096, 4097, 16 * 1024, 64 * 1024]) {
    const want = Buffer.from(shared.subarray(0, n));
    const got = copyOfRead(shared, n);
    t.equal(got.length, n, `${n}: its length`);
    t.ok(got.equals(want), `${n}: its bytes`);
    shared.fill(n & 0xff, 0, n);
    t.ok(got.equals(want), `${n}: unchanged when the shared buffer is read into again`);
    for (let i = 0; i < n; i++) shared[i] = (i * 7 + 3) & 0xff;
  }
});

t.test('a shared buffer that starts inside its ArrayBuffer is read from its own start', async (t) => {
  const backing = Buffer.alloc(1024, 0xee);
  const shared = backing.subarray(100, 600);
  shared.write('hello', 0, 'latin1');
  t.equal(copyOfRead(shared, 5).toString('latin1'), 'hello');
});
