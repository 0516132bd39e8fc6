/** An Ingress for api.example (Service s:80 in namespace ns) with these ingress-nginx annotations (short names): the limit import's tests. */
const P = 'nginx.ingress.kubernetes.io/';

export function limitIngress(annotations: Record<string, string>): Record<string, unknown> {
  return {
    kind: 'Ingress',
    metadata: {
      name: 'api',
      namespace: 'ns',
      annotations: Object.fromEntries(Object.entries(annotations).map(([k, v]) => [`${P}${k}`, v])),
    },
    spec: {
      ingressClassName: 'nginx',
      rules: [
        {
          host: 'api.example',
          http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 's', port: { number: 80 } } } }] },
        },
      ],
    },
  };
}
