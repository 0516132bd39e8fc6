/**
 * The HTTP series dashboards expect (issue 32 item 3), over real sockets with a real nginx
 * backend: requests by method and exact status (bounded: a WebDAV method is OTHER), request sizes
 * exactly the bytes the client sent (head, and the body relayed: decoded for chunked), response
 * sizes exactly the bytes it received, denials counted the same whichever path answers them, and
 * each upstream target's up/down state; the scrape passes `promtool check metrics`.
 */
import { spawnSync } from 'node:child_process';
import t, { type Test } from 'tap';
import { startIpgate, type Started } from '../helpers/ipgate';
import { connect, freePort, readAll, refusingPort, waitFor } from '../helpers/net';
import { missing, nginxHttpPreamble, startNginx, which } from '../helpers/peers';

const skip = missing('nginx') || missing('promtool');

async function nginx(t: Test): Promise<number> {
  const port = await freePort();
  const peer = await startNginx(
    `http {
  ${nginxHttpPreamble()}
  keepalive_requests 10000;
  server {
    listen 127.0.0.1:${port};
    location = /missing { return 404; }
    location = /down { return 503 "busy\\n"; }
    location / { return 200 "hello from nginx\\n"; }
  }
}`,
    [port],
  );
  t.teardown(() => peer.stop());
  return port;
}

async function gate(t: Test, backend: number, logging: Record<string, unknown> = {}): Promise<Started & { admin: number }> {
  const dead = refusingPort(t);
  const g = await startIpgate(
    {
      admin: { listen: '127.0.0.1:0' },
      logging,
      allowlists: { main: ['127.0.0.2/32'] },
      listeners: [
        { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${backend}`] },
        { name: 'dead', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${dead}`] },
      ],
    },
    'warn',
  );
  t.teardown(() => g.app.shutdown(0));
  return Object.assign(g, { admin: g.app.admin!.address.port });
}

/** Requests in order on one keep-alive connection from `localAddress`; what the client received. */
async function exchange(port: number, localAddress: string, requests: string[]): Promise<Buffer> {
  const s = await connect({ port, localAddress });
  const all = readAll(s); // every byte until the close (the last request says Connection: close)
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  // One at a time: each response is read whole before the next request goes.
  for (let i = 0; i < requests.length; i++) {
    const before = Buffer.concat(chunks).length;
    s.write(requests[i]!);
    await waitFor(() => responseEnds(Buffer.concat(chunks).subarray(before)), 10_000, `response ${i}`);
  }
  return all;
}

/** A whole response with Content-Length (nginx's and ipgate's answers all have one). */
function responseEnds(b: Buffer): boolean {
  const text = b.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return false;
  const len = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end));
  return len !== null && b.length >= end + 4 + Number(len[1]);
}

const scrape = async (g: { admin: number }): Promise<string> => (await fetch(`http://127.0.0.1:${g.admin}/metrics`)).text();

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

t.test('requests by method and status; sizes are the bytes each side sent; promtool passes', { skip }, async (t) => {
  const backend = await nginx(t);
  const g = await gate(t, backend);
  const requests = [
    'GET /a HTTP/1.1\r\nHost: app.example\r\nUser-Agent: t\r\n\r\n',
    'POST /form HTTP/1.1\r\nHost: app.example\r\nContent-Length: 11\r\n\r\nhello world',
    'PUT /up HTTP/1.1\r\nHost: app.example\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n',
    'PROPFIND /dav HTTP/1.1\r\nHost: app.example\r\n\r\n',
    'GET /missing HTTP/1.1\r\nHost: app.example\r\n\r\n',
    'GET /down HTTP/1.1\r\nHost: app.example\r\nConnection: close\r\n\r\n',
  ];
  const received = await exchange(g.port('web'), '127.0.0.2', requests);
  const statuses = [...received.toString('latin1').matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((m) => m[1]);
  t.same(statuses.slice(0, 2), ['200', '200']);
  t.same(statuses.slice(4), ['404', '503']);
  const stats = g.app.listeners[0]!.stats;
  await waitFor(() => stats.http.duration.count === requests.length, 5000, 'all recorded');
  const text = await scrape(g);

  const want: Array<[string, number]> = [
    ['ipgate_http_requests_total{listener="web",method="GET",status="200",code_class="2xx",protocol="h1"}', 1],
    ['ipgate_http_requests_total{listener="web",method="POST",status="200",code_class="2xx",protocol="h1"}', 1],
    [
      `ipgate_http_requests_total{listener="web",method="OTHER",status="${statuses[3]}",code_class="${statuses[3]![0]}xx",protocol="h1"}`,
      1,
    ],
    ['ipgate_http_requests_total{listener="web",method="GET",status="404",code_class="4xx",protocol="h1"}', 1],
    ['ipgate_http_requests_total{listener="web",method="GET",status="503",code_class="5xx",protocol="h1"}', 1],
    ['ipgate_http_request_size_bytes_count{listener="web"}', 6],
    ['ipgate_http_response_size_bytes_count{listener="web"}', 6],
    // The head as sent (no blanks around values here) plus the body relayed: 11 bytes, and the
    // chunked one decoded (11 bytes, without its framing).
    ['ipgate_http_request_size_bytes_sum{listener="web"}', requests.reduce((n, r) => n + r.indexOf('\r\n\r\n') + 4, 0) + 11 + 11],
    // Every byte the client read, on one connection.
    ['ipgate_http_response_size_bytes_sum{listener="web"}', received.length],
    [`ipgate_upstream_up{listener="web",upstream="127.0.0.1:${backend}"}`, 1],
  ];
  for (const [series, n] of want) t.equal(value(text, series), n, series);
  t.equal([...text.matchAll(/^ipgate_http_requests_total\{listener="web",method="PUT",status="\d{3}"/gm)].length, 1, 'PUT with its status');
  t.notMatch(text, /method="PROPFIND"/, 'an unlisted method is OTHER: bounded');
  t.notMatch(text, /app\.example|127\.0\.0\.2"/, 'no host or client address as a label');

  const r = spawnSync(which('promtool')!, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  t.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  t.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no lint findings');
});

t.test('denials: 403 by method, sizes counted, on the quick path as on the full one', { skip }, async (t) => {
  const backend = await nginx(t);
  for (const [what, logging] of [
    ['access log on (full path within its rate)', {}],
    ['access log off (quick path)', { access: false, denialSummaryIntervalMs: 0 }],
  ] as const) {
    const g = await gate(t, backend, logging);
    const requests = [
      'GET /x HTTP/1.1\r\nHost: a\r\n\r\n',
      'DELETE /x HTTP/1.1\r\nHost: a\r\nAccept: application/json\r\n\r\n',
      'POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody',
    ];
    const received = await exchange(g.port('web'), '127.0.0.9', requests);
    const stats = g.app.listeners[0]!.stats;
    await waitFor(() => stats.http.duration.count === 3, 5000, 'all recorded');
    const text = await scrape(g);
    t.equal(
      value(text, 'ipgate_http_requests_total{listener="web",method="GET",status="403",code_class="4xx",protocol="h1"}'),
      1,
      `${what}: GET 403`,
    );
    t.equal(
      value(text, 'ipgate_http_requests_total{listener="web",method="DELETE",status="403",code_class="4xx",protocol="h1"}'),
      1,
      `${what}: DELETE 403`,
    );
    t.equal(
      value(text, 'ipgate_http_requests_total{listener="web",method="POST",status="403",code_class="4xx",protocol="h1"}'),
      1,
      `${what}: POST 403`,
    );
    t.equal(value(text, 'ipgate_http_response_size_bytes_sum{listener="web"}'), received.length, `${what}: the 403s as written`);
    // A refused request's body is read past, not relayed: its head only.
    t.equal(
      value(text, 'ipgate_http_request_size_bytes_sum{listener="web"}'),
      requests.reduce((n, r) => n + r.indexOf('\r\n\r\n') + 4, 0),
      `${what}: heads only`,
    );
    await g.app.shutdown(0);
  }
});

t.test('ipgate_upstream_up: 0 for a target that refuses, 1 once one answers', { skip }, async (t) => {
  const backend = await nginx(t);
  const g = await gate(t, backend);
  const dead = g.app.config.listeners[1]!.upstreams[0]!;
  const got = await exchange(g.port('dead'), '127.0.0.2', ['GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n']);
  t.match(got.toString('latin1'), /^HTTP\/1\.1 502 /);
  await waitFor(() => g.app.listeners[1]!.stats.http.duration.count === 1, 5000, 'recorded');
  const text = await scrape(g);
  t.equal(value(text, `ipgate_upstream_up{listener="dead",upstream="${dead}"}`), 0);
  t.equal(value(text, 'ipgate_http_requests_total{listener="dead",method="GET",status="502",code_class="5xx",protocol="h1"}'), 1);
  t.notMatch(text, /ipgate_upstream_up\{listener="web"/, 'a target not tried yet has no series');
});
