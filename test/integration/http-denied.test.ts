/**
 * Quick denials (relay-conn.ts `quickDeny`): a direct client refused for the whole connection, with
 * debug off, gets its prebuilt 403s without an Exchange; pipelined denials are answered in order in
 * one write. What must not change: the order, the client's format (Accept), the strict framing
 * (bodies read past, a request hidden in a body is no request, garbage answered 400 after the 403s
 * before it), and the counters and info lines a denial gives (denied_by_entry named by its entry).
 * Runs at level info with the access log off (`logging.access: false`): at debug, or with the
 * access log on below its denial lines' rate, every denial takes the full path (its line needs the
 * Exchange); access-log.test.ts covers the quick path past that rate.
 */
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { connect, readAll, readUntil, waitFor } from '../helpers/net';
import { countingBackend } from '../helpers/http';

async function gate(t: Test, allow: unknown[], logging: Record<string, unknown> = {}): Promise<{ g: Started; backend: () => number }> {
  const b = await countingBackend();
  t.teardown(() => b.close());
  const g = await startIpgate(
    {
      logging: { access: false, denialSummaryIntervalMs: 0, ...logging },
      allowlists: { main: allow },
      listeners: [{ name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${b.port}`] }],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  return { g, backend: () => b.requests.length + b.connections };
}

const stats = (g: Started) => g.app.listeners[0]!.stats;
const statuses = (text: string): string[] => [...text.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((m) => m[1]!);

const cases: Array<{ name: string; bytes: string; statuses: string[]; bodies?: RegExp; closes: boolean }> = [
  {
    name: "12 pipelined requests in one write: twelve 403s in order, each in its client's format, the connection kept",
    bytes:
      Array.from(
        { length: 12 },
        (_, i) => `GET /${i} HTTP/1.1\r\nHost: a\r\n${i % 3 === 0 ? 'Accept: application/json\r\n' : ''}\r\n`,
      ).join('') + 'GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n',
    statuses: Array(13).fill('403') as string[],
    bodies:
      /^(?:HTTP\/1\.1 403 Forbidden\r\nContent-Type: application\/json[\s\S]*?\r\n\r\n\{"error":"forbidden","message":"Forbidden"\}\n(?:HTTP\/1\.1 403 Forbidden\r\nContent-Type: text\/plain[\s\S]*?\r\n\r\nForbidden\n){2}){4}HTTP\/1\.1 403 Forbidden\r\nContent-Type: text\/plain; charset=utf-8\r\nContent-Length: 10\r\nCache-Control: no-store\r\nConnection: close\r\n\r\nForbidden\n$/,
    closes: true,
  },
  {
    name: 'bodies read past (Content-Length, chunked): a request inside a body is no request',
    bytes:
      'POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 33\r\n\r\nGET /hidden HTTP/1.1\r\nHost: a\r\n\r\n' +
      'POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n21\r\nGET /hidden HTTP/1.1\r\nHost: a\r\n\r\n\r\n0\r\n\r\n' +
      'GET /c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n',
    statuses: ['403', '403', '403'],
    closes: true,
  },
  {
    name: 'denials, then garbage in the same write: the 403s first, then 400 and the close',
    bytes: 'GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\ngarbage\r\n\r\n',
    statuses: ['403', '403', '400'],
    closes: true,
  },
  {
    name: 'smuggling framing refused as before: Content-Length with Transfer-Encoding after a denial is 400',
    bytes:
      'GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    statuses: ['403', '400'],
    closes: true,
  },
  {
    name: 'an HTTP/1.0 request without keep-alive: 403 with Connection: close, nothing after it parsed',
    bytes: 'GET /1 HTTP/1.0\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n',
    statuses: ['403'],
    closes: true,
  },
];

for (const c of cases) {
  t.test(`quick denials: ${c.name}`, async (t) => {
    const { g, backend } = await gate(t, ['127.0.0.1/32']);
    const s = await connect({ port: g.port(), localAddress: '127.0.0.4' });
    s.write(c.bytes);
    const text = (await readAll(s)).toString('latin1');
    t.same(statuses(text), c.statuses, 'answers in order');
    if (c.bodies) t.match(text, c.bodies, 'each answer whole, in the format its request asked for');
    if (c.closes) t.match(text, /\r\nConnection: close\r\n\r\n[^\r]*\n$/, 'the last answer says close');
    const denials = c.statuses.filter((x) => x === '403').length;
    t.equal(stats(g).denied.get('not_allowlisted'), denials, 'each refused request counted');
    t.equal(stats(g).httpRequests, denials, 'each denied request counted as a request');
    await waitFor(() => (stats(g).httpResponses.get('4xx') ?? 0) >= denials, 5000, '4xx counted');
    t.equal(stats(g).httpResponses.get('4xx'), denials, 'each 403 counted by class');
    t.equal(stats(g).httpClientErrors.get('bad_request') ?? 0, c.statuses.length - denials, 'a 400 counted as a client error');
    t.equal(backend(), 0, 'the backend received nothing');
  });
}

t.test('quick denials: a deny entry is counted as denied_by_entry and named in the info line, without a lookup per request', async (t) => {
  const { g } = await gate(t, ['127.0.0.0/8', { cidr: '127.0.0.4/32', action: 'deny', comment: 'lab' }], {
    denialSummaryIntervalMs: 200,
    denialLinesPerInterval: 10,
  });
  const s = await connect({ port: g.port(), localAddress: '127.0.0.4' });
  s.write('GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n');
  await readUntil(s, 'Forbidden\nHTTP/1.1 403 Forbidden', 5000);
  s.write('GET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
  t.same(statuses((await readAll(s)).toString('latin1')), ['403'], 'the third answered, then the close');
  t.equal(stats(g).denied.get('denied_by_entry'), 3, "the reason carried from the connection's lookup");
  t.notOk(stats(g).denied.has('not_allowlisted'));
  let summary: Record<string, unknown> | undefined;
  await waitFor(() => (summary = g.logs.find((l) => typeof l.denials === 'number')) !== undefined, 5000, 'summary line');
  t.match(summary, { level: 'info', denials: 3, reasons: { denied_by_entry: 3 }, listeners: { web: 3 } });
  const first = g.logs.find((l) => l.client === '127.0.0.4' && typeof l.msg === 'string' && l.msg.startsWith('denied 127.0.0.4'));
  t.match(first, { level: 'info', reason: 'denied_by_entry', entry: '127.0.0.4/32' }, 'the per-address line names the deny entry');
});
