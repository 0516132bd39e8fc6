/**
 * src/transport/byte-socket.ts CloseHooks: the first three hooks live in fields and the rest in a
 * list, and however many a socket has, each runs once, in the order added, when the socket closes;
 * a hook added once they ran (or while they run) runs in a microtask, never inside onClose().
 * Every hook is called with the socket as `this`, so one function shared by every socket finds
 * its connection in the socket's `owner` (transport/byte-socket.ts).
 */
import t from 'tap';
import { CloseHooks, type Owned } from '../../../src/transport/byte-socket';

class Hooked extends CloseHooks {
  close(): void {
    this.closed();
  }
}

const microtask = (): Promise<void> => new Promise<void>((r) => queueMicrotask(r));

for (const n of [0, 1, 2, 3, 4, 6]) {
  t.test(`${n} hook(s): each once, in the order added`, async (t) => {
    const s = new Hooked();
    const ran: number[] = [];
    for (let i = 0; i < n; i++) s.onClose(() => ran.push(i));
    t.same(ran, [], 'none before the close');
    s.close();
    t.same(
      ran,
      Array.from({ length: n }, (_, i) => i),
      'all of them, in order, at the close',
    );
    s.close();
    await microtask();
    t.equal(ran.length, n, 'a second close runs none again');
  });
}

t.test('a hook added after the close, or by a hook while they run, runs in a microtask, once', async (t) => {
  const s = new Hooked();
  const ran: string[] = [];
  s.onClose(() => ran.push('a'));
  s.onClose(() => {
    ran.push('b');
    s.onClose(() => ran.push('added by b'));
  });
  s.onClose(() => ran.push('c'));
  s.onClose(() => ran.push('d'));
  s.close();
  t.same(ran, ['a', 'b', 'c', 'd'], 'the four at the close; the one b added is not run inside it');
  s.onClose(() => ran.push('late'));
  t.same(ran, ['a', 'b', 'c', 'd'], 'not inside onClose() either');
  await microtask();
  await microtask();
  t.same(ran, ['a', 'b', 'c', 'd', 'added by b', 'late'], 'both in microtasks, in the order added');
  s.close();
  await microtask();
  t.equal(ran.length, 6, 'each once');
});

t.test('every hook, in a field, in the list or late, gets the socket as `this`, and so its owner', async (t) => {
  // One function for all sockets, as the relay's and the upstream pool's close hooks are.
  const seen: [string, object | null][] = [];
  function shared(this: Owned): void {
    seen.push([(this.owner as { name: string }).name, this.owner]);
  }
  const a = new Hooked();
  const b = new Hooked();
  const ownerA = { name: 'a' };
  const ownerB = { name: 'b' };
  a.owner = ownerA;
  b.owner = ownerB;
  for (let i = 0; i < 5; i++) a.onClose(shared); // three in fields, two in the list
  b.onClose(shared);
  b.close();
  a.close();
  t.same(
    seen.map((x) => x[0]),
    ['b', 'a', 'a', 'a', 'a', 'a'],
    "each socket's hooks saw that socket's owner",
  );
  t.ok(
    seen.every(([name, owner]) => owner === (name === 'a' ? ownerA : ownerB)),
    'the owner objects themselves',
  );
  b.onClose(shared);
  await microtask();
  t.same(seen[6], ['b', ownerB], 'a late hook (a microtask) gets its socket too');
});
