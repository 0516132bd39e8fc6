/**
 * Boot-time errors: thrown once at start-up (or by `ipgate check-config`), never on the data path.
 * Each names the config path and the offending value, the way an operator will search for it.
 */
export class ConfigError extends Error {
  readonly code = 'IPGATE_CONFIG';
  constructor(
    readonly problems: readonly string[],
    readonly file?: string,
  ) {
    super(
      (file ? `invalid config ${file}:\n` : 'invalid config:\n') +
        problems.map((p) => `  - ${p}`).join('\n'),
    );
    this.name = 'ConfigError';
  }
}

/** `listeners[1].allowlist[0]: "10.0.0.1/33": prefix length 33 out of range for IPv4` */
export function problem(path: string, value: unknown, message: string): string {
  const shown = formatValue(value);
  // Address and CIDR refusals (allowlist/cidr.ts) already begin with the quoted value.
  return message.startsWith(`${shown}: `) ? `${path}: ${message}` : `${path}: ${shown}: ${message}`;
}

function formatValue(value: unknown): string {
  if (value === undefined) return '(missing)';
  const text = JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
