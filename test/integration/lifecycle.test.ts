/**
 * The process as operators run it (the compiled binary): check-config, bind failures, and
 * SIGTERM / SIGINT draining open connections before exiting 0.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { once } from 'node:events';
import t from 'tap';
import { createTcpEcho } from '../../src/echo/echo-server';
import { MAIN, spawnIpgate, tmpDir, type Spawned } from '../helpers/ipgate';
import { closed, connect, freePort, readLine, readUntil, waitFor, waitForListen } from '../helpers/net';

async function echoBackend(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = createTcpEcho();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
}

function config(port: number, upstream: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    logging: { level: 'info' },
    admin: { listen: null },
    store: { type: 'memory' },
    allowlists: { main: ['127.0.0.0/8'] },
    listeners: [
      {
        name: 'tcp',
        mode: 'tcp',
        listen: `127.0.0.1:${port}`,
        allowlist: 'main',
        upstreams: [`127.0.0.1:${upstream}`],
        outboundProxyProtocol: 'v2',
      },
    ],
    ...extra,
  };
}

async function started(p: Spawned, port: number): Promise<void> {
  await Promise.race([
    waitForListen(port, 20_000),
    p.exited.then((code) => {
      throw new Error(`ipgate exited ${code}: ${p.stderr()} ${p.stdout()}`);
    }),
  ]);
}

t.test('the compiled entry point exists (npm test builds first)', async (t) => {
  t.ok(fs.existsSync(MAIN), MAIN);
});

t.test('check-config: 0 and a summary for a valid file; 1 and path + value for an invalid one', async (t) => {
  const dir = tmpDir();
  const good = path.join(dir, 'good.yaml');
  fs.writeFileSync(
    good,
    'allowlists: { main: [10.0.0.0/8] }\nlisteners: [{ name: a, listen: "127.0.0.1:7000", allowlist: main, upstreams: ["127.0.0.1:7100"] }]\n',
  );
  const ok = spawnIpgate(['check-config', good]);
  t.equal(await ok.exited, 0);
  t.match(ok.stdout(), /good\.yaml: valid \(1 listener\(s\), 1 allowlist\(s\)\)/);

  const badFile = path.join(dir, 'bad.yaml');
  fs.writeFileSync(
    badFile,
    'allowlists: { main: [10.0.0.0/8] }\nlisteners: [{ name: a, listen: "127.0.0.1:7000", allowlist: main, upstreams: ["127.0.0.1:7100"] }, { name: b, listen: "127.0.0.1:7001", allowlist: main, upstreams: ["127.0.0.1:7100"], proxyProtocol: { mode: optional, trustedSources: ["10.0.0.1/33"] } }]\n',
  );
  const bad = spawnIpgate(['check-config', badFile]);
  t.equal(await bad.exited, 1);
  t.match(bad.stderr(), /listeners\[1\]\.proxyProtocol\.trustedSources\[0\]: "10\.0\.0\.1\/33": prefix length 33 out of range for IPv4/);

  const missingFile = spawnIpgate(['check-config', path.join(dir, 'nope.yaml')]);
  t.equal(await missingFile.exited, 1);
  t.match(missingFile.stderr(), /cannot read config file/);

  // Starting with an invalid config fails the same way, before binding anything.
  const run = spawnIpgate(['--config', badFile]);
  t.equal(await run.exited, 1);
  t.match(run.stderr(), /prefix length 33 out of range/);
});

t.test('a port already in use: exit 1 naming the listener and the address', async (t) => {
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => blocker.close(() => r())));
  const port = (blocker.address() as net.AddressInfo).port;
  const p = spawnIpgate([], config(port, 9));
  t.equal(await p.exited, 1);
  t.match(p.stdout() + p.stderr(), new RegExp(`listener \\\\?"tcp\\\\?" cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE`));
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal}: stop accepting, let open streams finish, exit 0`, async (t) => {
    const backend = await echoBackend();
    t.teardown(backend.close);
    const port = await freePort();
    const p = spawnIpgate([], config(port, backend.port, { shutdown: { drainTimeoutMs: 10_000 } }));
    t.teardown(() => {
      p.child.kill('SIGKILL');
    });
    await started(p, port);
    const c = await connect({ port });
    t.match(await readLine(c), /^ipgate-echo client=127\.0\.0\.1:\d+ via=proxy-v2/);
    p.child.kill(signal);
    // New connections are refused once the listener is closed...
    await waitFor(
      () =>
        new Promise<boolean>((resolve) => {
          const probe = net.connect({ port, host: '127.0.0.1' });
          probe.once('connect', () => {
            probe.destroy();
            resolve(false);
          });
          probe.once('error', () => resolve(true));
        }),
      5000,
      'listener closed',
    );
    // ...while the open stream keeps working.
    c.write('still here\n');
    t.equal((await readUntil(c, 'still here\n')).toString(), 'still here\n', 'open stream still forwarded during drain');
    t.equal(p.child.exitCode, null, 'still running while a stream is open');
    c.end();
    t.equal(await p.exited, 0, 'exit 0 after the last stream closed');
    t.match(p.stdout(), /draining/);
  });
}

t.test('a start with the admin API, TCP and HTTP listeners writes nothing to stderr', async (t) => {
  // Operators alert on stderr; a library deprecation warning printed at every start (fastify
  // 5.12's FSTDEP023 did) is noise that hides real problems.
  const backend = await echoBackend();
  t.teardown(backend.close);
  const [port, httpPort, adminPort] = [await freePort(), await freePort(), await freePort()];
  const dir = tmpDir();
  fs.writeFileSync(path.join(dir, 'token'), 'a-long-enough-admin-token-for-tests\n', { mode: 0o600 });
  const p = spawnIpgate(
    [],
    config(port, backend.port, {
      admin: { listen: `127.0.0.1:${adminPort}`, tokenFile: path.join(dir, 'token') },
      listeners: [
        { name: 'tcp', mode: 'tcp', listen: `127.0.0.1:${port}`, allowlist: 'main', upstreams: [`127.0.0.1:${backend.port}`] },
        { name: 'web', mode: 'http', listen: `127.0.0.1:${httpPort}`, allowlist: 'main', upstreams: [`127.0.0.1:${backend.port}`] },
      ],
    }),
  );
  t.teardown(() => {
    p.child.kill('SIGKILL');
  });
  await started(p, port);
  await waitForListen(httpPort, 20_000);
  await waitForListen(adminPort, 20_000);
  const r = await fetch(`http://127.0.0.1:${adminPort}/metrics`);
  t.equal(r.status, 200, 'admin API serving');
  await r.text();
  p.child.kill('SIGTERM');
  t.equal(await p.exited, 0, 'exit 0');
  t.equal(p.stderr(), '', 'stderr stays empty');
});

t.test('drain timeout: streams still open are closed and the process exits 0', async (t) => {
  const backend = await echoBackend();
  t.teardown(backend.close);
  const port = await freePort();
  const p = spawnIpgate([], config(port, backend.port, { shutdown: { drainTimeoutMs: 500 } }));
  t.teardown(() => {
    p.child.kill('SIGKILL');
  });
  await started(p, port);
  const c = await connect({ port });
  await readLine(c);
  const start = Date.now();
  p.child.kill('SIGTERM');
  const [code] = (await once(p.child, 'exit')) as [number];
  t.equal(code, 0);
  const ms = Date.now() - start;
  t.ok(ms >= 450 && ms < 5000, `exited after ${ms} ms (drain timeout 500 ms)`);
  await closed(c, 2000);
  t.match(p.stdout(), /drain timeout: closing remaining connections/);
});
