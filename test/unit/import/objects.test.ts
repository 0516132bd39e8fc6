/**
 * Reading Kubernetes objects for the import (src/import/objects.ts): every shape `kubectl`, Helm
 * and the API produce, and a clear refusal naming the document for what is not an object.
 */
import t from 'tap';
import { addDocuments, emptySet, InputError, objectKey } from '../../../src/import/objects';

t.test('shapes: single objects, documents, List, IngressList without item kinds, JSON', async (t) => {
  const rows: Array<{ name: string; text: string; ingresses: string[]; services?: number; configMaps?: number; others?: string[] }> = [
    { name: 'one object', text: 'kind: Ingress\nmetadata: {name: a, namespace: x}\n', ingresses: ['x/a'] },
    {
      name: 'documents, empty ones and comments skipped',
      text: '---\n# only a comment\n---\nkind: Ingress\nmetadata: {name: a}\n---\n---\nkind: Service\nmetadata: {name: s}\n',
      ingresses: ['default/a'],
      services: 1,
    },
    {
      name: 'kind: List (kubectl get -o yaml) with mixed kinds',
      text: 'kind: List\nitems:\n- {kind: Ingress, metadata: {name: a, namespace: n}}\n- {kind: ConfigMap, metadata: {name: c, namespace: n}}\n- {kind: Deployment, metadata: {name: d, namespace: n}}\n',
      ingresses: ['n/a'],
      configMaps: 1,
      others: ['Deployment n/d'],
    },
    {
      name: "IngressList items carry no kind (the API's list form)",
      text: '{"kind": "IngressList", "items": [{"metadata": {"name": "a", "namespace": "n"}}, {"metadata": {"name": "b", "namespace": "n"}}]}',
      ingresses: ['n/a', 'n/b'],
    },
    {
      name: 'a List inside a List',
      text: 'kind: List\nitems:\n- kind: ServiceList\n  items: [{metadata: {name: s}}]\n',
      ingresses: [],
      services: 1,
    },
  ];
  for (const row of rows) {
    const set = emptySet();
    addDocuments(set, row.text, 'f.yaml');
    t.same(set.ingresses.map(objectKey), row.ingresses, `${row.name}: Ingresses`);
    t.equal(set.services.length, row.services ?? 0, `${row.name}: Services`);
    t.equal(set.configMaps.length, row.configMaps ?? 0, `${row.name}: ConfigMaps`);
    t.same(set.others, row.others ?? [], `${row.name}: other objects named`);
  }
});

t.test('refusals name the file and the document', async (t) => {
  const rows: Array<{ name: string; text: string; message: RegExp }> = [
    { name: 'not YAML', text: 'kind: Ingress\n  x: [\n', message: /^f\.yaml: document 1: not valid YAML\/JSON/ },
    {
      name: 'a scalar document',
      text: 'kind: Ingress\nmetadata: {name: a}\n--- hello\n',
      message: /^f\.yaml: document 2: not a Kubernetes object/,
    },
    { name: 'no kind', text: 'metadata: {name: a}\n', message: /^f\.yaml: document 1: not a Kubernetes object: it has no "kind"/ },
    {
      name: 'a List item without kind',
      text: 'kind: List\nitems: [{metadata: {name: a}}]\n',
      message: /^f\.yaml: document 1 items\[0\]: not a Kubernetes object: it has no "kind"/,
    },
    {
      name: 'metadata not a mapping',
      text: 'kind: Ingress\nmetadata: [a]\n',
      message: /^f\.yaml: document 1: Ingress: metadata is not a mapping/,
    },
  ];
  for (const row of rows) {
    let caught: unknown = null;
    try {
      addDocuments(emptySet(), row.text, 'f.yaml');
    } catch (err) {
      caught = err;
    }
    t.ok(caught instanceof InputError, `${row.name}: refused as unreadable input`);
    t.match((caught as Error | null)?.message ?? '', row.message, `${row.name}: names the document`);
  }
});
