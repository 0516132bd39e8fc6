#!/usr/bin/env node
/**
 * Process entry: parse the command line, load the config, start, handle signals.
 * The only place that exits the process.
 */
import cluster from 'node:cluster';
import path from 'node:path';
import { loadTokens, TokenError } from './admin/auth';
import { processModel } from './cluster/process-model';
import { ConfigError } from './config/errors';
import { configWarnings, loadConfigFile } from './config/load';
import { startEcho } from './echo/echo-server';
import { createLogger } from './log';

const VERSION: string = (require('../../package.json') as { version: string }).version;
export const DEMO_CONFIG = path.resolve(__dirname, '../../config/demo.yaml');

const USAGE = `ipgate ${VERSION}: an edge proxy that keeps the real client IP and admits only allowlisted clients

Usage:
  ipgate [run] [--config FILE]       run the proxy (without --config: the bundled demo, ${path.relative(process.cwd(), DEMO_CONFIG) || DEMO_CONFIG})
  ipgate check-config FILE           validate a config file and exit (0 valid, 1 invalid)
  ipgate echo [--tcp ADDR] [--http ADDR]
                                     the demo backend: reports the client address it learned
  ipgate doctor [...]                check a Kubernetes cluster for ways the client IP gets lost
                                     (--config FILE: and the TLS listeners' certificates)
  ipgate allowlist ls|get|add|deny|rm|check|replace|create|delete|explain [...]
                                     edit the allowlists through the admin API (ipgate allowlist --help)
  ipgate import ingress-nginx [-f FILE]... [...]
                                     write an ipgate config from Ingress objects (ipgate import --help)
  ipgate --version | --help
`;

/** `--name value` or `--name=value` (as the subcommands' node:util parseArgs accept them). */
function flag(args: string[], name: string): string | undefined {
  const joined = args.findIndex((a) => a.startsWith(`${name}=`));
  if (joined >= 0) return args.splice(joined, 1)[0]!.slice(name.length + 1);
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) throw new UsageError(`${name} needs a value`);
  args.splice(i, 2);
  return v;
}

class UsageError extends Error {}

async function flushed(logger: ReturnType<typeof createLogger>, code: number): Promise<number> {
  logger.flush();
  await new Promise((r) => setTimeout(r, 20));
  return code;
}

async function run(args: string[]): Promise<number> {
  const file = flag(args, '--config') ?? process.env.IPGATE_CONFIG ?? DEMO_CONFIG;
  if (args.length > 0) throw new UsageError(`unexpected argument "${args[0]}"`);
  const loaded = loadConfigFile(file);
  const logger = createLogger(loaded.logging);
  // Cluster mode (processModel): this process is the primary (store, admin API) or one of its
  // workers (listeners). Each side loads only its own code: the worker never loads fastify, the
  // primary never loads the forwarders (bench/README.md "Admin API in its own process").
  if (cluster.isWorker) {
    const { runWorker } = require('./cluster/worker') as typeof import('./cluster/worker');
    return flushed(logger, await runWorker(loaded, logger.child({ worker: cluster.worker?.id })));
  }
  // Lists kept in a ConfigMap key (allowlists.<name>.configMap) are read from the API before
  // anything starts, checked like a list file (a bad one is a config error), and watched from
  // then on (config/configmap-lists.ts). Workers get them from the primary.
  const { ConfigMapLists } = require('./config/configmap-lists') as typeof import('./config/configmap-lists');
  // Each live source's last reload (file, ConfigMaps): ipgate_config_last_reload_successful.
  const { ReloadStatus, watchHealth } = require('./config/reload-status') as typeof import('./config/reload-status');
  const reloads = new ReloadStatus();
  const configMaps = new ConfigMapLists({ logger, reloads });
  let config: typeof loaded;
  try {
    config = await configMaps.fill(loaded);
  } catch (err) {
    await configMaps.close();
    throw err instanceof ConfigError && err.file === undefined ? new ConfigError(err.problems, file) : err;
  }
  // The admin token is checked before anything starts, so a bad one is a config error on one
  // line (main's handler below) rather than a fatal log with a stack after the workers forked.
  if (config.admin.listen !== null) loadTokens(config.admin);
  logger.info({ version: VERSION, config: file, node: process.version }, 'starting');
  for (const warning of configWarnings(loaded)) logger.warn({ config: file, warning }, `config: ${warning}`);
  const model = processModel(config);
  if (model.kind === 'cluster') {
    const { runPrimary } = require('./cluster/primary') as typeof import('./cluster/primary');
    return flushed(logger, await runPrimary(config, logger, model.workers, model.reason, path.resolve(file), configMaps, reloads));
  }
  logger.info({ workers: 1, reason: model.reason }, 'running as one process');
  const { startApp } = require('./app') as typeof import('./app');
  let app: Awaited<ReturnType<typeof startApp>>;
  try {
    app = await startApp(config, { logger, configFile: path.resolve(file) });
  } catch (err) {
    logger.fatal({ err }, (err as Error).message);
    await configMaps.close();
    logger.flush();
    await new Promise((r) => setTimeout(r, 50));
    return 1;
  }
  logger.info('ready');
  // source: config lists and routes follow the file (config/watch.ts); the rest of a change waits for a restart.
  const { ConfigWatcher } = require('./config/watch') as typeof import('./config/watch');
  const { declaredLists } = require('./store/start-service') as typeof import('./store/start-service');
  const started = app;
  const { routeReloader } = require('./route/routes-in-force') as typeof import('./route/routes-in-force');
  started.metrics.setReloads(reloads);
  started.metrics.setWatches(() => watchHealth(configMaps, started.service.store));
  const watcher = new ConfigWatcher({
    file: path.resolve(file),
    logger,
    initial: config,
    configMaps,
    reloads,
    onConfig: async (next) => {
      await started.service.setDeclared(declaredLists(next, path.resolve(file)));
    },
    // The listeners' routes follow the file too (validated whole first, swapped all at once).
    onRoutes: routeReloader(config, logger, (update) => started.replaceRoutes(update)),
    onRefusal: (problems) => {
      started.service.configRefusal = problems;
    },
  });
  started.service.declaredWatches = configMaps.status.bind(configMaps);
  watcher.start();
  // SIGHUP: re-read the config file now (as a change of it would).
  process.on('SIGHUP', () => void watcher.reload());
  return new Promise<number>((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      signals++;
      if (signals > 1) {
        logger.warn({ signal }, 'second signal: exiting without waiting for connections');
        resolve(1);
        return;
      }
      logger.info({ signal, drainTimeoutMs: config.shutdown.drainTimeoutMs }, 'stopping: no new connections, draining open ones');
      watcher.close();
      void app.shutdown().then(() => {
        logger.info('stopped');
        resolve(0);
      });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }).then(async (code) => {
    logger.flush();
    await new Promise((r) => setTimeout(r, 20));
    return code;
  });
}

async function main(argv: string[]): Promise<number> {
  const args = argv.slice();
  const command = args[0] !== undefined && !args[0].startsWith('-') ? args.shift()! : 'run';
  // `ipgate allowlist --help`, `ipgate doctor --help` and `ipgate import --help` are the subcommands' own help.
  if (
    command !== 'allowlist' &&
    command !== 'doctor' &&
    command !== 'import' &&
    (args.includes('--help') || args.includes('-h') || command === 'help')
  ) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.includes('--version')) {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  switch (command) {
    case 'run':
      return run(args);
    case 'check-config': {
      const file = args[0];
      if (file === undefined) throw new UsageError('check-config needs a FILE');
      const config = loadConfigFile(file);
      for (const warning of configWarnings(config)) process.stderr.write(`ipgate: warning: ${file}: ${warning}\n`);
      process.stdout.write(
        `${file}: valid (${config.listeners.length} listener(s), ${Object.keys(config.allowlists).length} allowlist(s))\n`,
      );
      // Their entries come from the API when ipgate runs, checked then as a list file is here.
      const fromApi = Object.entries(config.allowlists)
        .filter(([, l]) => l.configMap !== null)
        .map(([name]) => name);
      if (fromApi.length > 0)
        process.stdout.write(`${file}: not checked here: the entries of ${fromApi.join(', ')} (read from a ConfigMap when ipgate runs)\n`);
      return 0;
    }
    case 'echo': {
      const tcp = flag(args, '--tcp') ?? null;
      const http = flag(args, '--http') ?? null;
      const servers = await startEcho({ tcp: tcp ?? (http === null ? '127.0.0.1:7100' : null), http });
      process.stdout.write(`ipgate echo: tcp=${tcp ?? (http === null ? '127.0.0.1:7100' : '-')} http=${http ?? '-'}\n`);
      return new Promise((resolve) => {
        const stop = (): void => void servers.close().then(() => resolve(0));
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
      });
    }
    case 'doctor': {
      // Loaded on demand: the proxy itself never needs the Kubernetes client code.
      const { doctorMain } = require('./doctor/cli') as { doctorMain: (a: string[]) => Promise<number> };
      return doctorMain(args);
    }
    case 'allowlist': {
      // Loaded on demand, like doctor: an admin API client, not part of the proxy.
      const { allowlistMain } = require('./cli/allowlist') as { allowlistMain: (a: string[]) => Promise<number> };
      return allowlistMain(args);
    }
    case 'import': {
      // Loaded on demand: a migration tool, not part of the proxy.
      const { importMain } = require('./cli/import') as { importMain: (a: string[]) => Promise<number> };
      return importMain(args);
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      // A config or token error is the operator's to fix: one line per problem, each naming the
      // field and the value, no stack (the stack would only point into the validator).
      if (err instanceof ConfigError) {
        const where = err.file !== undefined ? `invalid config ${err.file}` : 'invalid config';
        process.stderr.write(err.problems.map((p) => `ipgate: ${where}: ${p}\n`).join(''));
      } else if (err instanceof TokenError) process.stderr.write(`ipgate: invalid admin token: ${err.message}\n`);
      else if (err instanceof UsageError) process.stderr.write(`ipgate: ${err.message}\n\n${USAGE}`);
      else process.stderr.write(`ipgate: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(err instanceof UsageError ? 2 : 1);
    },
  );
}
