/** The store named by the config. The Kubernetes store plugs in here (separate issue). */
import type { Logger } from 'pino';
import type { StoreConfig } from '../config/schema';
import { FileStore } from './file-store';
import { MemoryStore } from './memory-store';
import { StoreLoadError, type AllowlistStore } from './store';

export function createStore(config: StoreConfig, logger: Logger): AllowlistStore {
  switch (config.type) {
    case 'file':
      return new FileStore({ path: config.path, logger, pollIntervalMs: config.pollIntervalMs });
    case 'memory':
      return new MemoryStore();
    case 'kubernetes':
      throw new StoreLoadError('store.type "kubernetes" is not available in this build');
  }
}
