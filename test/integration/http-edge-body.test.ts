/**
 * The body-size rule (docs/edge-rules.md "Body size"), in process over real sockets: curl uploads
 * with Content-Length and chunked, raw requests for what curl cannot do (a head whose body never
 * comes, a chunked body sent in pieces), a backend that reports what it received. A Content-Length
 * over the limit is answered 413 at once (the backend sees nothing); a chunked body 413 as soon as
 * it passes the limit (the backend's request is cut, never completed); at the limit it passes; a
 * route's own limit replaces the listener's (null turns it off); counted as
 * `ipgate_http_client_errors_total{reason="body_too_large"}`; a route's limit follows a reload.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { countingBackend } from '../helpers/http';
import { startHttpGate, tmpDir, type Started } from '../helpers/ipgate';
import { closed, connect, readAll, readUntil, waitFor } from '../helpers/net';
import { missing } from '../helpers/peers';
import { routesUpdate, routesVersion } from '../../src/route/routes-in-force';
import type { Config } from '../../src/schema/config';

const skip = missing('curl');

/** A backend that answers each request with the length of the body it read, and records the complete ones. */
async function lengthBackend(t: Test): Promise<{ port: number; complete: number[]; started: () => number; aborted: () => number }> {
  const complete: number[] = [];
  let aborted = 0;
  const b = await countingBackend((req, res) => {
    let n = 0;
    req.on('data', (c: Buffer) => (n += c.length));
    req.on('end', () => {
      complete.push(n);
      res.end(`got ${n}\n`);
    });
    req.on('close', () => {
      if (!req.complete) aborted++;
    });
  });
  t.teardown(() => b.close());
  return { port: b.port, complete, started: () => b.requests.length, aborted: () => aborted };
}

function curl(args: string[]): Promise<{ status: number; out: string }> {
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '--max-time', '10', '--interface', '127.0.0.3', '-o', '-', '-w', '\n%{http_code}', ...args], (err, stdout) => {
      if (err !== null && stdout === '') return reject(err);
      const lines = stdout.trimEnd().split('\n');
      resolve({ status: Number(lines.pop()), out: lines.join('\n').trimEnd() });
    });
  });
}

const stats = (g: Started) => g.app.listeners[0]!.stats;

t.test('maxBodyBytes: Content-Length at once, chunked as it streams; routes; reload', { skip }, async (t) => {
  const be = await lengthBackend(t);
  const up = `127.0.0.1:${be.port}`;
  const dir = tmpDir('ipgate-edge-body-');
  const file = (n: number): string => {
    const f = path.join(dir, `body-${n}`);
    fs.writeFileSync(f, Buffer.alloc(n, 0x61));
    return f;
  };
  const routes = (smallLimit: number): NonNullable<Config['listeners'][number]['routes']> => [
    { name: 'inherits', hosts: ['inherits.example'], upstreams: [up] },
    { name: 'small', hosts: ['small.example'], upstreams: [up], http: { maxBodyBytes: smallLimit } },
    { name: 'unlimited', hosts: ['unlimited.example'], upstreams: [up], http: { maxBodyBytes: null } },
    { name: 'plain', hosts: ['plain.example'], upstreams: [up] },
  ];
  const g = await startHttpGate(t, { upstreams: [up], http: { maxBodyBytes: 1000 }, routes: routes(100) }, { level: 'info' });
  const port = g.port();
  const url = (host: string): string[] => ['--resolve', `${host}:${port}:127.0.0.1`, `http://${host}:${port}/up`];

  t.test('Content-Length: at the limit passes, one byte over is 413 and nothing reaches the backend', async (t) => {
    const ok = await curl(['--data-binary', `@${file(1000)}`, ...url('inherits.example')]);
    t.same([ok.status, ok.out], [200, 'got 1000'], 'exactly maxBodyBytes: forwarded whole');
    const before = be.started();
    const big = await curl(['--data-binary', `@${file(1001)}`, '-D', '-', ...url('inherits.example')]);
    t.equal(big.status, 413, 'one byte over: 413');
    t.match(big.out, /connection: close/i, 'and the connection closes');
    t.equal(be.started(), before, 'the backend saw no request');
    t.equal(stats(g).httpClientErrors.get('body_too_large'), 1, 'counted as a client error');
  });

  t.test('Content-Length over the limit is answered before the body is sent', async (t) => {
    const c = await connect({ port, localAddress: '127.0.0.3' });
    // Only the head: the answer cannot wait for a body that never comes.
    c.write('POST /up HTTP/1.1\r\nHost: inherits.example\r\nContent-Length: 50000000\r\n\r\n');
    const reply = (await readAll(c, 5000)).toString('latin1');
    t.match(reply, /^HTTP\/1\.1 413 Payload Too Large\r\n/, '413 at once');
  });

  t.test('chunked: 413 as soon as the streamed body passes the limit; the backend request is cut', async (t) => {
    const before = { started: be.started(), complete: be.complete.length, aborted: be.aborted() };
    const c = await connect({ port, localAddress: '127.0.0.3' });
    c.write('POST /up HTTP/1.1\r\nHost: inherits.example\r\nTransfer-Encoding: chunked\r\n\r\n');
    c.write(`258\r\n${'b'.repeat(600)}\r\n`); // 600 bytes: under the limit, forwarded
    await waitFor(() => be.started() === before.started + 1, 5000, 'the request reached the backend');
    c.write(`190\r\n${'b'.repeat(400)}\r\n`); // 1000: still at the limit
    c.write(`1\r\nb\r\n`); // 1001: over
    const reply = (await readAll(c, 5000)).toString('latin1');
    t.match(reply, /^HTTP\/1\.1 413 Payload Too Large\r\n/, '413 once the body passed the limit (no terminating chunk sent)');
    await waitFor(() => be.aborted() === before.aborted + 1, 5000, 'the backend request aborted');
    t.equal(be.complete.length, before.complete, 'the backend never completed the partial body');
    const ok = await curl(['-H', 'Transfer-Encoding: chunked', '--data-binary', `@${file(1000)}`, ...url('inherits.example')]);
    t.same([ok.status, ok.out], [200, 'got 1000'], 'a chunked body at the limit passes (curl)');
    const big = await curl(['-H', 'Transfer-Encoding: chunked', '--data-binary', `@${file(300_000)}`, ...url('inherits.example')]);
    t.equal(big.status, 413, 'a large chunked upload from curl: 413');
  });

  t.test("a route's own limit replaces the listener's; null turns it off", async (t) => {
    t.equal((await curl(['--data-binary', `@${file(101)}`, ...url('small.example')])).status, 413, 'small: 101 > 100');
    t.same((await curl(['--data-binary', `@${file(100)}`, ...url('small.example')])).out, 'got 100', 'small: 100 passes');
    t.same((await curl(['--data-binary', `@${file(200_000)}`, ...url('unlimited.example')])).out, 'got 200000', 'unlimited: no limit');
    t.same(
      (await curl(['-H', 'Transfer-Encoding: chunked', '--data-binary', `@${file(200_000)}`, ...url('unlimited.example')])).out,
      'got 200000',
      'unlimited: chunked too',
    );
  });

  t.test('a keep-alive connection under the limit keeps going; GETs are untouched', async (t) => {
    const c = await connect({ port, localAddress: '127.0.0.3' });
    t.teardown(() => c.destroy());
    c.write(`POST /up HTTP/1.1\r\nHost: small.example\r\nContent-Length: 5\r\n\r\nhello`);
    t.match((await readUntil(c, 'got 5\n', 5000)).toString(), /^HTTP\/1\.1 200/);
    c.write(`GET /up HTTP/1.1\r\nHost: small.example\r\n\r\n`);
    t.match((await readUntil(c, 'got 0\n', 5000)).toString(), /^HTTP\/1\.1 200/, 'the next request on the same connection');
  });

  t.test("a reload changes a route's limit live", async (t) => {
    const next = { listeners: [{ ...g.app.config.listeners[0]!, routes: routes(5000) }] };
    const r = g.app.replaceRoutes(routesUpdate(next, routesVersion(next.listeners)));
    t.same(r.problems, []);
    t.same((await curl(['--data-binary', `@${file(4000)}`, ...url('small.example')])).out, 'got 4000', 'small now takes 4000');
    t.equal((await curl(['--data-binary', `@${file(5001)}`, ...url('small.example')])).status, 413, 'and refuses 5001');
    const off = {
      listeners: [
        {
          ...g.app.config.listeners[0]!,
          routes: routes(5000).map((x) => (x.name === 'small' ? { ...x, http: { maxBodyBytes: null } } : x)),
        },
      ],
    };
    t.same(g.app.replaceRoutes(routesUpdate(off, routesVersion(off.listeners))).problems, []);
    t.same((await curl(['--data-binary', `@${file(9000)}`, ...url('small.example')])).out, 'got 9000', 'turned off by a reload');
  });
});

t.test('a listener without routes: its maxBodyBytes; the socket stays usable for the next client', { skip }, async (t) => {
  const be = await lengthBackend(t);
  const g = await startHttpGate(t, { upstreams: [`127.0.0.1:${be.port}`], http: { maxBodyBytes: 10 } }, { level: 'info' });
  const port = g.port();
  const c = await connect({ port, localAddress: '127.0.0.3' });
  c.write('POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n');
  t.match((await readAll(c, 5000)).toString('latin1'), /^HTTP\/1\.1 413 /, '11 bytes chunked in one read: 413');
  await closed(c);
  const again = await connect({ port, localAddress: '127.0.0.4' });
  again.write('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789');
  t.match((await readAll(again, 5000)).toString('latin1'), /^HTTP\/1\.1 200 [\s\S]*got 10\n$/, 'the next request at the limit is relayed');
  t.equal(stats(g).httpClientErrors.get('body_too_large'), 1);
});
