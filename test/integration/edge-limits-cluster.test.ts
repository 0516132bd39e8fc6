/**
 * Per-client limits across cluster workers (docs/edge-rules.md "Rate and connection limits"):
 * with `workers: 2` a client's limit holds whichever worker accepts its connections, since the
 * workers tell each other what they accepted (src/limit/limit-zones.ts, relayed by the primary).
 * A client sending twice its rate for 10 s over new connections (spread over both workers by the
 * primary's round robin) is held within 10% of its rate; another client at a quarter of its rate is never
 * refused; requests in progress on both workers count against one limit_conn. The compiled binary,
 * real sockets.
 */
import type http from 'node:http';
import t from 'tap';
import { countingBackend } from '../helpers/http';
import { childPids, killAtTeardown, logLines, spawnIpgate } from '../helpers/ipgate';
import { connect, freePort, readAll, waitFor } from '../helpers/net';

async function get(port: number, from: string, host: string, path = '/'): Promise<number> {
  const c = await connect({ port, localAddress: from });
  c.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  const reply = (await readAll(c, 15_000)).toString('latin1');
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0);
}

/** `perSecond` requests a second from `from` for `seconds`, each on a new connection, paced from the start (no drift). */
async function send(port: number, from: string, host: string, perSecond: number, seconds: number): Promise<number[]> {
  const total = perSecond * seconds;
  const t0 = performance.now();
  const pending: Promise<number>[] = [];
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    pending.push(get(port, from, host));
  }
  return Promise.all(pending);
}

t.test('workers: 2 hold a client to its limit whichever worker accepts it', async (t) => {
  const held: http.ServerResponse[] = [];
  const be = await countingBackend((req, res) => {
    if (req.url === '/hold') held.push(res);
    else res.end('ok\n');
  });
  t.teardown(() => be.close());
  const port = await freePort();
  const g = spawnIpgate(['run'], {
    workers: 2,
    logging: { level: 'debug', access: true },
    store: { type: 'memory' },
    admin: { listen: null },
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [
      {
        name: 'web',
        mode: 'http',
        listen: `127.0.0.1:${port}`,
        allowlist: 'main',
        upstreams: [`127.0.0.1:${be.port}`],
        routes: [
          { name: 'rate', hosts: ['r.example'], limits: { requests: { rate: '40r/s', burst: 10, nodelay: true } } },
          { name: 'conn', hosts: ['c.example'], limits: { concurrent: { perClient: 2 } } },
        ],
      },
    ],
  });
  killAtTeardown(t, g);
  await waitFor(() => /"msg":"ready"/.test(g.stdout()) || g.child.exitCode !== null, 20_000, 'primary ready');
  t.equal(g.child.exitCode, null, 'ipgate runs');

  t.test('twice the rate for 10 s: held within 10%; another client unaffected', async (t) => {
    const seconds = 10;
    const [a, b] = await Promise.all([
      send(port, '127.0.0.2', 'r.example', 80, seconds),
      send(port, '127.0.0.3', 'r.example', 10, seconds),
    ]);
    const accepted = a.filter((s) => s === 200).length;
    const refused = a.filter((s) => s === 429).length;
    t.equal(accepted + refused, a.length, 'every request answered 200 or 429');
    // nginx: rate * time + the burst (+ 1) at the start.
    const expected = 40 * seconds + 10 + 1;
    t.comment(`client at 80 r/s against 40r/s burst 10 over ${seconds} s: ${accepted} accepted, ${expected} expected`);
    t.ok(Math.abs(accepted - expected) <= 0.1 * 40 * seconds, `within 10% of the limit (${accepted} vs ${expected})`);
    t.same(
      b.filter((s) => s !== 200),
      [],
      'the client at a quarter of its rate: never refused',
    );
    // Both workers took this client's requests: each one's copy of the bucket held the shared limit.
    await waitFor(
      () => logLines(g.stdout()).filter((l) => l.msg === 'access' && l.client === '127.0.0.2').length >= a.length,
      10_000,
      'every access line written',
    );
    const lines = logLines(g.stdout()).filter((l) => l.msg === 'access' && l.client === '127.0.0.2');
    const pids = new Set(lines.filter((l) => l.status === 200).map((l) => l.pid));
    t.equal(pids.size, 2, 'both workers forwarded some of its requests');
    t.equal(lines.filter((l) => l.result === 'limited_requests').length, refused, 'each refusal logged with result limited_requests');
  });

  t.test('limit_conn counts the requests in progress on both workers', async (t) => {
    const from = '127.0.0.4';
    // New connections alternate between the workers (round robin): two held, then a third.
    const a = get(port, from, 'c.example', '/hold');
    const b = get(port, from, 'c.example', '/hold');
    await waitFor(() => held.length === 2, 10_000, 'two requests at the backend');
    const lines = () => logLines(g.stdout()).filter((l) => l.msg === 'access' && l.client === from);
    for (let i = 0; i < 4; i++) t.equal(await get(port, from, 'c.example', '/hold'), 429, `request ${i + 3} in progress: 429`);
    await waitFor(() => lines().filter((l) => l.result === 'limited_concurrent').length === 4, 10_000, 'the four refusals logged');
    const refusedBy = new Set(
      lines()
        .filter((l) => l.result === 'limited_concurrent')
        .map((l) => l.pid),
    );
    t.equal(refusedBy.size, 2, "refused by both workers: each counted the other one's request");
    t.equal(held.length, 2, 'none of them reached the backend');
    for (const res of held.splice(0)) res.end('done\n');
    t.same(await Promise.all([a, b]), [200, 200]);
    const c = get(port, from, 'c.example', '/hold');
    await waitFor(() => held.length === 1, 10_000, 'a new one once they finished');
    held.splice(0)[0]!.end('done\n');
    t.equal(await c, 200);
  });

  t.test("a worker that dies gives back its requests in progress; its replacement counts the others'", async (t) => {
    const from = '127.0.0.5';
    const a = get(port, from, 'c.example', '/hold').catch(() => 0);
    const b = get(port, from, 'c.example', '/hold').catch(() => 0);
    await waitFor(() => held.length === 2, 10_000, 'two requests at the backend');
    const readyLines = (): number => logLines(g.stdout()).filter((l) => l.msg === 'worker ready').length;
    const ready = readyLines();
    const [victim] = childPids(g.child.pid!);
    process.kill(victim!, 'SIGKILL');
    await waitFor(() => readyLines() === ready + 1, 20_000, 'the replacement worker ready');
    // One of the two requests died with its worker: one is in progress now, so one more fits
    // (perClient 2) whichever worker takes it, and the one after that does not.
    const c = get(port, from, 'c.example', '/hold');
    await waitFor(
      () => held.filter((r) => !r.writableEnded && !(r.socket?.destroyed ?? true)).length === 2,
      10_000,
      'a third request admitted',
    );
    t.pass("one more admitted: the dead worker's request was given back");
    t.equal(await get(port, from, 'c.example', '/hold'), 429, "and the next refused: the replacement counts the survivor's request");
    for (const res of held.splice(0)) if (!(res.socket?.destroyed ?? true)) res.end('done\n');
    t.equal(await c, 200);
    await Promise.all([a, b]);
  });
});
