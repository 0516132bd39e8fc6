/**
 * A WebSocket client by hand (RFC 6455) over a plain socket, for tests through ipgate: the upgrade
 * request, and a reader of what comes back (the HTTP head, then frames). The backend is usually
 * the built-in echo (src/echo/echo-server.ts createHttpEcho), whose first message reports what it
 * received.
 */
import crypto from 'node:crypto';
import type net from 'node:net';
import { wsParse, type WsMessage } from '../../src/echo/echo-server';

/** An upgrade request for `path` on `host`, with `extra` header lines; `key` is its Sec-WebSocket-Key. */
export function wsHandshake(path = '/chat', extra = '', host = 'ws.example'): { text: string; key: string } {
  const key = crypto.randomBytes(16).toString('base64');
  return {
    key,
    text:
      `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`,
  };
}

/** Everything a socket receives, buffered: the HTTP head first, then WebSocket frames. */
export class WsReader {
  private buf = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | null = null;
  constructor(socket: net.Socket) {
    socket.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      this.wake?.();
    });
    socket.on('close', () => {
      this.ended = true;
      this.wake?.();
    });
    socket.on('error', () => undefined);
  }

  private async more(deadline: number, what: string): Promise<void> {
    if (this.ended) throw new Error(`${what}: closed; got ${JSON.stringify(this.buf.toString('latin1').slice(0, 200))}`);
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`${what}: timeout`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, left);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
    });
  }

  async head(ms = 5000): Promise<string> {
    const deadline = Date.now() + ms;
    for (;;) {
      const i = this.buf.indexOf('\r\n\r\n');
      if (i >= 0) {
        const text = this.buf.subarray(0, i + 4).toString('latin1');
        this.buf = this.buf.subarray(i + 4);
        return text;
      }
      await this.more(deadline, 'head');
    }
  }

  async messages(n: number, ms = 5000): Promise<WsMessage[]> {
    const deadline = Date.now() + ms;
    const got: WsMessage[] = [];
    for (;;) {
      const r = wsParse(this.buf);
      if (r === null) throw new Error('bad frame');
      got.push(...r.messages);
      this.buf = Buffer.from(r.rest);
      if (got.length >= n) return got;
      await this.more(deadline, `${n} messages`);
    }
  }
}
