/**
 * Session ticket keys (src/tls/session-tickets.ts): a listener's own keys rotate on their timer;
 * keys adopted from the cluster primary do not rotate here; the primary's set rotates every
 * listener's key together and hands the whole set on; the IPC encoding round-trips.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { decodeTicketKeys, encodeTicketKeys } from '../../../src/cluster/protocol';
import { ClusterTicketKeys, TICKET_KEY_BYTES, TicketKeys } from '../../../src/tls/session-tickets';
import { waitFor } from '../../helpers/net';

t.test('own keys: 48 random bytes, a new key at each rotation, onChange told', async (t) => {
  const k = new TicketKeys(20);
  const seen: Buffer[] = [k.current];
  k.onChange(() => seen.push(k.current));
  t.equal(k.current.length, TICKET_KEY_BYTES);
  t.equal(k.external, false, 'its own until adopted');
  k.start();
  t.teardown(() => k.stop());
  await waitFor(() => seen.length >= 3, 5000, 'two rotations');
  k.stop();
  t.equal(new Set(seen.map((b) => b.toString('hex'))).size, seen.length, 'every rotation made a different key');
});

t.test('adopted keys are used as sent and never rotated here', async (t) => {
  const adopted = new TicketKeys(20);
  const control = new TicketKeys(20);
  let changes = 0;
  let controlChanges = 0;
  adopted.onChange(() => changes++);
  control.onChange(() => controlChanges++);
  const key = randomBytes(TICKET_KEY_BYTES);
  adopted.start();
  adopted.adopt(key);
  adopted.start(); // CertStore.start() after the worker adopted: still no timer
  control.start();
  t.teardown(() => {
    adopted.stop();
    control.stop();
  });
  await waitFor(() => controlChanges >= 3, 5000, 'the control instance rotated three times');
  t.equal(adopted.current, key, 'the adopted key is still in force');
  t.equal(changes, 1, 'one change: the adoption');
  t.equal(adopted.external, true);
  adopted.adopt(Buffer.from(key));
  t.equal(changes, 1, 'the same key again (a repeated message) rebuilds nothing');
  const rows = [
    { desc: 'empty', key: Buffer.alloc(0) },
    { desc: 'too short', key: Buffer.alloc(32) },
    { desc: 'too long', key: Buffer.alloc(80) },
  ];
  for (const row of rows) {
    t.throws(() => adopted.adopt(row.key), new RegExp(`48 bytes, not ${row.key.length}`), `${row.desc}: refused`);
    t.equal(adopted.current, key, `${row.desc}: the key in force stays`);
  }
});

t.test("the primary's keys: one per listener, all rotated together, the set handed on", async (t) => {
  const sent: Array<ReadonlyMap<string, Buffer>> = [];
  const c = new ClusterTicketKeys(['web', 'api'], (keys) => sent.push(keys), 20);
  t.same(c.listeners, ['web', 'api']);
  const start = c.current();
  t.same([...start.keys()], ['web', 'api']);
  t.not(start.get('web')!.toString('hex'), start.get('api')!.toString('hex'), 'each listener has its own key');
  c.rotate();
  t.equal(sent.length, 1, 'a rotation hands the set on');
  for (const name of ['web', 'api']) {
    t.equal(sent[0]!.get(name)!.length, TICKET_KEY_BYTES, `${name}: 48 bytes`);
    t.not(sent[0]!.get(name)!.toString('hex'), start.get(name)!.toString('hex'), `${name}: a new key`);
    t.equal(c.current().get(name), sent[0]!.get(name), `${name}: the key sent is the key in force`);
  }
  c.start();
  t.teardown(() => c.stop());
  await waitFor(() => sent.length >= 3, 5000, 'the timer rotates');
  c.stop();
  const empty = new ClusterTicketKeys([], () => undefined, 20);
  t.same(empty.current(), new Map(), 'no TLS listener with tickets: no keys');
});

t.test('the IPC encoding round-trips every key byte for byte', async (t) => {
  const keys = new Map([
    ['web', randomBytes(48)],
    ['with space', randomBytes(48)],
    ['zeros', Buffer.alloc(48)],
  ]);
  const wire = JSON.parse(JSON.stringify(encodeTicketKeys(keys))) as Record<string, string>; // the channel is JSON
  const back = decodeTicketKeys(wire);
  t.same([...back.keys()], [...keys.keys()]);
  for (const [name, key] of keys) t.ok(back.get(name)!.equals(key), `${name}: same bytes`);
});
