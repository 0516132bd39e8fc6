/**
 * The config schema and its documentation cannot drift: every option has one doc comment and
 * states its default only with the `default:` keyword; every default applies and is valid;
 * docs/config-reference.md is generated from the schema; the prose docs quote no default by hand;
 * the Helm chart's values schema agrees with ipgate's on every option it passes through.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { configSchema } from '../../../src/schema/config';
import { Section, Type } from '../../../src/schema/kit';
import {
  REFERENCE_FILE,
  renderReference,
  schemaLiterals,
  schemaProblems,
  walkSchema,
  type OptionRow,
} from '../../helpers/config-reference';
import { ROOT } from '../../helpers/root';

t.test('every option is documented once, and its default is stated, valid and applied', async (t) => {
  const literals = schemaLiterals();
  const walk = walkSchema(configSchema as never, literals);
  t.ok(walk.rows.length >= 70, `the walk reaches every option (${walk.rows.length})`);
  t.same(schemaProblems(walk, literals), [], 'no problems');
});

t.test('the checks catch each kind of drift (a fixture section with one of each)', async (t) => {
  const dir = t.testdir({
    'schema-fixture.ts': [
      'export const Fixture = Section({',
      '  /** Documented; its value is in bounds. */',
      '  fine: Type.Integer({ minimum: 1, default: 1 }),',
      '  undocumented: Type.Integer({ default: 1 }),',
      '  /** Timeout, ms. Default 5000. */',
      '  prose: Type.Integer({ default: 5000 }),',
      '  /** Its value breaks its own bounds. */',
      '  invalid: Type.Integer({ minimum: 1, default: 0 }),',
      '  /** Optional and defaulted at once. */',
      '  both: Type.Optional(Type.Boolean({ default: false })),',
      '  ...spread,',
      '});',
      'export const Loose = Type.Object({',
      '  /** Required, yet given a value. */',
      '  requiredDefault: Type.Integer({ default: 1 }),',
      '});',
      'export const Unused = Section({',
      '  /** Never hooked into the schema. */',
      '  orphan: Type.String(),',
      '});',
    ].join('\n'),
  });
  const literals = schemaLiterals([path.join(dir, 'schema-fixture.ts')]);
  const schema = {
    type: 'object',
    additionalProperties: false,
    properties: {
      fixture: Section({
        fine: Type.Integer({ minimum: 1, default: 1 }),
        undocumented: Type.Integer({ default: 1 }),
        prose: Type.Integer({ default: 5000 }),
        invalid: Type.Integer({ minimum: 1, default: 0 }),
        both: Type.Optional(Type.Boolean({ default: false })),
      }),
      loose: Type.Object({ requiredDefault: Type.Integer({ default: 1 }) }),
      unknown: { type: 'object', properties: { x: { type: 'string' } } },
    },
  };
  const problems = schemaProblems(walkSchema(schema as never, literals), literals).join('\n');
  const EXPECTED: { what: string; pattern: RegExp }[] = [
    { what: 'a section the literals do not describe', pattern: /unknown \{x\}: no Section\/Type\.Object literal/ },
    { what: 'a section open to unknown keys', pattern: /loose: accepts unknown keys/ },
    { what: 'a spread member', pattern: /members other than `key: schema`.*\.\.\.spread/ },
    { what: 'a section never used', pattern: /a section \{orphan\} that configSchema does not use/ },
    { what: 'an undocumented option', pattern: /fixture\.undocumented .*no doc comment/ },
    { what: 'a default in prose', pattern: /fixture\.prose .*speaks of a default/ },
    { what: 'a default its option refuses', pattern: /fixture\.invalid: its default 0 is refused by its own schema: data must be >= 1/ },
    { what: 'Optional with a default', pattern: /fixture\.both: Type\.Optional with a default/ },
    { what: 'required with a default', pattern: /loose\.requiredDefault: required, yet has a default/ },
    { what: 'left out, with no default', pattern: /unknown\.x: may be left out but has no default/ },
  ];
  for (const e of EXPECTED) t.match(problems, e.pattern, e.what);
  t.notMatch(problems, /fixture\.fine/, 'the documented, valid option is not reported');
});

t.test('docs/config-reference.md is the one generated from the schema', async (t) => {
  const generated = renderReference();
  if (process.env.UPDATE_CONFIG_REFERENCE === '1') fs.writeFileSync(REFERENCE_FILE, generated);
  const committed = fs.existsSync(REFERENCE_FILE) ? fs.readFileSync(REFERENCE_FILE, 'utf8') : '(missing)';
  t.equal(
    committed,
    generated,
    'regenerate with npm run build:all && UPDATE_CONFIG_REFERENCE=1 npx tap dist/test/unit/config/schema-docs.test.js',
  );
  for (const r of walkSchema().rows) {
    if ('default' in r.schema) t.ok(generated.includes(`| \`${r.key}\` |`), `${r.path} is listed`);
  }
});

/** The prose docs an operator reads, besides the generated reference. */
function proseDocs(): { file: string; text: string }[] {
  const files = [
    'README.md',
    ...fs
      .readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md') && f !== 'config-reference.md')
      .map((f) => `docs/${f}`),
  ];
  return files.map((file) => ({ file, text: fs.readFileSync(path.join(ROOT, file), 'utf8') }));
}

/** `listeners[].http.denied.keepAlive` -> the ways prose names it: `http.denied.keepAlive`, `denied.keepAlive`. */
function proseNames(r: OptionRow): string[] {
  const parts = r.path
    .replace(/\[\]/g, '')
    .split('.')
    .filter((p) => p !== '<name>');
  const out: string[] = [];
  for (let i = 0; i < parts.length - 1; i++) out.push(parts.slice(i).join('.'));
  return out;
}

t.test('the prose docs quote no ipgate default by hand (the reference has them)', async (t) => {
  const rows = walkSchema().rows.filter((r) => 'default' in r.schema);
  const docs = proseDocs();
  const found: string[] = [];
  for (const r of rows) {
    for (const name of proseNames(r)) {
      const near = new RegExp(`\`${name.replace(/[.[\]]/g, '\\$&')}\`[^.;]{0,40}\\bdefault\\b`, 'i');
      for (const d of docs) if (near.test(d.text)) found.push(`${d.file}: \`${name}\` followed by "default"`);
    }
    const v = r.schema.default;
    // Defaults with punctuation (an address, a path, a variable name), not a word such as "file".
    if (typeof v === 'string' && /[.:/_]/.test(v)) {
      const quoted = new RegExp(`\\bdefault\\b[^;]{0,15}\`?${v.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`, 'i');
      for (const d of docs) if (quoted.test(d.text)) found.push(`${d.file}: ${r.path}'s default ${JSON.stringify(v)} written out`);
    }
  }
  t.same(found, [], 'link docs/config-reference.md instead');
});

// -------------------------------------------------------------------------------------------------
// The chart's values schema (helm/ipgate/values.schema.json) passes these sections to ipgate's
// config as they are (templates/_config.tpl): every option it lists must have ipgate's bounds, and
// every ipgate option must be listed (the chart refuses unknown keys) or excluded here with why.

type J = Record<string, unknown> & { properties?: Record<string, J>; items?: J; anyOf?: J[]; oneOf?: J[]; $ref?: string };
const chart = JSON.parse(fs.readFileSync(path.join(ROOT, 'helm/ipgate/values.schema.json'), 'utf8')) as J & {
  definitions: Record<string, J>;
};
const resolve = (s: J): J => (s.$ref !== undefined ? chart.definitions[s.$ref.replace('#/definitions/', '')]! : s);
const ipgate = configSchema as unknown as J;

/** Chart sections and the ipgate section each mirrors; `omit`: ipgate options (by key, at any depth) the chart sets itself or leaves out. */
const MIRRORS: { chart: J; ipgate: J; at: string; omit: Record<string, string> }[] = [
  {
    chart: chart.properties!.config!,
    ipgate,
    at: 'config',
    omit: {
      admin: 'the chart renders it from its own admin values (port, bind address, Service host names)',
      store: 'the chart always uses its own ConfigMap store',
      listeners: 'chart top-level `listeners` (with port, servicePort, nodePort)',
      allowlists: 'chart top-level `allowlists`',
      echo: 'demo backends, not for a cluster',
    },
  },
  {
    chart: chart.properties!.listeners!.items!,
    ipgate: ipgate.properties!.listeners!.items!,
    at: 'listeners[]',
    omit: {
      listen: 'the chart writes it from `listenAddress` and `port`',
    },
  },
  {
    chart: chart.properties!.allowlists!.additionalProperties as J,
    ipgate: ipgate.properties!.allowlists!.additionalProperties as J,
    at: 'allowlists.<name>',
    omit: {
      file: 'the chart writes no list files (its declarative lists are read through the API)',
      configMap: 'the chart writes it for `source: config` lists (the <fullname>-lists ConfigMap, watched through the API)',
    },
  },
];

const BOUNDS: readonly string[] = [
  'type',
  'enum',
  'const',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
] as const;

/** Where a chart schema and ipgate's disagree, and ipgate options missing from the chart. */
function compare(c: J, g: J, at: string, omit: Record<string, string>, out: string[]): void {
  // A chart definition ($ref: a CIDR, an upstream) checks syntax ipgate checks in validate.ts, with
  // length caps of its own: only its type must agree.
  const bounds = c.$ref !== undefined ? ['type'] : BOUNDS;
  c = resolve(c);
  // Enums as sets: the order of the choices is not a constraint.
  const norm = (v: unknown): string => JSON.stringify(Array.isArray(v) ? [...(v as unknown[])].map(String).sort() : v);
  for (const k of bounds) {
    if (c[k] !== undefined && norm(c[k]) !== norm(g[k])) {
      out.push(`${at}: chart ${k} ${JSON.stringify(c[k])}, ipgate ${JSON.stringify(g[k])}`);
    }
  }
  const cb = c.anyOf ?? c.oneOf;
  const gb = g.anyOf;
  if (cb !== undefined || gb !== undefined) {
    if (cb?.length !== gb?.length) out.push(`${at}: chart has ${cb?.length ?? 0} alternatives, ipgate ${gb?.length ?? 0}`);
    else
      cb!.forEach((b, i) => {
        compare(b, gb![i]!, `${at}|${i}`, omit, out);
      });
  }
  if (c.items !== undefined && g.items !== undefined) compare(c.items, g.items, `${at}[]`, omit, out);
  if (g.properties !== undefined) {
    for (const [key, gs] of Object.entries(g.properties)) {
      const cs = c.properties?.[key];
      if (cs === undefined) {
        if (omit[key] === undefined && c.properties !== undefined)
          out.push(
            `${at}.${key}: an ipgate option the chart's values schema refuses (add it to helm/ipgate/values.schema.json, or to MIRRORS' omit with why)`,
          );
        continue;
      }
      compare(cs, gs, `${at}.${key}`, omit, out);
    }
  }
  for (const key of Object.keys(c.properties ?? {})) {
    // The chart's own listener keys, left out of config.yaml (_config.tpl): the ports, and the
    // acknowledgement of a trust-all range (allowTrustAll, checked by the chart only).
    if (
      g.properties !== undefined &&
      g.properties[key] === undefined &&
      !['port', 'servicePort', 'nodePort', 'allowTrustAll'].includes(key)
    )
      out.push(`${at}.${key}: in the chart, not an ipgate option`);
  }
}

t.test("the chart's values schema agrees with ipgate's on every option it passes through", async (t) => {
  for (const m of MIRRORS) {
    const out: string[] = [];
    compare(m.chart, m.ipgate, m.at, m.omit, out);
    t.same(out, [], `chart ${m.at}`);
  }
  // The comparison can fail: a changed bound and a missing option are both reported.
  const out: string[] = [];
  compare(
    { type: 'object', properties: { a: { type: 'integer', maximum: 10 } } },
    { type: 'object', properties: { a: { type: 'integer', maximum: 20 }, b: { type: 'string' } } },
    'x',
    {},
    out,
  );
  t.same(out, [
    'x.a: chart maximum 10, ipgate 20',
    "x.b: an ipgate option the chart's values schema refuses (add it to helm/ipgate/values.schema.json, or to MIRRORS' omit with why)",
  ]);
});
