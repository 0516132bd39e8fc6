/**
 * Bulk data through the TCP path of the compiled binary: 1 GiB each way arrives byte-exact, and a
 * stalled reader keeps the proxy's memory bounded (backpressure reaches the sender).
 */
import fs from 'node:fs';
import net from 'node:net';
import t, { type Test } from 'tap';
import { patternBlock, receiveAll, sendBlocks } from '../helpers/bulk';
import { spawnIpgate, type Spawned } from '../helpers/ipgate';
import { connect, freePort, waitFor, waitForListen } from '../helpers/net';

const GiB = 1024 ** 3;
const BLOCK = 1024 * 1024;

const BLOCKS = Array.from({ length: 16 }, (_, i) => patternBlock(i + 1, BLOCK));
const send = (socket: net.Socket, total: number): Promise<string> => sendBlocks(socket, total, BLOCKS);
const receive = (socket: net.Socket): Promise<{ bytes: number; sha: string }> => receiveAll(socket);

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

async function gate(t: Test, upstream: number, env: NodeJS.ProcessEnv = {}): Promise<{ p: Spawned; port: number }> {
  const port = await freePort();
  const p = spawnIpgate(
    [],
    {
      logging: { level: 'warn' },
      admin: { listen: null },
      store: { type: 'memory' },
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'bulk', mode: 'tcp', listen: `127.0.0.1:${port}`, allowlist: 'main', upstreams: [`127.0.0.1:${upstream}`] }],
    },
    env,
  );
  t.teardown(() => {
    p.child.kill('SIGKILL');
  });
  await Promise.race([
    waitForListen(port, 20_000),
    p.exited.then((c) => {
      throw new Error(`exited ${c}: ${p.stderr()}`);
    }),
  ]);
  return { p, port };
}

// Both relay read modes: large reads into a reused buffer (the default, large-reads.ts) and Node's
// ordinary 'data' reads (IPGATE_RELAY_READ_BUFFER=0, also what a Node without the onread fields gets).
for (const [mode, env] of [
  ['large reads', {}],
  ["'data' reads", { IPGATE_RELAY_READ_BUFFER: '0' }],
] as const)
  t.test(`${mode}: 1 GiB up and 256 MiB down, at the same time, arrive byte-exact`, async (t) => {
    let upstreamResult: Promise<{ bytes: number; sha: string }> | null = null;
    let downstreamSha: Promise<string> | null = null;
    const server = net.createServer({ allowHalfOpen: true }, (s) => {
      upstreamResult = receive(s);
      downstreamSha = send(s, GiB / 4);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = await gate(t, (server.address() as net.AddressInfo).port, env);

    const start = Date.now();
    const c = await connect({ port, allowHalfOpen: true });
    const got = receive(c);
    const sentSha = await send(c, GiB);
    await waitFor(() => upstreamResult !== null && downstreamSha !== null);
    const up = await upstreamResult!;
    const down = await got;
    const ms = Date.now() - start;
    t.equal(up.bytes, GiB, 'client -> upstream: every byte');
    t.equal(up.sha, sentSha, 'client -> upstream: byte-exact (sha256)');
    t.equal(down.bytes, GiB / 4, 'upstream -> client: every byte');
    t.equal(down.sha, await downstreamSha!, 'upstream -> client: byte-exact (sha256)');
    t.comment(`1.25 GiB through the proxy in ${ms} ms (${((1.25 * GiB * 8) / (ms / 1000) / 1e9).toFixed(2)} Gbit/s on a shared machine)`);
  });

t.test('a stalled reader keeps the proxy memory bounded: backpressure reaches the sender', async (t) => {
  let written = 0;
  let upstream: net.Socket | null = null;
  const server = net.createServer((s) => {
    upstream = s;
    s.on('error', () => undefined);
    const pump = (): void => {
      // Stop after 512 MiB in any case: a proxy without backpressure would have buffered it all.
      while (written < 512 * 1024 * 1024) {
        written += BLOCK;
        if (!s.write(BLOCKS[0]!)) {
          s.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    upstream?.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const { p, port } = await gate(t, (server.address() as net.AddressInfo).port);
  const before = rssKiB(p.child.pid!);

  const c = await connect({ port });
  c.pause(); // the stalled reader: never reads
  // Wait until the sender is blocked: `written` stops growing for a while.
  let last = -1;
  await waitFor(
    async () => {
      const now = written;
      const stable = now === last && now > 0;
      last = now;
      await new Promise((r) => setTimeout(r, 300));
      return stable;
    },
    20_000,
    'sender blocked by backpressure',
  );
  const after = rssKiB(p.child.pid!);
  t.ok(written < 64 * 1024 * 1024, `sender blocked after ${(written / 1048576).toFixed(1)} MiB (socket buffers), not 512 MiB`);
  t.ok(after - before < 48 * 1024, `proxy RSS grew ${((after - before) / 1024).toFixed(1)} MiB (before ${(before / 1024).toFixed(1)} MiB)`);
  c.destroy();
});
