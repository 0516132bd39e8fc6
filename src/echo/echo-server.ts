/**
 * `ipgate echo`: the built-in demo backend. It reports the client address it learned, so an
 * operator can see the whole idea working with nc or curl:
 *
 * - TCP: accepts an optional PROXY v1/v2 header (from any peer: it is a loopback demo and test
 *   backend, never a public listener), writes one line
 *   `ipgate-echo client=203.0.113.7:5555 via=proxy-v2 peer=127.0.0.1:40312\n`, then echoes every byte.
 * - HTTP: answers every request with JSON: the client address it learned (X-Real-IP, else the
 *   socket), and the forwarded headers it received.
 * - WebSocket (RFC 6455, on the HTTP port): after the handshake, sends one text message with the
 *   same JSON, then echoes every text/binary message; answers ping and close. Enough for demos and
 *   tests (`websocat ws://127.0.0.1:8080/`), not a general WebSocket server: no extensions, no
 *   fragmented messages, messages up to 1 MiB.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { canonicalAddress, formatHostPort } from '../identity/address';
import { decodeProxyHeader } from '../proxy-protocol/decoder';

export interface EchoServers {
  tcp: net.Server | null;
  http: http.Server | null;
  close(): Promise<void>;
}

/** The line the TCP echo writes first. Exported for tests. */
function echoLine(client: string, via: string, peer: string): string {
  return `ipgate-echo client=${client} via=${via} peer=${peer}\n`;
}

export function createTcpEcho(): net.Server {
  return net.createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => socket.destroy());
    const peer = formatHostPort(canonicalAddress(socket.remoteAddress ?? ''), socket.remotePort ?? 0);
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), 10_000).unref();
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk]);
      const r = decodeProxyHeader(buf);
      if (r.kind === 'more') return;
      socket.off('data', onData);
      clearTimeout(timer);
      let client = peer;
      let via = 'socket';
      let rest = buf;
      if (r.kind === 'error') {
        socket.end(`ipgate-echo error=${r.reason}\n`);
        return;
      }
      if (r.kind === 'done') {
        rest = buf.subarray(r.length);
        if (r.header.source !== null) {
          client = formatHostPort(r.header.source.address, r.header.source.port);
          via = `proxy-v${r.header.version}`;
        } else {
          via = `proxy-v${r.header.version}-local`;
        }
      }
      socket.write(echoLine(client, via, peer));
      if (rest.length > 0) socket.write(rest);
      socket.pipe(socket);
    };
    socket.on('data', onData);
    // A client that sends nothing still learns its address after a moment: many TCP protocols
    // wait for the server to speak first, and a person typing into nc wants to see it at once.
    socket.once('end', () => {
      clearTimeout(timer);
      if (socket.listenerCount('data') > 0 && buf.length === 0) socket.end(echoLine(peer, 'socket', peer));
    });
  });
}

/** The JSON the HTTP echo reports for a request (also the first WebSocket message). */
function echoReport(req: http.IncomingMessage, bodyBytes: number): string {
  const peer = canonicalAddress(req.socket.remoteAddress ?? '');
  const realIp = req.headers['x-real-ip'];
  return `${JSON.stringify({
    client: typeof realIp === 'string' ? realIp : peer,
    via: typeof realIp === 'string' ? 'x-real-ip' : 'socket',
    peer: formatHostPort(peer, req.socket.remotePort ?? 0),
    method: req.method,
    url: req.url,
    headers: {
      'x-real-ip': req.headers['x-real-ip'] ?? null,
      'x-forwarded-for': req.headers['x-forwarded-for'] ?? null,
      'x-forwarded-proto': req.headers['x-forwarded-proto'] ?? null,
      'x-forwarded-host': req.headers['x-forwarded-host'] ?? null,
      'x-forwarded-port': req.headers['x-forwarded-port'] ?? null,
      forwarded: req.headers.forwarded ?? null,
      host: req.headers.host ?? null,
    },
    bodyBytes,
  })}\n`;
}

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const WS_MAX_PAYLOAD = 1 << 20;

/** RFC 6455 4.2.2: Sec-WebSocket-Accept for a Sec-WebSocket-Key. */
export function wsAccept(key: string): string {
  return crypto
    .createHash('sha1')
    .update(key + WS_GUID)
    .digest('base64');
}

/** One unfragmented frame; `mask` for client-to-server frames (RFC 6455 5.3). */
export function wsFrame(opcode: number, payload: Buffer, mask = false): Buffer {
  const len = payload.length;
  const ext = len < 126 ? 0 : len < 65_536 ? 2 : 8;
  const head = Buffer.alloc(2 + ext + (mask ? 4 : 0));
  head[0] = 0x80 | opcode;
  head[1] = (mask ? 0x80 : 0) | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(len, 2);
  else if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
  if (!mask) return Buffer.concat([head, payload]);
  const key = crypto.randomBytes(4);
  key.copy(head, 2 + ext);
  const body = Buffer.from(payload);
  for (let i = 0; i < body.length; i++) body[i]! ^= key[i & 3]!;
  return Buffer.concat([head, body]);
}

export interface WsMessage {
  opcode: number;
  payload: Buffer;
}

/**
 * Parse complete frames from `buf`: the messages and the bytes left over (an incomplete frame).
 * null when a frame is malformed or too large.
 */
export function wsParse(buf: Buffer): { messages: WsMessage[]; rest: Buffer } | null {
  const messages: WsMessage[] = [];
  let off = 0;
  for (;;) {
    if (buf.length - off < 2) break;
    const b0 = buf[off]!;
    const b1 = buf[off + 1]!;
    if ((b0 & 0x80) === 0 || (b0 & 0x70) !== 0) return null; // fragmented or RSV bits: not supported
    let len = b1 & 0x7f;
    let p = off + 2;
    if (len === 126) {
      if (buf.length - p < 2) break;
      len = buf.readUInt16BE(p);
      p += 2;
    } else if (len === 127) {
      if (buf.length - p < 8) break;
      const big = buf.readBigUInt64BE(p);
      if (big > BigInt(WS_MAX_PAYLOAD)) return null;
      len = Number(big);
      p += 8;
    }
    if (len > WS_MAX_PAYLOAD) return null;
    const masked = (b1 & 0x80) !== 0;
    const need = p + (masked ? 4 : 0) + len;
    if (buf.length < need) break;
    const payload = Buffer.from(buf.subarray(need - len, need));
    if (masked) for (let i = 0; i < len; i++) payload[i]! ^= buf[p + (i & 3)]!;
    messages.push({ opcode: b0 & 0x0f, payload });
    off = need;
  }
  return { messages, rest: buf.subarray(off) };
}

/** The HTTP echo's upgrade handler: handshake, identity message, then echo. */
function wsEcho(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
  socket.on('error', () => socket.destroy());
  const key = req.headers['sec-websocket-key'];
  if (req.headers.upgrade?.toLowerCase() !== 'websocket' || typeof key !== 'string') {
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` + `Sec-WebSocket-Accept: ${wsAccept(key)}\r\n\r\n`,
  );
  socket.write(wsFrame(1, Buffer.from(echoReport(req, 0))));
  let buf = head;
  const onData = (chunk: Buffer): void => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    const r = wsParse(buf);
    if (r === null) {
      socket.end(wsFrame(8, Buffer.from([0x03, 0xea]))); // 1002 protocol error
      return;
    }
    buf = r.rest;
    for (const m of r.messages) {
      if (m.opcode === 1 || m.opcode === 2) socket.write(wsFrame(m.opcode, m.payload));
      else if (m.opcode === 9) socket.write(wsFrame(10, m.payload));
      else if (m.opcode === 8) {
        socket.end(wsFrame(8, m.payload.subarray(0, 2)));
        return;
      }
    }
  };
  socket.on('data', onData);
  // The HTTP server's sockets are half-open capable: end our side when the peer ends its.
  socket.once('end', () => socket.end());
  if (head.length > 0) onData(Buffer.alloc(0));
}

export function createHttpEcho(): http.Server {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 65_536) chunks.push(c);
    });
    req.on('end', () => {
      const body = echoReport(req, size);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  server.keepAliveTimeout = 30_000;
  server.on('upgrade', wsEcho);
  return server;
}

function listen(server: net.Server, address: string): Promise<void> {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(colon + 1));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export async function startEcho(opts: { tcp: string | null; http: string | null }): Promise<EchoServers> {
  const tcp = opts.tcp !== null ? createTcpEcho() : null;
  const web = opts.http !== null ? createHttpEcho() : null;
  if (tcp && opts.tcp !== null) await listen(tcp, opts.tcp);
  if (web && opts.http !== null) await listen(web, opts.http);
  return {
    tcp,
    http: web,
    close: async () => {
      const closing: Promise<void>[] = [];
      for (const s of [tcp, web]) {
        if (!s) continue;
        closing.push(new Promise((r) => s.close(() => r())));
        if (s instanceof http.Server) s.closeAllConnections();
      }
      await Promise.all(closing);
    },
  };
}
