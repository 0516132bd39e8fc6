/**
 * ipgate's version from package.json, in a module of its own so that loading it pulls in nothing
 * else (the cluster worker must not load the admin API's modules just to know the version).
 */
import path from 'node:path';

/** package.json's version: one level up from src, two from dist/src. */
function packageVersion(): string {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = require(path.join(__dirname, rel)) as { name?: string; version?: string };
      if (pkg.name === 'ipgate' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not at this level
    }
  }
  return '0.0.0';
}

export const VERSION = packageVersion();
