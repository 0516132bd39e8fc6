/**
 * The optional NetworkPolicy: ingress to the ipgate pods only; the listener ports from anywhere or
 * from the given CIDRs, the admin port only from the chosen peers (e.g. the monitoring namespace).
 */
import t from 'tap';
import { HTTP_LISTENER, TCP_LISTENER, VARIANTS, render, renderError } from '../helpers/helm';

const MONITORING = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } };

t.test('off by default', async (t) => {
  t.equal(render({}).all('NetworkPolicy').length, 0);
});

t.test('on: selects the controller pods, restricts ingress only (egress to upstreams and the API server stays open)', async (t) => {
  const out = render(VARIANTS['networkPolicy on']!);
  const np = out.one('NetworkPolicy');
  t.same(np.spec.podSelector.matchLabels, out.one('DaemonSet').spec.selector.matchLabels);
  t.same(np.spec.policyTypes, ['Ingress']);
  t.equal(np.spec.egress, undefined);
});

t.test('the admin port is admitted only from the chosen peers', async (t) => {
  const np = render(VARIANTS['networkPolicy on']!).one('NetworkPolicy');
  const admin = (np.spec.ingress as { ports: { port: number }[]; from?: unknown[] }[]).filter((r) => r.ports.some((p) => p.port === 9901));
  t.equal(admin.length, 1, 'one rule names the admin port');
  t.same(admin[0], { ports: [{ protocol: 'TCP', port: 9901 }], from: [MONITORING] });
});

t.test("without admin peers no rule admits the admin port (pods cannot reach it; the kubelet's probes can)", async (t) => {
  const np = render({ networkPolicy: { enabled: true } }).one('NetworkPolicy');
  const ports = (np.spec.ingress as { ports: { port: number }[] }[]).flatMap((r) => r.ports.map((p) => p.port));
  t.same(ports, [8080], 'only the listener port');
});

t.test('data ports: every listener, from anywhere by default, or from the given CIDRs with exceptions', async (t) => {
  const any = render({
    networkPolicy: { enabled: true },
    listeners: [HTTP_LISTENER, TCP_LISTENER],
    allowlists: { office: [], partners: [] },
  }).one('NetworkPolicy');
  t.same(
    any.spec.ingress[0],
    {
      ports: [
        { protocol: 'TCP', port: 8080 },
        { protocol: 'TCP', port: 8443 },
      ],
    },
    'no from: any source',
  );
  const np = render(VARIANTS['networkPolicy on']!).one('NetworkPolicy');
  t.same(np.spec.ingress[0], {
    ports: [{ protocol: 'TCP', port: 8080 }],
    from: [{ ipBlock: { cidr: '203.0.113.0/24' } }, { ipBlock: { cidr: '2001:db8::/32', except: ['2001:db8:ffff::/48'] } }],
  });
  t.notOk(
    (np.spec.ingress[0].ports as { port: number }[]).some((p) => p.port === 9901),
    'the data rule never opens the admin port',
  );
});

t.test('refused: a bad source CIDR, a CIDR without prefix, an empty admin peer, an unknown peer key', async (t) => {
  t.match(
    renderError({ networkPolicy: { enabled: true, data: { sourceCIDRs: ['203.0.113.0/33'] } } }),
    /at '\/networkPolicy\/data\/sourceCIDRs\/0'/,
  );
  t.match(
    renderError({ networkPolicy: { enabled: true, data: { sourceCIDRs: ['203.0.113.7'] } } }),
    /at '\/networkPolicy\/data\/sourceCIDRs\/0'/,
  );
  t.match(
    renderError({ networkPolicy: { enabled: true, data: { sourceCIDRs: [{ cidr: '0.0.0.0/0', except: ['10.0.0/8'] }] } } }),
    /at '\/networkPolicy\/data\/sourceCIDRs\/0'/,
  );
  t.match(renderError({ networkPolicy: { enabled: true, admin: { from: [{}] } } }), /at '\/networkPolicy\/admin\/from\/0': minProperties/);
  t.match(
    renderError({ networkPolicy: { enabled: true, admin: { from: [{ namespaceSelectr: {} }] } } }),
    /additional properties 'namespaceSelectr' not allowed/,
  );
});

t.test('NOTES warn that hostNetwork pods are mostly outside NetworkPolicy', async (t) => {
  t.match(
    render({ hostNetwork: true, networkPolicy: { enabled: true } }).notes(),
    /WARNING: networkPolicy is on, but most CNIs do not enforce NetworkPolicies for hostNetwork pods/,
  );
  t.notMatch(render(VARIANTS['networkPolicy on']!).notes(), /WARNING: networkPolicy/);
});
