/**
 * A Node HTTP backend that can be stopped (its listener closed, its connections cut) and started
 * again on the same port: the target that dies and comes back in the upstream health tests. It
 * answers `name|target`, counts requests by path, and the status of one path (a health check's)
 * can be changed while it runs.
 */
import http from 'node:http';
import type net from 'node:net';
import type { Test } from 'tap';

export interface Restartable {
  readonly port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Requests received (every path but `checkPath`'s, or only `path`'s). */
  hits(path?: string): number;
  /** The status `checkPath` answers (others answer `status`). */
  checkStatus: number;
  /** Every request's path, in the order received. */
  readonly paths: string[];
}

export async function restartable(t: Test, name: string, status = 200, checkPath = '/healthz'): Promise<Restartable> {
  const byPath = new Map<string, number>();
  let server: http.Server | null = null;
  let port = 0;
  const b: Restartable = {
    get port() {
      return port;
    },
    checkStatus: 200,
    paths: [],
    hits(path?: string): number {
      if (path !== undefined) return byPath.get(path) ?? 0;
      let n = 0;
      for (const [p, c] of byPath) if (p !== checkPath) n += c;
      return n;
    },
    async start(): Promise<void> {
      const s = http.createServer((req, res) => {
        const path = req.url ?? '';
        byPath.set(path, (byPath.get(path) ?? 0) + 1);
        b.paths.push(path);
        res.statusCode = path === checkPath ? b.checkStatus : status;
        res.end(`${name}|${path}\n`);
      });
      await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
      port = (s.address() as net.AddressInfo).port;
      server = s;
    },
    async stop(): Promise<void> {
      const s = server;
      server = null;
      if (s === null) return;
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    },
  };
  await b.start();
  t.teardown(() => b.stop());
  return b;
}
