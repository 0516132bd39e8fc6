/**
 * Bulk data for TCP relay tests: deterministic pseudo-random blocks (a chunk overwritten, dropped
 * or reordered by the proxy changes the hash), a sender with backpressure and a receiver that
 * hashes what arrives, optionally pausing at random so the proxy's writes to it pend.
 */
import crypto from 'node:crypto';
import type net from 'node:net';
import { prng } from './prng';

/** `n` bytes of xorshift32 output seeded by `seed`. */
export function patternBlock(seed: number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i + 4 <= n; i += 4) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    b.writeUInt32LE(x, i);
  }
  return b;
}

/** Write `total` bytes cycling through `blocks` with backpressure, then end; resolve with their sha256 once ended. */
export function sendBlocks(socket: net.Socket, total: number, blocks: readonly Buffer[]): Promise<string> {
  const hash = crypto.createHash('sha256');
  let sent = 0;
  let i = 0;
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    const pump = (): void => {
      while (sent < total) {
        const b = blocks[i++ % blocks.length]!;
        const chunk = total - sent < b.length ? b.subarray(0, total - sent) : b;
        hash.update(chunk);
        sent += chunk.length;
        if (!socket.write(chunk)) {
          socket.once('drain', pump);
          return;
        }
      }
      socket.end(() => resolve(hash.digest('hex')));
    };
    pump();
  });
}

/**
 * Read to the end; resolve with the byte count and sha256. With `pauseSeed`, pause for 0-3 ms
 * after ~30% of the chunks (seeded, reproducible).
 */
export function receiveAll(socket: net.Socket, pauseSeed?: number): Promise<{ bytes: number; sha: string }> {
  const hash = crypto.createHash('sha256');
  const rand = pauseSeed === undefined ? null : prng(pauseSeed);
  let bytes = 0;
  return new Promise((resolve, reject) => {
    socket.on('data', (c: Buffer) => {
      bytes += c.length;
      hash.update(c);
      if (rand !== null && rand() < 0.3) {
        socket.pause();
        setTimeout(() => socket.resume(), Math.floor(rand() * 4));
      }
    });
    socket.once('error', reject);
    socket.once('end', () => resolve({ bytes, sha: hash.digest('hex') }));
  });
}
