/** Where the API-managed allowlists are kept (the source of truth for `source: store` lists). */
import { Enum, Nullable, Section, Type, type Static } from './kit';

export const StoreSchema = Section(
  {
    /** `file`: a JSON file written atomically; `kubernetes`: a ConfigMap; `memory`: tests and demos. */
    type: Enum(['file', 'kubernetes', 'memory'], { default: 'file' }),
    /**
     * File store path. A relative path is relative to the config file's directory, like every path
     * the config names (it was relative to the working directory before: a warning names a store
     * left at the old place). Left out: `./data/allowlists.json` under the working directory (the
     * image links /app/data to its volume).
     */
    path: Type.String({ minLength: 1, default: './data/allowlists.json' }),
    /** Kubernetes store: namespace; null: the pod's own. */
    namespace: Nullable(Type.String(), { default: null }),
    /** Kubernetes store: ConfigMap name. */
    configMap: Type.String({ minLength: 1, default: 'ipgate-allowlists' }),
    /** File store: periodic check of the file for external edits, besides fs.watch. */
    pollIntervalMs: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 2000 }),
  },
  { default: {} },
);

export type StoreConfig = Static<typeof StoreSchema>;
