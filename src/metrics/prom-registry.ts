/**
 * prom-client's Registry without the rest of prom-client: the one door to a file of that package
 * that its index does not name as an export.
 *
 * Why: `require('prom-client')` loads every part of it (default collectors, the Pushgateway, the
 * cluster aggregator, and through processCpuTotal the whole of @opentelemetry/api): 88 modules,
 * ~1.5 MiB of heap and ~5 MiB of RSS for code ipgate never runs in a single process (its metrics
 * are its own, published.ts; its process metrics are its own, process-metrics.ts). The Registry
 * is lib/registry.js, which index.js re-exports as is (`exports.Registry = require('./lib/registry')`),
 * 9 modules with what it needs (bench/README.md "Memory of the default pod").
 * The workers' aggregation (cluster.ts) still loads the whole package: it runs only with
 * `workers >= 2`.
 *
 * Probed at load: the file must export a constructor with `PROMETHEUS_CONTENT_TYPE` (prom-client
 * 15's Registry); if a version moves or changes it, the package's own export is used (the memory
 * is lost, nothing else). test/unit/metrics/prom-registry.test.ts fails when the file is not the
 * one prom-client exports, so an upgrade that moves it is seen.
 */
import type { Registry as PromRegistry } from 'prom-client';

/** Where the Registry was found: the file alone, or (fallback) prom-client's index. */
export let registrySource: 'lib/registry' | 'index' = 'lib/registry';

function load(): typeof PromRegistry {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const R = require('prom-client/lib/registry') as typeof PromRegistry;
    if (typeof R === 'function' && typeof R.PROMETHEUS_CONTENT_TYPE === 'string') return R;
  } catch {
    // moved or changed: the package's own export below
  }
  registrySource = 'index';
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require('prom-client') as typeof import('prom-client')).Registry;
}

export const Registry = load();
export type Registry = PromRegistry;
