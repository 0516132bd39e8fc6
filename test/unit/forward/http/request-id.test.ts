/**
 * Request ids (src/forward/http/request-id.ts): 32 lower-case hex characters of fresh randomness
 * each, as nginx's $request_id. Checked over several batches (256 ids per randomBytes call): no
 * repeat, no shared prefix or counter between consecutive ids, and the bits look uniform (each hex
 * digit position near 1/16 per value; a process prefix or counter fails that at once).
 */
import t from 'tap';
import { newRequestId, validRequestId } from '../../../../src/forward/http/request-id';

t.test('ids are 32 hex characters, never repeat, and share no prefix with the one before', async (t) => {
  const n = 256 * 8 + 17; // across batch boundaries
  const ids = Array.from({ length: n }, () => newRequestId());
  for (const id of ids) t.match(id, /^[0-9a-f]{32}$/);
  t.equal(new Set(ids).size, n, 'all distinct');
  let sharedPrefix = 0;
  for (let i = 1; i < n; i++) if (ids[i]!.slice(0, 8) === ids[i - 1]!.slice(0, 8)) sharedPrefix++;
  t.ok(sharedPrefix <= 1, `consecutive ids share their first 32 bits ${sharedPrefix} times (random: ~${(n / 2 ** 32).toExponential(1)})`);
  // Before: a per-process 16-hex prefix, then a counter: every id shared its first half.
  t.notOk(
    ids.every((id) => id.slice(0, 16) === ids[0]!.slice(0, 16)),
    'no per-process prefix',
  );
});

t.test('every hex digit position is uniform (no counter, no fixed part)', async (t) => {
  const n = 4096;
  const counts = Array.from({ length: 32 }, () => new Array<number>(16).fill(0));
  for (let k = 0; k < n; k++) {
    const id = newRequestId();
    for (let i = 0; i < 32; i++) counts[i]![parseInt(id[i]!, 16)]!++;
  }
  // Chi-square per position, 15 degrees of freedom: p = 1e-6 at ~54; a counter's low digits or a
  // fixed prefix give thousands.
  const worst = Math.max(...counts.map((c) => c.reduce((s, o) => s + (o - n / 16) ** 2 / (n / 16), 0)));
  t.ok(worst < 60, `worst position chi-square ${worst.toFixed(1)}`);
});

t.test('a received id is kept when it is 1-200 visible ASCII characters', async (t) => {
  t.ok(validRequestId('abc-123'));
  t.notOk(validRequestId(''));
  t.notOk(validRequestId('a b'));
  t.notOk(validRequestId('x'.repeat(201)));
});
