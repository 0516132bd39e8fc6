/**
 * Parsers reused across connections (llhttp-parser.ts `take` / `release`, bench/README.md "Parsers
 * reused across connections"): a connection that ends in any state gives its parser back, and the
 * next connection, client side or upstream side, takes it. Over real sockets, ipgate in this
 * process and a node:http backend that answers every request with the id it was sent: waves of
 * clients from distinct 127.0.0.x addresses each follow a generated plan (complete requests kept
 * alive, then a clean close, a close mid-head, mid-body or mid-pipeline, or a malformed request),
 * and the backend closes some upstream connections after a response and cuts others mid-body. Every
 * complete response a client reads must carry the id of the request it sent on that connection,
 * in order: a parser that kept anything of its last connection, or that two connections shared,
 * would answer one client with another's bytes or desync a kept connection.
 */
import http from 'node:http';
import type net from 'node:net';
import t, { type Test } from 'tap';
import { pooledParsers } from '../../src/forward/http/relay/llhttp-parser';
import { startHttpGate } from '../helpers/ipgate';
import { connect } from '../helpers/net';
import { prng } from '../helpers/prng';
import { listenLoopback } from '../helpers/http';

/** How a client connection ends after its complete requests. */
type End = 'close' | 'mid-head' | 'mid-body' | 'mid-pipeline' | 'malformed';
const ENDS: readonly End[] = ['close', 'mid-head', 'mid-body', 'mid-pipeline', 'malformed'];

interface Plan {
  ids: string[];
  end: End;
}

/**
 * The backend: 200 with `id <id>` for every request. Ids ending in 3 close the upstream
 * connection after the response; ids ending in 7 get a head promising 40 bytes, 5 of them, then a
 * reset: their client connection gets no complete response.
 */
async function backend(t: Test): Promise<number> {
  const server = http.createServer((req, res) => {
    const id = String(req.headers['x-id'] ?? '');
    if (id.endsWith('7')) {
      res.writeHead(200, { 'Content-Length': '40' });
      res.write('cut-');
      setImmediate(() => req.socket.destroy());
      return;
    }
    const body = `id ${id} ${req.url}`;
    if (id.endsWith('3')) res.setHeader('Connection', 'close');
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.end(body);
  });
  server.keepAliveTimeout = 30_000;
  return listenLoopback(t, server);
}

const request = (id: string): string => `GET /r/${id}?q=${id} HTTP/1.1\r\nHost: reuse.test\r\nX-Id: ${id}\r\n\r\n`;

/** Reads responses in order; resolves with the bodies of the complete ones when the socket closes. */
function responses(socket: net.Socket): Promise<{ bodies: string[]; statuses: number[] }> {
  return new Promise((resolve) => {
    let buf = '';
    const bodies: string[] = [];
    const statuses: number[] = [];
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      buf += d;
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.slice(0, end);
        const m = /\r\ncontent-length: *(\d+)/i.exec(head);
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (buf.length < total) return;
        statuses.push(Number(head.slice(9, 12)));
        bodies.push(buf.slice(end + 4, total));
        buf = buf.slice(total);
        socket.emit('response');
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ bodies, statuses }));
  });
}

/** One client: its complete requests one at a time, then its end. Returns what it read. */
async function client(port: number, local: string, plan: Plan): Promise<{ bodies: string[]; statuses: number[] }> {
  const s = await connect({ port, localAddress: local });
  const read = responses(s);
  let answered = 0;
  s.on('response', () => answered++);
  const waitAnswer = (n: number): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (answered >= n || s.destroyed) {
          s.off('response', check);
          s.off('close', check);
          resolve();
        }
      };
      s.on('response', check);
      s.on('close', check);
      check();
    });
  for (let i = 0; i < plan.ids.length; i++) {
    if (s.destroyed) break;
    s.write(request(plan.ids[i]!));
    await waitAnswer(i + 1);
  }
  if (!s.destroyed) {
    switch (plan.end) {
      case 'close':
        s.end();
        break;
      case 'mid-head':
        s.write('GET /half HTTP/1.1\r\nHost: reuse.test\r\nX-Id: ');
        setImmediate(() => s.destroy());
        break;
      case 'mid-body':
        s.write('POST /body HTTP/1.1\r\nHost: reuse.test\r\nContent-Length: 100\r\n\r\n0123456789');
        setImmediate(() => s.destroy());
        break;
      case 'mid-pipeline':
        s.write(`${request('p1')}GET /next HTTP/1.1\r\nHost: reu`);
        setImmediate(() => s.destroy());
        break;
      case 'malformed':
        s.write('GET /bad HTTP/1.1\r\nHost: reuse.test\r\nBad Header: x\r\n\r\n');
        break;
    }
  }
  return read;
}

t.test('connections that end in every state hand their parsers on without a byte crossing over', async (t) => {
  const backendPort = await backend(t);
  const g = await startHttpGate(t, { upstreams: [`127.0.0.1:${backendPort}`] });
  const port = g.port();
  const rand = prng(0x9a55);
  const plans: Plan[] = [];
  let next = 0;
  for (let i = 0; i < 400; i++) {
    const n = Math.floor(rand() * 4);
    const ids = Array.from({ length: n }, () => String(++next));
    plans.push({ ids, end: ENDS[Math.floor(rand() * ENDS.length)]! });
  }
  const results: { plan: Plan; bodies: string[]; statuses: number[] }[] = [];
  for (let w = 0; w < plans.length; w += 40) {
    const wave = plans.slice(w, w + 40);
    const got = await Promise.all(wave.map((plan, i) => client(port, `127.0.0.${2 + ((w + i) % 200)}`, plan)));
    for (let i = 0; i < got.length; i++) results.push({ plan: wave[i]!, ...got[i]! });
  }

  let complete = 0;
  let crossed = 0;
  let malformed = 0;
  for (const { plan, bodies, statuses } of results) {
    // The ids answered in order up to the first cut one (the backend resets it), then nothing.
    const cut = plan.ids.findIndex((id) => id.endsWith('7'));
    const expected = (cut < 0 ? plan.ids : plan.ids.slice(0, cut)).map((id) => `id ${id} /r/${id}?q=${id}`);
    const got = bodies.slice(0, expected.length);
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      crossed++;
      t.fail(`a client read another exchange's bytes: ${JSON.stringify({ plan, bodies, statuses })}`);
    }
    complete += got.length;
    const rest = statuses.slice(expected.length);
    if (cut < 0 && plan.end === 'malformed') {
      if (rest[0] === 400) malformed++;
      else t.fail(`a malformed request was not answered 400: ${JSON.stringify({ plan, statuses })}`);
    } else if (cut < 0 && plan.end === 'mid-pipeline') {
      // The pipelined request may have been answered before the client's reset: its own id only.
      if (rest.length > 1 || (rest.length === 1 && bodies[expected.length] !== 'id p1 /r/p1?q=p1')) {
        t.fail(`a pipelined request was answered with something else: ${JSON.stringify({ plan, bodies })}`);
      }
    } else if (cut >= 0) {
      // A cut response: a 502 if the cut came before the head went out, else nothing complete.
      if (rest.some((st) => st !== 502)) t.fail(`a cut exchange answered more: ${JSON.stringify({ plan, statuses })}`);
    } else if (rest.length > 0) t.fail(`more answers than requests: ${JSON.stringify({ plan, statuses })}`);
  }
  t.equal(crossed, 0, 'no client read a response that was not its own, in its order');
  t.ok(complete > 300, `${complete} responses checked`);
  t.ok(malformed > 20, `${malformed} malformed requests answered 400`);
  const pooled = pooledParsers();
  t.ok(pooled.request > 0 && pooled.request <= 256, `request parsers waiting in the pool: ${pooled.request}`);
  t.ok(pooled.response > 0 && pooled.response <= 256, `response parsers waiting in the pool: ${pooled.response}`);

  // And the next connection, on a pooled parser, is served as the first one was.
  const last = await client(port, '127.0.0.250', { ids: ['1000', '1001'], end: 'close' });
  t.strictSame(last.bodies, ['id 1000 /r/1000?q=1000', 'id 1001 /r/1001?q=1001'], 'a connection after the churn');
});
