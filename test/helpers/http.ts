/**
 * HTTP helpers for the HTTP-path tests: requests from a chosen 127.0.0.x source address, and
 * backends that count what reached them.
 */
import http from 'node:http';
import net from 'node:net';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  json: () => Record<string, unknown>;
}

export interface RequestOptions {
  port: number;
  host?: string;
  path?: string;
  method?: string;
  localAddress?: string;
  headers?: http.OutgoingHttpHeaders | string[];
  agent?: http.Agent | false;
  body?: string;
}

export function request(opts: RequestOptions): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: opts.host ?? '127.0.0.1', port: opts.port, path: opts.path ?? '/', method: opts.method ?? 'GET',
      localAddress: opts.localAddress, headers: opts.headers, agent: opts.agent ?? false,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) as Record<string, unknown> });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A backend that records every connection and request, answering with `handler`. */
export interface CountingBackend {
  server: http.Server;
  port: number;
  connections: number;
  requests: http.IncomingMessage[];
  close: () => Promise<void>;
}

export async function countingBackend(handler: http.RequestListener = (_req, res) => res.end('ok\n')): Promise<CountingBackend> {
  const state = { connections: 0, requests: [] as http.IncomingMessage[] };
  const server = http.createServer((req, res) => {
    state.requests.push(req);
    handler(req, res);
  });
  server.keepAliveTimeout = 30_000;
  server.on('connection', () => state.connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const b: CountingBackend = {
    server,
    port: (server.address() as net.AddressInfo).port,
    get connections() { return state.connections; },
    set connections(v: number) { state.connections = v; },
    requests: state.requests,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
  return b;
}

/** A port nothing listens on (bound then closed). */
export async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}
