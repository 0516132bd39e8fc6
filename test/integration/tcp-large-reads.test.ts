/**
 * Large reads in the TCP relay (src/forward/tcp/large-reads.ts): a direction that carries a bulk
 * flow switches to reads into one reused buffer. The reuse is only safe if no chunk is overwritten
 * before its write finished, so these tests make writes pend (readers that pause at random) and
 * check every byte, plus half-close, backpressure and the buffer pool, in this process so the
 * switch counters can be read. The switch must happen on the Node running the tests (CI: Node 20
 * and the image's Node 24): if Node's internals change, the first test fails instead of the relay
 * silently falling back.
 */
import fs from 'node:fs';
import net from 'node:net';
import t, { type Test } from 'tap';
import { largeReadsEnabled, largeReadStats, POOL_MAX } from '../../src/forward/tcp/large-reads';
import { patternBlock, receiveAll, sendBlocks } from '../helpers/bulk';
import { spawnIpgate, startIpgate } from '../helpers/ipgate';
import { connect, freePort, waitFor } from '../helpers/net';

const MiB = 1024 * 1024;

/** Blocks of three sizes (1 MiB + 7, 300,001, 64 KiB), so writes and reads never line up. */
function send(socket: net.Socket, total: number, seed: number): Promise<string> {
  return sendBlocks(socket, total, [patternBlock(seed, MiB + 7), patternBlock(seed + 1, 300_001), patternBlock(seed + 2, 65_536)]);
}

async function upstreamServer(t: Test, onConn: (s: net.Socket) => void): Promise<number> {
  const server = net.createServer({ allowHalfOpen: true }, onConn);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
      }),
  );
  return (server.address() as net.AddressInfo).port;
}

async function gate(t: Test, upstream: number): Promise<number> {
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'bulk', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${upstream}`] }],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return g.port();
}

t.test('large reads are in use on this Node', async (t) => {
  t.equal(largeReadsEnabled(), true, `Node ${process.version}: the onread fields were found (else relays fall back to 'data' reads)`);
});

t.test('both directions at once, both readers pausing at random: every byte, in order', async (t) => {
  const before = largeReadStats.switched;
  let atUpstream: Promise<{ bytes: number; sha: string }> | null = null;
  let downSha: Promise<string> | null = null;
  const upstream = await upstreamServer(t, (s) => {
    atUpstream = receiveAll(s, 11);
    downSha = send(s, 48 * MiB, 500);
  });
  const port = await gate(t, upstream);
  const c = await connect({ port, allowHalfOpen: true });
  const atClient = receiveAll(c, 12);
  const upSha = await send(c, 64 * MiB, 100);
  await waitFor(() => atUpstream !== null && downSha !== null);
  const up = await atUpstream!;
  const down = await atClient;
  t.equal(up.bytes, 64 * MiB, 'client -> upstream: every byte');
  t.equal(up.sha, upSha, 'client -> upstream: byte-exact');
  t.equal(down.bytes, 48 * MiB, 'upstream -> client: every byte');
  t.equal(down.sha, await downSha!, 'upstream -> client: byte-exact');
  t.equal(largeReadStats.switched - before, 2, 'both directions switched to large reads');
});

t.test('half-close after the switch: the FIN travels on, the other direction keeps flowing', async (t) => {
  const before = largeReadStats.switched;
  let result: Promise<{ bytes: number; sha: string; replySha: string }> | null = null;
  const upstream = await upstreamServer(t, (s) => {
    result = (async () => {
      const got = await receiveAll(s, 21); // resolves on the client's FIN
      const replySha = await send(s, 16 * MiB, 900); // only after the FIN: the reply direction is still open
      return { ...got, replySha };
    })();
  });
  const port = await gate(t, upstream);
  const c = await connect({ port, allowHalfOpen: true });
  const reply = receiveAll(c, 22);
  const sentSha = await send(c, 24 * MiB, 300);
  const back = await reply;
  await waitFor(() => result !== null);
  const r = await result!;
  t.equal(r.bytes, 24 * MiB, 'upstream got every byte, then the FIN');
  t.equal(r.sha, sentSha, 'byte-exact before the FIN');
  t.equal(back.bytes, 16 * MiB, 'the reply sent after the FIN reached the client');
  t.equal(back.sha, r.replySha, 'reply byte-exact');
  t.equal(largeReadStats.switched - before, 2, 'both directions had switched');
});

t.test('a stalled reader after the switch: the sender is blocked, the proxy buffers a bounded amount', async (t) => {
  const before = largeReadStats.switched;
  let written = 0;
  let up: net.Socket | null = null;
  const block = patternBlock(7, MiB);
  const upstream = await upstreamServer(t, (s) => {
    up = s;
    s.on('error', () => undefined);
    const pump = (): void => {
      while (written < 512 * MiB) {
        written += block.length;
        if (!s.write(block)) {
          s.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
  t.teardown(() => {
    up?.destroy();
  });
  const port = await gate(t, upstream);
  const c = await connect({ port });
  // Read 8 MiB (the direction switches), then stop reading for good.
  let got = 0;
  await new Promise<void>((resolve) => {
    c.on('data', (chunk: Buffer) => {
      got += chunk.length;
      if (got >= 8 * MiB) {
        c.pause();
        resolve();
      }
    });
  });
  t.equal(largeReadStats.switched - before, 1, 'the upstream -> client direction switched');
  let last = -1;
  await waitFor(
    async () => {
      const now = written;
      const stable = now === last;
      last = now;
      await new Promise((r) => setTimeout(r, 300));
      return stable;
    },
    20_000,
    'sender blocked',
  );
  // Kernel socket buffers on both hops plus the relay's 256 KiB: each hop can hold at most the
  // kernel's receive plus send buffer maxima (autotuned up to net.ipv4.tcp_rmem / tcp_wmem's
  // third field: 6 MiB + 4 MiB on a stock kernel, 32 MiB + 4 MiB on some CI machines, where a
  // fixed 32 MiB bound failed with 45.9 MiB in flight). The unbounded case is the 512 MiB.
  const kernelMax = (f: string): number => Number(fs.readFileSync(`/proc/sys/net/ipv4/${f}`, 'utf8').trim().split(/\s+/)[2]);
  const bound = 2 * (kernelMax('tcp_rmem') + kernelMax('tcp_wmem')) + MiB;
  t.ok(bound < 256 * MiB, `the kernel's buffers (${(bound / MiB).toFixed(0)} MiB) leave the check meaningful`);
  t.ok(
    written - got < bound,
    `sender blocked with ${((written - got) / MiB).toFixed(1)} MiB in flight (kernel bound ${(bound / MiB).toFixed(0)} MiB), not 512 MiB`,
  );
  c.destroy();
});

t.test('read buffers go back to the pool when a relay closes, and are reused', async (t) => {
  const upstream = await upstreamServer(t, (s) => {
    s.on('data', () => undefined);
    s.on('end', () => s.end());
  });
  const port = await gate(t, upstream);
  const runOne = async (seed: number): Promise<void> => {
    const c = await connect({ port, allowHalfOpen: true });
    c.resume();
    const closedP = new Promise((r) => c.once('close', r));
    await send(c, 8 * MiB, seed);
    await closedP;
  };
  await runOne(1); // may allocate (the pool can be empty)
  await waitFor(() => largeReadStats.pooled >= 1, 5_000, 'buffer returned to the pool');
  const allocated = largeReadStats.allocated;
  const reused = largeReadStats.reused;
  for (let i = 0; i < 3; i++) {
    await runOne(10 + i);
    await waitFor(() => largeReadStats.pooled >= 1, 5_000, 'buffer returned to the pool');
  }
  t.equal(largeReadStats.allocated, allocated, 'no new buffer allocated for the next three relays');
  t.ok(largeReadStats.reused >= reused + 3, `pooled buffers reused (${largeReadStats.reused - reused})`);
  t.ok(largeReadStats.pooled <= POOL_MAX, 'pool stays within its cap');
});

t.test('a bad IPGATE_RELAY_READ_BUFFER stops the start-up with its name and value', async (t) => {
  const port = await freePort();
  const p = spawnIpgate(
    [],
    {
      admin: { listen: null },
      store: { type: 'memory' },
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [{ name: 'bulk', mode: 'tcp', listen: `127.0.0.1:${port}`, allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
    },
    { IPGATE_RELAY_READ_BUFFER: '64k' },
  );
  t.teardown(() => {
    p.child.kill('SIGKILL');
  });
  t.equal(await p.exited, 1, 'exit status 1');
  // The fatal log line's msg (JSON: the quotes escaped).
  t.match(
    p.stdout() + p.stderr(),
    '"msg":"IPGATE_RELAY_READ_BUFFER: \\"64k\\": not a whole number of bytes"',
    'the message names the variable and the value',
  );
});
