/**
 * Load, validate and freeze the config: YAML -> schema (Ajv, defaults applied, unknown keys refused)
 * -> semantic checks -> deep freeze. The only place config errors are produced; the rest of the
 * program trusts the frozen object.
 */
import fs from 'node:fs';
import path from 'node:path';
import Ajv, { type ErrorObject } from 'ajv';
import YAML from 'yaml';
import { ConfigError, problem } from './errors';
import { parseHostPort } from './host-port';
import { configSchema, type Config } from './schema';
import { checkSemantics } from './validate';

const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false, coerceTypes: false });
const validateSchema = ajv.compile(configSchema);

/**
 * The admin API's bind address from the environment, replacing `admin.listen` when set and not
 * empty: a pod learns its own IP only at run time (the chart sets it from status.podIP), and with
 * hostNetwork a wildcard bind would put the admin API on every node address.
 */
export const ADMIN_LISTEN_ENV = 'IPGATE_ADMIN_LISTEN';

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
  let raw: unknown;
  try {
    raw = YAML.parse(text, { prettyErrors: true, uniqueKeys: true });
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
  return buildConfig(raw, file);
}

/** What buildConfig checks besides the config itself. */
export interface BuildOptions {
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
  const { problems, warnings } = checkSemantics(config, raw, file !== undefined ? path.dirname(path.resolve(file)) : null, opts.tlsFiles ?? true);
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

function formatAjvErrors(errors: ErrorObject[], root: unknown): string[] {
  const out = new Set<string>();
  // anyOf reports every branch; the branch errors say more than "must match a schema in anyOf".
  const specific = errors.filter((e) => e.keyword !== 'anyOf');
  for (const e of specific.length > 0 ? specific : errors) {
    let path = e.instancePath;
    let message = e.message ?? 'invalid';
    if (e.keyword === 'additionalProperties') {
      const key = (e.params as { additionalProperty: string }).additionalProperty;
      path = `${path}/${key}`;
      message = 'unknown key';
    } else if (e.keyword === 'required') {
      const key = (e.params as { missingProperty: string }).missingProperty;
      path = `${path}/${key}`;
      message = 'required';
    } else if (e.keyword === 'enum') {
      message = `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
    } else if (e.keyword === 'propertyNames') {
      path = `${path}/${(e.params as { propertyName: string }).propertyName}`;
      message = 'invalid name (letters, digits, "_", "-", "." and at most 63 characters)';
      out.add(`${jsonPointerToPath(path)}: ${message}`);
      continue;
    }
    out.add(problem(jsonPointerToPath(path), e.keyword === 'required' ? undefined : valueAt(root, path), message));
  }
  return [...out];
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}
