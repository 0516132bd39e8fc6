/**
 * GET <admin-url>/readyz with the admin bearer token. Never throws: an unreachable admin API is a
 * finding (doctor may run where only the Kubernetes API is reachable), not a failed run.
 */
import http from 'node:http';
import https from 'node:https';
import type { AdminView } from './snapshot';

const MAX_BODY_BYTES = 1024 * 1024;

interface ReadyzOptions {
  adminUrl: string;
  token?: string;
  tokenProblem?: string;
  timeoutMs?: number;
}

function readyzUrl(adminUrl: string): URL {
  const url = new URL(adminUrl);
  if (!/\/readyz\/?$/.test(url.pathname)) url.pathname = `${url.pathname.replace(/\/+$/, '')}/readyz`;
  return url;
}

export function fetchReadyz(opts: ReadyzOptions): Promise<AdminView> {
  let url: URL;
  try {
    url = readyzUrl(opts.adminUrl);
  } catch {
    return Promise.resolve({ url: opts.adminUrl, error: 'not a URL', ...problem(opts) });
  }
  const mod = url.protocol === 'https:' ? https : http;
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'ipgate-doctor' };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const timeoutMs = opts.timeoutMs ?? 5000;
  return new Promise((resolve) => {
    const req = mod.request(url, { method: 'GET', headers, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= MAX_BODY_BYTES) chunks.push(c);
      });
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = text === '' ? null : JSON.parse(text);
        } catch {
          body = text;
        }
        resolve({ url: url.href, status: res.statusCode ?? 0, body, ...problem(opts) });
      });
      res.on('error', (err) => resolve({ url: url.href, error: err.message, ...problem(opts) }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (err) => {
      const code = (err as NodeJS.ErrnoException).code;
      resolve({ url: url.href, error: code ? `${code}: ${err.message}` : err.message, ...problem(opts) });
    });
    req.end();
  });
}

function problem(opts: ReadyzOptions): { tokenProblem?: string } {
  return opts.tokenProblem ? { tokenProblem: opts.tokenProblem } : {};
}
