/**
 * Bytes allocated on the JS heap per HTTP/1.1 keep-alive request (issue 31's budget): a denied
 * request (403 from the allowlist, kept alive) at most 600 bytes, an allowed one relayed to a
 * backend at most 2,500 (main before the issue: ~1,100 and ~6,100 on Node 20; 500 and 2,209 when
 * the budget was last lowered: bench/README.md "Repeated head pieces"). Measured by the
 * benchmark's own tool, exactly (bench/load/alloc-probe.ts: a full collection at both ends of the
 * window, the heap's used bytes before and after each collection between), over real loopback
 * sockets with the compiled build: bench/README.md "Allocation per request (issue 31)". Bytes do
 * not depend on the machine's load, so a bound can hold on a shared machine; a change that adds a
 * closure, an object or a string per request shows here before it shows in a benchmark.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/ipgate';

const BENCH = path.join(ROOT, 'dist/bench/load/denied-instructions.js');

function bytesPerRequest(allowed: boolean): Promise<number> {
  const args = [BENCH, '--alloc', '--requests', '20000', '--warmup', '20000', '--connections', '20'];
  if (allowed) args.push('--allowed');
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { timeout: 240_000 }, (err, stdout, stderr) => {
      if (err) {
        reject(new Error(`${String(err)}\n${stderr}`));
        return;
      }
      const m = / (\d+) bytes\/request allocated/.exec(stdout);
      if (m === null) reject(new Error(`no measurement in: ${stdout}${stderr}`));
      else resolve(Number(m[1]));
    });
  });
}

t.test('a denied keep-alive request allocates at most 600 bytes', async (t) => {
  const bytes = await bytesPerRequest(false);
  t.ok(bytes > 0, `measured ${bytes} bytes per request`);
  t.ok(bytes <= 600, `denied: ${bytes} bytes per request (budget 600)`);
});

t.test('an allowed keep-alive request relayed to a backend allocates at most 2,500 bytes', async (t) => {
  const bytes = await bytesPerRequest(true);
  t.ok(bytes > 0, `measured ${bytes} bytes per request`);
  t.ok(bytes <= 2500, `allowed: ${bytes} bytes per request (budget 2,500)`);
});
