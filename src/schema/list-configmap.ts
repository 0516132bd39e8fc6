/**
 * `allowlists.<name>.configMap`: a `source: config` list whose entries are one key of a Kubernetes
 * ConfigMap, read and watched through the API server (config/configmap-lists.ts), so an edit is in
 * force in every pod within about a second. A mounted ConfigMap file reaches the pod only on the
 * kubelet's sync period (about a minute; docs/kubernetes.md "Declarative lists"). The chart writes
 * this for its declarative lists.
 *
 * ```yaml
 * allowlists:
 *   partners:
 *     source: config
 *     configMap: {name: ipgate-lists, key: partners.yaml}
 * ```
 */
import { Nullable, Section, Type, type Static } from './kit';

/** A Kubernetes object name (RFC 1123 subdomain). */
const OBJECT_NAME = '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$';
/** A ConfigMap data key. */
const DATA_KEY = '^[-._a-zA-Z0-9]+$';

export const ListConfigMapSchema = Section({
  /** The ConfigMap's name. ipgate needs get, list and watch on it (the chart's Role grants them by name). */
  name: Type.String({ pattern: OBJECT_NAME, maxLength: 253 }),
  /** The data key holding the entries: a YAML or JSON array, as a list `file`. */
  key: Type.String({ pattern: DATA_KEY, maxLength: 253 }),
  /**
   * Its namespace; null: the pod's own (POD_NAMESPACE, then the service account's namespace, then
   * the kubeconfig context's), as `store.namespace`. After loading, the namespace used.
   */
  namespace: Nullable(Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 }), { default: null }),
});

/** After loading: `namespace` filled in (null until the API is asked, then the namespace used). */
export type ListConfigMap = Static<typeof ListConfigMapSchema>;
