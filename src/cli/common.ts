/**
 * What every admin-API command line shares (`ipgate allowlist ...`, `ipgate doctor`): the option
 * names, their parsing with node:util `parseArgs` (so `--flag=value` and `--flag value` both work),
 * the token, and `--output json|yaml|table`.
 *
 * One definition here keeps the names the same everywhere: `--admin-url`, `--token-file`,
 * `--output` (`--json` is kept as an alias of `--output json`).
 */
import fs from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import YAML from 'yaml';

/** A command-line mistake: the caller prints it with the usage text and exits 2. */
export class UsageError extends Error {}

/** The options every admin-API command takes. */
export const ADMIN_OPTIONS = {
  'admin-url': { type: 'string' },
  'token-file': { type: 'string' },
  output: { type: 'string', short: 'o' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/**
 * The usage lines for ADMIN_OPTIONS, the same text in every command's help. `defaults`: the
 * command falls back to $IPGATE_ADMIN_URL / $IPGATE_ADMIN_TOKEN; `machine`: what json/yaml print.
 */
export function adminOptionsUsage(defaults: boolean, machine: string): string {
  return `  --admin-url URL        admin API${defaults ? ' (default $IPGATE_ADMIN_URL or http://127.0.0.1:9901)' : ''}; a host name other
                         than localhost must be listed in the server's admin.allowedHosts
  --token-file FILE      file holding the admin bearer token${defaults ? ' (default: $IPGATE_ADMIN_TOKEN)' : ''}
  -o, --output FORMAT    table (default, for people), json or yaml (${machine}); --json = --output json
  -h, --help             this text
`;
}

export type OutputFormat = 'table' | 'json' | 'yaml';

/**
 * `parseArgs` in strict mode with its errors rewritten as one short sentence naming the option
 * (its own messages suggest `--` tricks that do not apply here).
 */
export function parseCommandLine<O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O, allowPositionals: boolean) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals });
  } catch (err) {
    const e = err as Error & { code?: string };
    // `Option '-f, --file <value>' argument missing` -> `--file`; `Unknown option '-x'` -> `-x`.
    const quoted = /'(-[^']*?)(?: <value>)?'/.exec(e.message)?.[1];
    const opt = quoted?.split(', ').pop();
    switch (e.code) {
      case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
        throw new UsageError(`unknown option ${opt ?? e.message}`);
      case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
        throw new UsageError(
          /argument missing/.test(e.message) ? `${opt ?? 'an option'} needs a value` : `${opt ?? 'an option'} takes no value`,
        );
      case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
        throw new UsageError(`unexpected argument ${e.message.match(/'([^']*)'/)?.[1] ?? ''}`.trim());
      default:
        throw new UsageError(e.message);
    }
  }
}

/** `--output` / `--json`: the format, or a UsageError quoting a wrong value. */
export function outputFormat(values: { output?: string | undefined; json?: boolean | undefined }): OutputFormat {
  if (values.json === true) {
    if (values.output !== undefined && values.output !== 'json')
      throw new UsageError(`--json and --output ${values.output} contradict each other`);
    return 'json';
  }
  const v = values.output ?? 'table';
  if (v !== 'table' && v !== 'json' && v !== 'yaml') throw new UsageError(`--output ${JSON.stringify(v)}: expected table, json or yaml`);
  return v;
}

/** A machine-readable document in the chosen format (json: 2-space indented, one trailing newline). */
export function renderDocument(format: 'json' | 'yaml', doc: unknown): string {
  return format === 'json' ? `${JSON.stringify(doc, null, 2)}\n` : YAML.stringify(doc);
}

/** The admin base URL: `--admin-url`, else $IPGATE_ADMIN_URL, else the default admin listen address. */
export function adminUrl(flag: string | undefined, env: NodeJS.ProcessEnv, fallback: string | null = 'http://127.0.0.1:9901'): URL | null {
  const text = flag ?? env.IPGATE_ADMIN_URL ?? fallback;
  if (text === null) return null;
  try {
    return new URL(text);
  } catch {
    throw new UsageError(`--admin-url ${JSON.stringify(text)} is not a URL (e.g. http://127.0.0.1:9901)`);
  }
}

/** The token from `--token-file` (trimmed), or null when the flag is absent. */
export function tokenFromFile(file: string | undefined): string | null {
  if (file === undefined) return null;
  let token: string;
  try {
    token = fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new UsageError(`cannot read --token-file ${JSON.stringify(file)}: ${(err as Error).message}`);
  }
  if (token === '') throw new UsageError(`--token-file ${JSON.stringify(file)} is empty`);
  return token;
}

/** Rows as aligned columns (two spaces apart, the last column not padded). */
export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return `${rows
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}
