/**
 * Socket helpers for tests: real sockets on loopback. Distinct clients are sockets bound to
 * distinct 127.0.0.x source addresses.
 */
import fs from 'node:fs';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { once } from 'node:events';

export interface ClientOptions {
  host?: string;
  port: number;
  /** Source address to bind (e.g. 127.0.0.7 to be a different client). */
  localAddress?: string;
  family?: 4 | 6;
  allowHalfOpen?: boolean;
}

export async function connect(opts: ClientOptions): Promise<net.Socket> {
  const socket = net.connect({
    host: opts.host ?? '127.0.0.1',
    port: opts.port,
    localAddress: opts.localAddress,
    allowHalfOpen: opts.allowHalfOpen ?? false,
  });
  await once(socket, 'connect');
  return socket;
}

/** Resolve with everything the peer sent until it closed (or `ms` passed: then reject). */
export function readAll(socket: net.Socket, ms = 10_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`readAll: no close within ${ms} ms; got ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`));
    }, ms);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined);
    const done = (): void => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    };
    socket.once('end', done);
    socket.once('close', done);
  });
}

/**
 * Buffered reads on a socket: bytes not consumed by one read stay for the next, so a line and the
 * payload behind it in the same segment are both seen.
 */
const buffers = new WeakMap<net.Socket, { buf: Buffer; ended: boolean; wake: (() => void) | null }>();

function state(socket: net.Socket): { buf: Buffer; ended: boolean; wake: (() => void) | null } {
  let st = buffers.get(socket);
  if (!st) {
    const s = { buf: Buffer.alloc(0), ended: false, wake: null as (() => void) | null };
    socket.on('data', (c: Buffer) => {
      s.buf = Buffer.concat([s.buf, c]);
      s.wake?.();
    });
    const end = (): void => {
      s.ended = true;
      s.wake?.();
    };
    socket.once('end', end);
    socket.once('close', end);
    socket.on('error', () => undefined);
    buffers.set(socket, s);
    st = s;
  }
  return st;
}

/** Wait until the buffered bytes contain `needle`; consume and return everything up to and including it. */
export async function readUntil(socket: net.Socket, needle: string | Buffer, ms = 10_000): Promise<Buffer> {
  const st = state(socket);
  const deadline = Date.now() + ms;
  for (;;) {
    const i = st.buf.indexOf(needle);
    if (i >= 0) {
      const end = i + Buffer.byteLength(needle);
      const out = st.buf.subarray(0, end);
      st.buf = st.buf.subarray(end);
      return out;
    }
    if (st.ended)
      throw new Error(
        `readUntil(${JSON.stringify(needle.toString())}): closed first; got ${JSON.stringify(st.buf.toString('latin1').slice(0, 200))}`,
      );
    const left = deadline - Date.now();
    if (left <= 0)
      throw new Error(
        `readUntil(${JSON.stringify(needle.toString())}): timeout; got ${JSON.stringify(st.buf.toString('latin1').slice(0, 200))}`,
      );
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, left);
      st.wake = () => {
        clearTimeout(timer);
        st.wake = null;
        resolve();
      };
    });
  }
}

export const readLine = (socket: net.Socket, ms?: number): Promise<string> =>
  readUntil(socket, '\n', ms).then((b) => b.subarray(0, b.length - 1).toString('latin1'));

/** Wait for the socket to be closed by the peer; resolves with the ms it took. */
export function closed(socket: net.Socket, ms = 10_000): Promise<number> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    if (socket.destroyed) return resolve(0);
    socket.on('error', () => undefined);
    socket.resume();
    const timer = setTimeout(() => reject(new Error(`socket not closed within ${ms} ms`)), ms);
    const done = (): void => {
      clearTimeout(timer);
      resolve(Date.now() - start);
    };
    socket.once('end', done);
    socket.once('close', done);
  });
}

/** Ports this process has handed out: the kernel may give a closed port again on the next bind. */
const handedOut = new Set<number>();

/**
 * A port that was free a moment ago (for configs of external peers that need a fixed port), and not
 * one this process handed out before: once the probe closes, the kernel may pick the same port for
 * the next probe, and a config given two such ports would name one address twice (a CI run of
 * admin-process.test.ts failed so, "collides with admin.listen").
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (;;) {
    const server = net.createServer();
    server.listen(0, host);
    await once(server, 'listening');
    const port = (server.address() as net.AddressInfo).port;
    await new Promise((r) => server.close(r));
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

/**
 * A loopback port that refuses connections for as long as the test holds it: a TCP socket bound to
 * it that never listens, so a connect gets a reset (ECONNREFUSED), and the kernel gives the port to
 * no one binding port 0 (every ipgate listener here, every freePort probe, in any process). A port
 * from freePort() was only free a moment ago: a test running beside this one may listen on it (a CI
 * run of access-log.test.ts found its dead upstream answering, result "ok"). Closed at teardown.
 * Node's tcp_wrap binding, as src/transport/raw-socket.ts uses it (net has no bind without listen).
 */
export function refusingPort(t: { teardown(fn: () => void): void }): number {
  const binding = (process as unknown as { binding(name: string): Record<string, unknown> }).binding('tcp_wrap');
  const TCP = binding.TCP as new (
    type: number,
  ) => {
    bind(host: string, port: number): number;
    getsockname(out: { port?: number }): number;
    close(): void;
  };
  const handle = new TCP((binding.constants as Record<string, number>).SOCKET!);
  const err = handle.bind('127.0.0.1', 0);
  const out: { port?: number } = {};
  if (err !== 0 || handle.getsockname(out) !== 0 || out.port === undefined) {
    handle.close();
    throw new Error(`refusingPort: bind or getsockname failed (${err})`);
  }
  t.teardown(() => handle.close());
  return out.port;
}

/** Poll until `fn` returns true (no sleeps standing in for conditions). */
export async function waitFor(fn: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > deadline) throw new Error(`waitFor: ${what} not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Wait until some socket LISTENs on `port`, read from /proc/net/tcp{,6} so that no probe connection
 * reaches the server (a probe through a proxy would show up in its counters).
 */
export async function waitForListen(port: number, ms = 10_000): Promise<void> {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const listening = (): boolean =>
    ['/proc/net/tcp', '/proc/net/tcp6'].some((f) => {
      let text = '';
      try {
        text = fs.readFileSync(f, 'utf8');
      } catch {
        return false;
      }
      return text.split('\n').some((line) => {
        const cols = line.trim().split(/\s+/);
        return cols[1]?.endsWith(`:${hex}`) === true && cols[3] === '0A';
      });
    });
  await waitFor(listening, ms, `a listener on port ${port}`);
}

/** Wait until something accepts TCP connections on host:port. */
export async function waitForPort(port: number, host = '127.0.0.1', ms = 10_000): Promise<void> {
  await waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const s = net.connect({ host, port });
        s.once('connect', () => {
          s.destroy();
          resolve(true);
        });
        s.once('error', () => resolve(false));
      }),
    ms,
    `port ${host}:${port}`,
  );
}

/**
 * A port on loopback whose connects never complete: a listening socket (python3, backlog 0) that
 * never accepts, its accept queue filled, so the kernel drops further SYNs and a connect hangs
 * until the caller's timer fires. `cleanup` kills the listener and closes the fillers.
 */
export async function stalledPort(): Promise<{ port: number; cleanup: () => void }> {
  const py = spawn(
    'python3',
    [
      '-c',
      'import socket,time\ns=socket.socket()\ns.bind(("127.0.0.1",0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = Number((await once(py.stdout!, 'data'))[0].toString().trim());
  const fillers: net.Socket[] = [];
  for (let i = 0; i < 4; i++) {
    const s = net.connect({ host: '127.0.0.1', port });
    s.on('error', () => undefined);
    fillers.push(s);
  }
  await new Promise((r) => setTimeout(r, 200)); // let the fillers occupy the queue
  return {
    port,
    cleanup: () => {
      py.kill('SIGKILL');
      fillers.forEach((s) => {
        s.destroy();
      });
    },
  };
}
