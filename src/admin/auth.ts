/**
 * Bearer-token authentication for the admin API.
 *
 * Tokens: `admin.tokenFile` (or, without it, the `admin.tokenEnv` variable) holds one token, named
 * `admin`; `admin.tokensFile` holds named tokens, one `name:token` per line, so the audit log can
 * say who changed what. The names are what the audit "who" shows; the tokens are never logged.
 *
 * Comparison is constant-time: both the presented and each known token are hashed (SHA-256) so
 * crypto.timingSafeEqual always compares 32 equal-length bytes (it throws on unequal lengths, and
 * an early length check would leak the token's length), and every known token is compared, so the
 * time does not tell which one nearly matched.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import type { AdminConfig } from '../schema/config';

export interface Tokens {
  /** Name and SHA-256 of each token. */
  readonly entries: readonly { name: string; digest: Buffer }[];
  /** Where the tokens came from, for the start-up log line (never the tokens). */
  readonly sources: readonly string[];
}

export class TokenError extends Error {
  readonly code = 'ERR_ADMIN_TOKEN';
  override readonly name = 'TokenError';
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,62}$/;
/** Shorter tokens are guessable; the chart generates 48 characters. */
const MIN_TOKEN_LENGTH = 16;

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

export function loadTokens(
  config: Pick<AdminConfig, 'tokenFile' | 'tokenEnv' | 'tokensFile'>,
  env: NodeJS.ProcessEnv = process.env,
): Tokens {
  const entries: { name: string; digest: Buffer }[] = [];
  const sources: string[] = [];
  const add = (name: string, token: string, where: string): void => {
    if (token.length < MIN_TOKEN_LENGTH) throw new TokenError(`${where}: the token is shorter than ${MIN_TOKEN_LENGTH} characters`);
    if (/\s/.test(token)) throw new TokenError(`${where}: the token contains white space`);
    if (entries.some((e) => e.name === name)) throw new TokenError(`${where}: token name "${name}" is used twice`);
    entries.push({ name, digest: digest(token) });
  };
  if (config.tokenFile !== null) {
    add('admin', readFile(config.tokenFile).trim(), `admin.tokenFile ${config.tokenFile}`);
    sources.push(`tokenFile ${config.tokenFile}`);
  } else {
    const v = env[config.tokenEnv];
    if (v !== undefined && v.trim() !== '') {
      add('admin', v.trim(), `environment variable ${config.tokenEnv}`);
      sources.push(`env ${config.tokenEnv}`);
    }
  }
  if (config.tokensFile !== null) {
    const lines = readFile(config.tokensFile).split('\n');
    for (const [i, raw] of lines.entries()) {
      const line = raw.trim();
      if (line === '' || line.startsWith('#')) continue;
      const where = `admin.tokensFile ${config.tokensFile} line ${i + 1}`;
      const colon = line.indexOf(':');
      if (colon < 0) throw new TokenError(`${where}: expected name:token`);
      const name = line.slice(0, colon);
      if (!NAME.test(name)) throw new TokenError(`${where}: "${name.slice(0, 64)}" is not a valid token name`);
      add(name, line.slice(colon + 1), where);
    }
    sources.push(`tokensFile ${config.tokensFile}`);
  }
  return { entries, sources };
}

/** The name of the token presented, or null. Constant time in the presented token. */
export function authenticate(tokens: Tokens, presented: string): string | null {
  const d = digest(presented);
  let found: string | null = null;
  for (const e of tokens.entries) {
    if (timingSafeEqual(d, e.digest) && found === null) found = e.name;
  }
  return found;
}

function readFile(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new TokenError(`cannot read ${file}: ${(err as Error).message}`);
  }
}
