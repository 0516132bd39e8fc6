/**
 * Build the store the config names, load it (seeding it from `config.allowlists`) and apply every
 * list before any listener accepts: a connection must never be decided on the config's lists when
 * the store (the source of truth) says otherwise.
 */
import type { Logger } from 'pino';
import type { AllowEntry } from '../allowlist/entry';
import { AuditLog } from '../audit/audit-log';
import type { Config } from '../config/schema';
import { AllowlistService } from './allowlist-service';
import { createStore } from './create-store';
import type { LiveLists } from './live-lists';

export async function startAllowlistService(config: Config, lists: LiveLists, logger: Logger): Promise<AllowlistService> {
  const store = createStore(config.store, logger);
  const service = new AllowlistService(store, lists, new AuditLog(logger, config.admin.auditHistory), logger);
  const seed = new Map<string, readonly AllowEntry[]>(Object.entries(config.allowlists));
  try {
    await service.start(seed);
  } catch (err) {
    await store.close();
    throw err;
  }
  return service;
}
