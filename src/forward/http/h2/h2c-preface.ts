/**
 * h2c with prior knowledge (RFC 9113 3.3) on a plaintext listener that opts in
 * (`http.http2.cleartext`): a connection is HTTP/2 when its first 24 bytes are the client
 * preface, `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`, and HTTP/1.x otherwise. The bytes read to tell are
 * handed to the engine that serves the connection, nothing lost. Most connections are told by
 * their first read (an HTTP/1.1 method is never a prefix of "PRI * HTTP/2.0" but for a method
 * named PRI, which llhttp refuses anyway); a client that sends a prefix and stops is closed after
 * http.requestHeaderTimeoutMs, as a request head that stops would be.
 */
import { Buffer } from 'node:buffer';
import type net from 'node:net';

export const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * true: the bytes so far are the whole preface; false: they cannot be one; null: a prefix of it,
 * read on.
 */
export function prefaceState(buf: Buffer): boolean | null {
  const n = Math.min(buf.length, H2_PREFACE.length);
  if (buf.compare(H2_PREFACE, 0, n, 0, n) !== 0) return false;
  return n === H2_PREFACE.length ? true : null;
}

/**
 * Read `socket` (paused) until the preface is seen or ruled out, then `done(isH2, bytes)` with
 * everything read (the socket paused again); `isH2` null: the socket closed or timed out first.
 */
export function sniffPreface(
  socket: net.Socket,
  leftover: Buffer,
  timeoutMs: number,
  done: (isH2: boolean | null, bytes: Buffer) => void,
): void {
  let buf = leftover;
  const first = buf.length > 0 ? prefaceState(buf) : null;
  if (first !== null) {
    done(first, buf);
    return;
  }
  const finish = (isH2: boolean | null): void => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('close', onClose);
    socket.pause();
    done(isH2, buf);
  };
  const onData = (d: Buffer): void => {
    buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
    const st = prefaceState(buf);
    if (st !== null) finish(st);
  };
  const onClose = (): void => finish(null);
  const timer = setTimeout(finish, timeoutMs, null);
  socket.on('data', onData);
  socket.once('close', onClose);
  socket.resume();
}
