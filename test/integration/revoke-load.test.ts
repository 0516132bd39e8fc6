/**
 * Under load (loopback TCP streams and HTTP keep-alive requests from allowed clients, running the
 * whole time), 100 allowlist updates through the admin API cause no failed connection or request
 * for allowed clients. Each removal's enforcement is measured from the client's side: the time from
 * the acknowledgement reaching the updater to the removed client's open stream being closed (negative:
 * the stream was cut before the acknowledgement arrived, as the matcher is swapped and live
 * connections revoked before the response is sent).
 *
 * ipgate runs as the compiled binary in its own process (file store, fsync per write), so the load
 * generator in this process does not compete with it for the event loop and the numbers are ipgate's.
 */
import http from 'node:http';
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { request, TOKEN } from '../helpers/admin-api';
import { countingBackend } from '../helpers/http';
import { spawnIpgate, tmpDir } from '../helpers/ipgate';
import { connect, freePort, readLine, readUntil, waitFor } from '../helpers/net';
import { tcpEcho } from '../helpers/echo';

const UPDATES = 100;
const TCP_WORKERS = 6;
const HTTP_WORKERS = 4;
const VICTIM = '127.0.0.200';

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function get(agent: http.Agent, port: number, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', agent, localAddress }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.setTimeout(5000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

t.test('100 updates under load: no failure for allowed clients; write-to-enforcement measured', async (t) => {
  const echo = await tcpEcho(t);
  const web = await countingBackend();
  t.teardown(() => web.close());
  const [adminPort, tcpPort, webPort] = [await freePort(), await freePort(), await freePort()];
  const dir = tmpDir('ipgate-load-');
  const proc = spawnIpgate(
    [],
    {
      logging: { level: 'warn', access: false },
      store: { type: 'file', path: path.join(dir, 'allowlists.json') },
      admin: { listen: `127.0.0.1:${adminPort}` },
      allowlists: { main: ['127.0.0.0/28', `${VICTIM}/32`] },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: `127.0.0.1:${tcpPort}`,
          allowlist: 'main',
          upstreams: [`127.0.0.1:${echo}`],
          outboundProxyProtocol: 'v1',
        },
        { name: 'web', mode: 'http', listen: `127.0.0.1:${webPort}`, allowlist: 'main', upstreams: [`127.0.0.1:${web.port}`] },
      ],
    },
    { IPGATE_ADMIN_TOKEN: TOKEN },
  );
  t.teardown(async () => {
    if (proc.child.exitCode === null) {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  });
  const base = `http://127.0.0.1:${adminPort}`;
  await waitFor(
    async () => {
      if (proc.child.exitCode !== null) throw new Error(`ipgate exited: ${proc.stderr()}${proc.stdout()}`);
      return request(base, 'GET', '/readyz', { token: null }).then(
        (r) => r.status === 200,
        () => false,
      );
    },
    10_000,
    'ipgate ready',
  );
  const g = {
    port: (name: string) => (name === 'tcp' ? tcpPort : webPort),
    api: (m: string, u: string, o?: Parameters<typeof request>[3]) => request(base, m, u, o),
  };
  const stats = { tcpOk: 0, httpOk: 0, failures: [] as string[] };
  let running = true;

  const tcpWorker = async (k: number): Promise<void> => {
    const from = `127.0.0.${2 + k}`;
    while (running) {
      try {
        const s = await connect({ port: g.port('tcp'), localAddress: from });
        await readLine(s, 5000);
        s.write('payload\n');
        await readUntil(s, 'payload\n', 5000);
        s.destroy();
        stats.tcpOk++;
      } catch (err) {
        stats.failures.push(`tcp ${from}: ${(err as Error).message}`);
      }
    }
  };
  const httpWorker = async (k: number): Promise<void> => {
    const from = `127.0.0.${10 + k}`;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    while (running) {
      try {
        const status = await get(agent, g.port('web'), from);
        if (status !== 200) stats.failures.push(`http ${from}: HTTP ${status}`);
        else stats.httpOk++;
      } catch (err) {
        stats.failures.push(`http ${from}: ${(err as Error).message}`);
      }
    }
    agent.destroy();
  };
  const workers = [
    ...Array.from({ length: TCP_WORKERS }, (_, k) => tcpWorker(k)),
    ...Array.from({ length: HTTP_WORKERS }, (_, k) => httpWorker(k)),
  ];

  const fromAck: number[] = [];
  const fromSend: number[] = [];
  const writeMs: number[] = [];
  let notCut = 0;
  const started = Date.now();
  for (let i = 0; i < UPDATES; i++) {
    if (i % 2 === 0) {
      // The victim holds an open stream; the update removes it.
      const v = await connect({ port: g.port('tcp'), localAddress: VICTIM });
      await readLine(v, 5000);
      const cut = new Promise<number>((resolve) => v.once('close', () => resolve(performance.now())));
      v.on('error', () => undefined);
      const sent = performance.now();
      const r = await g.api('DELETE', `/v1/allowlists/main/entries/${VICTIM}%2F32`);
      const acked = performance.now();
      if (r.status !== 200) throw new Error(`update ${i}: HTTP ${r.status} ${r.text}`);
      const closedAt = await Promise.race([cut, new Promise<number>((res) => setTimeout(() => res(-1), 1000))]);
      if (closedAt < 0) {
        notCut++;
        v.destroy();
        continue;
      }
      fromAck.push(closedAt - acked);
      fromSend.push(closedAt - sent);
      writeMs.push(acked - sent);
    } else {
      const sent = performance.now();
      const r = await g.api('POST', '/v1/allowlists/main/entries', {
        body: { entries: [{ cidr: `${VICTIM}/32`, comment: `round ${i}` }] },
      });
      writeMs.push(performance.now() - sent);
      if (r.status !== 200) throw new Error(`update ${i}: HTTP ${r.status} ${r.text}`);
    }
  }
  const updatesSeconds = (Date.now() - started) / 1000;
  running = false;
  await Promise.all(workers);

  t.equal(notCut, 0, "every removed client's stream was cut within 1 s of the acknowledgement");
  t.same(stats.failures.slice(0, 5), [], `no failed connection or request for allowed clients (${stats.failures.length} failures)`);
  t.ok(stats.tcpOk > 50 && stats.httpOk > 50, `load ran throughout: ${stats.tcpOk} TCP streams, ${stats.httpOk} HTTP requests`);
  const audit = await g.api('GET', '/v1/audit?limit=1000');
  t.equal(audit.json.records.length, UPDATES, 'every update audited');
  t.ok(fs.existsSync(path.join(dir, 'allowlists.json')));
  for (const a of [fromAck, fromSend, writeMs]) a.sort((x, y) => x - y);
  const f = (n: number): string => n.toFixed(2);
  t.comment(
    `write -> enforcement (removed client's stream closed), from the acknowledgement: p50 ${f(pct(fromAck, 50))} ms, p99 ${f(pct(fromAck, 99))} ms, max ${f(fromAck[fromAck.length - 1]!)} ms (negative: cut before the ack arrived)`,
  );
  t.comment(
    `from the request being sent: p50 ${f(pct(fromSend, 50))} ms, p99 ${f(pct(fromSend, 99))} ms; acknowledged write round trip p50 ${f(pct(writeMs, 50))} ms, p99 ${f(pct(writeMs, 99))} ms`,
  );
  t.comment(
    `${UPDATES} updates in ${updatesSeconds.toFixed(1)} s under load (${(UPDATES / updatesSeconds).toFixed(0)}/s); load: ${stats.tcpOk} TCP streams, ${stats.httpOk} HTTP requests`,
  );
  t.ok(pct(fromAck, 99) < 1000, 'p99 under 1 s');
});
