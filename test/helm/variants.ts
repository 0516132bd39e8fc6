/**
 * Values variants the chart tests render. Each is a values file's content, merged by helm over the
 * chart's values.yaml (maps merge, lists replace).
 */
export const TCP_LISTENER = {
  name: 'tls',
  mode: 'tcp',
  port: 8443,
  servicePort: 443,
  nodePort: 30443,
  allowlist: 'partners',
  upstreams: ['ingress-nginx-controller.ingress-nginx:443'],
  outboundProxyProtocol: 'v2',
  proxyProtocol: { mode: 'optional', trustedSources: ['10.0.0.0/8'], headerTimeoutMs: 3000 },
  timeouts: { connectMs: 2000, idleMs: 300000 },
};

export const HTTP_LISTENER = {
  name: 'web',
  mode: 'http',
  port: 8080,
  servicePort: 80,
  nodePort: 30080,
  allowlist: 'office',
  upstreams: ['web.apps:8080', 'web-b.apps:8080'],
  http: { trustedProxies: ['192.0.2.0/24'], forwarded: true, xForwardedFor: 'append' },
};

export const ALLOWLISTS = {
  office: ['203.0.113.0/24', { cidr: '2001:db8::/32', comment: 'office v6' }],
  partners: [{ cidr: '198.51.100.7/32', comment: 'partner A', expiresAt: '2030-01-01T00:00:00Z' }],
};

export const VARIANTS: Record<string, Record<string, unknown>> = {
  default: {},
  'two listeners, fixed nodePorts': { listeners: [HTTP_LISTENER, TCP_LISTENER], allowlists: ALLOWLISTS },
  'kind=Deployment': { kind: 'Deployment', replicaCount: 3 },
  hostNetwork: { hostNetwork: true },
  'hostNetwork with port 443': {
    hostNetwork: true,
    listeners: [{ ...TCP_LISTENER, port: 443 }],
    allowlists: ALLOWLISTS,
  },
  'service.type=LoadBalancer': {
    service: { type: 'LoadBalancer', healthCheckNodePort: 32100, loadBalancerSourceRanges: ['0.0.0.0/0'] },
  },
  existingSecret: { admin: { existingSecret: 'ops-ipgate-token', existingSecretKey: 'admin-token' } },
  'serviceMonitor on': { serviceMonitor: { enabled: true, labels: { release: 'kube-prometheus-stack' } } },
  'dashboard on': { dashboard: { enabled: true } },
};
