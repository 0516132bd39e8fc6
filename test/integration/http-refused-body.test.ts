/**
 * A request ipgate refuses (403 by a list, 404 / 400 on a routed listener) that announced a body it
 * has not sent (issue 27, "Degraded": `Expect: 100-continue`): the answer says `Connection: close`
 * and the connection ends, so the client's next bytes are never parsed, neither as that body nor
 * as a request (HAProxy closes the same way; nginx keeps the connection and answers the next
 * request 400). A refused request whose body came with its head keeps its connection, pipelined
 * requests behind it answered in order. Over real sockets, with curl too, on the quick denial
 * (level info) and the full path (level debug); on net.Sockets too (http-sockets.test.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import type net from 'node:net';
import t, { type Test } from 'tap';
import { countingBackend } from '../helpers/http';
import { startIpgate, tmpDir, type Started } from '../helpers/ipgate';
import { connect, readAll, readUntil } from '../helpers/net';
import { missing } from '../helpers/peers';
import { run } from '../helpers/tls-nginx';

/** What reached the backend: requests and their body bytes. */
async function backend(t: Test): Promise<{ port: number; seen: () => string[] }> {
  const seen: string[] = [];
  const b = await countingBackend((req, res) => {
    let n = 0;
    req.on('data', (c: Buffer) => (n += c.length));
    req.on('end', () => {
      seen.push(`${req.method ?? ''} ${req.url ?? ''} ${n}`);
      res.end(`ok ${n}\n`);
    });
  });
  t.teardown(() => b.close());
  return { port: b.port, seen: () => seen };
}

/**
 * ipgate with a plain listener `web` (allowlist 127.0.0.1 only) and a routed one `routed` (route
 * `guarded` on guarded.example.com with the same list, `open` on open.example.com for everyone).
 */
async function gate(t: Test, level: 'info' | 'debug', upstream: number): Promise<Started> {
  const g = await startIpgate(
    {
      logging: { denialSummaryIntervalMs: 0 },
      allowlists: { main: ['127.0.0.1/32'], everyone: ['127.0.0.0/8'] },
      listeners: [
        { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${upstream}`] },
        {
          name: 'routed',
          mode: 'http',
          listen: '127.0.0.1:0',
          allowlist: 'everyone',
          upstreams: [`127.0.0.1:${upstream}`],
          routes: [
            { name: 'guarded', hosts: ['guarded.example.com'], allowlist: 'main' },
            { name: 'open', hosts: ['open.example.com'] },
          ],
        },
      ],
    },
    level,
  );
  t.teardown(() => g.app.shutdown(0));
  return g;
}

/** The refusals: listener, Host, target, the status ipgate answers with (client 127.0.0.2). */
const refusals = [
  { what: '403 (listener list)', listener: 'web', host: 'a', target: '/up', status: 403 },
  { what: '403 (route list)', listener: 'routed', host: 'guarded.example.com', target: '/up', status: 403 },
  { what: '404 (no route)', listener: 'routed', host: 'nowhere.example.com', target: '/up', status: 404 },
  { what: '400 (a path no route can match safely)', listener: 'routed', host: 'open.example.com', target: '/in/%2F', status: 400 },
] as const;

/** Read one canned answer (ipgate's bodies end with "\n" and hold no other). */
async function answer(c: net.Socket): Promise<string> {
  const head = (await readUntil(c, '\r\n\r\n', 5000)).toString('latin1');
  return head + (await readUntil(c, '\n', 5000)).toString('latin1');
}

async function client(g: Started, listener: string, from = '127.0.0.2'): Promise<net.Socket> {
  const c = await connect({ port: g.port(listener), localAddress: from });
  c.on('error', () => undefined); // a write after ipgate's close
  return c;
}

for (const level of ['info', 'debug'] as const) {
  t.test(`${level}: a refused request whose body has not come: connection: close, the next request never parsed`, async (t) => {
    const b = await backend(t);
    const g = await gate(t, level, b.port);
    for (const r of refusals) {
      for (const [how, head] of [
        ['Expect: 100-continue, body never sent', 'Expect: 100-continue\r\nContent-Length: 10\r\n'],
        ['chunked, no chunk sent', 'Transfer-Encoding: chunked\r\n'],
        ['Content-Length, body not sent', 'Content-Length: 10\r\n'],
      ] as const) {
        const c = await client(g, r.listener);
        c.write(`POST ${r.target} HTTP/1.1\r\nHost: ${r.host}\r\n${head}\r\n`);
        const first = await answer(c);
        t.match(first, new RegExp(`^HTTP/1\\.1 ${r.status} `), `${r.what}, ${how}: ${r.status}, no 100 Continue`);
        t.match(first, /\r\nconnection: close\r\n/i, `${r.what}, ${how}: connection: close`);
        c.write(`GET /second HTTP/1.1\r\nHost: ${r.host}\r\n\r\n`);
        t.equal((await readAll(c, 10_000)).toString('latin1'), '', `${r.what}, ${how}: nothing more answered, the connection closed`);
      }
    }
    t.same(b.seen(), [], 'the backend received nothing');
  });

  t.test(
    `${level}: a refused request whose body came with its head keeps its connection; pipelined requests answered in order`,
    async (t) => {
      const b = await backend(t);
      const g = await gate(t, level, b.port);
      for (const r of refusals) {
        const c = await client(g, r.listener);
        c.write(
          `POST ${r.target} HTTP/1.1\r\nHost: ${r.host}\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello` +
            `POST ${r.target} HTTP/1.1\r\nHost: ${r.host}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`,
        );
        for (const n of [1, 2]) {
          const res = await answer(c);
          t.match(res, new RegExp(`^HTTP/1\\.1 ${r.status} `), `${r.what}: answer ${n}`);
          t.notMatch(res, /connection: close/i, `${r.what}: answer ${n} keeps the connection`);
        }
        c.write(`GET ${r.target} HTTP/1.1\r\nHost: ${r.host}\r\nConnection: close\r\n\r\n`);
        t.match(
          (await readAll(c)).toString('latin1'),
          new RegExp(`^HTTP/1\\.1 ${r.status} [\\s\\S]*connection: close\r\n`, 'i'),
          `${r.what}: the next request on it answered`,
        );
      }
      t.same(b.seen(), [], 'the backend received nothing');
    },
  );
}

t.test(
  'curl -H "Expect: 100-continue" --data-binary @big: refused, then a second URL on the same command; an allowed client uploads',
  { skip: missing('curl') },
  async (t) => {
    const b = await backend(t);
    const g = await gate(t, 'info', b.port);
    const big = path.join(tmpDir('ipgate-expect-'), 'big');
    fs.writeFileSync(big, Buffer.alloc(2 << 20, 120));
    const curl = (from: string, listener: string, host: string): ReturnType<typeof run> => {
      const url = `http://127.0.0.1:${g.port(listener)}`;
      const each = [
        '-sS',
        '--max-time',
        '10',
        '--interface',
        from,
        '-H',
        `Host: ${host}`,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code} %{num_connects}\\n',
      ];
      return run('curl', [
        ...each,
        '-H',
        'Expect: 100-continue',
        '--data-binary',
        `@${big}`,
        `${url}/upload`,
        '--next',
        ...each,
        `${url}/second`,
      ]);
    };
    for (const [listener, host] of [
      ['web', 'a'],
      ['routed', 'guarded.example.com'],
    ] as const) {
      const r = await curl('127.0.0.2', listener, host);
      t.equal(r.code, 0, `${listener}: curl succeeded: ${r.stderr}`);
      t.same(
        r.stdout.trim().split('\n'),
        ['403 1', '403 1'],
        `${listener}: 403 for the upload, and 403 for the second URL on a new connection (never read as a body)`,
      );
    }
    t.same(b.seen(), [], 'the backend received nothing from the refused client');
    const ok = await curl('127.0.0.1', 'web', 'a');
    t.equal(ok.code, 0, ok.stderr);
    t.same(
      ok.stdout.trim().split('\n'),
      ['200 1', '200 0'],
      'the allowed client: 100 Continue, the upload, then the second URL on the same connection',
    );
    t.same(b.seen(), [`POST /upload ${2 << 20}`, 'GET /second 0'], 'the backend received the whole upload and the second request');
  },
);
