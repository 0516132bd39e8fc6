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
import { parseCidr } from '../allowlist/cidr';
import { validateEntry } from '../allowlist/entry';
import { problem } from './errors';
import { bindCollision, loopsToItself } from './addresses';
import { parseHostPort, type HostPort } from './host-port';
import type { AllowEntryConfig, Config } from './schema';

/** A CIDR this short trusts a large part of the internet (/8 is already 16 million addresses). */
const WIDE_PREFIX = 7;

/** A DNS name (labels of letters, digits and hyphens), for admin.allowedHosts. */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** Removed HTTP engines, still accepted in old configs (the relay serves them), and why they went. */
const REMOVED_ENGINES: Readonly<Record<string, string>> = {
  undici: 'undici\'s client can kill the process on a close-delimited response',
  'http-proxy': 'its shared keep-alive agent let an upgrade request desync a pooled upstream connection, and it leaked upstream sockets under the engine fuzz test',
};

export interface SemanticResult {
  problems: string[];
  warnings: string[];
}

/**
 * `raw` is the config as written, before the schema's defaults were filled in: "set by the
 * operator" (an ignored option, `http` on a tcp listener) cannot be told from a default afterwards.
 */
export function checkSemantics(config: Config, raw: unknown = config): SemanticResult {
  const problems: string[] = [];
  const warnings: string[] = [];
  const rawListeners = rawArray(rawObject(raw)?.listeners);

  const checkCidrs = (path: string, list: readonly string[], trust: string | null = null): void => {
    list.forEach((text, i) => {
      const r = parseCidr(text);
      if (!r.ok) problems.push(problem(`${path}[${i}]`, text, r.message));
      else if (trust !== null && r.cidr.prefix <= WIDE_PREFIX) {
        const span = r.cidr.prefix === 0 ? `every IPv${r.cidr.family} address` : `1/${2 ** r.cidr.prefix} of all IPv${r.cidr.family} addresses`;
        warnings.push(problem(`${path}[${i}]`, text, `trusts ${span}: ${trust}; list only the CIDRs of your load balancers or proxies`));
      }
    });
  };

  // Entries may be written as a bare CIDR string; normalise to {cidr} so the rest sees one shape.
  for (const [name, list] of Object.entries(config.allowlists)) {
    const raw = list as unknown[];
    config.allowlists[name] = raw.map((item, i): AllowEntryConfig => {
      const candidate = typeof item === 'string' ? { cidr: item } : item;
      const r = validateEntry(candidate);
      if (!r.ok) {
        const path = typeof item === 'string' ? `allowlists.${name}[${i}]` : `allowlists.${name}[${i}].${r.field}`;
        const value = typeof item === 'string' ? item : (candidate as Record<string, unknown>)[r.field];
        problems.push(problem(path, value, r.message));
        return candidate as AllowEntryConfig;
      }
      return r.entry;
    });
  }

  checkCidrs('clusterNetworks', config.clusterNetworks);
  config.admin.allowedHosts.forEach((h, i) => {
    if (!HOST_NAME.test(h)) {
      problems.push(problem(`admin.allowedHosts[${i}]`, h,
        'must be a host name without port, scheme or wildcard (IP addresses and localhost are always allowed)'));
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
        const consequence = other.what === 'admin' || what === 'admin' ? 'the admin API never shares a data port' : 'only one socket can listen on it';
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

  const names = new Map<string, number>();
  config.listeners.forEach((l, i) => {
    const at = `listeners[${i}]`;
    const seen = names.get(l.name);
    if (seen !== undefined) problems.push(problem(`${at}.name`, l.name, `duplicate of listeners[${seen}].name`));
    names.set(l.name, i);
    const hp = listenerBinds[i] ?? null;
    const rawListener = rawObject(rawListeners[i]);

    if (!Object.prototype.hasOwnProperty.call(config.allowlists, l.allowlist)) {
      const known = Object.keys(config.allowlists);
      problems.push(problem(`${at}.allowlist`, l.allowlist,
        `no such allowlist (defined: ${known.length ? known.join(', ') : 'none'}; define it under "allowlists")`));
    }
    l.upstreams.forEach((u, j) => {
      const up = parseHostPort(u, false);
      if (typeof up === 'string') problems.push(problem(`${at}.upstreams[${j}]`, u, up));
      else if (hp !== null && loopsToItself(hp, up)) {
        problems.push(problem(`${at}.upstreams[${j}]`, u,
          `is this listener's own address (${at}.listen ${JSON.stringify(l.listen)}): every connection would be forwarded back to ipgate, without end`));
      }
    });
    checkCidrs(`${at}.proxyProtocol.trustedSources`, l.proxyProtocol.trustedSources,
      'anyone there can send a PROXY header and choose the client address ipgate checks');
    if (l.proxyProtocol.mode !== 'off' && l.proxyProtocol.trustedSources.length === 0) {
      problems.push(problem(`${at}.proxyProtocol.trustedSources`, [],
        `is empty, so no peer may send a PROXY header in mode "${l.proxyProtocol.mode}": list the load balancers' CIDRs`));
    }
    const rawPp = rawObject(rawListener?.proxyProtocol);
    if (l.proxyProtocol.mode === 'off' && rawPp !== null) {
      for (const key of ['trustedSources', 'headerTimeoutMs', 'maxV2Length'] as const) {
        if (key in rawPp) warnings.push(problem(`${at}.proxyProtocol.${key}`, rawPp[key], 'is ignored: proxyProtocol.mode is "off" (no PROXY header is read)'));
      }
    }
    const rawHttp = rawObject(rawListener?.http);
    if (l.mode === 'tcp') {
      for (const key of Object.keys(rawHttp ?? {})) {
        problems.push(problem(`${at}.http.${key}`, rawHttp![key], `is an HTTP option but ${at}.mode is "tcp": remove it, or set mode: http`));
      }
      return;
    }
    checkCidrs(`${at}.http.trustedProxies`, l.http.trustedProxies,
      'anyone there can send X-Forwarded-For and choose the client address ipgate checks');
    const removed = REMOVED_ENGINES[l.http.engine];
    if (removed !== undefined) {
      warnings.push(problem(`${at}.http.engine`, l.http.engine,
        `was removed (${removed}; docs/http-engines.md): the relay engine serves this listener`));
    }
  });
  return { problems, warnings };
}

function rawObject(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : null;
}

function rawArray(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}
