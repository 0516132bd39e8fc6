/**
 * SIGKILL at random moments during a stream of updates never leaves a corrupt or partial store file:
 * after a restart the list equals the last acknowledged version, or, when a write was in flight at
 * the kill, the version that write would have produced (it may have reached the disk before its
 * acknowledgement did: "acknowledged" promises durability, not that nothing newer exists). Nothing
 * else is allowed: no older version (a lost acknowledged write), no mix, no parse error.
 *
 * The compiled binary (dist/src/main.js) runs with a file store; one updater client sends PUTs (with
 * If-Match) and POSTs one at a time, so at most one write is in flight. Time-boxed to ~20 s with the restarts.
 */
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import type { AllowEntry } from '../../src/allowlist/entry';
import { parseDocument, revisionOf } from '../../src/store/document';
import { request, TOKEN } from '../helpers/admin-api';
import { MAIN, spawnIpgate, tmpDir, type Spawned } from '../helpers/ipgate';
import { freePort, waitFor } from '../helpers/net';

const TIME_BOX_MS = 14_000;
const UPDATES = 1000;

interface Acked {
  version: string;
  entries: AllowEntry[];
}

async function start(dir: string, adminPort: number): Promise<Spawned> {
  const proc = spawnIpgate(
    [],
    {
      logging: { level: 'warn' },
      store: { type: 'file', path: path.join(dir, 'allowlists.json') },
      admin: { listen: `127.0.0.1:${adminPort}` },
      allowlists: { main: ['127.0.0.1/32'] },
      listeners: [{ name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] }],
    },
    { IPGATE_ADMIN_TOKEN: TOKEN },
  );
  const base = `http://127.0.0.1:${adminPort}`;
  try {
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
  } catch (err) {
    // A start that never got ready must not keep the test process alive until tap's timeout
    // (the primary's worker exits with it).
    proc.child.kill('SIGKILL');
    throw err;
  }
  return proc;
}

/** One update: PUT a fresh small list (even i) or POST one entry (odd i). Returns the expected result. */
function nextUpdate(
  i: number,
  last: Acked,
): { method: string; url: string; body: unknown; headers: Record<string, string>; expect: AllowEntry[] } {
  if (i % 2 === 0) {
    const entries = [{ cidr: `10.${(i >> 8) & 255}.${i & 255}.0/24`, comment: `put ${i}` }, { cidr: '127.0.0.1/32' }];
    return { method: 'PUT', url: '/v1/allowlists/main', body: { entries }, headers: { 'if-match': `"${last.version}"` }, expect: entries };
  }
  const entry = { cidr: `172.16.${(i >> 8) & 255}.${i & 255}/32`, comment: `post ${i}` };
  return { method: 'POST', url: '/v1/allowlists/main/entries', body: { entries: [entry] }, headers: {}, expect: [...last.entries, entry] };
}

function send(
  agent: http.Agent,
  port: number,
  method: string,
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; json: { version: string; entries: AllowEntry[] } }> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: url,
        agent,
        headers: { ...headers, authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': payload.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString()) });
          } catch (err) {
            reject(err);
          }
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

t.test(
  'SIGKILL during a stream of updates: the file is whole and holds the last acknowledged version (or the in-flight one)',
  async (t) => {
    t.ok(fs.existsSync(MAIN), 'compiled binary present (npx tsc -p tsconfig.json)');
    const dir = tmpDir('ipgate-crash-');
    const file = path.join(dir, 'allowlists.json');
    const adminPort = await freePort();
    const began = Date.now();
    let runs = 0;
    let totalAcked = 0;
    const outcomes = { acked: 0, inFlight: 0 };
    let streamMs = 0;

    while (runs < 3 || (Date.now() - began < TIME_BOX_MS && runs < 15)) {
      runs++;
      const proc = await start(dir, adminPort);
      const cur = await request(`http://127.0.0.1:${adminPort}`, 'GET', '/v1/allowlists/main');
      let last: Acked = { version: cur.json.version, entries: cur.json.entries };
      let inflight: AllowEntry[] | null = null;
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      // The kill lands at a random moment in the stream (each write costs two fsyncs, ~10 ms here,
      // so a stream of 1,000 would outlast the time box: it is cut long before its end).
      const killAfterMs = 20 + Math.random() * 2500;
      const t0 = Date.now();
      let acked = 0;
      const updater = (async () => {
        for (let i = 0; i < UPDATES; i++) {
          const u = nextUpdate(runs * UPDATES + i, last);
          inflight = u.expect;
          let r: Awaited<ReturnType<typeof send>>;
          try {
            r = await send(agent, adminPort, u.method, u.url, u.body, u.headers);
          } catch {
            return; // killed
          }
          if (r.status !== 200) throw new Error(`update ${i}: HTTP ${r.status} ${JSON.stringify(r.json)}`);
          if (JSON.stringify(r.json.entries) !== JSON.stringify(u.expect)) throw new Error(`update ${i}: unexpected list`);
          last = { version: r.json.version, entries: r.json.entries };
          inflight = null;
          acked++;
        }
      })();
      await Promise.race([new Promise((r) => setTimeout(r, killAfterMs)), updater]);
      proc.child.kill('SIGKILL');
      streamMs += Date.now() - t0;
      await proc.exited;
      await updater;
      agent.destroy();
      totalAcked += acked;

      const parsed = parseDocument(fs.readFileSync(file, 'utf8'));
      t.ok(parsed.ok, `run ${runs}: the file parses and validates (${parsed.ok ? 'ok' : parsed.reason})`);
      if (!parsed.ok) break;
      const onDisk = parsed.lists.get('main')!;
      const isAcked = onDisk.version === last.version && JSON.stringify(onDisk.entries) === JSON.stringify(last.entries);
      const isInFlight =
        inflight !== null &&
        revisionOf(onDisk.version) === revisionOf(last.version) + 1 &&
        JSON.stringify(onDisk.entries) === JSON.stringify(inflight);
      t.ok(
        isAcked || isInFlight,
        `run ${runs}: killed after ${acked} acknowledged updates; file = ${isAcked ? 'last acknowledged' : isInFlight ? 'the in-flight write' : `unexpected ${onDisk.version} (last acked ${last.version})`}`,
      );
      if (isAcked) outcomes.acked++;
      else if (isInFlight) outcomes.inFlight++;
      t.same(fs.readdirSync(dir).filter((n) => n.startsWith('.')).length <= 1, true, `run ${runs}: at most the one interrupted temp file`);
    }

    // A restart on the last file serves exactly what the file holds.
    const proc = await start(dir, adminPort);
    const parsed = parseDocument(fs.readFileSync(file, 'utf8'));
    const got = await request(`http://127.0.0.1:${adminPort}`, 'GET', '/v1/allowlists/main');
    t.equal(got.headers.etag, `"${parsed.ok ? parsed.lists.get('main')!.version : ''}"`, "after restart the API serves the file's version");
    t.same(
      fs.readdirSync(dir).filter((n) => n.startsWith('.')),
      [],
      'temp files of interrupted writes removed at start',
    );
    proc.child.kill('SIGTERM');
    await once(proc.child, 'exit');
    t.comment(
      `${runs} kill -9 runs, ${totalAcked} acknowledged updates; file = last acked ${outcomes.acked}x, in-flight ${outcomes.inFlight}x; ` +
        `throughput ${(totalAcked / (streamMs / 1000)).toFixed(0)} acknowledged updates/s (one client, one write in flight, fsync per write)`,
    );
    t.ok(outcomes.acked + outcomes.inFlight === runs, 'every run ended on an allowed version');
  },
);
