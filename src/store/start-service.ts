/**
 * Build the store the config names, load it (seeding it from the config's `source: store` lists)
 * and apply every list before any listener accepts: a connection must never be decided on the
 * config's seed when the store (the source of truth for those lists) says otherwise. The config's
 * `source: config` lists are applied from the config itself (AllowlistService).
 */
import type { Logger } from 'pino';
import type { AllowEntry } from '../allowlist/entry';
import { AuditLog } from '../audit/audit-log';
import type { Config } from '../schema/config';
import { AllowlistService, CONFIG_FILE, type DeclaredList, type ServiceStartOptions } from './allowlist-service';
import { createStore } from './create-store';
import { listUsers } from './list-ref';
import type { LiveLists } from './live-lists';

/** The config's lists split by owner: seeds of store lists, declared config lists, and who uses which. */
export function listSources(
  config: Pick<Config, 'allowlists' | 'listeners'>,
  configFile: string | null,
): { seed: Map<string, readonly AllowEntry[]>; options: ServiceStartOptions } {
  const seed = new Map<string, readonly AllowEntry[]>();
  for (const [name, l] of Object.entries(config.allowlists)) if (l.source === 'store') seed.set(name, l.entries as AllowEntry[]);
  return { seed, options: { declared: declaredLists(config, configFile), users: (name) => listUsers(config.listeners, name) } };
}

/**
 * The `source: config` lists of a config, with where each is managed (for the 409 message) and
 * where a change to it comes from (the audit's `who`).
 */
export function declaredLists(config: Pick<Config, 'allowlists'>, configFile: string | null): Map<string, DeclaredList> {
  const declared = new Map<string, DeclaredList>();
  for (const [name, l] of Object.entries(config.allowlists)) {
    if (l.source !== 'config') continue;
    // A ConfigMap list's namespace is filled in once read (config/configmap-lists.ts): null only
    // for a config not read through it.
    const cm =
      l.file === null && l.configMap !== null
        ? `${l.configMap.namespace ?? '(pod namespace)'}/${l.configMap.name} key ${l.configMap.key}`
        : null;
    const managedIn =
      l.file !== null
        ? `${l.file} (allowlists.${name}.file of ${configFile ?? 'the config'})`
        : cm !== null
          ? `ConfigMap ${cm} (allowlists.${name}.configMap of ${configFile ?? 'the config'})`
          : `${configFile ?? 'the config file'} (allowlists.${name})`;
    const changedBy = cm !== null ? `configmap ${cm}` : l.file !== null ? `file ${l.file}` : CONFIG_FILE;
    declared.set(name, { entries: l.entries as AllowEntry[], allowTemporary: l.allowTemporary, managedIn, changedBy });
  }
  return declared;
}

export async function startAllowlistService(
  config: Config,
  lists: LiveLists,
  logger: Logger,
  configFile: string | null = null,
): Promise<AllowlistService> {
  const store = createStore(config.store, logger);
  const service = new AllowlistService(store, lists, new AuditLog(logger, config.admin.auditHistory), logger);
  const { seed, options } = listSources(config, configFile);
  try {
    await service.start(seed, options);
  } catch (err) {
    await store.close();
    throw err;
  }
  return service;
}
