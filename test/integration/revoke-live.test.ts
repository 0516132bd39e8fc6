/**
 * Live apply + revoke over real sockets: an allowlist write through the admin API closes the open
 * TCP stream and the open HTTP keep-alive connection of clients it no longer allows, within 1 s of
 * the acknowledgement, and leaves still-allowed clients undisturbed. Entries with expiresAt stop
 * matching (and their connections are cut) at that time without any request.
 */
import type net from 'node:net';
import t, { type Test } from 'tap';
import { startAdminGate, type AdminGate } from '../helpers/admin-api';
import { countingBackend } from '../helpers/http';
import { closed, connect, readAll, readLine, readUntil } from '../helpers/net';
import { tcpEcho } from '../helpers/echo';

async function gate(t: Test, allow: unknown[]): Promise<AdminGate> {
  const echo = await tcpEcho(t);
  const web = await countingBackend();
  t.teardown(() => web.close());
  return startAdminGate(t, {
    allowlists: { main: allow },
    listeners: [
      { name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${echo}`], outboundProxyProtocol: 'v1' },
      { name: 'web', mode: 'http', listen: '127.0.0.1:0', allowlist: 'main', upstreams: [`127.0.0.1:${web.port}`] },
    ],
  });
}

/** A TCP stream through ipgate that has proven it works (echo line + payload round trip). */
async function tcpStream(g: AdminGate, from: string): Promise<net.Socket> {
  const s = await connect({ port: g.port('tcp'), localAddress: from });
  const line = await readLine(s);
  if (!line.includes(`client=${from}:`)) throw new Error(`unexpected echo line ${line}`);
  s.write('ping\n');
  await readUntil(s, 'ping\n');
  return s;
}

/** An HTTP/1.1 keep-alive connection that has completed one request and stays open. */
async function keepAlive(g: AdminGate, from: string): Promise<net.Socket> {
  const s = await connect({ port: g.port('web'), localAddress: from });
  s.write('GET / HTTP/1.1\r\nHost: a\r\n\r\n');
  const head = (await readUntil(s, 'ok\n')).toString();
  if (!/^HTTP\/1\.1 200 /.test(head) || /connection: close/i.test(head)) throw new Error(`unexpected response ${head}`);
  return s;
}

t.test(
  'removing entries through the API cuts the TCP stream and the HTTP keep-alive connection within 1 s; others keep theirs',
  async (t) => {
    const g = await gate(t, ['127.0.0.3/32', '127.0.0.4/32', '127.0.0.5/32', '127.0.0.6/32']);
    const tcpGone = await tcpStream(g, '127.0.0.3');
    const tcpKept = await tcpStream(g, '127.0.0.4');
    const httpGone = await keepAlive(g, '127.0.0.5');
    const httpKept = await keepAlive(g, '127.0.0.6');
    let keptClosed = false;
    for (const s of [tcpKept, httpKept]) s.once('close', () => (keptClosed = true));

    const tcpClosed = closed(tcpGone, 5000);
    const httpClosed = closed(httpGone, 5000);
    const cur = await g.api('GET', '/v1/allowlists/main');
    const put = await g.api('PUT', '/v1/allowlists/main', {
      headers: { 'if-match': cur.headers.etag! },
      body: { entries: [{ cidr: '127.0.0.4/32' }, { cidr: '127.0.0.6/32' }] },
    });
    t.equal(put.status, 200);
    const acked = Date.now();
    await tcpClosed;
    const tcpMs = Date.now() - acked;
    await httpClosed;
    const httpMs = Date.now() - acked;
    t.ok(tcpMs < 1000, `TCP stream cut ${tcpMs} ms after the acknowledgement`);
    t.ok(httpMs < 1000, `HTTP keep-alive connection cut ${httpMs} ms after the acknowledgement`);

    t.equal(keptClosed, false, 'the still-allowed connections were not closed');
    tcpKept.write('still here\n');
    t.equal((await readUntil(tcpKept, 'still here\n')).toString(), 'still here\n', 'the still-allowed TCP stream carries on');
    httpKept.write('GET /again HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    t.match((await readAll(httpKept)).toString(), /^HTTP\/1\.1 200 /, 'the still-allowed keep-alive connection serves its next request');
    t.equal(g.app.listeners[0]!.stats.denied.get('revoked'), 1, 'TCP revocation counted');
    t.equal(g.app.listeners[1]!.stats.denied.get('revoked'), 1, 'HTTP revocation counted');
    tcpKept.destroy();

    // New connections from the removed clients are denied at once.
    const again = await connect({ port: g.port('tcp'), localAddress: '127.0.0.3' });
    t.equal((await readAll(again)).length, 0, 'a new TCP connection from the removed client is closed');
    const web = await connect({ port: g.port('web'), localAddress: '127.0.0.5' });
    web.write('GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n');
    t.match((await readAll(web)).toString(), /^HTTP\/1\.1 403 /, 'a new HTTP request from the removed client gets 403');
  },
);

t.test('DELETE of one entry cuts only that client', async (t) => {
  const g = await gate(t, ['127.0.0.3/32', '127.0.0.0/24']);
  const a = await tcpStream(g, '127.0.0.3');
  const b = await tcpStream(g, '127.0.0.4');
  // 127.0.0.3 stays allowed by the /24: removing its /32 must not cut it.
  const del = await g.api('DELETE', '/v1/allowlists/main/entries/127.0.0.3%2F32');
  t.equal(del.status, 200);
  a.write('x\n');
  t.equal((await readUntil(a, 'x\n')).toString(), 'x\n', 'still allowed by the wider entry: not disturbed');
  const aClosed = closed(a, 5000);
  const bClosed = closed(b, 5000);
  const del2 = await g.api('DELETE', '/v1/allowlists/main/entries/127.0.0.0%2F24');
  t.equal(del2.status, 200);
  const acked = Date.now();
  await Promise.all([aClosed, bClosed]);
  t.ok(Date.now() - acked < 1000, `both cut within ${Date.now() - acked} ms`);
});

t.test('an entry with expiresAt stops matching then: its open stream is cut, new connections denied', async (t) => {
  const expires = new Date(Date.now() + 1500);
  const g = await gate(t, [{ cidr: '127.0.0.7/32', expiresAt: expires.toISOString() }, '127.0.0.8/32']);
  const s = await tcpStream(g, '127.0.0.7');
  const kept = await tcpStream(g, '127.0.0.8');
  const http = await keepAlive(g, '127.0.0.7');
  await Promise.all([closed(s, 5000), closed(http, 5000)]);
  const late = Date.now() - expires.getTime();
  t.ok(late >= -5 && late < 1000, `cut ${late} ms after expiresAt`);
  const again = await connect({ port: g.port('tcp'), localAddress: '127.0.0.7' });
  t.equal((await readAll(again)).length, 0, 'new connection denied after expiry');
  kept.write('y\n');
  t.equal((await readUntil(kept, 'y\n')).toString(), 'y\n', 'the unexpired client is not disturbed');
  const chk = await g.api('GET', '/v1/allowlists/main/check?ip=127.0.0.7');
  t.equal(chk.json.allowed, false, 'check agrees');
  kept.destroy();
});
