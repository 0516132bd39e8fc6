/**
 * The config watcher (src/config/watch.ts), reloaded as SIGHUP does, against a real file:
 * - a change outside the lists and routes is "applied at the next restart" once; its revert says
 *   nothing is pending any more (it used to say "applied at the next restart" again: the comparison
 *   was with the previous file, not with the config running);
 * - each reload's outcome is recorded per source (config/reload-status.ts): a refused edit
 *   (`10.20.0.0/33`) sets the file's gauge to 0 and keeps its last success time; a good one sets 1.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { loadConfigFile } from '../../../src/config/load';
import { ReloadStatus } from '../../../src/config/reload-status';
import { ConfigWatcher } from '../../../src/config/watch';
import { createLogger } from '../../../src/log';
import { LogCapture } from '../../helpers/ipgate';

const config = (workers: number, cidr = '10.20.0.0/16'): string => `workers: ${workers}
allowlists:
  office: {source: config, entries: [${cidr}]}
listeners:
  - name: web
    listen: "127.0.0.1:0"
    allowlist: office
    upstreams: ["127.0.0.1:7100"]
`;

t.test('a change outside the lists, then its revert: one "next restart" warning, then "nothing waits"', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-watch-'));
  const file = path.join(dir, 'ipgate.yaml');
  fs.writeFileSync(file, config(1));
  const logs = new LogCapture();
  const logger = createLogger({ level: 'info', format: 'json' }, logs);
  const reloads = new ReloadStatus();
  const watcher = new ConfigWatcher({ file, logger, initial: loadConfigFile(file), onConfig: () => undefined, reloads });
  t.teardown(() => watcher.close());
  const restartLines = (): Record<string, unknown>[] =>
    logs.lines.filter((l) => typeof l.msg === 'string' && l.msg.includes('applied at the next restart'));

  fs.writeFileSync(file, config(2));
  await watcher.reload();
  t.equal(restartLines().length, 1, 'the change waits for a restart');
  t.same(restartLines()[0]!.fields, ['workers']);
  t.same(watcher.restartPending, ['workers']);

  fs.writeFileSync(file, config(2, '10.30.0.0/16'));
  await watcher.reload();
  t.equal(restartLines().length, 1, 'a list edit with the same pending change: not said again');

  fs.writeFileSync(file, config(1));
  await watcher.reload();
  t.equal(restartLines().length, 1, 'the revert is not "applied at the next restart"');
  t.same(watcher.restartPending, []);
  const back = logs.lines.find((l) => typeof l.msg === 'string' && l.msg.includes('nothing waits for a restart'));
  t.match(back, { level: 'info', fields: ['workers'] }, 'the revert says nothing is pending');
});

t.test("a refused edit: the file's reload gauge 0, its last success kept; a good edit: 1 again", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-watch-'));
  const file = path.join(dir, 'ipgate.yaml');
  fs.writeFileSync(file, config(1));
  const logs = new LogCapture();
  const reloads = new ReloadStatus();
  const watcher = new ConfigWatcher({
    file,
    logger: createLogger({ level: 'info', format: 'json' }, logs),
    initial: loadConfigFile(file),
    onConfig: () => undefined,
    reloads,
  });
  t.teardown(() => watcher.close());
  const state = () => reloads.list().find((s) => s.kind === 'file' && s.source === file)!;
  t.match(state(), { ok: true }, 'the start-up load counts as good');
  const started = state().lastSuccessAt;
  t.ok(started > 0);

  fs.writeFileSync(file, config(1, '10.20.0.0/33'));
  await watcher.reload();
  t.match(state(), { ok: false, lastSuccessAt: started }, 'refused: 0, the last success time unchanged');
  t.ok(
    logs.lines.some(
      (l) => typeof l.msg === 'string' && l.msg.startsWith('config change refused') && String(l.problem).includes('10.20.0.0/33'),
    ),
  );

  fs.writeFileSync(file, config(1, '10.21.0.0/16'));
  await watcher.reload();
  t.equal(state().ok, true, 'fixed: 1');
  t.ok(state().lastSuccessAt >= started);
});
