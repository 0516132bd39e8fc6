/**
 * Checks the schema cannot express: CIDRs and addresses parse strictly, names are unique, references
 * resolve. Every problem names the path and the value; all are collected, not just the first.
 */
import { parseCidr } from '../allowlist/cidr';
import { validateEntry } from '../allowlist/entry';
import { problem } from './errors';
import { parseHostPort } from './host-port';
import type { AllowEntryConfig, Config } from './schema';

export function checkSemantics(config: Config): string[] {
  const problems: string[] = [];

  const checkCidrs = (path: string, list: readonly string[]): void => {
    list.forEach((text, i) => {
      const r = parseCidr(text);
      if (!r.ok) problems.push(problem(`${path}[${i}]`, text, r.message));
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
  if (config.admin.listen !== null) {
    const hp = parseHostPort(config.admin.listen, true);
    if (typeof hp === 'string') problems.push(problem('admin.listen', config.admin.listen, hp));
  }
  if (config.echo) {
    for (const key of ['tcp', 'http'] as const) {
      const v = config.echo[key];
      if (v === null) continue;
      const hp = parseHostPort(v, true);
      if (typeof hp === 'string') problems.push(problem(`echo.${key}`, v, hp));
    }
  }

  const names = new Map<string, number>();
  const binds = new Map<string, number>();
  config.listeners.forEach((l, i) => {
    const at = `listeners[${i}]`;
    const seen = names.get(l.name);
    if (seen !== undefined) problems.push(problem(`${at}.name`, l.name, `duplicate of listeners[${seen}].name`));
    names.set(l.name, i);

    const hp = parseHostPort(l.listen, true);
    if (typeof hp === 'string') problems.push(problem(`${at}.listen`, l.listen, hp));
    else if (hp.port !== 0) {
      const key = `${hp.host}:${hp.port}`;
      const other = binds.get(key);
      if (other !== undefined) problems.push(problem(`${at}.listen`, l.listen, `already used by listeners[${other}]`));
      binds.set(key, i);
    }
    // Port 0 (a free port, tests) cannot collide: the kernel hands out distinct ports.
    if (typeof hp !== 'string' && hp.port !== 0 && admin(config) === `${hp.host}:${hp.port}`) {
      problems.push(problem(`${at}.listen`, l.listen, 'is the admin API address: the admin API never shares a data port'));
    }

    if (!Object.prototype.hasOwnProperty.call(config.allowlists, l.allowlist)) {
      const known = Object.keys(config.allowlists);
      problems.push(problem(`${at}.allowlist`, l.allowlist,
        `no such allowlist (defined: ${known.length ? known.join(', ') : 'none'}; define it under "allowlists")`));
    }
    l.upstreams.forEach((u, j) => {
      const up = parseHostPort(u, false);
      if (typeof up === 'string') problems.push(problem(`${at}.upstreams[${j}]`, u, up));
    });
    checkCidrs(`${at}.proxyProtocol.trustedSources`, l.proxyProtocol.trustedSources);
    if (l.proxyProtocol.mode !== 'off' && l.proxyProtocol.trustedSources.length === 0) {
      problems.push(problem(`${at}.proxyProtocol.trustedSources`, [],
        `is empty, so no peer may send a PROXY header in mode "${l.proxyProtocol.mode}": list the load balancers' CIDRs`));
    }
    checkCidrs(`${at}.http.trustedProxies`, l.http.trustedProxies);
  });
  return problems;
}

function admin(config: Config): string | null {
  if (config.admin.listen === null) return null;
  const hp = parseHostPort(config.admin.listen, true);
  return typeof hp === 'string' ? null : `${hp.host}:${hp.port}`;
}
