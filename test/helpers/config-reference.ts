/**
 * The config schema's options joined to their doc comments, and the reference page made from them
 * (docs/config-reference.md). The doc of an option is the JSDoc on its property in a `Section(...)`
 * or `Type.Object(...)` literal under src/config/ (read with the TypeScript parser); its type,
 * constraints and default come from the compiled schema itself. A literal is matched to the schema
 * object it built by its ordered list of keys (Type.Object keeps the literal's order).
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import Ajv from 'ajv';
import { OptionalKind } from '@sinclair/typebox';
import { configSchema } from '../../src/schema/config';
import { ROOT } from './root';

const SCHEMA_DIR = path.join(ROOT, 'src/schema');

/** The files that define config options: schema.ts, schema/*.ts and the schema-*.ts sections. */
export function schemaFiles(): string[] {
  return fs
    .readdirSync(SCHEMA_DIR)
    .filter((f) => f.endsWith('.ts') && f !== 'problem.ts')
    .map((f) => path.join(SCHEMA_DIR, f))
    .sort();
}

/** One object literal handed to `Section` / `Type.Object`: where, its keys in order, each key's doc. */
export interface Literal {
  where: string;
  keys: string[];
  docs: Map<string, string>;
  /** Members that are not a plain `key: schema` (a spread, a method): their docs cannot be checked. */
  unsupported: string[];
}

export function schemaLiterals(files: string[] = schemaFiles()): Literal[] {
  const out: Literal[] = [];
  for (const file of files) {
    const sf = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && ['Section', 'Type.Object'].includes(node.expression.getText(sf))) {
        const arg = node.arguments[0];
        if (arg !== undefined && ts.isObjectLiteralExpression(arg)) {
          const { line } = sf.getLineAndCharacterOfPosition(arg.getStart(sf));
          const lit: Literal = { where: `${path.relative(ROOT, file)}:${line + 1}`, keys: [], docs: new Map(), unsupported: [] };
          for (const p of arg.properties) {
            if ((ts.isPropertyAssignment(p) || ts.isShorthandPropertyAssignment(p)) && !ts.isComputedPropertyName(p.name)) {
              const key = ts.isStringLiteral(p.name) ? p.name.text : p.name.getText(sf);
              lit.keys.push(key);
              const doc = ts
                .getJSDocCommentsAndTags(p)
                .filter(ts.isJSDoc)
                .map((d) => ts.getTextOfJSDocComment(d.comment) ?? '')
                .join('\n')
                .trim();
              if (doc !== '') lit.docs.set(key, doc);
            } else {
              lit.unsupported.push(p.getText(sf).slice(0, 60));
            }
          }
          out.push(lit);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

type Schema = Record<string, unknown> & { properties?: Record<string, Schema>; required?: string[] };

/** One option: its path in the file, its schema, whether it must be written, its doc. */
export interface OptionRow {
  path: string;
  /** The path of the section holding it ('' for the top level). */
  section: string;
  key: string;
  schema: Schema;
  required: boolean;
  /** `Type.Optional`: leaving it out means something (no default is filled in). */
  optional: boolean;
  doc: string | undefined;
  /** Where its doc comment is, or why it has none. */
  where: string;
}

export interface SchemaWalk {
  rows: OptionRow[];
  /** Sections whose literal was not found or matched more than one literal, sections open to unknown keys. */
  unmatched: string[];
}

/**
 * Every option of `schema`, once: a section reused in two places (an allowlist entry in the array
 * form and in `entries`) is listed at its first path.
 */
export function walkSchema(schema: Schema = configSchema as unknown as Schema, literals: Literal[] = schemaLiterals()): SchemaWalk {
  const rows: OptionRow[] = [];
  const unmatched: string[] = [];
  const seen = new Set<object>();
  const visit = (s: unknown, at: string): void => {
    if (s === null || typeof s !== 'object') return;
    const node = s as Schema;
    if (node.properties !== undefined && !seen.has(node.properties)) {
      seen.add(node.properties);
      if (node.additionalProperties !== false)
        unmatched.push(`${at || '(top level)'}: accepts unknown keys (additionalProperties is not false)`);
      const keys = Object.keys(node.properties);
      const matches = literals.filter((l) => l.keys.join(',') === keys.join(','));
      if (matches.length !== 1)
        unmatched.push(
          `${at || '(top level)'} {${keys.join(', ')}}: ${matches.length === 0 ? 'no Section/Type.Object literal with these keys under src/config' : `${matches.length} literals have these keys (${matches.map((m) => m.where).join(', ')})`}`,
        );
      const lit = matches.length === 1 ? matches[0]! : undefined;
      for (const key of keys) {
        const p = node.properties[key]!;
        const rowPath = at === '' ? key : `${at}.${key}`;
        rows.push({
          path: rowPath,
          section: at,
          key,
          schema: p,
          required: (node.required ?? []).includes(key),
          optional: OptionalKind in p,
          doc: lit?.docs.get(key),
          where: lit?.where ?? 'no literal',
        });
        visit(p, rowPath);
      }
    }
    if (Array.isArray(node.anyOf)) for (const branch of node.anyOf) visit(branch, at);
    if (node.items !== undefined) visit(node.items, `${at}[]`);
    if (node.additionalProperties !== undefined && typeof node.additionalProperties === 'object')
      visit(node.additionalProperties, `${at}.<name>`);
  };
  visit(schema, '');
  return { rows, unmatched };
}

/** Markdown inline code: double backticks around text that holds one. */
function code(text: string): string {
  return text.includes('`') ? `\`\` ${text} \`\`` : `\`${text}\``;
}

/** The type and constraints of an option, in a few words. */
export function describeType(s: Schema): string {
  if (Array.isArray(s.enum)) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (Array.isArray(s.anyOf)) return (s.anyOf as Schema[]).map(describeType).join(' or ');
  const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
  const bounds: string[] = [];
  if (s.minimum !== undefined || s.maximum !== undefined) bounds.push(`${s.minimum ?? ''}..${s.maximum ?? ''}`);
  if (s.minLength !== undefined) bounds.push(`length >= ${s.minLength}`);
  if (s.maxLength !== undefined) bounds.push(`length <= ${s.maxLength}`);
  if (s.minItems !== undefined) bounds.push(`at least ${s.minItems}`);
  if (s.maxItems !== undefined) bounds.push(`at most ${s.maxItems}`);
  if (s.pattern !== undefined) bounds.push(code(String(s.pattern)));
  const named = types
    .map((t) => {
      if (t === 'array') {
        const items = s.items as Schema | undefined;
        const inner = items === undefined ? 'any' : items.properties !== undefined ? 'object' : describeType(items);
        return /\s/.test(inner) ? `(${inner})[]` : `${inner}[]`;
      }
      if (t === 'object' && s.properties === undefined && s.additionalProperties !== undefined) return 'map';
      return t;
    })
    .join(' or ');
  return bounds.length > 0 ? `${named} (${bounds.join(', ')})` : named;
}

const cell = (text: string): string => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');

/** docs/config-reference.md, generated: one table per section, in the schema's order. */
export function renderReference(walk: SchemaWalk = walkSchema()): string {
  const lines = [
    '# Config reference',
    '',
    '<!-- Generated from src/schema/config.ts and src/schema/ by test/helpers/config-reference.ts.',
    '     Do not edit: change the schema, then run',
    '     npm run build:all && UPDATE_CONFIG_REFERENCE=1 npx tap dist/test/unit/config/schema-docs.test.js -->',
    '',
    'Every option of the config file (YAML or JSON), its type, its default and what it does. An option',
    'with a default may be left out; "required" ones must be written; "(none)" means leaving it out',
    'is meaningful in itself. Unknown keys are refused everywhere. The definitions, with the same',
    'text, are in [src/schema/config.ts](../src/schema/config.ts) and',
    '[src/schema/](../src/schema/).',
    '',
    'Paths: every file the config names (`allowlists.<name>.file`, `tls` certificates, keys and CAs,',
    "`store.path`, `admin.tokenFile`, `admin.tokensFile`) is read relative to the config file's",
    'directory when it is not absolute, as nginx reads its `include`s. Before, `store.path` and the',
    'token files were relative to the working directory: a relative one that exists only at its old',
    'place is named in a warning at start-up and by `ipgate check-config`.',
    '',
    "Errors: every problem names the option's path, its value (summarised when large) and its line",
    '(`listeners[1].listen: 22023: must be a string, not a number: ... in config.yaml:12`); an',
    'unknown key names the option it was probably meant to be.',
  ];
  const sections: string[] = [];
  for (const r of walk.rows) if (!sections.includes(r.section)) sections.push(r.section);
  for (const section of sections) {
    const parent = walk.rows.find((r) => r.path === section);
    lines.push('', `## ${section === '' ? 'Top level' : `\`${section}\``}`, '');
    if (parent?.doc !== undefined) lines.push(cell(parent.doc), '');
    lines.push('| option | type | default | description |', '|---|---|---|---|');
    for (const r of walk.rows.filter((x) => x.section === section)) {
      const def = r.required ? 'required' : 'default' in r.schema ? `\`${JSON.stringify(r.schema.default)}\`` : '(none)';
      lines.push(`| \`${r.key}\` | ${cell(describeType(r.schema))} | ${cell(def)} | ${cell(r.doc ?? '')} |`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export const REFERENCE_FILE = path.join(ROOT, 'docs/config-reference.md');

/**
 * Everything that lets the schema and its docs drift: an option without a doc comment, a doc that
 * states a default in prose (the `default:` keyword is the only place), a default that never applies
 * (on a required option) or is missing (an option that may be left out but gets nothing), a
 * default its own option refuses, a section that accepts unknown keys, a literal the walk cannot
 * tie to the schema. Empty when all is well.
 */
export function schemaProblems(walk: SchemaWalk, literals: Literal[]): string[] {
  const problems: string[] = [...walk.unmatched];
  for (const l of literals) {
    if (l.unsupported.length > 0)
      problems.push(`${l.where}: members other than \`key: schema\` cannot be documented or checked: ${l.unsupported.join('; ')}`);
  }
  const reached = new Set(walk.rows.map((r) => r.where));
  for (const l of literals) {
    if (!reached.has(l.where)) problems.push(`${l.where}: a section {${l.keys.join(', ')}} that configSchema does not use`);
  }
  const ajv = new Ajv({ strict: false, useDefaults: true });
  for (const r of walk.rows) {
    if (r.doc === undefined) problems.push(`${r.path} (${r.where}): no doc comment (/** ... */ on the property)`);
    else if (/\bdefaults?\b/i.test(r.doc))
      problems.push(`${r.path} (${r.where}): the doc comment speaks of a default; state it only with the \`default:\` keyword`);
    const hasDefault = 'default' in r.schema;
    if (r.required && hasDefault) problems.push(`${r.path}: required, yet has a default (never applied)`);
    if (!r.required && !hasDefault && !r.optional)
      problems.push(`${r.path}: may be left out but has no default (give one, or mark it Type.Optional if absence means something)`);
    if (r.optional && hasDefault)
      problems.push(`${r.path}: Type.Optional with a default (the type says it may be absent, Ajv always fills it in)`);
    if (hasDefault) {
      const validate = ajv.compile(r.schema);
      const value = structuredClone(r.schema.default);
      if (!validate(value))
        problems.push(
          `${r.path}: its default ${JSON.stringify(r.schema.default)} is refused by its own schema: ${ajv.errorsText(validate.errors)}`,
        );
    }
  }
  return problems;
}
