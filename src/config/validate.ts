/**
 * Checks the schema cannot express: CIDRs and addresses parse strictly, names are unique, references
 * resolve, no two sockets bind the same port on overlapping addresses, no listener forwards to
 * itself, options are given only where they apply. Every problem names the path and the value; all
 * are collected, not just the first.
 *
 * Warnings are for a config that works but probably not as meant (a PROXY header believed from the
 * whole internet, an option the chosen engine ignores): the process starts, `main` logs them and
 * `check-config` prints them.
 */
import fs from 'node:fs';
import path from 'node:path';
import YAML, { isSeq, LineCounter } from 'yaml';
import { parseCidr } from '../allowlist/cidr';
import { validateEntry } from '../allowlist/entry';
import { problem } from '../schema/problem';
import { location } from './locate';
import { bindCollision, loopsToItself } from './addresses';
import { parseHostPort, type HostPort } from '../address/host-port';
import { allowlistDefault, type AllowEntryConfig, type AllowlistConfig, type AllowlistObjectInput, type Config } from '../schema/config';
import { checkLimits } from './validate-limits';
import { checkRoutes, httpCheckOverH2 } from './validate-routes';
import { checkTls } from './validate-tls';
import { checkHttp2 } from './validate-http2';

/** A CIDR this short trusts a large part of the internet (/8 is already 16 million addresses). */
const WIDE_PREFIX = 7;

/** A DNS name (labels of letters, digits and hyphens), for admin.allowedHosts. */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** Removed HTTP engines, still accepted in old configs (the relay serves them), and why they went. */
const REMOVED_ENGINES: Readonly<Record<string, string>> = {
  undici: "undici's client can kill the process on a close-delimited response",
  'http-proxy':
    'its shared keep-alive agent let an upgrade request desync a pooled upstream connection, and it leaked upstream sockets under the engine fuzz test',
};

interface SemanticResult {
  problems: string[];
  warnings: string[];
}

/**
 * `raw` is the config as written, before the schema's defaults were filled in: "set by the
 * operator" (an ignored option, `http` on a tcp listener) cannot be told from a default afterwards.
 */
export function checkSemantics(config: Config, raw: unknown = config, baseDir: string | null = null, tlsFiles = true): SemanticResult {
  const problems: string[] = [];
  const warnings: string[] = [];
  const rawListeners = rawArray(rawObject(raw)?.listeners);

  const checkCidrs = (path: string, list: readonly string[], trust: string | null = null): void => {
    list.forEach((text, i) => {
      const r = parseCidr(text);
      if (!r.ok) problems.push(problem(`${path}[${i}]`, text, r.message));
      else if (trust !== null && r.cidr.prefix <= WIDE_PREFIX) {
        const span =
          r.cidr.prefix === 0 ? `every IPv${r.cidr.family} address` : `1/${2 ** r.cidr.prefix} of all IPv${r.cidr.family} addresses`;
        warnings.push(problem(`${path}[${i}]`, text, `trusts ${span}: ${trust}; list only the CIDRs of your load balancers or proxies`));
      }
    });
  };

  // Each list to one shape (AllowlistConfig); entries may be written as a bare CIDR string and
  // are normalised to {cidr} so the rest sees one shape.
  const validEntries = (at: string, items: unknown[]): AllowEntryConfig[] => validateListEntries(at, items, problems);
  for (const [name, value] of Object.entries(config.allowlists as Record<string, unknown>)) {
    const at = `allowlists.${name}`;
    if (Array.isArray(value)) {
      config.allowlists[name] = {
        source: 'store',
        entries: validEntries(at, value),
        file: null,
        configMap: null,
        allowTemporary: allowlistDefault('allowTemporary'),
      };
      continue;
    }
    // As written (Ajv fills in no default inside the allowlists' anyOf): the schema's defaults here.
    const v = value as Partial<AllowlistObjectInput> & Pick<AllowlistObjectInput, 'source'>;
    const list: AllowlistConfig = {
      source: v.source,
      entries: [],
      file: null,
      configMap: null,
      allowTemporary: v.allowTemporary ?? allowlistDefault('allowTemporary'),
    };
    if (v.configMap !== undefined) {
      // The entries come from the API when ipgate runs (config/configmap-lists.ts fills them in
      // with the same checks as a file's); loading the file alone (check-config, workers) cannot read them.
      if (v.source !== 'config')
        problems.push(
          problem(`${at}.configMap`, v.configMap, 'is for source: config lists (a store list is edited through the admin API)'),
        );
      if (v.entries !== undefined)
        problems.push(problem(`${at}.entries`, v.entries.length, `and ${at}.configMap both given: keep the entries in one place`));
      if (v.file !== undefined)
        problems.push(problem(`${at}.file`, v.file, `and ${at}.configMap both given: keep the entries in one place`));
      list.configMap = { name: v.configMap.name, key: v.configMap.key, namespace: v.configMap.namespace ?? null };
    } else if (v.file !== undefined) {
      if (v.source !== 'config')
        problems.push(problem(`${at}.file`, v.file, 'is for source: config lists (a store list is edited through the admin API)'));
      if (v.entries !== undefined)
        problems.push(problem(`${at}.entries`, v.entries.length, `and ${at}.file both given: keep the entries in one place`));
      const file = path.resolve(baseDir ?? process.cwd(), v.file);
      list.file = file;
      const read = readListFile(file);
      if (typeof read === 'string') problems.push(problem(`${at}.file`, v.file, read));
      else list.entries = validateListEntries(`${at}.file(${v.file})`, read.items, problems, (i) => location(file, read.lineOf(i)));
    } else {
      list.entries = validEntries(`${at}.entries`, v.entries ?? []);
    }
    if (v.allowTemporary !== undefined && v.source !== 'config') {
      problems.push(
        problem(
          `${at}.allowTemporary`,
          v.allowTemporary,
          'is for source: config lists (every entry of a store list can be edited through the admin API)',
        ),
      );
    }
    config.allowlists[name] = list;
  }

  resolvePaths(config, raw, baseDir, warnings);
  checkCidrs('clusterNetworks', config.clusterNetworks);
  config.admin.allowedHosts.forEach((h, i) => {
    if (!HOST_NAME.test(h)) {
      problems.push(
        problem(
          `admin.allowedHosts[${i}]`,
          h,
          'must be a host name without port, scheme or wildcard (IP addresses and localhost are always allowed)',
        ),
      );
    }
  });

  // Every socket this process binds, in the order an operator reads them: the admin API, each
  // listener, the echo backends. A later one that collides with an earlier one is the problem.
  const binds: { field: string; text: string; hp: HostPort; what: string }[] = [];
  const bind = (field: string, text: string, what: string): HostPort | null => {
    const hp = parseHostPort(text, true);
    if (typeof hp === 'string') {
      problems.push(problem(field, text, hp));
      return null;
    }
    // Port 0 (a free port, tests) cannot collide: the kernel hands out distinct ports.
    if (hp.port !== 0) {
      for (const other of binds) {
        const why = bindCollision(other.hp, hp);
        if (why === null) continue;
        const consequence =
          other.what === 'admin' || what === 'admin' ? 'the admin API never shares a data port' : 'only one socket can listen on it';
        problems.push(problem(field, text, `collides with ${other.field} ${JSON.stringify(other.text)}: ${why}; ${consequence}`));
        break;
      }
    }
    binds.push({ field, text, hp, what });
    return hp;
  };

  if (config.admin.listen !== null) bind('admin.listen', config.admin.listen, 'admin');
  const listenerBinds = config.listeners.map((l, i) => bind(`listeners[${i}].listen`, l.listen, 'listener'));
  if (config.echo) {
    for (const key of ['tcp', 'http'] as const) {
      const v = config.echo[key];
      if (v !== null) bind(`echo.${key}`, v, 'echo');
    }
  }

  /** A field naming an allowlist (instead of CIDRs): the list must be defined. */
  const checkListRef = (field: string, name: string): void => {
    if (!Object.hasOwn(config.allowlists, name)) {
      const known = Object.keys(config.allowlists);
      problems.push(
        problem(
          field,
          name,
          `names no allowlist (defined: ${known.length ? known.join(', ') : 'none'}; define it under "allowlists", or give CIDRs)`,
        ),
      );
    }
  };

  const names = new Map<string, number>();
  config.listeners.forEach((l, i) => {
    const at = `listeners[${i}]`;
    const seen = names.get(l.name);
    if (seen !== undefined) problems.push(problem(`${at}.name`, l.name, `duplicate of listeners[${seen}].name`));
    names.set(l.name, i);
    const hp = listenerBinds[i] ?? null;
    const rawListener = rawObject(rawListeners[i]);
    checkLimits(at, l, Object.keys(config.allowlists), problems);

    if (!Object.hasOwn(config.allowlists, l.allowlist)) {
      const known = Object.keys(config.allowlists);
      problems.push(
        problem(
          `${at}.allowlist`,
          l.allowlist,
          `no such allowlist (defined: ${known.length ? known.join(', ') : 'none'}; define it under "allowlists")`,
        ),
      );
    }
    l.upstreams.forEach((u, j) => {
      const up = parseHostPort(u, false);
      if (typeof up === 'string') problems.push(problem(`${at}.upstreams[${j}]`, u, up));
      else if (hp !== null && loopsToItself(hp, up)) {
        problems.push(
          problem(
            `${at}.upstreams[${j}]`,
            u,
            `is this listener's own address (${at}.listen ${JSON.stringify(l.listen)}): every connection would be forwarded back to ipgate, without end`,
          ),
        );
      }
    });
    checkRoutes(
      l,
      {
        at,
        listen: hp,
        hasList: (n) => Object.hasOwn(config.allowlists, n),
        listNames: () => Object.keys(config.allowlists),
      },
      problems,
    );
    const ts = l.proxyProtocol.trustedSources;
    if (typeof ts === 'string') checkListRef(`${at}.proxyProtocol.trustedSources`, ts);
    else
      checkCidrs(
        `${at}.proxyProtocol.trustedSources`,
        ts,
        'anyone there can send a PROXY header and choose the client address ipgate checks',
      );
    if (l.proxyProtocol.mode !== 'off' && Array.isArray(ts) && ts.length === 0) {
      problems.push(
        problem(
          `${at}.proxyProtocol.trustedSources`,
          [],
          `is empty, so no peer may send a PROXY header in mode "${l.proxyProtocol.mode}": list the load balancers' CIDRs`,
        ),
      );
    }
    const rawPp = rawObject(rawListener?.proxyProtocol);
    if (l.proxyProtocol.mode === 'off' && rawPp !== null) {
      for (const key of ['trustedSources', 'headerTimeoutMs', 'maxV2Length'] as const) {
        if (key in rawPp)
          warnings.push(
            problem(`${at}.proxyProtocol.${key}`, rawPp[key], 'is ignored: proxyProtocol.mode is "off" (no PROXY header is read)'),
          );
      }
    }
    checkTls(at, l, rawListener?.tls, baseDir, problems, warnings, tlsFiles);
    const rawHttp = rawObject(rawListener?.http);
    if (l.mode === 'tcp') {
      for (const key of Object.keys(rawHttp ?? {})) {
        problems.push(
          problem(`${at}.http.${key}`, rawHttp![key], `is an HTTP option but ${at}.mode is "tcp": remove it, or set mode: http`),
        );
      }
      return;
    }
    const tp = l.http.trustedProxies;
    if (typeof tp === 'string') checkListRef(`${at}.http.trustedProxies`, tp);
    else checkCidrs(`${at}.http.trustedProxies`, tp, 'anyone there can send X-Forwarded-For and choose the client address ipgate checks');
    checkHttp2(at, l, baseDir, problems, warnings);
    if (l.upstreamHealth?.active?.type === 'http' && l.http.upstreamProtocol !== 'http1' && l.upstreams.length > 0) {
      const p = httpCheckOverH2(`${at}.upstreamHealth.active.type`, l.http.upstreamProtocol);
      if (!problems.includes(p)) problems.push(p);
    }
    const removed = REMOVED_ENGINES[l.http.engine];
    if (removed !== undefined) {
      warnings.push(
        problem(
          `${at}.http.engine`,
          l.http.engine,
          `was removed (${removed}; docs/http-engines.md): the relay engine serves this listener`,
        ),
      );
    }
  });
  return { problems, warnings };
}

/**
 * One rule for the files a config names (docs/config-reference.md "Paths"): a relative path is
 * relative to the config file's directory, as nginx's `include` and HAProxy's `default-path
 * config` read theirs; list files and TLS files always were, and `store.path`, `admin.tokenFile`
 * and `admin.tokensFile` are too (they were relative to the working directory). The default
 * `store.path`, written nowhere in the file, stays `./data/allowlists.json` under the working
 * directory (the image links /app/data to its volume). A relative path written in the file whose
 * old place (from the working directory) exists while its new one does not is warned about: the
 * store or token would otherwise seem to vanish on upgrade.
 */
function resolvePaths(config: Config, raw: unknown, baseDir: string | null, warnings: string[]): void {
  const base = baseDir ?? process.cwd();
  const resolve = (field: string, written: unknown, used = true): string | null => {
    if (typeof written !== 'string' || written === '') return null;
    const now = path.resolve(base, written);
    const before = path.resolve(process.cwd(), written);
    if (used && !path.isAbsolute(written) && now !== before && fs.existsSync(before) && !fs.existsSync(now)) {
      warnings.push(
        problem(
          field,
          written,
          `now resolves to ${now} (relative to the config file), where nothing is; it used to resolve to ${before}, ` +
            'which exists: write that absolute path, or move the file',
        ),
      );
    }
    return now;
  };
  const rawStore = rawObject(rawObject(raw)?.store);
  config.store.path = resolve('store.path', rawStore?.path, config.store.type === 'file') ?? path.resolve(process.cwd(), config.store.path);
  const rawAdmin = rawObject(rawObject(raw)?.admin);
  if (config.admin.tokenFile !== null) config.admin.tokenFile = resolve('admin.tokenFile', rawAdmin?.tokenFile) ?? config.admin.tokenFile;
  if (config.admin.tokensFile !== null)
    config.admin.tokensFile = resolve('admin.tokensFile', rawAdmin?.tokensFile) ?? config.admin.tokensFile;
}

/** The entries of a list file (YAML or JSON) with each one's line, or why it cannot be used. */
function readListFile(file: string): ListDocument | string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    return `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
  const r = parseListDocument(text);
  return typeof r === 'string' ? `${file} ${r}` : r;
}

/** A list document's entries, and the 1-based line of entry `i` (a problem names it). */
interface ListDocument {
  items: unknown[];
  lineOf(i: number): number;
}

/**
 * The entries array of a list document (a list file, a ConfigMap key: YAML or JSON), or why it
 * cannot be used.
 */
export function parseListText(text: string): unknown[] | string {
  const r = parseListDocument(text);
  return typeof r === 'string' ? r : r.items;
}

/** parseListText with each entry's line (for `... in lists/office.yaml:12`). */
function parseListDocument(text: string): ListDocument | string {
  const counter = new LineCounter();
  const doc = YAML.parseDocument(text, { uniqueKeys: true, lineCounter: counter });
  if (doc.errors.length > 0) return `is not valid YAML/JSON: ${doc.errors[0]!.message.split('\n')[0]}`;
  let parsed: unknown;
  try {
    parsed = doc.toJS();
  } catch (err) {
    return `is not valid YAML/JSON: ${(err as Error).message.split('\n')[0]}`;
  }
  if (parsed === null || parsed === undefined) return { items: [], lineOf: () => 1 };
  if (!Array.isArray(parsed)) return 'must hold an array of entries (CIDR strings or {cidr, action?, comment?, expiresAt?})';
  const seq = doc.contents;
  return {
    items: parsed,
    lineOf: (i) => {
      const item = isSeq(seq) ? (seq.items[i] as { range?: [number, number, number] } | undefined) : undefined;
      return item?.range ? counter.linePos(item.range[0]).line : 1;
    },
  };
}

/**
 * A list's entries checked one by one (validateEntry) and normalised to {cidr, ...}: each bad or
 * repeated entry adds a problem `<at>[i]...: value: why` to `problems` and is left out. `where(i)`:
 * the entry's place, appended to its problem (` in lists/office.yaml:12`).
 */
export function validateListEntries(
  at: string,
  items: readonly unknown[],
  problems: string[],
  where: (i: number) => string = () => '',
): AllowEntryConfig[] {
  const out: AllowEntryConfig[] = [];
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const candidate = typeof item === 'string' ? { cidr: item } : item;
    const r = validateEntry(candidate);
    if (!r.ok) {
      const p = typeof item === 'string' || r.field === '' ? `${at}[${i}]` : `${at}[${i}].${r.field}`;
      const value = typeof item === 'string' ? item : isRecord(candidate) ? (candidate[r.field] ?? candidate) : candidate;
      problems.push(problem(p, value, r.message) + where(i));
      return;
    }
    const dup = seen.get(r.entry.cidr);
    if (dup !== undefined) {
      problems.push(problem(`${at}[${i}].cidr`, r.entry.cidr, `is listed twice (also ${at}[${dup}]); one CIDR has one action`) + where(i));
      return;
    }
    seen.set(r.entry.cidr, i);
    out.push(r.entry);
  });
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function rawObject(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

function rawArray(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}
