/**
 * The config file's schema: every option written once, as a TypeBox expression that is at the same
 * time its JSON Schema (checked by Ajv in load.ts, which fills in the `default`s), its TypeScript
 * type (`Static<>`) and the place of its one doc comment. The sections live in ./schema/ (and in
 * ./schema-*.ts for sections other work adds); this file puts them together and exports them all.
 *
 * `additionalProperties: false` everywhere (`Section`), so a misspelt key is an error rather than a
 * silently ignored option; semantic checks (CIDRs, addresses, cross references) follow in
 * `validate.ts`. The resulting object is frozen. test/unit/config/schema-docs.test.ts keeps every
 * option documented, its default valid and stated nowhere else.
 */
import { AdminSchema } from './admin';
import { AllowlistsSchema } from './allowlist';
import { Ms, Nullable, Section, Type, type Static } from './kit';
import { ListenerSchema } from './listener';
import { LoggingSchema } from './logging';
import { StoreSchema } from './store';

export * from './admin';
export * from './allowlist';
export * from './listener';
export * from './logging';
export * from './store';
export * from './routes';
export * from './list-configmap';
export * from './edge';

/** The built-in echo backends (demos and tests), started in this process. */
const EchoSchema = Section({
  /** TCP echo backend address; null: none. */
  tcp: Nullable(Type.String(), { default: null }),
  /** HTTP echo backend address; null: none. */
  http: Nullable(Type.String(), { default: null }),
});

const ConfigSchema = Section({
  /**
   * Worker processes running the listeners: a number, or `auto` (one per core). Above 1, a
   * primary process holds the store, the admin API and `/metrics` (src/cluster/primary.ts); at 1,
   * one process runs everything unless `admin.separateProcess` is true.
   */
  workers: Type.Union([Type.Integer({ minimum: 1, maximum: 256 }), Type.Unsafe<'auto'>({ const: 'auto' })], { default: 1 }),
  /** Logs: level, format, the access log, denial summaries. */
  logging: LoggingSchema,
  /** The admin API: address, tokens, audit history. */
  admin: AdminSchema,
  /** Where API-managed allowlists are kept (`source: store` lists). */
  store: StoreSchema,
  /**
   * Close live connections whose client a list change no longer allows, and those whose client a
   * trusted peer named (PROXY header, X-Forwarded-For) when a change of the trusted list stops
   * trusting that peer (`trust_revoked`).
   */
  revokeLive: Type.Boolean({ default: true }),
  /** Shutdown after SIGTERM / SIGINT. */
  shutdown: Section(
    {
      /** Time open connections get to finish after SIGTERM. */
      drainTimeoutMs: Ms({ default: 30_000 }),
    },
    { default: {} },
  ),
  /** Pod, node and service CIDRs: peers from these on a public listener suggest source NAT. */
  clusterNetworks: Type.Array(Type.String(), { default: [] }),
  /**
   * Named allowlists: list name -> an array of entries, or `{source, entries | file, allowTemporary}`.
   * An entry is a CIDR string (allow) or `{cidr, action, comment, expiresAt}`.
   */
  allowlists: AllowlistsSchema({ default: {} }),
  /** The data ports: what each binds, enforces and forwards to. */
  listeners: Type.Array(ListenerSchema, { minItems: 1 }),
  /** Built-in echo backend (demo only); null: none. */
  echo: Nullable(EchoSchema, { default: null }),
});

/** The JSON Schema Ajv compiles (load.ts). */
export const configSchema = ConfigSchema;

/** The loaded config: defaults filled in, allowlists normalised (validate.ts), frozen. */
export type Config = Static<typeof ConfigSchema>;
