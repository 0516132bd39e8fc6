/**
 * src/transport/byte-socket.ts CloseHooks: the first three hooks live in fields and the rest in a
 * list, and however many a socket has, each runs once, in the order added, when the socket closes;
 * a hook added once they ran (or while they run) runs in a microtask, never inside onClose().
 */
import t from 'tap';
import { CloseHooks } from '../../../src/transport/byte-socket';

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
