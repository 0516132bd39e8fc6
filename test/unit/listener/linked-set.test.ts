/**
 * The registries of open connections and waits (src/connection/linked-set.ts): Set's behaviour for
 * what the callers use (add, delete, has, size, iteration), links cleared on removal (the reason
 * it exists: a removed member points at nothing), and walks that delete as they go.
 */
import t from 'tap';
import { type Linked, LinkedSet } from '../../../src/connection/linked-set';

class Member implements Linked<Member> {
  linkSet: LinkedSet<Member> | null = null;
  linkPrev: Member | null = null;
  linkNext: Member | null = null;
  constructor(readonly id: number) {}
}

const ids = (s: Iterable<Member>): number[] => [...s].map((m) => m.id);
const members = (n: number): Member[] => Array.from({ length: n }, (_, i) => new Member(i));

t.test('add, has, size and iteration (insertion order, as a Set); adding twice keeps one', async (t) => {
  const s = new LinkedSet<Member>();
  const [a, b, c] = members(3) as [Member, Member, Member];
  t.equal(s.size, 0, 'empty');
  t.same(ids(s), [], 'nothing to iterate');
  s.add(a).add(b).add(c);
  t.equal(s.size, 3);
  t.same(ids(s), [0, 1, 2], 'oldest first');
  s.add(b);
  t.equal(s.size, 3, 'a second add of a member changes nothing');
  t.same(ids(s), [0, 1, 2]);
  t.ok(s.has(b), 'has a member');
  t.notOk(new LinkedSet<Member>().has(b), 'another set does not have it');
});

t.test('delete from the head, the middle and the tail clears the links of what it removed', async (t) => {
  for (const [what, victim, left] of [
    ['head', 0, [1, 2, 3, 4]],
    ['middle', 2, [0, 1, 3, 4]],
    ['tail', 4, [0, 1, 2, 3]],
  ] as const) {
    const s = new LinkedSet<Member>();
    const all = members(5);
    for (const m of all) s.add(m);
    const v = all[victim]!;
    t.ok(s.delete(v), `${what}: deleted`);
    t.same(ids(s), left, `${what}: the rest in order`);
    t.equal(s.size, 4, `${what}: size`);
    t.same([v.linkSet, v.linkPrev, v.linkNext], [null, null, null], `${what}: the removed member points at nothing`);
    t.notOk(s.delete(v), `${what}: a second delete is false`);
    t.equal(s.size, 4, `${what}: and changes nothing`);
    s.add(new Member(9));
    t.same(ids(s), [...left, 9], `${what}: a new member goes at the end`);
  }
});

t.test('a member in one set is refused by another; after delete it may join one', async (t) => {
  const s1 = new LinkedSet<Member>();
  const s2 = new LinkedSet<Member>();
  const m = new Member(7);
  s1.add(m);
  t.throws(() => s2.add(m), /another set/, 'refused while in s1');
  t.notOk(s2.delete(m), 's2 does not delete what it does not hold');
  t.equal(s1.size, 1, 's1 unchanged');
  s1.delete(m);
  s2.add(m);
  t.same([ids(s1), ids(s2)], [[], [7]], 'moved');
});

t.test('walk visits in insertion order while the callback deletes and adds members, as a Set does', async (t) => {
  const rows: [string, (s: LinkedSet<Member>, m: Member, all: Member[]) => void, number[], number[]][] = [
    ['deletes nothing', () => undefined, [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]],
    ['deletes the member given', (s, m) => s.delete(m), [0, 1, 2, 3, 4, 5], []],
    ['deletes its successor', (s, m, all) => s.delete(all[m.id + 1] ?? m), [0, 2, 4], [0, 2, 4]],
    ['deletes itself and its successor', (s, m, all) => s.delete(m) && s.delete(all[m.id + 1] ?? m), [0, 2, 4], []],
    ['deletes the last one', (s, _m, all) => s.delete(all[5]!), [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]],
    [
      'adds a member once (visited at the end)',
      (s, m) => (m.id === 2 ? s.add(new Member(99)) : undefined),
      [0, 1, 2, 3, 4, 5, 99],
      [0, 1, 2, 3, 4, 5, 99],
    ],
    [
      'adds a member at the last one (visited)',
      (s, m) => (m.id === 5 ? s.add(new Member(99)) : undefined),
      [0, 1, 2, 3, 4, 5, 99],
      [0, 1, 2, 3, 4, 5, 99],
    ],
  ];
  for (const [what, fn, visited, left] of rows) {
    const s = new LinkedSet<Member>();
    const all = members(6);
    for (const m of all) s.add(m);
    const seen: number[] = [];
    s.walk((m) => {
      seen.push(m.id);
      fn(s, m, all);
    });
    t.same(seen, visited, `${what}: visited`);
    t.same(ids(s), left, `${what}: left`);
    t.equal(s.size, left.length, `${what}: size`);
  }
});

t.test('a nested walk is refused, and a throwing callback leaves the set walkable', async (t) => {
  const s = new LinkedSet<Member>();
  for (const m of members(3)) s.add(m);
  t.throws(() => s.walk(() => s.walk(() => undefined)), /nested/);
  t.throws(() =>
    s.walk(() => {
      throw new Error('boom');
    }),
  );
  const seen: number[] = [];
  s.walk((m) => seen.push(m.id));
  t.same(seen, [0, 1, 2], 'walks again after both');
});

t.test('iteration is a snapshot: deleting while iterating does not skip', async (t) => {
  const s = new LinkedSet<Member>();
  for (const m of members(5)) s.add(m);
  const seen: number[] = [];
  for (const m of s) {
    seen.push(m.id);
    s.delete(m);
  }
  t.same(seen, [0, 1, 2, 3, 4]);
  t.equal(s.size, 0);
});
