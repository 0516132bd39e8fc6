/**
 * "Did you mean" for an unknown config key: the known key nearest by edit distance (Damerau:
 * an adjacent swap counts one, as `proxyProtocl` / `porxyProtocol` are typed), case ignored, if it
 * is near enough to be the one meant (at most 1 edit for keys up to 4 characters, 2 up to 8, then
 * a quarter of the length); else a key of that name one section down (`trustedProxies` written
 * beside `listen` belongs under `http`). Nothing is suggested rather than a far guess.
 */

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
export function editDistance(a: string, b: string): number {
  const n = a.length;
  const m = b.length;
  if (n === 0) return m;
  if (m === 0) return n;
  let prev2 = new Array<number>(m + 1).fill(0);
  let prev = Array.from({ length: m + 1 }, (_, j) => j);
  let cur = new Array<number>(m + 1).fill(0);
  for (let i = 1; i <= n; i++) {
    cur[0] = i;
    for (let j = 1; j <= m; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, prev2[j - 2]! + 1);
      cur[j] = d;
    }
    [prev2, prev, cur] = [prev, cur, prev2];
  }
  return prev[m]!;
}

function nearEnough(key: string, distance: number): boolean {
  const len = key.length;
  return distance <= (len <= 4 ? 1 : len <= 8 ? 2 : Math.max(2, Math.floor(len / 4)));
}

/** The known key `key` was probably meant to be, or null. */
export function nearestKey(key: string, known: readonly string[]): string | null {
  const lower = key.toLowerCase();
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase());
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  // Distance 0 is a key written in another case (`ProxyProtocol`).
  return best !== null && nearEnough(key, bestDistance) ? best : null;
}

interface ObjectSchema {
  properties?: Record<string, unknown>;
  type?: unknown;
}

/**
 * The sentence after "unknown key" for `key` in an object whose schema is `parent`: `did you mean
 * "x"?`, `did you mean http.trustedProxies? (an option of the http section)`, or null.
 */
export function suggestKey(key: string, parent: unknown): string | null {
  const props = (parent as ObjectSchema | null)?.properties;
  if (props === undefined) return null;
  const own = nearestKey(key, Object.keys(props));
  if (own !== null) return `did you mean ${JSON.stringify(own)}?`;
  for (const [section, schema] of Object.entries(props)) {
    const inner = (schema as ObjectSchema).properties;
    if (inner === undefined) continue;
    const hit = nearestKey(key, Object.keys(inner));
    if (hit !== null && hit.toLowerCase() === key.toLowerCase())
      return `did you mean ${section}.${hit}? (an option of the ${section} section)`;
  }
  return null;
}
