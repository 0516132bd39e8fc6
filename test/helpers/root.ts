/**
 * The checkout's root. Tests run compiled, from dist/test/ (docs/testing.md "Tests run compiled"),
 * so a path from `__dirname` must not count levels: the root is the nearest directory above with
 * a package.json, the same from test/helpers/ (an editor's run through a TypeScript loader) and
 * from dist/test/helpers/.
 */
import fs from 'node:fs';
import path from 'node:path';

function findRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

export const ROOT = findRoot(__dirname);
/** The compiled CLI, as the image runs it. */
export const MAIN = path.join(ROOT, 'dist/src/main.js');
/** test/fixtures/ in the checkout (fixtures are not compiled). */
export const FIXTURES = path.join(ROOT, 'test/fixtures');
