/**
 * A read-only Kubernetes API client on node:http/https: GET an object, GET a list (following
 * `continue` pages). Enough for doctor; not a general client (no watch, no writes, no retries:
 * a doctor run is short and its findings say what could not be read).
 */
import http from 'node:http';
import https from 'node:https';
import { DoctorError, KubeStatusError } from './errors';
import type { KubeAccess } from './kubeconfig';

/** Cap on one response body: a 5000-node NodeList is ~25 MB; anything past this is not an API answer. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** Page size for lists, as kubectl uses. */
const LIST_LIMIT = 500;

export interface KubeResponse {
  readonly status: number;
  readonly body: unknown;
}

export interface KubeClientOptions {
  /** Per request, connect to last byte. */
  timeoutMs?: number;
}

export class KubeClient {
  private readonly agent: http.Agent;
  private readonly timeoutMs: number;
  private readonly headers: Record<string, string>;

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
    this.headers = { accept: 'application/json', 'user-agent': 'ipgate-doctor' };
    if (access.token) this.headers.authorization = `Bearer ${access.token}`;
    else if (access.basicAuth) {
      const { username, password } = access.basicAuth;
      this.headers.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    }
  }

  close(): void {
    this.agent.destroy();
  }

  /** Raw GET: any HTTP status is returned; only "could not talk to the server" throws. */
  get(apiPath: string): Promise<KubeResponse> {
    const url = new URL(this.access.server.href.replace(/\/+$/, '') + apiPath);
    const mod = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      const req = mod.request(
        url,
        { method: 'GET', agent: this.agent, headers: this.headers, timeout: this.timeoutMs },
        (res) => {
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
            let body: unknown = text;
            if (text !== '' && /json/i.test(String(res.headers['content-type'] ?? 'application/json'))) {
              try {
                body = JSON.parse(text);
              } catch {
                body = text;
              }
            }
            resolve({ status: res.statusCode ?? 0, body });
          });
          res.on('error', (err) => reject(unreachable(this.access, err)));
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (err) => reject(unreachable(this.access, err)));
      req.end();
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
    const items: T[] = [];
    let cont: string | undefined;
    do {
      const sep = apiPath.includes('?') ? '&' : '?';
      const page = `${apiPath}${sep}limit=${LIST_LIMIT}${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
      const res = await this.get(page);
      if (res.status === 404) return null;
      if (res.status < 200 || res.status >= 300) throw statusError(res, apiPath);
      const body = res.body as { items?: T[]; metadata?: { continue?: string } };
      if (Array.isArray(body?.items)) items.push(...body.items);
      cont = body?.metadata?.continue || undefined;
    } while (cont);
    return items;
  }
}

function unreachable(access: KubeAccess, err: Error): DoctorError {
  const code = (err as NodeJS.ErrnoException).code;
  return new DoctorError(
    'IPGATE_DOCTOR_API_UNREACHABLE',
    `cannot reach the Kubernetes API at ${access.server.origin} (${access.source}): ${code ? `${code}: ` : ''}${err.message}`,
    { cause: err },
  );
}

/** The API server explains failures in a Status object's `message`; fall back to the raw text. */
function statusError(res: KubeResponse, apiPath: string): KubeStatusError {
  const b = res.body as { kind?: string; message?: string } | string;
  const reason =
    typeof b === 'object' && b !== null && typeof b.message === 'string'
      ? b.message
      : typeof b === 'string' && b !== ''
        ? b.slice(0, 200).trim()
        : http.STATUS_CODES[res.status] ?? 'unexpected status';
  return new KubeStatusError(res.status, apiPath, reason);
}
