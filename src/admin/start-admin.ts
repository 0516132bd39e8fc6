/**
 * Start the admin API when `admin.listen` is set: tokens loaded (a bad tokens file stops the start),
 * readiness computed from the listeners and the store.
 */
import type { Logger } from 'pino';
import type { Config } from '../schema/config';
import type { RoutesInForce } from '../route/routes-in-force';
import type { Listener } from '../listener/listener';
import type { SelfChecks } from '../selfcheck/self-checks';
import type { AllowlistService } from '../store/allowlist-service';
import { buildAdminApp } from './admin-app';
import { startAdminServer, type AdminServer } from './admin-server';
import { loadTokens, type Tokens } from './auth';
import type { Readiness } from './routes/health';
import type { MetricsEndpoint } from './routes/metrics';
import { VERSION } from '../version';

export function readiness(service: AllowlistService, listeners: readonly Listener[], selfChecks: SelfChecks | null = null): Readiness {
  const unbound = listeners.filter((l) => l.address === null).map((l) => l.name);
  const refusal = service.store.lastRefusal();
  const lists: Readiness['lists'] = {};
  for (const name of service.names()) {
    const l = service.get(name);
    const live = service.lists.has(name) ? service.lists.get(name) : null;
    lists[name] = {
      version: l.version,
      appliedVersion: live?.version ?? null,
      entries: l.entries.length,
      appliedAt: live && live.appliedAt > 0 ? new Date(live.appliedAt).toISOString() : null,
    };
  }
  const checks: Readiness['checks'] = [
    unbound.length === 0
      ? { name: 'listeners', status: 'ok', message: `${listeners.length} listener(s) bound` }
      : { name: 'listeners', status: 'error', message: `not bound: ${unbound.join(', ')}` },
    !service.loaded
      ? { name: 'store', status: 'error', message: `${service.store.kind} store ${service.store.location} not loaded` }
      : refusal
        ? {
            name: 'store',
            status: 'warn',
            message: `${service.store.kind} store ${service.store.location}: content refused (${refusal.reason}); the last good lists stay in force`,
          }
        : { name: 'store', status: 'ok', message: `${service.store.kind} store ${service.store.location} loaded` },
  ];
  // A config seed that differs from its store list, store entries a config list ignores: warnings
  // found once at start-up (AllowlistService.checkSeeds), shown until the next start.
  for (const w of service.startWarnings) checks.push({ name: 'allowlist_seed', status: 'warn', message: w.message });
  if (service.configRefusal !== null) {
    checks.push({
      name: 'config',
      status: 'warn',
      message: `the last change to the config file or its lists was refused, the lists and routes in force stay: ${service.configRefusal.join('; ')}`,
    });
  }
  // A failing watch of a lists ConfigMap: the lists in force stay, but edits are not arriving.
  for (const [where, w] of Object.entries(service.declaredWatches?.() ?? {})) {
    checks.push(
      w.lastError === null
        ? { name: 'config_lists', status: 'ok', message: `ConfigMap ${where} watched${w.watchConnected ? '' : ' (re-watching)'}` }
        : {
            name: 'config_lists',
            status: 'warn',
            message: `ConfigMap ${where}: ${w.lastError}; the lists in force stay until the API answers again`,
          },
    );
  }
  // Self-checks (source NAT suspected, PROXY trust) warn but never make ipgate unready.
  if (selfChecks !== null) checks.push(...selfChecks.readinessChecks());
  const store = { kind: service.store.kind, location: service.store.location, ...(service.store.status?.() ?? {}) };
  return { ready: unbound.length === 0 && service.loaded, checks, lists, store };
}

export async function startAdmin(
  config: Config,
  service: AllowlistService,
  listeners: readonly Listener[],
  logger: Logger,
  selfChecks: SelfChecks | null = null,
  metrics: MetricsEndpoint | null = null,
  routes?: RoutesInForce,
): Promise<AdminServer | null> {
  if (config.admin.listen === null) return null;
  const tokens = loadTokens(config.admin);
  const app = await buildAdminApp({
    service,
    tokens,
    logger,
    bodyLimit: config.admin.bodyLimit,
    version: VERSION,
    listeners,
    readiness: () => readiness(service, listeners, selfChecks),
    metrics,
    allowedHosts: config.admin.allowedHosts,
    ...(routes !== undefined ? { routes } : {}),
  });
  const server = await startAdminServer(app, config.admin.listen);
  logAdminListening(server, tokens, config, logger);
  return server;
}

/** The start-up lines of the admin API, the same in one process and in a cluster primary. */
export function logAdminListening(server: AdminServer, tokens: Tokens, config: Config, logger: Logger): void {
  const names = tokens.entries.map((e) => e.name);
  logger.info(
    { address: server.address.address, port: server.address.port, tokens: names, sources: tokens.sources },
    'admin API listening',
  );
  if (names.length === 0) {
    logger.warn(
      { tokenEnv: config.admin.tokenEnv },
      'admin API has no token: only /healthz, /readyz and /openapi.json answer; set the token variable or admin.tokenFile',
    );
  }
}
