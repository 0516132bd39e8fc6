/**
 * The config's `Type` (src/schema/kit.ts) builds exactly what `@sinclair/typebox`'s `Type`
 * builds, symbols included, so a section written with either mixes with the others and TypeBox's own
 * tools (Value, TypeCompiler) read the config schema; and the running program never loads TypeBox.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { Kind as TbKind, OptionalKind as TbOptionalKind, Type as Tb } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { Kind, OptionalKind, Section, Type } from '../../../src/schema/kit';
import { configSchema } from '../../../src/schema/config';

/** JSON plus the TypeBox symbols, at every depth. */
function shape(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(shape);
  if (v === null || typeof v !== 'object') return v;
  const o = v as Record<string | symbol, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(o)) out[k] = shape(o[k]);
  if (o[TbKind] !== undefined) out['[Kind]'] = o[TbKind];
  if (o[TbOptionalKind] !== undefined) out['[OptionalKind]'] = o[TbOptionalKind];
  return out;
}

const CASES: { what: string; ours: unknown; theirs: unknown }[] = [
  { what: 'String with options', ours: Type.String({ minLength: 1, default: 'x' }), theirs: Tb.String({ minLength: 1, default: 'x' }) },
  {
    what: 'Integer with bounds',
    ours: Type.Integer({ minimum: 1, maximum: 9, default: 2 }),
    theirs: Tb.Integer({ minimum: 1, maximum: 9, default: 2 }),
  },
  { what: 'Number', ours: Type.Number(), theirs: Tb.Number() },
  { what: 'Boolean with default', ours: Type.Boolean({ default: true }), theirs: Tb.Boolean({ default: true }) },
  { what: 'Null', ours: Type.Null(), theirs: Tb.Null() },
  { what: 'Array of strings', ours: Type.Array(Type.String(), { minItems: 1 }), theirs: Tb.Array(Tb.String(), { minItems: 1 }) },
  { what: 'Literal', ours: Type.Literal('auto'), theirs: Tb.Literal('auto') },
  {
    what: 'Union with a default',
    ours: Type.Union([Type.Integer(), Type.Literal('auto')], { default: 1 }),
    theirs: Tb.Union([Tb.Integer(), Tb.Literal('auto')], { default: 1 }),
  },
  { what: 'Optional', ours: Type.Optional(Type.String()), theirs: Tb.Optional(Tb.String()) },
  { what: 'Unsafe', ours: Type.Unsafe<'a'>({ enum: ['a'] }), theirs: Tb.Unsafe<'a'>({ enum: ['a'] }) },
  {
    what: 'Object with required, optional and options',
    ours: Type.Object({ a: Type.String(), b: Type.Optional(Type.Integer()) }, { additionalProperties: false, default: {} }),
    theirs: Tb.Object({ a: Tb.String(), b: Tb.Optional(Tb.Integer()) }, { additionalProperties: false, default: {} }),
  },
  {
    what: 'Object with every property optional (no required)',
    ours: Type.Object({ a: Type.Optional(Type.String()) }),
    theirs: Tb.Object({ a: Tb.Optional(Tb.String()) }),
  },
];

t.test('each builder makes what TypeBox makes', async (t) => {
  t.equal(Kind, TbKind, 'the same Kind symbol');
  t.equal(OptionalKind, TbOptionalKind, 'the same OptionalKind symbol');
  for (const c of CASES) t.same(shape(c.ours), shape(c.theirs), c.what);
  // The comparison sees a difference when there is one (a symbol, a key).
  t.not(JSON.stringify(shape(Type.Optional(Type.String()))), JSON.stringify(shape(Tb.String())), 'Optional differs from plain');
});

t.test("TypeBox's own Value fills the config schema's defaults", async (t) => {
  const listener = { name: 'a', listen: '127.0.0.1:0', allowlist: 'x', upstreams: ['127.0.0.1:1'] };
  const filled = Value.Default(configSchema, { listeners: [structuredClone(listener)], allowlists: { x: [] } }) as {
    listeners: { proxyProtocol: { headerTimeoutMs: number } }[];
  };
  t.equal(filled.listeners[0]!.proxyProtocol.headerTimeoutMs, 5000, 'a nested default filled in by TypeBox');
  // (Value.Check would need the `Unsafe` kinds (Enum, Nullable) registered; Ajv is the checker.)
  t.ok(Value.Check(Section({ a: Type.Integer({ minimum: 1 }) }), { a: 1 }), "TypeBox accepts a value within our builder's bound");
  t.notOk(Value.Check(Section({ a: Type.Integer({ minimum: 1 }) }), { a: 0 }), 'and refuses one outside it');
});

t.test('the program never loads TypeBox (type-only imports): loading the config does not', async (t) => {
  // The config loader this test runs (compiled, or through a loader in process.execArgv), in a fresh process.
  const load = require.resolve('../../../src/config/load');
  const dir = t.testdir({
    'probe.js': [
      `const { buildConfig } = require(${JSON.stringify(load)});`,
      "buildConfig({ allowlists: { a: [] }, listeners: [{ name: 'a', listen: '127.0.0.1:0', allowlist: 'a', upstreams: ['127.0.0.1:1'] }] });",
      "const count = () => Object.keys(require.cache).filter((f) => f.includes('@sinclair')).length;",
      'const before = count();',
      "require('@sinclair/typebox');",
      'process.stdout.write(JSON.stringify([before, count() > 0]));',
    ].join('\n'),
  });
  const r = spawnSync(process.execPath, [...process.execArgv, path.join(dir, 'probe.js')], { encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout, '[0,true]', 'no @sinclair/typebox module in the require cache (and the count sees one once required)');
});
