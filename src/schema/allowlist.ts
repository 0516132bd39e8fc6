/**
 * Allowlists as the config file writes them, and the one shape they have once loaded.
 *
 * ```yaml
 * allowlists:
 *   office:                     # array form: the store owns it, this only seeds an empty store
 *     - 10.0.0.0/8
 *   partners:
 *     source: config            # the config owns it (GitOps): edits to this file apply live
 *     allowTemporary: true      # admin API may add entries that carry expiresAt
 *     entries:
 *       - 203.0.113.0/24
 *       - {cidr: 203.0.113.66/32, action: deny, comment: compromised}
 *   balancers:
 *     source: config
 *     file: lists/balancers.yaml   # the entries in their own file (a mounted ConfigMap)
 * ```
 *
 * Ajv fills in no default inside `anyOf`, so validate.ts turns both forms into `AllowlistConfig`,
 * taking the defaults from `AllowlistObjectSchema` (`allowlistDefault`).
 */
import { ListConfigMapSchema, type ListConfigMap } from './list-configmap';
import { Enum, NAME_PATTERN, Section, Type, type Static } from './kit';

/** One entry written as an object (a bare CIDR string is an allow entry). */
const AllowEntrySchema = Section({
  /** The CIDR, or one address (a /32 or /128). */
  cidr: Type.String(),
  /** `allow` or `deny`; left out: allow. The most specific entry decides; deny wins at the same prefix. */
  action: Type.Optional(Enum(['allow', 'deny'])),
  /** Free text kept with the entry (store, audit log, API responses). */
  comment: Type.Optional(Type.String({ maxLength: 1024 })),
  /** RFC 3339 date-time; the entry stops matching at this instant. Left out: never. */
  expiresAt: Type.Optional(Type.String()),
});

/** An entry as written: a CIDR string (allow), or the object form. */
const EntryInputSchema = Type.Union([Type.String(), AllowEntrySchema]);

/** The object form of a list: who owns it, and its entries (inline or in a file). */
const AllowlistObjectSchema = Section({
  /**
   * Who owns the list. Required in the object form (ownership is written down, never guessed).
   * `config`: this file (or `file`) is the truth; a change to it is applied live without a
   *   restart (the file is watched, re-read and fully validated; a bad file is refused with a
   *   log line and the lists in force stay); admin API writes are refused with 409.
   * `store`: the store is the truth (the admin API edits it); `entries` only seed an empty
   *   store, and a seed that differs from the store is reported once at start-up and in /readyz.
   */
  source: Enum(['config', 'store']),
  /** The entries (strings or objects). With `file`, must be left out. */
  entries: Type.Optional(Type.Array(EntryInputSchema)),
  /**
   * `source: config` only: a YAML or JSON file holding the entries array (relative paths are
   * relative to the config file), watched like the config itself. The chart mounts its
   * declarative lists this way, so an edit does not change the pod template. Left out: the
   * entries are inline. Once loaded, `entries` holds the file's entries and `file` its absolute
   * path (null for inline entries).
   */
  file: Type.Optional(Type.String({ minLength: 1 })),
  /**
   * `source: config` only: the entries in a ConfigMap key, read and watched through the API
   * (list-configmap.ts; in force within a second, where a mounted file waits for the kubelet's
   * sync). Left out: none. Once loaded, null when not given.
   */
  configMap: Type.Optional(ListConfigMapSchema),
  /**
   * `source: config` only: the admin API may add temporary entries, each with an `expiresAt` in
   * the future (an incident-time overlay that cannot outlive its expiry), kept in the store and
   * shown apart (`temporary`) from the declared ones.
   */
  allowTemporary: Type.Boolean({ default: false }),
});

/**
 * One list as written: an array of entries (exactly `{source: store, entries: [...]}`), or the
 * object form.
 */
const AllowlistInputSchema = Type.Union([Type.Array(EntryInputSchema), AllowlistObjectSchema]);

/**
 * `allowlists`: list name -> list. The schema checks the written forms; the type is the loaded one
 * (validate.ts normalises every list to `AllowlistConfig` before anything else reads it).
 */
export function AllowlistsSchema(options: { default: Record<string, never> }) {
  return Type.Unsafe<Record<string, AllowlistConfig>>({
    ...options,
    type: 'object',
    propertyNames: { pattern: NAME_PATTERN },
    additionalProperties: AllowlistInputSchema,
  });
}

/** The object-form default of `key`, for validate.ts (Ajv applies none inside anyOf). */
export function allowlistDefault<K extends keyof typeof AllowlistObjectSchema.properties>(
  key: K,
): Static<(typeof AllowlistObjectSchema.properties)[K]> {
  return (AllowlistObjectSchema.properties[key] as { default?: unknown }).default as Static<(typeof AllowlistObjectSchema.properties)[K]>;
}

/** One entry, after loading (always the object form). */
export type AllowEntryConfig = Static<typeof AllowEntrySchema>;
/** One list as written in the object form. */
export type AllowlistObjectInput = Static<typeof AllowlistObjectSchema>;

/** One list, after loading: every form becomes this, the fields as `AllowlistObjectSchema` documents them. */
export type AllowlistConfig = Omit<AllowlistObjectInput, 'entries' | 'file' | 'configMap'> & {
  entries: AllowEntryConfig[];
  file: string | null;
  configMap: ListConfigMap | null;
};
