/** The store named by the config. */
import type { Logger } from 'pino';
import type { StoreConfig } from '../schema/config';
import { FileStore } from './file-store';
import { KubernetesStore } from './kubernetes-store';
import { MemoryStore } from './memory-store';
import type { AllowlistStore } from './store';

export function createStore(config: StoreConfig, logger: Logger): AllowlistStore {
  switch (config.type) {
    case 'file':
      return new FileStore({ path: config.path, logger, pollIntervalMs: config.pollIntervalMs });
    case 'memory':
      return new MemoryStore();
    case 'kubernetes':
      return new KubernetesStore({ namespace: config.namespace, configMap: config.configMap, logger });
  }
}
