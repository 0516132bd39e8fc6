/** The TCP echo backend (src/echo/echo-server.ts) on a loopback port, closed when the test ends. */
import type net from 'node:net';
import type { Test } from 'tap';
import { createTcpEcho } from '../../src/echo/echo-server';

/** Listens on 127.0.0.1; returns its port. */
export async function tcpEcho(t: Test): Promise<number> {
  const server = createTcpEcho();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}
