/**
 * The data Service: NodePort (or LoadBalancer) with externalTrafficPolicy Local, one port per
 * listener, and never the admin port.
 */
import t from 'tap';
import { HTTP_LISTENER, TCP_LISTENER, VARIANTS, render } from '../helpers/helm';

const dataService = (values: Record<string, unknown>) => render(values).one('Service', 'edge-ipgate');

t.test('the default Service is a NodePort with externalTrafficPolicy Local, so kube-proxy does not SNAT', async (t) => {
  const svc = dataService({});
  t.equal(svc.spec.type, 'NodePort');
  t.equal(svc.spec.externalTrafficPolicy, 'Local');
  t.equal(svc.spec.internalTrafficPolicy, 'Cluster');
  t.same(svc.spec.ports, [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http' }], 'nodePort left to Kubernetes');
  t.same(svc.spec.selector, { 'app.kubernetes.io/name': 'ipgate', 'app.kubernetes.io/instance': 'edge', 'app.kubernetes.io/component': 'controller' });
});

t.test('one Service port per listener, with its fixed nodePort', async (t) => {
  const svc = dataService(VARIANTS['two listeners, fixed nodePorts']!);
  t.same(svc.spec.ports, [
    { name: 'web', protocol: 'TCP', port: 80, targetPort: 'web', nodePort: 30080 },
    { name: 'tls', protocol: 'TCP', port: 443, targetPort: 'tls', nodePort: 30443 },
  ]);
});

t.test('servicePort defaults to the listener port', async (t) => {
  const svc = dataService({ listeners: [{ ...HTTP_LISTENER, servicePort: null, nodePort: null }], allowlists: { office: [] } });
  t.same(svc.spec.ports, [{ name: 'web', protocol: 'TCP', port: 8080, targetPort: 'web' }]);
});

for (const [name, values] of Object.entries(VARIANTS)) {
  t.test(`${name}: the admin port is on no externally reachable Service`, async (t) => {
    const out = render(values);
    for (const svc of out.all('Service')) {
      const exposed = svc.spec.type === 'NodePort' || svc.spec.type === 'LoadBalancer';
      const ports = (svc.spec.ports as { name: string; port: number; targetPort: unknown }[]);
      if (exposed) {
        t.notOk(ports.some((p) => p.name === 'admin' || p.targetPort === 'admin' || p.targetPort === 9901 || p.port === 9901),
          `${svc.metadata.name} (${svc.spec.type}) has no admin port`);
        t.equal(svc.spec.externalTrafficPolicy, 'Local', `${svc.metadata.name} keeps the client IP`);
      }
    }
    t.equal(out.all('Service').filter((s) => s.spec.type === 'NodePort' || s.spec.type === 'LoadBalancer').length, 1,
      'exactly one externally reachable Service');
  });
}

t.test('LoadBalancer: still Local, with the health check node port and source ranges', async (t) => {
  const svc = dataService(VARIANTS['service.type=LoadBalancer']!);
  t.equal(svc.spec.type, 'LoadBalancer');
  t.equal(svc.spec.externalTrafficPolicy, 'Local');
  t.equal(svc.spec.healthCheckNodePort, 32100);
  t.same(svc.spec.loadBalancerSourceRanges, ['0.0.0.0/0']);
});

t.test('NodePort: LoadBalancer-only fields are not rendered', async (t) => {
  const svc = dataService({ service: { healthCheckNodePort: 32100, loadBalancerSourceRanges: ['10.0.0.0/8'], loadBalancerClass: 'x' } });
  t.equal(svc.spec.healthCheckNodePort, undefined);
  t.equal(svc.spec.loadBalancerSourceRanges, undefined);
  t.equal(svc.spec.loadBalancerClass, undefined);
});

t.test('externalTrafficPolicy Cluster is possible (PROXY-sending load balancer) and NOTES warn about it', async (t) => {
  const out = render({ service: { externalTrafficPolicy: 'Cluster' }, listeners: [TCP_LISTENER], allowlists: { partners: [] } });
  t.equal(out.one('Service', 'edge-ipgate').spec.externalTrafficPolicy, 'Cluster');
  t.match(out.notes(), /WARNING: externalTrafficPolicy is Cluster/);
  t.notMatch(render({}).notes(), /WARNING/);
});
