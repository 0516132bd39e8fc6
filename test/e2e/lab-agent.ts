/**
 * A client process for the e2e lab, started inside a namespace (`ip netns exec NS node
 * dist/test/e2e/lab-agent.js`): the test process cannot open sockets in another namespace, so it
 * sends this agent one JSON request per line on stdin and reads one JSON answer per line.
 *
 *   {"id":1,"op":"tcp","host":"192.0.2.11","port":30443,"localAddress":"203.0.113.10","send":"<base64>"}
 *     -> {"id":1,"connected":true,"line":"ipgate-echo client=...","closed":false}
 *   {"id":2,"op":"http","url":"http://192.0.2.11:30080/","localAddress":"203.0.113.10"}
 *     -> {"id":2,"status":200,"body":"..."}
 *   {"id":3,"op":"tcpMany","count":30,...tcp fields} -> {"id":3,"results":[...]}
 *
 * A TCP request reads the first line the server sends, or until it closes, or `timeoutMs`.
 */
import http from 'node:http';
import net from 'node:net';
import readline from 'node:readline';

interface TcpRequest {
  host: string;
  port: number;
  localAddress?: string;
  /** Bytes to send once connected, base64. */
  send?: string;
  timeoutMs?: number;
}

export interface TcpResult {
  connected: boolean;
  /** First line received (without the newline), '' when the server closed without one. */
  line: string | null;
  /** The server closed the connection before sending a line. */
  closed: boolean;
  error?: string;
}

function tcp(req: TcpRequest): Promise<TcpResult> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: req.host, port: req.port, localAddress: req.localAddress });
    let buf = '';
    let connected = false;
    let settled = false;
    const finish = (r: TcpResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => finish({ connected, line: null, closed: false, error: 'timeout' }), req.timeoutMs ?? 3000);
    socket.once('connect', () => {
      connected = true;
      if (req.send !== undefined) socket.write(Buffer.from(req.send, 'base64'));
      else socket.write('hello\n');
    });
    socket.on('data', (c: Buffer) => {
      buf += c.toString('latin1');
      const nl = buf.indexOf('\n');
      if (nl >= 0) finish({ connected, line: buf.slice(0, nl), closed: false });
    });
    socket.once('end', () => finish({ connected, line: buf === '' ? '' : buf, closed: true }));
    socket.once('close', () => finish({ connected, line: buf === '' ? '' : buf, closed: true }));
    socket.on('error', (err: NodeJS.ErrnoException) => finish({ connected, line: null, closed: true, error: err.code ?? err.message }));
  });
}

function get(req: {
  url: string;
  localAddress?: string;
  headers?: Record<string, string>;
  timeoutMs?: number;
}): Promise<{ status: number; body: string } | { error: string }> {
  return new Promise((resolve) => {
    const r = http.get(
      req.url,
      { localAddress: req.localAddress, headers: { connection: 'close', ...req.headers }, timeout: req.timeoutMs ?? 3000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', (err) => resolve({ error: err.message }));
      },
    );
    r.on('timeout', () => r.destroy(new Error('timeout')));
    r.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
  });
}

async function handle(msg: Record<string, unknown>): Promise<Record<string, unknown>> {
  switch (msg.op) {
    case 'tcp':
      return { ...(await tcp(msg as unknown as TcpRequest)) };
    case 'tcpMany': {
      const results: TcpResult[] = [];
      const count = Number(msg.count);
      // A few at a time: fast, but no burst that would look like a flood on a loaded machine.
      for (let i = 0; i < count; i += 5) {
        const batch = Array.from({ length: Math.min(5, count - i) }, () => tcp(msg as unknown as TcpRequest));
        results.push(...(await Promise.all(batch)));
      }
      return { results };
    }
    case 'http':
      return { ...(await get(msg as unknown as { url: string })) };
    default:
      return { error: `unknown op ${String(msg.op)}` };
  }
}

if (require.main === module) {
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const msg = JSON.parse(line) as Record<string, unknown>;
    void handle(msg).then((r) => process.stdout.write(`${JSON.stringify({ id: msg.id, ...r })}\n`));
  });
  rl.on('close', () => process.exit(0));
  process.stdout.write('{"ready":true}\n');
}
