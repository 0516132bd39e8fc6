/**
 * Minimal HTTP forwarders for bench/load/compare.ts (`--proxies ...,node-min,undici-min`): what
 * the HTTP engine alone costs, without ipgate's listener, identity, allowlist, metrics and
 * http-proxy. Not a proxy to use: only what the benchmark's HTTP workload needs (GET, keep-alive,
 * X-Real-IP / X-Forwarded-For set, hop-by-hop headers dropped).
 *
 *   node dist/bench/load/http-engines.js node|undici|undici-stream PORT UPSTREAM_PORT
 *
 * `node`: http.Server + http.request on a keep-alive Agent (what ipgate's engine uses underneath);
 * `undici`: http.Server + undici Pool.dispatch (no ClientRequest / Agent per request);
 * `undici-stream`: http.Server + undici Pool.stream into the ServerResponse.
 */
import http from 'node:http';

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-connection']);

function nodeEngine(up: number): http.RequestListener {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  return (req, res) => {
    const headers: http.OutgoingHttpHeaders = {
      ...req.headers,
      'x-real-ip': req.socket.remoteAddress,
      'x-forwarded-for': req.socket.remoteAddress,
    };
    delete headers.connection;
    const p = http.request({ host: '127.0.0.1', port: up, method: req.method, path: req.url, headers, agent }, (r) => {
      const h: http.OutgoingHttpHeaders = {};
      for (const k in r.headers) if (!HOP.has(k)) h[k] = r.headers[k];
      res.writeHead(r.statusCode ?? 502, h);
      r.pipe(res);
    });
    p.on('error', () => {
      res.statusCode = 502;
      res.end();
    });
    req.pipe(p);
  };
}

function undiciEngine(up: number): http.RequestListener {
  // undici ships with ipgate's dependency tree (not a direct dependency): this is an experiment.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Pool } = require('undici') as { Pool: new (url: string, o: object) => { dispatch(o: object, h: object): void } };
  const pool = new Pool(`http://127.0.0.1:${up}`, { connections: 128, pipelining: 1 });
  return (req, res) => {
    const headers: string[] = [];
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) if (!HOP.has(raw[i]!.toLowerCase())) headers.push(raw[i]!, raw[i + 1]!);
    headers.push('x-real-ip', req.socket.remoteAddress ?? '', 'x-forwarded-for', req.socket.remoteAddress ?? '');
    pool.dispatch(
      { path: req.url, method: req.method, headers, body: req.method === 'GET' || req.method === 'HEAD' ? null : req },
      {
        onConnect: () => undefined,
        onError: () => {
          if (!res.headersSent) res.statusCode = 502;
          res.end();
        },
        onHeaders: (status: number, rh: Buffer[], resume: () => void) => {
          const out: string[] = [];
          for (let i = 0; i < rh.length; i += 2) {
            const k = rh[i]!.toString('latin1');
            if (!HOP.has(k.toLowerCase())) out.push(k, rh[i + 1]!.toString('latin1'));
          }
          res.writeHead(status, out);
          res.once('drain', resume);
          return true;
        },
        onData: (chunk: Buffer) => res.write(chunk),
        onComplete: () => res.end(),
      },
    );
  };
}

function undiciStreamEngine(up: number): http.RequestListener {
  // The same with undici's `Pool.stream` (the response body written into a Writable, here the
  // ServerResponse itself): the convenience API next to dispatch(), to choose between them.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { Pool } = require('undici') as {
    Pool: new (
      url: string,
      o: object,
    ) => {
      stream(
        o: object,
        factory: (d: { statusCode: number; headers: Record<string, string | string[]> }) => NodeJS.WritableStream,
        cb: (err: Error | null) => void,
      ): void;
    };
  };
  const pool = new Pool(`http://127.0.0.1:${up}`, { connections: 128, pipelining: 1 });
  return (req, res) => {
    const headers: string[] = [];
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) if (!HOP.has(raw[i]!.toLowerCase())) headers.push(raw[i]!, raw[i + 1]!);
    headers.push('x-real-ip', req.socket.remoteAddress ?? '', 'x-forwarded-for', req.socket.remoteAddress ?? '');
    pool.stream(
      { path: req.url, method: req.method, headers, body: req.method === 'GET' || req.method === 'HEAD' ? null : req },
      ({ statusCode, headers: rh }) => {
        const h: http.OutgoingHttpHeaders = {};
        for (const k in rh) if (!HOP.has(k)) h[k] = rh[k];
        res.writeHead(statusCode, h);
        return res;
      },
      (err) => {
        if (err === null) return;
        if (!res.headersSent) res.statusCode = 502;
        res.end();
      },
    );
  };
}

const [mode, port, up] = process.argv.slice(2);
const engine = mode === 'undici' ? undiciEngine : mode === 'undici-stream' ? undiciStreamEngine : nodeEngine;
http.createServer(engine(Number(up))).listen(Number(port), '127.0.0.1');
