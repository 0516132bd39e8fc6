/**
 * A listening TCP handle on 127.0.0.1 for the floor proxies on Node's handles
 * (bench/load/tcp-raw-min.ts, bench/load/http-raw-min.ts): each accepted connection's handle goes
 * to `onConnection`, accept errors are dropped. Node's internal tcp_wrap binding, as they use it.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
const { TCP, constants: TCPConstants } = ((process as any).binding as (name: string) => any)('tcp_wrap');

export function listenRaw<H>(port: number, onConnection: (h: H) => void): void {
  const server = new TCP(TCPConstants.SERVER);
  if (server.bind('127.0.0.1', port) !== 0) throw new Error(`bind ${port}`);
  server.onconnection = (err: number, h: H | undefined) => {
    if (err !== 0 || h === undefined) return;
    onConnection(h);
  };
  if (server.listen(511) !== 0) throw new Error(`listen ${port}`);
}
