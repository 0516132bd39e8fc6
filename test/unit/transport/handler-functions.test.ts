/**
 * No function literal is written straight into a property anywhere in src/. V8's parser marks a
 * function literal on the right of an assignment to a property (`socket.onData = (c) => ...`) for
 * allocation in the old generation; made per connection, such a handler outlives its connection
 * there, and everything it closes over (both sockets, the connection) survives every scavenge
 * until the next mark-compact. The same handler made in a local first (`const onData = ...;
 * socket.onData = onData`) is an ordinary young allocation. bench/README.md "Functions assigned to
 * properties are old" has the measurement.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { ROOT } from '../../helpers/root';

/** `file:line  text` for each assignment of a function literal to a property in `source`. */
function propertyFunctions(file: string, source: string): string[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isBinaryExpression(n) && n.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
      // What TypeScript erases does not hide the literal from V8: parentheses, casts, `!`, satisfies.
      let right: ts.Expression = n.right;
      while (
        ts.isParenthesizedExpression(right) ||
        ts.isAsExpression(right) ||
        ts.isNonNullExpression(right) ||
        ts.isSatisfiesExpression(right) ||
        ts.isTypeAssertionExpression(right)
      ) {
        right = right.expression;
      }
      const left = n.left;
      if (
        (ts.isPropertyAccessExpression(left) || ts.isElementAccessExpression(left)) &&
        (ts.isArrowFunction(right) || ts.isFunctionExpression(right))
      ) {
        const line = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
        found.push(`${file}:${line}  ${n.getText(sf).split('\n')[0]}`);
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

t.test('no function literal is assigned to a property in src/', async (t) => {
  const src = path.join(ROOT, 'src');
  const files = fs
    .readdirSync(src, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(src, f));
  t.ok(files.length > 100, `the walk reaches src/ (${files.length} files)`);
  const found = files.flatMap((f) => propertyFunctions(path.relative(ROOT, f), fs.readFileSync(f, 'utf8')));
  t.same(found, [], 'make the function in a local first, then assign it');
});

t.test('the check finds each form and passes a handler made in a local', async (t) => {
  const cases: { name: string; code: string; flagged: boolean }[] = [
    { name: 'an arrow function', code: 'function f(a) { a.onData = (c) => c; }', flagged: true },
    { name: 'a function expression', code: 'function f(a) { a.onEnd = function () {}; }', flagged: true },
    { name: 'an element assignment', code: 'function f(a, k) { a[k] = () => 1; }', flagged: true },
    { name: 'behind parentheses and a cast', code: 'function f(a) { a.onData = ((c) => c) as never; }', flagged: true },
    { name: 'behind a non-null assertion', code: 'function f(a) { a.x = (() => 1)!; }', flagged: true },
    { name: 'in a constructor', code: 'class A { x: () => number; constructor() { this.x = () => 1; } }', flagged: true },
    { name: 'made in a local, then assigned', code: 'function f(a) { const onData = (c) => c; a.onData = onData; }', flagged: false },
    { name: 'passed as an argument', code: 'function f(a) { a.onClose(() => 1); }', flagged: false },
    { name: 'a class field', code: 'class A { x = () => 1; }', flagged: false },
    { name: 'a variable assignment', code: 'function f() { let g; g = () => 1; return g; }', flagged: false },
  ];
  for (const c of cases) t.equal(propertyFunctions('case.ts', c.code).length, c.flagged ? 1 : 0, c.name);
});
