/**
 * Runs the floor proxy (bench/load/http-raw-min.ts) in ipgate's place under the harnesses that
 * start `MAIN --config FILE` (bench/load/denied-instructions.ts `--main`): it reads the harness's
 * config (JSON), serves its one HTTP listener's port as the relay (the allowlist admits 127.0.0.1)
 * or as the prebuilt 403 (it does not), to the listener's first upstream, and passes `parse` on
 * unless IPGATE_FLOOR_PARSE=0. So the floor's instructions per request are read by the same
 * client, the same backend and the same window as ipgate's (bench/README.md "The floor of a
 * validating proxy").
 *
 *   node dist/bench/load/denied-instructions.js --main dist/bench/load/floor-as-ipgate.js [--allowed] ...
 */
import fs from 'node:fs';
import path from 'node:path';

interface HarnessConfig {
  allowlists: Record<string, string[]>;
  listeners: Array<{ listen: string; allowlist: string; upstreams: string[] }>;
}

const file = process.argv[process.argv.indexOf('--config') + 1]!;
const config = JSON.parse(fs.readFileSync(file, 'utf8')) as HarnessConfig;
const listener = config.listeners[0]!;
const port = (hostPort: string): string => hostPort.slice(hostPort.lastIndexOf(':') + 1);
const allowed = config.allowlists[listener.allowlist]!.includes('127.0.0.1/32');
const listen = port(listener.listen);
process.argv = [
  process.argv[0]!,
  path.join(__dirname, 'http-raw-min.js'),
  allowed ? listen : '0',
  allowed ? '0' : listen,
  port(listener.upstreams[0]!),
  ...(process.env.IPGATE_FLOOR_PARSE === '0' ? [] : ['parse']),
];
require('./http-raw-min');
