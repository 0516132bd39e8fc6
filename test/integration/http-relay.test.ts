/**
 * What is specific to the relay engine (`http.engine: relay`, src/forward/http/relay/): it parses
 * and frames HTTP itself, so these check the framing against real peers over loopback: smuggling
 * attempts stopped at the proxy, pipelined requests answered in order, bodies byte-exact through
 * slow readers on both sides, 1xx and HEAD responses, an HTTP/1.0 client of a chunked response,
 * pool reuse. The engine-neutral behaviour is http-forward-relay.test.ts; nginx and HAProxy in
 * front and behind are http-nginx-relay.test.ts.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { connect, readAll, readUntil } from '../helpers/net';
import { countingBackend, type CountingBackend } from '../helpers/http';

async function backend(t: Test, handler?: http.RequestListener): Promise<CountingBackend> {
  const b = await countingBackend(handler);
  t.teardown(() => b.close());
  return b;
}

async function gate(t: Test, upstream: number, http: Record<string, unknown> = {}): Promise<Started> {
  const g = await startIpgate(
    {
      allowlists: { main: ['127.0.0.0/8'] },
      listeners: [
        {
          name: 'web',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'main',
          upstreams: [`127.0.0.1:${upstream}`],
          http: { engine: 'relay', ...http },
        },
      ],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

t.test('smuggling attempts are answered 400 at the proxy and never reach the backend', async (t) => {
  const b = await backend(t);
  const g = await gate(t, b.port);
  const attempts: Record<string, string> = {
    'Content-Length with Transfer-Encoding':
      'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n',
    'two Content-Length': 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc',
    'obs-fold': 'GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n continued\r\n\r\n',
    'space before the colon': 'GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nhello',
    'chunked not last': 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n',
    'bad chunk size': 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n',
    'bare LF line ends': 'GET / HTTP/1.1\nHost: a\n\n',
  };
  for (const [name, bytes] of Object.entries(attempts)) {
    const c = await connect({ port: g.port() });
    c.write(bytes);
    const res = (await readAll(c)).toString();
    t.match(res, /^HTTP\/1\.1 400 /, name);
  }
  t.equal(b.requests.length, 0, 'the backend received nothing');
});

t.test('header bytes above 0x7f pass unchanged both ways (latin1, not UTF-8)', async (t) => {
  // A raw backend: node:http would write its own header values as UTF-8.
  const got: Buffer[] = [];
  const server = net.createServer((sock) => {
    sock.on('data', (d: Buffer) => {
      got.push(d);
      if (!Buffer.concat(got).includes('\r\n\r\n')) return;
      sock.end(
        Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Back: caf'), Buffer.from([0xe9]), Buffer.from('\r\n\r\nok')]),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
      }),
  );
  const g = await gate(t, (server.address() as net.AddressInfo).port);
  const c = await connect({ port: g.port() });
  c.write(
    Buffer.concat([
      Buffer.from('GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX-Name: '),
      Buffer.from([0x52, 0xe9, 0xff]),
      Buffer.from('\r\n\r\n'),
    ]),
  );
  const res = await readAll(c);
  t.ok(Buffer.concat(got).includes(Buffer.from([0x52, 0xe9, 0xff, 0x0d, 0x0a])), "the backend got the client's bytes");
  t.ok(res.includes(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0d, 0x0a])), "the client got the backend's bytes");
});

t.test('pipelined requests are answered in order, one upstream request at a time', async (t) => {
  let inFlight = 0;
  let maxInFlight = 0;
  const b = await backend(t, (req, res) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    // The first answers last if they were sent together.
    setTimeout(
      () => {
        inFlight--;
        res.end(`answer ${req.url}\n`);
      },
      req.url === '/1' ? 60 : 5,
    );
  });
  const g = await gate(t, b.port);
  const c = await connect({ port: g.port() });
  c.write('GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
  const res = (await readAll(c)).toString();
  const order = [...res.matchAll(/answer (\/\d)/g)].map((m) => m[1]);
  t.same(order, ['/1', '/2', '/3'], 'responses in request order');
  t.equal(maxInFlight, 1, 'one request upstream at a time');
});

t.test('bodies byte-exact both ways through slow readers (backpressure)', async (t) => {
  const up = randomBytes(3 * 1024 * 1024);
  const down = randomBytes(5 * 1024 * 1024);
  const b = await backend(t, (req, res) => {
    const hash = createHash('sha256');
    req.on('data', (d: Buffer) => {
      hash.update(d);
      req.pause();
      setTimeout(() => req.resume(), 1); // a slow reader upstream
    });
    req.on('end', () => {
      res.setHeader('x-got', hash.digest('hex'));
      res.end(down);
    });
  });
  const g = await gate(t, b.port);
  const got = await new Promise<{ status: number; sha: string; xgot: string }>((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: g.port(), method: 'POST', path: '/big', headers: { 'transfer-encoding': 'chunked' } },
      (res) => {
        const hash = createHash('sha256');
        res.on('data', (d: Buffer) => {
          hash.update(d);
          res.pause();
          setTimeout(() => res.resume(), 1); // a slow reader downstream
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, sha: hash.digest('hex'), xgot: String(res.headers['x-got']) }));
      },
    );
    req.on('error', reject);
    for (let i = 0; i < up.length; i += 100_000) req.write(up.subarray(i, i + 100_000));
    req.end();
  });
  t.equal(got.status, 200);
  t.equal(got.xgot, createHash('sha256').update(up).digest('hex'), 'request body byte-exact at the backend (sent chunked)');
  t.equal(got.sha, createHash('sha256').update(down).digest('hex'), 'response body byte-exact at the client');
});

t.test('100 Continue, HEAD, 204 and an HTTP/1.0 client of a chunked response', async (t) => {
  const b = await backend(t, (req, res) => {
    if (req.url === '/nocontent') {
      res.statusCode = 204;
      res.end();
      return;
    }
    if (req.url === '/chunked') {
      res.write('part1-');
      setTimeout(() => res.end('part2'), 5);
      return;
    }
    if (req.method === 'HEAD') {
      res.setHeader('content-length', '8');
      res.end();
      return;
    }
    req.resume();
    req.on('end', () => res.end(`${req.method} done`));
  });
  const g = await gate(t, b.port);
  const c = await connect({ port: g.port() });
  c.write('POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n');
  t.match(
    (await readUntil(c, '\r\n\r\n')).toString(),
    /^HTTP\/1\.1 100 Continue\r\n/,
    '100 Continue (answered by ipgate, as node:http does)',
  );
  c.write('hello');
  t.match((await readUntil(c, 'POST done')).toString(), /^HTTP\/1\.1 200 /, 'then the final response');
  c.write('HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n');
  const head = (await readUntil(c, '\r\n\r\n')).toString();
  t.match(head, /^HTTP\/1\.1 200 [\s\S]*content-length: 8\r\n/i, "HEAD: the backend's Content-Length, no body");
  c.write('GET /nocontent HTTP/1.1\r\nHost: a\r\n\r\n');
  t.match((await readUntil(c, '\r\n\r\n')).toString(), /^HTTP\/1\.1 204 /, '204 on the same connection: HEAD sent no body');
  c.write('GET /after HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
  t.match((await readAll(c)).toString(), /GET done$/, 'the connection still in step after HEAD and 204');

  const old = await connect({ port: g.port() });
  old.write('GET /chunked HTTP/1.0\r\nHost: a\r\n\r\n');
  const res = (await readAll(old)).toString();
  t.notMatch(res, /transfer-encoding/i, 'no chunked framing to an HTTP/1.0 client');
  t.match(res, /\r\nconnection: close\r\n/i, 'Connection: close announced');
  t.match(res, /\r\n\r\npart1-part2$/, 'the decoded body, then the close');
});

t.test('a keep-alive client: one pooled upstream connection, identity headers', async (t) => {
  const b = await backend(t, (req, res) => res.end(`${String(req.headers['x-real-ip'])} ${String(req.headers.connection)}`));
  const g = await gate(t, b.port);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  for (let i = 0; i < 20; i++) {
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: g.port(), path: `/${i}`, agent, localAddress: '127.0.0.7' }, (res) => {
          let s = '';
          res.on('data', (d: Buffer) => (s += d.toString()));
          res.on('end', () => resolve(s));
        })
        .on('error', reject);
    });
    if (body !== '127.0.0.7 keep-alive') t.fail(`request ${i}: ${body}`);
  }
  t.equal(b.connections, 1, 'twenty requests over one pooled upstream connection');
  t.equal(g.app.listeners[0]!.stats.upstreamConnect.count, 1, 'its connect time observed once (ipgate_upstream_connect_seconds)');
  t.pass('X-Real-IP is the client, the upstream connection keep-alive');
});
