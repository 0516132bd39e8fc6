/**
 * The data Service: NodePort (or LoadBalancer) with externalTrafficPolicy Local, one port per
 * listener, and never the admin port.
 */
import t from 'tap';
import { HTTP_LISTENER, TCP_LISTENER, VARIANTS, render, renderError } from '../helpers/helm';

const dataService = (values: Record<string, unknown>) => render(values).one('Service', 'edge-ipgate');

t.test('the default Service is a NodePort with externalTrafficPolicy Local, so kube-proxy does not SNAT', async (t) => {
  const svc = dataService({});
  t.equal(svc.spec.type, 'NodePort');
  t.equal(svc.spec.externalTrafficPolicy, 'Local');
  t.equal(svc.spec.internalTrafficPolicy, 'Cluster');
  t.same(svc.spec.ports, [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 'http' }], 'nodePort left to Kubernetes');
  t.same(svc.spec.selector, {
    'app.kubernetes.io/name': 'ipgate',
    'app.kubernetes.io/instance': 'edge',
    'app.kubernetes.io/component': 'controller',
  });
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
      const ports = svc.spec.ports as { name: string; port: number; targetPort: unknown }[];
      if (exposed) {
        t.notOk(
          ports.some((p) => p.name === 'admin' || p.targetPort === 'admin' || p.targetPort === 9901 || p.port === 9901),
          `${svc.metadata.name} (${svc.spec.type}) has no admin port`,
        );
        t.equal(svc.spec.externalTrafficPolicy, 'Local', `${svc.metadata.name} keeps the client IP`);
      }
    }
    const wanted = (values.service as { enabled?: boolean } | undefined)?.enabled === false ? 0 : 1;
    t.equal(
      out.all('Service').filter((s) => s.spec.type === 'NodePort' || s.spec.type === 'LoadBalancer').length,
      wanted,
      wanted === 1 ? 'exactly one externally reachable Service' : 'none: hostNetwork without a Service',
    );
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

const PP_REQUIRED = { ...TCP_LISTENER, proxyProtocol: { mode: 'required', trustedSources: ['10.0.0.0/8'] } };

t.test('externalTrafficPolicy Cluster is refused while a listener takes connections without a PROXY header, with the reason', async (t) => {
  const message = renderError({ service: { externalTrafficPolicy: 'Cluster' } });
  t.match(
    message,
    /service\.externalTrafficPolicy: Cluster: kube-proxy forwards NodePort traffic to other nodes' pods and source-NATs it, so ipgate would see a node address instead of the client, and the allowlist would decide on it/,
  );
  t.match(message, /listeners\[0\] \("http"\) has proxyProtocol\.mode "off"/, 'names the listener and why');
  t.match(
    message,
    /Keep Local; or .* set proxyProtocol\.mode: required .* or, to accept node addresses, set service\.acceptSourceNat: true/,
    'and the ways out',
  );
  t.match(
    renderError({
      service: { externalTrafficPolicy: 'Cluster' },
      listeners: [HTTP_LISTENER, TCP_LISTENER],
      allowlists: { office: [], partners: [] },
    }),
    /listeners\[0\] \("web"\) has proxyProtocol\.mode "off"/,
    'the first listener without a header is named',
  );
  t.match(
    renderError({ service: { externalTrafficPolicy: 'Cluster' }, listeners: [TCP_LISTENER], allowlists: { partners: [] } }),
    /listeners\[0\] \("tls"\) has proxyProtocol\.mode "optional"/,
    'optional is not enough: a client that sends no header keeps the node address',
  );
});

t.test(
  'externalTrafficPolicy Cluster renders behind a PROXY-sending balancer (every listener required), or when accepted explicitly',
  async (t) => {
    const behindBalancer = render({
      service: { externalTrafficPolicy: 'Cluster' },
      listeners: [PP_REQUIRED],
      allowlists: { partners: [] },
    });
    t.equal(behindBalancer.one('Service', 'edge-ipgate').spec.externalTrafficPolicy, 'Cluster');
    t.notMatch(behindBalancer.notes(), /WARNING/, 'every client is named by a PROXY header: nothing to warn about');
    const accepted = render({ service: { externalTrafficPolicy: 'Cluster', acceptSourceNat: true } });
    t.equal(accepted.one('Service', 'edge-ipgate').spec.externalTrafficPolicy, 'Cluster');
    t.match(accepted.notes(), /WARNING: externalTrafficPolicy is Cluster with service\.acceptSourceNat/);
    t.notMatch(render({}).notes(), /WARNING/);
    t.equal(
      render({ hostNetwork: true, service: { enabled: false, externalTrafficPolicy: 'Cluster' } }).all('Service').length,
      1,
      'without a Service the policy has no effect: not refused',
    );
  },
);

t.test('hostNetwork: the data Service can be turned off; the admin Service stays; NOTES speak of node addresses', async (t) => {
  const out = render(VARIANTS['hostNetwork without a Service']!);
  t.same(
    out.all('Service').map((s) => s.metadata.name),
    ['edge-ipgate-admin'],
    'only the admin Service (ClusterIP)',
  );
  t.equal(out.podSpec().hostNetwork, true);
  const notes = out.notes();
  t.match(notes, /Listeners \(no Service: hostNetwork, on each node's own addresses\):\n {2}- http \(http\): node port 8080/);
  t.match(notes, /1\. No Service: no kube-proxy on the way/);
  t.notMatch(notes, /get svc edge-ipgate /, 'no step reads a Service that is not there');
  t.match(notes, /ipgate doctor --namespace ipgate-system\n/, "doctor finds the pods by the chart's labels");
  t.match(render(VARIANTS.hostNetwork!).notes(), /ipgate doctor --namespace ipgate-system --service edge-ipgate/);
});

t.test('service.enabled: false without hostNetwork is refused: nothing would carry client traffic', async (t) => {
  t.match(
    renderError({ service: { enabled: false } }),
    /service\.enabled: false without hostNetwork: nothing would carry client connections to the pods .* keep the Service, or set hostNetwork: true/,
  );
});
