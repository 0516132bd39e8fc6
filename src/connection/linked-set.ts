/**
 * The registries that gain and lose a member per connection or request (a listener's open
 * connections, the HTTP forwarder's connections, a listener's wait sweep, an HTTP/2 connection's
 * streams): a doubly-linked list threaded through the members themselves instead of a Set.
 *
 * Why not a Set (bench/README.md "The tail is the mark-compacts, and what starts them"): a Set
 * that keeps adding and deleting replaces its hash table every few dozen additions (deleted entries
 * fill it). The replaced table, once promoted, is old-generation garbage that still points at the
 * members it held when it was replaced, and a scavenge keeps whatever an old-generation object
 * points at: those connections, closed or not, and everything they reference (sockets, closures,
 * buffers) survive every scavenge until the next mark-compact, so they are promoted and die in
 * the old generation. Measured with short TCP connections (5,300 a second, Node 24): 1.5-1.6 MB
 * promoted per scavenge and 3-8 mark-compacts in 10 s with the listener's Set, 0.1 MB and none
 * with this list. A member removed from a LinkedSet has its links cleared, so a dead member
 * points at nothing.
 *
 * Each member type is in one LinkedSet at a time (the links are its fields).
 */
export interface Linked<T> {
  /** The set this member is in (a LinkedSet), null when in none. */
  linkSet: object | null;
  linkPrev: T | null;
  linkNext: T | null;
}

export class LinkedSet<T extends Linked<T>> implements Iterable<T> {
  private head: T | null = null;
  private tail: T | null = null;
  private count = 0;
  /** The member a walk goes to next (delete moves it on when it removes that member). */
  private cursor: T | null = null;
  private walking = false;

  get size(): number {
    return this.count;
  }

  has(member: T): boolean {
    return member.linkSet === this;
  }

  /** Add `member` at the end (a Set's order: insertion); a member already in this set stays where it is. */
  add(member: T): this {
    if (member.linkSet === this) return this;
    if (member.linkSet !== null) throw new Error('LinkedSet: the member is in another set');
    member.linkSet = this;
    member.linkPrev = this.tail;
    member.linkNext = null;
    if (this.tail === null) this.head = member;
    else this.tail.linkNext = member;
    this.tail = member;
    // A walk that had reached the end goes on to the new member, as a Set's iteration would.
    if (this.walking && this.cursor === null) this.cursor = member;
    this.count++;
    return this;
  }

  /** Remove `member`, clearing its links; false when it was not in this set. */
  delete(member: T): boolean {
    if (member.linkSet !== this) return false;
    const prev = member.linkPrev;
    const next = member.linkNext;
    if (member === this.cursor) this.cursor = next;
    if (prev === null) this.head = next;
    else prev.linkNext = next;
    if (next === null) this.tail = prev;
    else next.linkPrev = prev;
    member.linkSet = null;
    member.linkPrev = null;
    member.linkNext = null;
    this.count--;
    return true;
  }

  /**
   * Every member in insertion order, as a Set's forEach: the callback may delete any member (the
   * one given or others, not visited then) and add members (visited). One walk at a time: the
   * callers (the wait sweep, an HTTP/2 connection's stream timeouts) never nest them.
   */
  walk(fn: (member: T) => void): void {
    if (this.walking) throw new Error('LinkedSet: nested walk');
    this.walking = true;
    try {
      let m = this.head;
      while (m !== null) {
        this.cursor = m.linkNext;
        fn(m);
        m = this.cursor;
      }
    } finally {
      this.walking = false;
      this.cursor = null;
    }
  }

  /** The members as they are now, in insertion order (an array: the callers that walk them may close some). */
  [Symbol.iterator](): Iterator<T> {
    const all: T[] = [];
    for (let m = this.head; m !== null; m = m.linkNext) all.push(m);
    return all[Symbol.iterator]();
  }
}
