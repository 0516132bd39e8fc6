/**
 * Boot-time errors: thrown once at start-up (or by `ipgate check-config`), never on the data path.
 * Each names the config path and the offending value, the way an operator will search for it.
 */
export class ConfigError extends Error {
  readonly code = 'IPGATE_CONFIG';
  constructor(
    readonly problems: readonly string[],
    readonly file?: string,
    /** Where the problems are, when not the config file: `configmap` (configmap-lists.ts fill()). */
    readonly source?: 'configmap',
  ) {
    super((file ? `invalid config ${file}:\n` : 'invalid config:\n') + problems.map((p) => `  - ${p}`).join('\n'));
    this.name = 'ConfigError';
  }
}
