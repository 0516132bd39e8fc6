/**
 * Allowlist entries as stored and as the admin API accepts them:
 * `{cidr, action?: "allow" | "deny", comment?, expiresAt?}`.
 * Validation returns a value (field + sentence) for the caller to turn into a 4xx or a boot error.
 *
 * `action` absent means allow, and the canonical form leaves it out for an allow entry (`"allow"`
 * in is stored without it): documents written before deny entries existed keep their bytes and
 * their versions, and a list of allow entries stays as compact as before.
 */
import { parseCidr } from './cidr';

export interface AllowEntry {
  /** Canonical CIDR text (after validation), e.g. `10.0.0.0/8`, `2001:db8::/32`. */
  cidr: string;
  /**
   * `deny`: an address this entry decides is refused (`denied_by_entry`). Absent: allow. The most
   * specific entry covering an address decides (matcher.ts); canonical entries never hold `allow`.
   */
  action?: 'allow' | 'deny';
  comment?: string;
  /** RFC 3339 date-time; the entry stops matching at this instant. */
  expiresAt?: string;
}

type EntryValidation = { ok: true; entry: AllowEntry } | { ok: false; field: string; message: string };

/** Comments land in the store, the audit log and API responses: keep them bounded. */
const MAX_COMMENT_LENGTH = 1024;

const KNOWN_FIELDS = new Set(['cidr', 'action', 'comment', 'expiresAt']);

/**
 * Validate an untrusted entry and return a fresh, frozen, canonical copy.
 *
 * Unknown fields are rejected rather than dropped: a typo such as `expires_at` would otherwise
 * silently turn a temporary grant into a permanent one.
 */
export function validateEntry(e: unknown): EntryValidation {
  if (typeof e !== 'object' || e === null || Array.isArray(e)) {
    return { ok: false, field: '', message: 'entry must be an object {cidr, action?, comment?, expiresAt?}' };
  }
  const obj = e as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    if (!KNOWN_FIELDS.has(key)) {
      return {
        ok: false,
        field: key,
        message: `unknown field ${JSON.stringify(key).slice(0, 80)} (allowed: cidr, action, comment, expiresAt)`,
      };
    }
  }
  if (obj.cidr === undefined) return { ok: false, field: 'cidr', message: 'cidr is required' };
  if (typeof obj.cidr !== 'string') return { ok: false, field: 'cidr', message: 'cidr must be a string' };
  const parsed = parseCidr(obj.cidr);
  if (!parsed.ok) return { ok: false, field: 'cidr', message: parsed.message };
  const entry: AllowEntry = { cidr: parsed.cidr.text };

  if (obj.action !== undefined) {
    if (obj.action !== 'allow' && obj.action !== 'deny') {
      return { ok: false, field: 'action', message: `action ${JSON.stringify(obj.action)?.slice(0, 40)} must be "allow" or "deny"` };
    }
    if (obj.action === 'deny') entry.action = 'deny';
  }

  if (obj.comment !== undefined) {
    if (typeof obj.comment !== 'string') {
      return { ok: false, field: 'comment', message: 'comment must be a string' };
    }
    if (obj.comment.length > MAX_COMMENT_LENGTH) {
      return { ok: false, field: 'comment', message: `comment too long (${obj.comment.length} characters, at most ${MAX_COMMENT_LENGTH})` };
    }
    entry.comment = obj.comment;
  }

  if (obj.expiresAt !== undefined) {
    if (typeof obj.expiresAt !== 'string') {
      return { ok: false, field: 'expiresAt', message: 'expiresAt must be an RFC 3339 date-time string' };
    }
    const err = rfc3339Error(obj.expiresAt);
    if (err !== null) return { ok: false, field: 'expiresAt', message: err };
    entry.expiresAt = obj.expiresAt;
  }
  return { ok: true, entry: Object.freeze(entry) };
}

/**
 * A CIDR message that quotes the value (admin API answers; config errors quote it through
 * config/errors.ts `problem`): cidr.ts's messages are being changed to quote it
 * themselves; until then (and after, without doubling) the value is put in front here, so every
 * 4xx and config error names the CIDR it refuses.
 */
export function quoteCidr(text: string, message: string): string {
  const shown = JSON.stringify(text.slice(0, 128));
  return message.includes(shown) ? message : `${shown}: ${message}`;
}

// RFC 3339 section 5.6 date-time: full-date "T" full-time, with a mandatory offset (Z or
// +hh:mm). Lower-case t/z are allowed by the RFC. The date-only and offset-less forms that
// Date.parse also accepts are refused: they are read in local time, so the instant would depend
// on the TZ of whichever replica parses them.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** Why `text` is not an RFC 3339 date-time we accept, or null. */
function rfc3339Error(text: string): string | null {
  const m = RFC3339.exec(text);
  const shown = JSON.stringify(text.slice(0, 64));
  if (m === null) {
    return `expiresAt ${shown} is not an RFC 3339 date-time (e.g. 2025-01-31T18:00:00Z)`;
  }
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12) return `expiresAt ${shown}: month ${month} out of range`;
  if (day < 1 || day > daysInMonth(year, month)) return `expiresAt ${shown}: day ${day} out of range`;
  if (hour > 23) return `expiresAt ${shown}: hour ${hour} out of range`;
  if (minute > 59) return `expiresAt ${shown}: minute ${minute} out of range`;
  // RFC 3339 allows second 60 (leap second); JavaScript time has none, so refuse rather than
  // guess which instant was meant.
  if (second > 59) return `expiresAt ${shown}: second ${second} out of range (leap seconds are not supported)`;
  if (m[9] !== undefined && (Number(m[10]) > 23 || Number(m[11]) > 59)) {
    return `expiresAt ${shown}: offset ${m[9]}${m[10]}:${m[11]} out of range`;
  }
  return null;
}

/**
 * Milliseconds since the epoch of a validated RFC 3339 date-time, or NaN when invalid.
 * Fractions beyond milliseconds are truncated.
 */
export function parseRfc3339(text: string): number {
  if (rfc3339Error(text) !== null) return NaN;
  const m = RFC3339.exec(text)!;
  const frac = m[7] === undefined ? '' : m[7].slice(0, 4);
  const iso = `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}${frac}` + (m[8] !== undefined ? 'Z' : `${m[9]}${m[10]}:${m[11]}`);
  return Date.parse(iso);
}
