/**
 * An in-process ipgate with a file store in a temp dir and the admin API on a loopback port, plus a
 * small HTTP client for it (real requests through node:http, a fresh connection each).
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Test } from 'tap';
import { startIpgate, tmpDir, type Started } from './ipgate';

export const TOKEN = 'test-token-0123456789abcdef';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body bytes (sent as is, with `content-type` from headers or application/json). */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  /** Token to send; null sends no Authorization header. Default TOKEN. */
  token?: string | null;
}

export function request(base: string, method: string, url: string, opts: RequestOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  const token = opts.token === undefined ? TOKEN : opts.token;
  if (token !== null && headers.authorization === undefined) headers.authorization = `Bearer ${token}`;
  let payload: Buffer | null = null;
  if (opts.raw !== undefined) payload = Buffer.from(opts.raw);
  else if (opts.body !== undefined) payload = Buffer.from(JSON.stringify(opts.body));
  if (payload !== null) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(payload.length);
  }
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(url, base), { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    req.end(payload ?? undefined);
  });
}

export interface AdminGate extends Started {
  base: string;
  dir: string;
  /** The store file. */
  file: string;
  api: (method: string, url: string, opts?: RequestOptions) => Promise<Reply>;
}

/** ipgate with `raw` config, a file store in a fresh temp dir, the admin API on 127.0.0.1:0. */
export async function startAdminGate(
  t: Test,
  raw: Record<string, unknown>,
  opts: { dir?: string; store?: Record<string, unknown> } = {},
): Promise<AdminGate> {
  const dir = opts.dir ?? tmpDir('ipgate-admin-');
  const tokenFile = path.join(dir, 'token');
  fs.writeFileSync(tokenFile, `${TOKEN}\n`);
  const file = path.join(dir, 'allowlists.json');
  const g = await startIpgate({
    store: { type: 'file', path: file, ...opts.store },
    admin: { listen: '127.0.0.1:0', tokenFile },
    ...raw,
  });
  t.teardown(() => g.app.shutdown(0));
  const addr = g.app.admin!.address;
  const base = `http://127.0.0.1:${addr.port}`;
  return { ...g, base, dir, file, api: (m, u, o) => request(base, m, u, o) };
}
