/**
 * The store document: the one format every backend holds (the file's content, the ConfigMap's
 * `allowlists.json` key), parsed and validated here so a backend never has its own idea of "valid".
 *
 * ```json
 * { "format": "ipgate.allowlists/v1",
 *   "lists": { "main": { "revision": 7, "entries": [ { "cidr": "10.0.0.0/8", "comment": "office" } ] } } }
 * ```
 * `revision` counts writes of that list; the list's version (ETag) is `<revision>-<content hash>`,
 * so a hand edit that changes entries without bumping the revision still changes the version.
 *
 * Parsing is all-or-nothing: one bad entry refuses the whole document (Caddy: "reading the list at
 * runtime must not fail: keep the last good list") rather than applying a partial list, which could
 * silently lock out or admit a range.
 */
import { createHash } from 'node:crypto';
import { validateEntry, type AllowEntry } from '../allowlist/entry';
import type { StoredList, StoreSnapshot } from './store';

export const DOCUMENT_FORMAT = 'ipgate.allowlists/v1';
/** Same rule as config `allowlists` keys and listener names. */
export const LIST_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
/** Entries per list. The matcher is fine far beyond this (bench/micro/matcher.ts); the cap bounds
 *  the document (a ConfigMap holds at most 1 MiB) and the admin API's request bodies. */
export const MAX_ENTRIES = 100_000;

type DocumentParse = { ok: true; lists: Map<string, StoredList> } | { ok: false; reason: string };

export function listVersion(revision: number, entries: readonly AllowEntry[]): string {
  const hash = createHash('sha256').update(JSON.stringify(entries)).digest('hex').slice(0, 12);
  return `${revision}-${hash}`;
}

/** The revision part of a version (0 for anything unexpected). */
export function revisionOf(version: string): number {
  const n = Number.parseInt(version, 10);
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

export function makeList(name: string, entries: readonly AllowEntry[], revision: number): StoredList {
  return Object.freeze({ name, entries: Object.freeze([...entries]), version: listVersion(revision, entries) });
}

/** Why a list of entries cannot be stored, or null. `entries` are already validated one by one. */
export function duplicateCidr(entries: readonly AllowEntry[]): { index: number; cidr: string } | null {
  const seen = new Set<string>();
  for (const [index, e] of entries.entries()) {
    if (seen.has(e.cidr)) return { index, cidr: e.cidr };
    seen.add(e.cidr);
  }
  return null;
}

export function parseDocument(text: string): DocumentParse {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: `not valid JSON: ${(err as Error).message}` };
  }
  if (!isObject(raw)) return { ok: false, reason: 'the document must be a JSON object {format, lists}' };
  for (const key of Object.keys(raw)) {
    if (key !== 'format' && key !== 'lists') return { ok: false, reason: `unknown top-level field ${JSON.stringify(key)}` };
  }
  if (raw.format !== DOCUMENT_FORMAT) {
    return { ok: false, reason: `format must be ${JSON.stringify(DOCUMENT_FORMAT)}, got ${JSON.stringify(raw.format)?.slice(0, 60)}` };
  }
  if (!isObject(raw.lists)) return { ok: false, reason: 'lists must be an object {name: {revision, entries}}' };
  const lists = new Map<string, StoredList>();
  for (const [name, value] of Object.entries(raw.lists)) {
    const at = `lists.${name}`;
    if (!LIST_NAME.test(name)) return { ok: false, reason: `${JSON.stringify(name).slice(0, 70)}: not a valid list name` };
    if (!isObject(value)) return { ok: false, reason: `${at}: must be an object {revision, entries}` };
    for (const key of Object.keys(value)) {
      if (key !== 'revision' && key !== 'entries') return { ok: false, reason: `${at}: unknown field ${JSON.stringify(key)}` };
    }
    const revision = value.revision;
    if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 0) {
      return { ok: false, reason: `${at}.revision: must be a non-negative integer` };
    }
    if (!Array.isArray(value.entries)) return { ok: false, reason: `${at}.entries: must be an array` };
    if (value.entries.length > MAX_ENTRIES) return { ok: false, reason: `${at}.entries: more than ${MAX_ENTRIES} entries` };
    const entries: AllowEntry[] = [];
    for (const [i, e] of (value.entries as unknown[]).entries()) {
      // A bare string is an allow entry with nothing else (the compact form, serializeDocument).
      const r = validateEntry(typeof e === 'string' ? { cidr: e } : e);
      if (!r.ok) return { ok: false, reason: `${at}.entries[${i}]${r.field ? `.${r.field}` : ''}: ${r.message}` };
      entries.push(r.entry);
    }
    const dup = duplicateCidr(entries);
    if (dup) return { ok: false, reason: `${at}.entries[${dup.index}].cidr: ${dup.cidr} is listed twice` };
    lists.set(name, makeList(name, entries, revision));
  }
  return { ok: true, lists };
}

/**
 * The document text. `compact` (the Kubernetes store, whose ConfigMap holds at most 1 MiB): no
 * indentation, and an allow entry with nothing but its CIDR written as the bare string
 * (`"10.1.2.3/32"` instead of `{"cidr":"10.1.2.3/32"}`). Indented objects cost ~56 bytes per /32
 * entry, compact objects ~27 (40,000 of them: 1.08 MB, over the limit), strings ~18 (720 kB):
 * test/integration/store-kubernetes-capacity.test.ts measures it. Every reader accepts both forms
 * (parseDocument); an ipgate older than this change refuses string entries, so roll back only to
 * a build with it. The file store stays indented objects, one entry per line, for people to read.
 */
export function serializeDocument(snapshot: StoreSnapshot, compact = false): string {
  const lists: Record<string, { revision: number; entries: ReadonlyArray<AllowEntry | string> }> = {};
  for (const name of [...snapshot.lists.keys()].sort()) {
    const l = snapshot.lists.get(name)!;
    lists[name] = { revision: revisionOf(l.version), entries: compact ? l.entries.map(compactEntry) : l.entries };
  }
  return `${compact ? JSON.stringify({ format: DOCUMENT_FORMAT, lists }) : JSON.stringify({ format: DOCUMENT_FORMAT, lists }, null, 2)}\n`;
}

/** An entry as the compact document writes it: the bare CIDR when that is all it has. */
function compactEntry(e: AllowEntry): AllowEntry | string {
  return e.action === undefined && e.comment === undefined && e.expiresAt === undefined ? e.cidr : e;
}

/** Entries in a snapshot, and the bytes their JSON takes (for "how many would fit"). */
export function entryBytes(snapshot: StoreSnapshot): { entries: number; bytes: number } {
  let entries = 0;
  let bytes = 0;
  for (const l of snapshot.lists.values()) {
    entries += l.entries.length;
    for (const e of l.entries) bytes += Buffer.byteLength(JSON.stringify(compactEntry(e))) + 1;
  }
  return { entries, bytes };
}

/**
 * Seed lists from the config: validated entries (config validation already ran), duplicates
 * dropped (the matcher's rule: the first one wins).
 */
export function seedList(name: string, entries: readonly AllowEntry[]): StoredList {
  const seen = new Set<string>();
  const kept: AllowEntry[] = [];
  for (const e of entries) {
    const r = validateEntry(e);
    if (!r.ok || seen.has(r.entry.cidr)) continue;
    seen.add(r.entry.cidr);
    kept.push(r.entry);
  }
  return makeList(name, kept, 1);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
