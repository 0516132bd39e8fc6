/** IPGATE_RELAY_READ_BUFFER: bytes or 0; anything else is refused with the variable and the value. */
import t from 'tap';
import { DEFAULT_READ_BUFFER_BYTES, parseReadBufferEnv } from '../../../../src/forward/tcp/large-reads';

t.test('unset or empty: the default', async (t) => {
  t.equal(parseReadBufferEnv(undefined), DEFAULT_READ_BUFFER_BYTES);
  t.equal(parseReadBufferEnv(''), DEFAULT_READ_BUFFER_BYTES);
});

t.test('0 turns large reads off; sizes within bounds are taken as given', async (t) => {
  t.equal(parseReadBufferEnv('0'), 0);
  t.equal(parseReadBufferEnv('65536'), 65_536);
  t.equal(parseReadBufferEnv('1048576'), 1_048_576);
  t.equal(parseReadBufferEnv('16777216'), 16_777_216);
});

t.test('bad values name the variable and the value', async (t) => {
  for (const [value, why] of [
    ['64k', /not a whole number of bytes/],
    ['-1', /not a whole number of bytes/],
    ['1.5', /not a whole number of bytes/],
    [' 65536', /not a whole number of bytes/],
    ['4096', /must be 0 \(off\) or 65536\.\.16777216 bytes/],
    ['16777217', /must be 0 \(off\) or 65536\.\.16777216 bytes/],
  ] as const) {
    t.throws(() => parseReadBufferEnv(value), { message: why }, value);
    t.throws(
      () => parseReadBufferEnv(value),
      { message: new RegExp(`^IPGATE_RELAY_READ_BUFFER: "${value.replace(/[.]/g, '\\.')}"`) },
      `${value}: names it`,
    );
  }
});
