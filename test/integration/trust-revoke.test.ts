/**
 * Trust withdrawn live: when the named list behind `http.trustedProxies` or
 * `proxyProtocol.trustedSources` stops trusting a peer (an admin API write), the open connections
 * whose client that peer named (by X-Forwarded-For, by a PROXY header) are closed with
 * `trust_revoked`, within 1 s of the acknowledgement; connections through peers still trusted,
 * and direct ones, carry on; the peer's next connection is an untrusted one.
 */
import type net from 'node:net';
import t, { type Test } from 'tap';
import { startAdminGate, type AdminGate } from '../helpers/admin-api';
import { countingBackend } from '../helpers/http';
import { closed, connect, readAll, readLine, readUntil, waitFor } from '../helpers/net';
import { tcpEcho } from '../helpers/echo';

async function gate(t: Test): Promise<AdminGate> {
  const echo = await tcpEcho(t);
  const web = await countingBackend();
  t.teardown(() => web.close());
  return startAdminGate(t, {
    allowlists: {
      main: ['127.0.0.9/32', '192.0.2.7/32', '127.0.0.5/32'],
      proxies: ['127.0.0.2/32', '127.0.0.3/32'],
      balancers: ['127.0.0.3/32', '127.0.0.4/32'],
    },
    listeners: [
      {
        name: 'web',
        mode: 'http',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [`127.0.0.1:${web.port}`],
        http: { trustedProxies: 'proxies' },
      },
      {
        name: 'tcp',
        mode: 'tcp',
        listen: '127.0.0.1:0',
        allowlist: 'main',
        upstreams: [`127.0.0.1:${echo}`],
        outboundProxyProtocol: 'v1',
        proxyProtocol: { mode: 'optional', trustedSources: 'balancers' },
      },
    ],
  });
}

const XFF = 'X-Forwarded-For: 127.0.0.9\r\n';
const HEADER = 'PROXY TCP4 192.0.2.7 127.0.0.1 5555 80\r\n';

/** A keep-alive connection from `from` (a proxy speaking for 127.0.0.9) that has had one 200. */
async function keepAlive(g: AdminGate, from: string): Promise<net.Socket> {
  const s = await connect({ port: g.port('web'), localAddress: from });
  s.write(`GET / HTTP/1.1\r\nHost: a\r\n${XFF}\r\n`);
  const head = (await readUntil(s, 'ok\n')).toString();
  if (!/^HTTP\/1\.1 200 /.test(head)) throw new Error(`unexpected response ${head}`);
  return s;
}

/**
 * A TCP stream from `from`, `header` first; proven by the echo's line naming `client`. Something
 * is sent at once: with `optional` the listener reads every peer's first bytes to tell a header
 * from none.
 */
async function stream(g: AdminGate, from: string, header: string, client: string): Promise<net.Socket> {
  const s = await connect({ port: g.port('tcp'), localAddress: from });
  s.write(`${header}hi\n`);
  const line = await readLine(s);
  if (!line.includes(`client=${client}:`)) throw new Error(`unexpected echo line ${line}`);
  await readUntil(s, 'hi\n');
  return s;
}

async function untrust(g: AdminGate, list: string, cidr: string): Promise<number> {
  const del = await g.api('DELETE', `/v1/allowlists/${list}/entries/${encodeURIComponent(cidr)}`);
  if (del.status !== 200) throw new Error(`DELETE ${list} ${cidr}: ${del.status} ${del.text}`);
  return Date.now();
}

t.test("a proxy removed from http.trustedProxies: its keep-alive connection closes; another proxy's carries on", async (t) => {
  const g = await gate(t);
  const gone = await keepAlive(g, '127.0.0.2');
  const kept = await keepAlive(g, '127.0.0.3');
  let keptClosed = false;
  kept.once('close', () => (keptClosed = true));
  const goneClosed = closed(gone, 5000);
  const acked = await untrust(g, 'proxies', '127.0.0.2/32');
  await goneClosed;
  const ms = Date.now() - acked;
  t.ok(ms < 1000, `closed ${ms} ms after the acknowledgement`);
  const web = g.app.listeners[0]!;
  await waitFor(() => web.stats.closed.get('trust_revoked') === 1, 3000, 'counted as trust_revoked');
  t.equal(keptClosed, false, "the still-trusted proxy's connection was not closed");
  kept.write(`GET /again HTTP/1.1\r\nHost: a\r\n${XFF}Connection: close\r\n\r\n`);
  t.match((await readAll(kept)).toString(), /^HTTP\/1\.1 200 /, 'it serves its next request, X-Forwarded-For still believed');
  const again = await connect({ port: g.port('web'), localAddress: '127.0.0.2' });
  again.write(`GET / HTTP/1.1\r\nHost: a\r\n${XFF}Connection: close\r\n\r\n`);
  t.match((await readAll(again)).toString(), /^HTTP\/1\.1 403 /, "the removed proxy's new connection: its own address decides (403)");
});

t.test('a balancer removed from proxyProtocol.trustedSources: the streams its PROXY header named close; others carry on', async (t) => {
  const g = await gate(t);
  const gone = await stream(g, '127.0.0.3', HEADER, '192.0.2.7');
  const keptByHeader = await stream(g, '127.0.0.4', HEADER, '192.0.2.7');
  const direct = await stream(g, '127.0.0.5', '', '127.0.0.5');
  let keptClosed = false;
  for (const s of [keptByHeader, direct]) s.once('close', () => (keptClosed = true));
  const goneClosed = closed(gone, 5000);
  const acked = await untrust(g, 'balancers', '127.0.0.3/32');
  await goneClosed;
  const ms = Date.now() - acked;
  t.ok(ms < 1000, `closed ${ms} ms after the acknowledgement`);
  const tcp = g.app.listeners[1]!;
  await waitFor(() => tcp.stats.closed.get('trust_revoked') === 1, 3000, 'counted as trust_revoked');
  t.equal(keptClosed, false, "the still-trusted balancer's stream and the direct one were not closed");
  for (const s of [keptByHeader, direct]) {
    s.write('still here\n');
    t.equal((await readUntil(s, 'still here\n')).toString().endsWith('still here\n'), true, 'it carries on');
    s.destroy();
  }
  const again = await connect({ port: g.port('tcp'), localAddress: '127.0.0.3' });
  again.write(HEADER);
  t.equal((await readAll(again)).length, 0, "the removed balancer's new PROXY header is refused (pp_untrusted)");
  await waitFor(() => (tcp.stats.closed.get('pp_untrusted') ?? 0) === 1, 3000, 'counted as pp_untrusted');
});
