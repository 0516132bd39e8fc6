/**
 * Every value is documented and typed: each key of values.yaml carries a `# --` comment (helm-docs'
 * marker; a comment on a map documents what is under it), and values.schema.json has a property
 * for each key, so a misspelt or undocumented value cannot slip in.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import YAML, { isMap, type Pair, type YAMLMap } from 'yaml';
import { CHART } from '../helpers/helm';

interface SchemaNode {
  $ref?: string;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  type?: string | string[];
  oneOf?: SchemaNode[];
  anyOf?: SchemaNode[];
}

const doc = YAML.parseDocument(fs.readFileSync(path.join(CHART, 'values.yaml'), 'utf8'));
const schema = JSON.parse(fs.readFileSync(path.join(CHART, 'values.schema.json'), 'utf8')) as SchemaNode & {
  definitions: Record<string, SchemaNode>;
};

/** Every key path of values.yaml (maps only: list items are the list's), with whether it is documented. */
function keys(map: YAMLMap, prefix: string, inherited: boolean, out: { path: string; documented: boolean; leaf: boolean }[]): typeof out {
  map.items.forEach((p: Pair, i) => {
    const key = String((p.key as { value: unknown }).value);
    // The first key's comment is parsed onto the map that holds it.
    const comment = `${i === 0 ? (map.commentBefore ?? '') : ''}\n${(p.key as { commentBefore?: string }).commentBefore ?? ''}`;
    const documented = inherited || /(^|\n)\s*-- \S/.test(comment);
    const full = prefix ? `${prefix}.${key}` : key;
    const nested = isMap(p.value) && p.value.items.length > 0;
    out.push({ path: full, documented, leaf: !nested });
    if (nested) keys(p.value as YAMLMap, full, documented, out);
  });
  return out;
}

function resolve(node: SchemaNode): SchemaNode {
  return node.$ref ? resolve(schema.definitions[node.$ref.replace('#/definitions/', '')]!) : node;
}

/** The schema node for a key path, or null when the schema does not name it. */
function schemaAt(keyPath: string): SchemaNode | null {
  let node: SchemaNode = schema;
  for (const part of keyPath.split('.')) {
    node = resolve(node);
    const next = node.properties?.[part] ?? (typeof node.additionalProperties === 'object' ? node.additionalProperties : undefined);
    if (!next) return null;
    node = next;
  }
  return node;
}

const all = keys(doc.contents as YAMLMap, '', false, []);

t.test('values.yaml has keys to check', async (t) => {
  t.ok(all.length > 100, `${all.length} keys`);
});

t.test('every value has a "# --" comment (on itself or on the map above it)', async (t) => {
  const missing = all.filter((k) => k.leaf && !k.documented).map((k) => k.path);
  t.same(missing, []);
});

t.test('every value has an entry in values.schema.json', async (t) => {
  // Free-form maps (resources, affinity, ...) are typed as objects; their inner keys are Kubernetes'.
  const freeForm = (p: string): boolean => {
    const n = schemaAt(p);
    return n !== null && !resolve(n).properties && resolve(n).additionalProperties === undefined;
  };
  const underFreeForm = (p: string): boolean =>
    p
      .split('.')
      .slice(0, -1)
      .some((_, i, parts) => freeForm(parts.slice(0, i + 1).join('.')));
  const missing = all.filter((k) => !underFreeForm(k.path) && schemaAt(k.path) === null).map((k) => k.path);
  t.same(missing, []);
});

t.test('the check finds an undocumented value (the test can fail)', async (t) => {
  const probe = YAML.parseDocument('a:\n  # -- documented\n  b: 1\n  c: 2\n# -- a map\nd:\n  e: 1\n');
  const found = keys(probe.contents as YAMLMap, '', false, [])
    .filter((k) => k.leaf && !k.documented)
    .map((k) => k.path);
  t.same(found, ['a.c']);
});
