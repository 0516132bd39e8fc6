/** Loopback port helpers shared by the load benchmarks (bench/load/*.ts). */
import net from 'node:net';

/** A port free on 127.0.0.1 right now (the kernel's choice for port 0). */
export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}

/** Resolve once 127.0.0.1:`port` accepts a connection; throw after `ms`. */
export async function waitPort(port: number, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} not listening`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
