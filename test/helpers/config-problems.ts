/** The problems `buildConfig` refuses a raw config with (empty when it loads): the config tests' probe. */
import { ConfigError } from '../../src/config/errors';
import { buildConfig } from '../../src/config/load';

export function problemsOf(raw: unknown): string[] {
  try {
    buildConfig(raw);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}
