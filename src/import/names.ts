/**
 * Route and allowlist names for imported objects: bounded labels (the metric label rule,
 * `[A-Za-z0-9][A-Za-z0-9_.-]{0,62}`), stable from one import to the next.
 */
import crypto from 'node:crypto';

const NAME_MAX = 63;

/**
 * A route or list name from `base` (a bounded label: letters, digits, `.`, `_`, `-`, at most 63):
 * when too long or already taken, cut and followed by 8 hex digits of the SHA-256 of `key`
 * (which is unique), so names stay stable from one import to the next.
 */
export function uniqueName(base: string, key: string, taken: Set<string>): string {
  let clean = base.replace(/[^A-Za-z0-9_.-]/g, '-').replace(/^[^A-Za-z0-9]+/, '');
  if (clean === '') clean = 'x';
  let name = clean;
  if (name.length > NAME_MAX || taken.has(name)) {
    const hash = crypto.createHash('sha256').update(key).digest('hex');
    for (let n = 8; n <= 32; n += 4) {
      name = `${clean.slice(0, NAME_MAX - n - 1).replace(/[^A-Za-z0-9]+$/, '')}-${hash.slice(0, n)}`;
      if (!taken.has(name)) break;
    }
  }
  taken.add(name);
  return name;
}
