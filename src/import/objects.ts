/**
 * Kubernetes objects as `ipgate import ingress-nginx` reads them: YAML or JSON text holding
 * single objects, several documents (`---`), or lists (`kind: List` from `kubectl get -o yaml`,
 * `IngressList` from the API, whose items carry no kind). Only Ingress, Service and ConfigMap
 * objects are used; every other object is reported as ignored, never dropped unseen.
 */
import YAML from 'yaml';

/** The fields the importer reads; everything else of an object is left alone. */
export interface KubeObject {
  apiVersion?: unknown;
  kind?: unknown;
  metadata?: {
    name?: unknown;
    namespace?: unknown;
    annotations?: unknown;
    labels?: unknown;
    creationTimestamp?: unknown;
  };
  spec?: unknown;
  data?: unknown;
  [k: string]: unknown;
}

/** Input that cannot be read at all: the command exits 2 and writes no config. */
export class InputError extends Error {}

export interface ObjectSet {
  ingresses: KubeObject[];
  services: KubeObject[];
  configMaps: KubeObject[];
  /** Objects of other kinds: `Kind ns/name` each. */
  others: string[];
}

export function emptySet(): ObjectSet {
  return { ingresses: [], services: [], configMaps: [], others: [] };
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** strconv.ParseBool, which ingress-nginx uses for boolean annotations and ConfigMap keys. */
export const TRUE: ReadonlySet<string> = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
export const FALSE: ReadonlySet<string> = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** Where each object read from text came from (`file: document 2`), for messages about two of them. */
const ORIGIN = new WeakMap<KubeObject, string>();

export function originOf(o: KubeObject): string | undefined {
  return ORIGIN.get(o);
}

/** `ns/name` of an object (namespace `default` when the manifest leaves it out, as kubectl would). */
export function objectKey(o: KubeObject): string {
  return `${str(o.metadata?.namespace) ?? 'default'}/${str(o.metadata?.name) ?? '(no name)'}`;
}

/** Adds the objects of one YAML/JSON text to `set`. `where` names the file in errors. */
export function addDocuments(set: ObjectSet, text: string, where: string): void {
  const docs = YAML.parseAllDocuments(text, { uniqueKeys: false });
  // A text that is not YAML at all parses as one document with errors.
  const list = Array.isArray(docs) ? docs : [docs];
  list.forEach((doc, i) => {
    if (doc.errors.length > 0)
      throw new InputError(`${where}: document ${i + 1}: not valid YAML/JSON: ${doc.errors[0]!.message.split('\n')[0]}`);
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) return;
    addObject(set, value, `${where}: document ${i + 1}`);
  });
}

function addObject(set: ObjectSet, value: unknown, where: string, itemKind?: string): void {
  if (!isRecord(value)) throw new InputError(`${where}: not a Kubernetes object (a mapping with "kind")`);
  const kind = str(value.kind) ?? itemKind;
  if (kind === undefined) throw new InputError(`${where}: not a Kubernetes object: it has no "kind"`);
  if (kind.endsWith('List') && Array.isArray(value.items)) {
    // IngressList items come without kind; a `List` says it per item.
    const inner = kind === 'List' ? undefined : kind.slice(0, -4);
    value.items.forEach((item, j) => {
      addObject(set, item, `${where} items[${j}]`, inner);
    });
    return;
  }
  const o = value as KubeObject;
  if (o.metadata !== undefined && !isRecord(o.metadata)) throw new InputError(`${where}: ${kind}: metadata is not a mapping`);
  ORIGIN.set(o, where);
  switch (kind) {
    case 'Ingress':
      set.ingresses.push(o);
      break;
    case 'Service':
      set.services.push(o);
      break;
    case 'ConfigMap':
      set.configMaps.push(o);
      break;
    default:
      set.others.push(`${kind} ${objectKey(o)}`);
  }
}
