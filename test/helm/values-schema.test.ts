/**
 * Invalid values are refused by `helm template` (values.schema.json, or the chart's cross-field
 * checks) with a message naming the field.
 */
import t from 'tap';
import { HTTP_LISTENER, TCP_LISTENER, renderError } from '../helpers/helm';

const withListener = (patch: Record<string, unknown>) => ({ listeners: [{ ...HTTP_LISTENER, ...patch }], allowlists: { office: [] } });

const CASES: { what: string; values: Record<string, unknown>; message: RegExp }[] = [
  { what: 'kind StatefulSet', values: { kind: 'StatefulSet' }, message: /at '\/kind': value must be one of 'DaemonSet', 'Deployment'/ },
  { what: 'service.type ClusterIP (the data Service must be reachable from outside)', values: { service: { type: 'ClusterIP' } }, message: /at '\/service\/type': value must be one of 'NodePort', 'LoadBalancer'/ },
  { what: 'externalTrafficPolicy misspelt', values: { service: { externalTrafficPolicy: 'local' } }, message: /at '\/service\/externalTrafficPolicy': value must be one of 'Local', 'Cluster'/ },
  { what: 'nodePort above 32767', values: withListener({ nodePort: 40000 }), message: /at '\/listeners\/0\/nodePort'[\s\S]*maximum: got 40,000, want 32,767/ },
  { what: 'nodePort below 30000', values: withListener({ nodePort: 8080 }), message: /at '\/listeners\/0\/nodePort'[\s\S]*minimum: got 8,080, want 30,000/ },
  { what: 'proxyProtocol mode "maybe"', values: withListener({ proxyProtocol: { mode: 'maybe' } }), message: /at '\/listeners\/0\/proxyProtocol\/mode': value must be one of 'off', 'optional', 'required'/ },
  { what: 'listener port 70000', values: withListener({ port: 70000 }), message: /at '\/listeners\/0\/port': maximum: got 70,000, want 65,535/ },
  { what: 'listener without upstreams', values: withListener({ upstreams: [] }), message: /at '\/listeners\/0\/upstreams': minItems: got 0, want 1/ },
  { what: 'upstream without a port', values: withListener({ upstreams: ['backend'] }), message: /at '\/listeners\/0\/upstreams\/0'/ },
  { what: 'outboundProxyProtocol v3', values: withListener({ outboundProxyProtocol: 'v3' }), message: /at '\/listeners\/0\/outboundProxyProtocol': value must be one of 'none', 'v1', 'v2'/ },
  { what: 'unknown listener key (typo)', values: withListener({ upstream: ['x:1'] }), message: /at '\/listeners\/0': additional properties 'upstream' not allowed/ },
  { what: 'unknown top-level key', values: { hostnetwork: true }, message: /additional properties 'hostnetwork' not allowed/ },
  { what: 'listener name with uppercase (a port name)', values: withListener({ name: 'Web' }), message: /at '\/listeners\/0\/name'/ },
  { what: 'no listeners', values: { listeners: [] }, message: /at '\/listeners': minItems: got 0, want 1/ },
  { what: 'workers 0', values: { config: { workers: 0 } }, message: /at '\/config\/workers'/ },
  { what: 'admin.separateProcess not a boolean', values: { admin: { separateProcess: 1 } }, message: /at '\/admin\/separateProcess': got number, want boolean/ },
  { what: 'logging level verbose', values: { config: { logging: { level: 'verbose' } } }, message: /at '\/config\/logging\/level': value must be one of/ },
  { what: 'image digest not sha256', values: { image: { digest: 'latest' } }, message: /at '\/image\/digest'/ },
  // Cross-field checks (templates/_helpers.tpl "ipgate.validate").
  { what: 'listener port < 1024 without hostNetwork', values: withListener({ port: 80 }), message: /listeners\[0\]\.port: 80 is below 1024.*without hostNetwork/ },
  { what: 'listener names an undefined allowlist', values: { listeners: [TCP_LISTENER] }, message: /listeners\[0\]\.allowlist: "partners" is not defined under allowlists \(defined: default\)/ },
  { what: 'two listeners with one name', values: { listeners: [HTTP_LISTENER, { ...TCP_LISTENER, name: 'web' }], allowlists: { office: [], partners: [] } }, message: /listeners\[1\]\.name: "web" is used twice/ },
  { what: 'listener on the admin port', values: withListener({ port: 9901 }), message: /listeners\[0\]\.port: 9901 is already used by another listener or by admin\.port/ },
  { what: 'grace period shorter than the drain', values: { terminationGracePeriodSeconds: 10 }, message: /terminationGracePeriodSeconds: 10 s is not more than/ },
  { what: 'hostNetwork Deployment with 2 replicas and no anti-affinity', values: { hostNetwork: true, kind: 'Deployment', replicaCount: 2 }, message: /hostNetwork: two pods of a Deployment on one node/ },
];

for (const c of CASES) {
  t.test(`refused: ${c.what}`, async (t) => {
    t.match(renderError(c.values), c.message);
  });
}
