/**
 * A small Kubernetes API client on node:http/https: GET an object, GET a list (following `continue`
 * pages), PUT an object, and watch (a streamed GET of JSON lines). Shared by `ipgate doctor`
 * (read-only, short runs) and the ConfigMap store (long-running; retries and backoff are the
 * caller's policy, this client makes exactly one attempt per call).
 *
 * Why not @kubernetes/client-node: 2.0.1 does not load on Node 20 (its undici 8 needs Node >= 22.19,
 * and ipgate supports Node >= 20), and the 1.x informer stops for good on a watch error, so the store
 * would have to supervise it anyway. What the store needs (GET, PUT with resourceVersion, one watch)
 * is small enough to own, with no dependency.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { KubeError, KubeStatusError } from './errors';
import type { KubeAccess } from './kubeconfig';

/** Cap on one response body: a 5000-node NodeList is ~25 MB; anything past this is not an API answer. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** Cap on one watch event line. A ConfigMap holds at most 1 MiB of data; its event is a bit more. */
const MAX_WATCH_LINE_BYTES = 8 * 1024 * 1024;
/** Page size for lists, as kubectl uses. */
const LIST_LIMIT = 500;
/** Re-read a rotating token file this often (client-go: one minute). */
const TOKEN_REREAD_MS = 60_000;

interface KubeResponse {
  readonly status: number;
  readonly body: unknown;
}

interface KubeClientOptions {
  /** Per request, connect to last byte (watches: connect to response headers). Default 10000. */
  timeoutMs?: number;
  /** Default `ipgate`. */
  userAgent?: string;
}

/** One watch event as the API server streams it. */
export interface WatchEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  /** The object; for ERROR a Status (`{code: 410, reason: 'Expired', ...}`). */
  readonly object: Record<string, unknown>;
}

/** How a watch ended. */
export type WatchEnd =
  /** The server closed the stream (timeoutSeconds passed, API server restart, a proxy's idle cut). */
  | { readonly kind: 'closed'; readonly events: number }
  /** The server refused to start it (410 Gone: the resourceVersion is too old; 403; 5xx). */
  | { readonly kind: 'status'; readonly error: KubeStatusError }
  /** Could not connect, the connection dropped, or the stream was unreadable. */
  | { readonly kind: 'failed'; readonly error: KubeError; readonly events: number }
  /** `stop()` was called. */
  | { readonly kind: 'stopped'; readonly events: number };

export interface Watch {
  /** Resolves once, however the watch ended; never rejects. */
  readonly done: Promise<WatchEnd>;
  stop(): void;
}

interface WatchOptions {
  /** Called once the server accepted the watch (200). */
  onOpen?: () => void;
  /** Called for every event line, in order. A throw ends the watch as `failed`. */
  onEvent: (event: WatchEvent) => void;
  /** No byte for this long (not even a bookmark) means a dead connection. Default none. */
  idleTimeoutMs?: number;
}

export class KubeClient {
  private readonly agent: http.Agent;
  private readonly timeoutMs: number;
  private readonly baseHeaders: Record<string, string>;
  private token: string | undefined;
  private tokenReadAt = Date.now();

  constructor(
    readonly access: KubeAccess,
    opts: KubeClientOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    const isHttps = access.server.protocol === 'https:';
    this.agent = isHttps
      ? new https.Agent({
          keepAlive: true,
          ca: access.ca,
          cert: access.cert,
          key: access.key,
          rejectUnauthorized: !access.insecureSkipTlsVerify,
          servername: access.tlsServerName,
        })
      : new http.Agent({ keepAlive: true });
    this.baseHeaders = { accept: 'application/json', 'user-agent': opts.userAgent ?? 'ipgate' };
    this.token = access.token;
    if (!access.token && access.basicAuth) {
      const { username, password } = access.basicAuth;
      this.baseHeaders.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    }
  }

  close(): void {
    this.agent.destroy();
  }

  /** Raw GET: any HTTP status is returned; only "could not talk to the server" throws. */
  get(apiPath: string): Promise<KubeResponse> {
    return this.request('GET', apiPath);
  }

  /** One request with an optional JSON body: any HTTP status is returned; a transport failure throws KubeError. */
  request(method: 'GET' | 'PUT', apiPath: string, body?: unknown): Promise<KubeResponse> {
    const url = this.url(apiPath);
    const mod = url.protocol === 'https:' ? https : http;
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body), 'utf8');
    const headers = this.headers();
    if (payload) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(payload.length);
    }
    return new Promise((resolve, reject) => {
      const req = mod.request(url, { method, agent: this.agent, headers, timeout: this.timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) {
            req.destroy(new Error(`response larger than ${MAX_BODY_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          if (text !== '' && /json/i.test(String(res.headers['content-type'] ?? 'application/json'))) {
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = text;
            }
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', (err) => reject(unreachable(this.access, err)));
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (err) => reject(unreachable(this.access, err)));
      req.end(payload);
    });
  }

  /** GET one object: the object on 2xx, null on 404, KubeStatusError otherwise. */
  async getObject<T = Record<string, unknown>>(apiPath: string): Promise<T | null> {
    const res = await this.get(apiPath);
    if (res.status >= 200 && res.status < 300) return res.body as T;
    if (res.status === 404) return null;
    throw statusError(res, apiPath);
  }

  /**
   * GET a list, all pages: the items on 2xx, null on 404 (the resource type does not exist,
   * e.g. a CRD that is not installed), KubeStatusError otherwise.
   */
  async list<T = Record<string, unknown>>(apiPath: string): Promise<T[] | null> {
    const r = await this.listWithVersion<T>(apiPath);
    return r === null ? null : r.items;
  }

  /** As `list`, with the list's resourceVersion (where a watch starts). */
  async listWithVersion<T = Record<string, unknown>>(apiPath: string): Promise<{ items: T[]; resourceVersion: string } | null> {
    const items: T[] = [];
    let cont: string | undefined;
    let resourceVersion = '';
    do {
      const sep = apiPath.includes('?') ? '&' : '?';
      const page = `${apiPath}${sep}limit=${LIST_LIMIT}${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
      const res = await this.get(page);
      if (res.status === 404) return null;
      if (res.status < 200 || res.status >= 300) throw statusError(res, apiPath);
      const body = res.body as { items?: T[]; metadata?: { continue?: string; resourceVersion?: string } };
      if (Array.isArray(body?.items)) items.push(...body.items);
      resourceVersion = body?.metadata?.resourceVersion ?? resourceVersion;
      cont = body?.metadata?.continue || undefined;
    } while (cont);
    return { items, resourceVersion };
  }

  /**
   * Stream a watch (`apiPath` carries `watch=1` and the rest of the query). Events are JSON lines in
   * a chunked response; a line may arrive split across chunks or several per chunk. The caller
   * decides what to do when it ends (re-watch, relist on 410, back off).
   */
  watch(apiPath: string, opts: WatchOptions): Watch {
    const url = this.url(apiPath);
    const mod = url.protocol === 'https:' ? https : http;
    let events = 0;
    let settled = false;
    let stopped = false;
    /** Why we cut the stream ourselves (bad line, idle): reported instead of the socket's echo of it. */
    let failure: Error | null = null;
    let settle!: (end: WatchEnd) => void;
    const done = new Promise<WatchEnd>((resolve) => {
      settle = (end) => {
        if (settled) return;
        settled = true;
        resolve(end);
      };
    });
    // A watch holds its connection for minutes: give it a socket of its own, not the pooled ones.
    const req = mod.request(url, { method: 'GET', agent: false, headers: this.headers(), ...this.tlsOptions() });
    const connectTimer = setTimeout(() => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    connectTimer.unref();
    const ended = (err: Error): WatchEnd =>
      stopped ? { kind: 'stopped', events } : { kind: 'failed', error: unreachable(this.access, failure ?? err), events };
    const fail = (err: Error): void => {
      failure ??= err;
      req.destroy(err);
    };
    req.on('error', (err) => {
      clearTimeout(connectTimer);
      settle(ended(err));
    });
    req.on('response', (res) => {
      clearTimeout(connectTimer);
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          if (chunks.length < 64) chunks.push(c);
        });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          settle({ kind: 'status', error: statusError({ status, body }, apiPath) });
        });
        res.on('error', () => settle({ kind: 'status', error: statusError({ status, body: '' }, apiPath) }));
        return;
      }
      opts.onOpen?.();
      if (opts.idleTimeoutMs) {
        res.socket.setTimeout(opts.idleTimeoutMs, () => {
          fail(new Error(`watch idle for ${opts.idleTimeoutMs} ms (no event, no bookmark)`));
        });
      }
      let pending: Buffer = Buffer.alloc(0);
      res.on('data', (chunk: Buffer) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        let nl: number;
        while ((nl = pending.indexOf(0x0a)) !== -1) {
          const line = pending.subarray(0, nl).toString('utf8').trim();
          pending = pending.subarray(nl + 1);
          if (line === '') continue;
          let event: WatchEvent;
          try {
            event = parseEvent(line);
          } catch (err) {
            fail(err as Error);
            return;
          }
          events++;
          try {
            opts.onEvent(event);
          } catch (err) {
            fail(err as Error);
            return;
          }
        }
        if (pending.length > MAX_WATCH_LINE_BYTES) fail(new Error(`watch event larger than ${MAX_WATCH_LINE_BYTES} bytes`));
      });
      res.on('end', () => settle(stopped ? { kind: 'stopped', events } : failure ? ended(failure) : { kind: 'closed', events }));
      res.on('error', (err) => settle(ended(err)));
      // A reset mid-stream may close the response without an 'error' on some Node versions.
      res.on('close', () => {
        if (!res.complete || failure) settle(ended(new Error('watch connection closed mid-stream')));
      });
    });
    req.end();
    return {
      done,
      stop: () => {
        stopped = true;
        req.destroy();
        settle({ kind: 'stopped', events });
      },
    };
  }

  private url(apiPath: string): URL {
    return new URL(this.access.server.href.replace(/\/+$/, '') + apiPath);
  }

  /** The agent's TLS settings, for a request that does not use the agent (a watch). */
  private tlsOptions(): https.RequestOptions {
    if (this.access.server.protocol !== 'https:') return {};
    const a = this.access;
    return { ca: a.ca, cert: a.cert, key: a.key, rejectUnauthorized: !a.insecureSkipTlsVerify, servername: a.tlsServerName };
  }

  private headers(): Record<string, string> {
    const h = { ...this.baseHeaders };
    const token = this.currentToken();
    if (token) h.authorization = `Bearer ${token}`;
    return h;
  }

  private currentToken(): string | undefined {
    const file = this.access.tokenFile;
    if (file && Date.now() - this.tokenReadAt >= TOKEN_REREAD_MS) {
      this.tokenReadAt = Date.now();
      try {
        const t = fs.readFileSync(file, 'utf8').trim();
        if (t !== '') this.token = t;
      } catch {
        // keep the token we have: the kubelet replaces the file by rename, a miss is momentary
      }
    }
    return this.token;
  }
}

function parseEvent(line: string): WatchEvent {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    throw new Error(`watch stream: not a JSON event: ${line.slice(0, 80)}`);
  }
  const e = raw as { type?: unknown; object?: unknown };
  const types = ['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR'];
  if (typeof e?.type !== 'string' || !types.includes(e.type) || typeof e.object !== 'object' || e.object === null) {
    throw new Error(`watch stream: not a watch event: ${line.slice(0, 80)}`);
  }
  return e as WatchEvent;
}

function unreachable(access: KubeAccess, err: Error): KubeError {
  const code = (err as NodeJS.ErrnoException).code;
  return new KubeError(
    'IPGATE_KUBE_UNREACHABLE',
    `cannot reach the Kubernetes API at ${access.server.origin} (${access.source}): ${code ? `${code}: ` : ''}${err.message}`,
    { cause: err },
  );
}

/** The API server explains failures in a Status object's `message`; fall back to the raw text. */
export function statusError(res: KubeResponse, apiPath: string, method = 'GET'): KubeStatusError {
  const b = res.body as { kind?: string; message?: string } | string;
  const reason =
    typeof b === 'object' && b !== null && typeof b.message === 'string'
      ? b.message
      : typeof b === 'string' && b !== ''
        ? b.slice(0, 200).trim()
        : (http.STATUS_CODES[res.status] ?? 'unexpected status');
  return new KubeStatusError(res.status, apiPath, reason, method);
}
