/**
 * Load, validate and freeze the config: YAML -> schema (Ajv, defaults applied, unknown keys refused)
 * -> semantic checks -> deep freeze. The only place config errors are produced; the rest of the
 * program trusts the frozen object.
 */
import fs from 'node:fs';
import path from 'node:path';
import Ajv, { type ErrorObject } from 'ajv';
import YAML, { LineCounter } from 'yaml';
import { ConfigError } from './errors';
import { problem } from '../schema/problem';
import { parseHostPort } from '../address/host-port';
import { withLines } from './locate';
import { configSchema, type Config } from '../schema/config';
import { suggestKey } from './suggest';
import { checkSemantics } from './validate';

// verbose: each error carries its schema's parent (the known keys, for "did you mean").
const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false, coerceTypes: false, verbose: true });
const validateSchema = ajv.compile(configSchema);

/**
 * The admin API's bind address from the environment, replacing `admin.listen` when set and not
 * empty: a pod learns its own IP only at run time (the chart sets it from status.podIP), and with
 * hostNetwork a wildcard bind would put the admin API on every node address.
 */
const ADMIN_LISTEN_ENV = 'IPGATE_ADMIN_LISTEN';

export function loadConfigFile(file: string, env: NodeJS.ProcessEnv = process.env): Config {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`cannot read config file: ${(err as Error).message}`], file);
  }
  return parseConfig(text, file, env);
}

export function parseConfig(text: string, file?: string, env: NodeJS.ProcessEnv = {}): Config {
  // The document keeps each node's place in the text: every problem gets its line (locate.ts).
  const counter = new LineCounter();
  const doc = YAML.parseDocument(text, { prettyErrors: true, uniqueKeys: true, lineCounter: counter });
  if (doc.errors.length > 0) throw new ConfigError([`not valid YAML: ${doc.errors[0]!.message}`], file);
  let raw: unknown;
  try {
    raw = doc.toJS();
  } catch (err) {
    throw new ConfigError([`not valid YAML: ${(err as Error).message}`], file);
  }
  const listen = env[ADMIN_LISTEN_ENV];
  if (listen !== undefined && listen.trim() !== '' && raw !== null && typeof raw === 'object' && !Array.isArray(raw)) {
    const hp = parseHostPort(listen.trim(), true);
    if (typeof hp === 'string') throw new ConfigError([problem(`environment variable ${ADMIN_LISTEN_ENV}`, listen, hp)], file);
    const r = raw as Record<string, unknown>;
    const admin = r.admin;
    r.admin = { ...(admin !== null && typeof admin === 'object' && !Array.isArray(admin) ? admin : {}), listen: listen.trim() };
  }
  let config: Config;
  try {
    config = buildConfig(raw, file);
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(withLines(err.problems, doc, counter, file), err.file);
    throw err;
  }
  const warnings = WARNINGS.get(config);
  if (warnings !== undefined && warnings.length > 0) WARNINGS.set(config, Object.freeze(withLines(warnings, doc, counter, file)));
  return config;
}

/** What buildConfig checks besides the config itself. */
interface BuildOptions {
  /**
   * Read the TLS certificate, key and CA files (default true). `false`: every other check, for a
   * config written where the files are not (`ipgate import ingress-nginx --tls`).
   */
  tlsFiles?: boolean;
}

export function buildConfig(raw: unknown, file?: string, opts: BuildOptions = {}): Config {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError([problem('(top level)', raw, 'must be a mapping with at least "listeners"')], file);
  }
  const copy = structuredClone(raw) as Record<string, unknown>;
  if (!validateSchema(copy)) {
    throw new ConfigError(formatAjvErrors(validateSchema.errors ?? [], copy), file);
  }
  const config = copy as unknown as Config;
  const { problems, warnings } = checkSemantics(
    config,
    raw,
    file !== undefined ? path.dirname(path.resolve(file)) : null,
    opts.tlsFiles ?? true,
  );
  if (problems.length > 0) throw new ConfigError(problems, file);
  const frozen = deepFreeze(config);
  WARNINGS.set(frozen, Object.freeze(warnings));
  return frozen;
}

/**
 * The warnings of a config built here (it works, but probably not as meant: a PROXY header trusted
 * from everyone, an option the engine ignores), each `path: value: why`. Kept beside the frozen
 * config rather than in it, so the config's shape stays the schema's. Empty for any other object.
 */
export function configWarnings(config: Config): readonly string[] {
  return WARNINGS.get(config) ?? [];
}

const WARNINGS = new WeakMap<Config, readonly string[]>();

/** `/listeners/1/proxyProtocol/mode` -> `listeners[1].proxyProtocol.mode` */
export function jsonPointerToPath(pointer: string): string {
  if (pointer === '') return '(top level)';
  let out = '';
  for (const raw of pointer.slice(1).split('/')) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^[0-9]+$/.test(part) ? `[${part}]` : out === '' ? part : `.${part}`;
  }
  return out;
}

function valueAt(root: unknown, pointer: string): unknown {
  let cur: unknown = root;
  if (pointer === '') return cur;
  for (const raw of pointer.slice(1).split('/')) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[raw.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return cur;
}

/**
 * Ajv's errors as problems, each `path: value: why`. Besides Ajv's own wording:
 * - an unknown key names the key nearest to it (suggest.ts: "did you mean");
 * - a wrong type says what was given, and for an address what to write (`listen: 22023` is
 *   `"0.0.0.0:22023"` as a string);
 * - a union (anyOf) reports only the branches the value's own type belongs to: a mapping that is
 *   no valid list object is not also told "must be array"; a value no branch takes is one line
 *   naming every form.
 */
function formatAjvErrors(errors: ErrorObject[], root: unknown): string[] {
  const out = new Set<string>();
  for (const e of unionErrors(errors)) {
    let path = e.instancePath;
    let message = e.message ?? 'invalid';
    if (e.keyword === 'additionalProperties') {
      const key = (e.params as { additionalProperty: string }).additionalProperty;
      path = `${path}/${escapePointer(key)}`;
      const hint = suggestKey(key, e.parentSchema);
      message = hint === null ? 'unknown key' : `unknown key; ${hint}`;
    } else if (e.keyword === 'required') {
      const key = (e.params as { missingProperty: string }).missingProperty;
      path = `${path}/${escapePointer(key)}`;
      message = 'required';
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    } else if (e.keyword === 'type') {
      message = typeMessage(jsonPointerToPath(path), (e.params as { type: string | string[] }).type, valueAt(root, path));
    } else if (e.keyword === 'propertyNames') {
      path = `${path}/${escapePointer((e.params as { propertyName: string }).propertyName)}`;
      message = 'invalid name (letters, digits, "_", "-", "." and at most 63 characters)';
      out.add(`${jsonPointerToPath(path)}: ${message}`);
      continue;
    }
    out.add(problem(jsonPointerToPath(path), e.keyword === 'required' ? undefined : valueAt(root, path), message));
  }
  return [...out];
}

/**
 * Ajv reports every branch of a failed anyOf, and the anyOf itself. Kept: the errors of the
 * branches whose type the value has (they say what is wrong inside it); when every branch failed
 * on the value's type itself, one error naming all the forms (`must be an array or a mapping`).
 */
function unionErrors(errors: ErrorObject[]): ErrorObject[] {
  const groups = new Map<string, { branches: Map<number, ErrorObject[]> }>();
  const plain: ErrorObject[] = [];
  for (const e of errors) {
    if (e.keyword === 'anyOf') continue;
    const m = /^(.*\/anyOf)\/(\d+)(\/.*)?$/.exec(e.schemaPath);
    if (m === null) {
      plain.push(e);
      continue;
    }
    // The innermost anyOf decides (schemaPath's last one).
    const key = m[1]!;
    let g = groups.get(key);
    if (g === undefined) groups.set(key, (g = { branches: new Map() }));
    const branch = Number(m[2]);
    g.branches.set(branch, [...(g.branches.get(branch) ?? []), e]);
  }
  const out = [...plain];
  for (const [key, g] of groups) {
    const shallow = (e: ErrorObject): boolean =>
      (e.keyword === 'type' || e.keyword === 'const' || e.keyword === 'enum') &&
      e.schemaPath === `${key}/${[...g.branches].find(([, es]) => es.includes(e))![0]}/${e.keyword}`;
    const deep = [...g.branches.values()].filter((es) => !es.every(shallow));
    if (deep.length > 0) {
      for (const es of deep) out.push(...es);
      continue;
    }
    const all = [...g.branches.values()].flat();
    const first = all[0]!;
    const forms = all.map((e) =>
      e.keyword === 'type'
        ? typeName((e.params as { type: string }).type)
        : e.keyword === 'const'
          ? JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)
          : `one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`,
    );
    out.push({ ...first, keyword: 'union', message: `must be ${[...new Set(forms)].join(' or ')}` });
  }
  return out;
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping',
  null: 'null',
};

function typeName(t: string | string[]): string {
  return (Array.isArray(t) ? t : [t]).map((x) => TYPE_NAMES[x] ?? x).join(' or ');
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'number') return Number.isInteger(v) ? 'a number' : 'a decimal number';
  if (typeof v === 'boolean') return 'a boolean';
  return `a ${typeof v}`;
}

/**
 * `must be a string, not a number`, with what to write where a field has one form: an address
 * (`listen`, `upstreams[i]`, `admin.listen`) is `"host:port"` text; a listener's `allowlist` names
 * a list.
 */
function typeMessage(path: string, type: string | string[], value: unknown): string {
  const base = `must be ${typeName(type)}, not ${kindOf(value)}`;
  const field =
    path
      .replace(/\[\d+\]$/, '')
      .split('.')
      .pop() ?? '';
  if (
    (field === 'listen' || field === 'upstreams' || /^echo\.(tcp|http)$/.test(path)) &&
    (typeof value === 'number' || typeof value === 'string')
  ) {
    const port = typeof value === 'number' ? value : null;
    return `${base}: write the address as "host:port" text${port !== null && Number.isInteger(port) ? `, e.g. "0.0.0.0:${port}" or "[::]:${port}"` : ''}`;
  }
  if (/^listeners\[\d+\](\.routes\[\d+\])?\.allowlist$/.test(path) && typeof value === 'object' && value !== null) {
    return `${base}: the name of a list under "allowlists" (define the list there with these entries, and name it here)`;
  }
  return base;
}

function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}
