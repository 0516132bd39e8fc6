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
    const req = http.request(
      {
        host: opts.host ?? '127.0.0.1',
        port: opts.port,
        path: opts.path ?? '/',
        method: opts.method ?? 'GET',
        localAddress: opts.localAddress,
        headers: opts.headers,
        agent: opts.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) as Record<string, unknown> });
        });
        res.on('error', reject);
      },
    );
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
    get connections() {
      return state.connections;
    },
    set connections(v: number) {
      state.connections = v;
    },
    requests: state.requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return b;
}

/** What listenLoopback needs of a server: node:http's and node:https's both have it. */
interface LoopbackServer {
  listen(port: number, host: string, cb: () => void): unknown;
  closeAllConnections(): void;
  close(cb: () => void): unknown;
  address(): net.AddressInfo | string | null;
}

/**
 * Listens on 127.0.0.1 (a port of the kernel's choice) and returns the port; when `t` ends, every
 * connection is closed (keep-alive ones too) and then the server.
 */
export async function listenLoopback(t: { teardown(fn: () => Promise<void>): void }, server: LoopbackServer): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return (server.address() as net.AddressInfo).port;
}

/** A port nothing listens on (bound then closed). */
export async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}

/** A response read off the wire, as the client got it. */
export interface RawReply {
  /** 0 when no status line came back (the connection closed first). */
  status: number;
  /** Header lines in order, names lower-cased. */
  headers: Array<[string, string]>;
  body: string;
  header(name: string): string | undefined;
}

/**
 * Send `bytes` as they are (no client library normalises the target or the headers) on a new
 * connection from `localAddress`, read until the peer closes, and parse the one response (send
 * `Connection: close`). For inputs a client library would refuse or rewrite.
 */
export async function rawRequest(port: number, bytes: Buffer, localAddress?: string, ms = 10_000): Promise<RawReply> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress });
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`rawRequest: no close within ${ms} ms; got ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`));
    }, ms);
    socket.once('connect', () => socket.write(bytes));
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const text = Buffer.concat(chunks).toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  const lines = (headEnd === -1 ? text : text.slice(0, headEnd)).split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  const headers: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.push([line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]);
  }
  let body = headEnd === -1 ? '' : text.slice(headEnd + 4);
  if (headers.some(([k, v]) => k === 'transfer-encoding' && /chunked/i.test(v))) body = dechunk(body);
  return {
    status: m === null ? 0 : Number(m[1]),
    headers,
    body,
    header: (name: string) => headers.find(([k]) => k === name)?.[1],
  };
}

/** A chunked body's data (RFC 9112 7.1), as far as it goes. */
function dechunk(text: string): string {
  let out = '';
  let k = 0;
  for (;;) {
    const eol = text.indexOf('\r\n', k);
    if (eol === -1) return out;
    const size = parseInt(text.slice(k, eol), 16);
    if (!(size > 0)) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    k = eol + 2 + size + 2;
  }
}
