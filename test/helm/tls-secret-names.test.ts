/**
 * `tls.secrets[].name` takes any Kubernetes Secret name (a DNS-1123 subdomain), so a Secret is
 * mounted under its own name: cert-manager's `shop.example.com-tls` included, and the directories
 * `ipgate import ingress-nginx --tls` writes (`<secretName>`, `<namespace>.<secretName>`). The
 * volume name must be a DNS label: a name that is one keeps `tls-<name>` (existing installs roll no
 * pod), any other gets `tls-<16 hex digits of its SHA-256>`. Checked with a real `helm template`,
 * the workload against the Kubernetes schema, and the import's output rendered as the chart's values.
 */
import { createHash } from 'node:crypto';
import t from 'tap';
import { convertIngressNginx, DEFAULT_OPTIONS } from '../../src/import/ingress-nginx';
import type { KubeObject } from '../../src/import/objects';
import { HTTP_LISTENER, render, renderError, validateObject, type K8sObject } from '../helpers/helm';

interface Mount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}
interface Volume {
  name: string;
  secret?: { secretName: string };
}

const tlsFor = (dirs: string[]): Record<string, unknown> => ({
  certificates: dirs.map((d) => ({ cert: `/etc/ipgate/tls/${d}/tls.crt`, key: `/etc/ipgate/tls/${d}/tls.key` })),
});
const values = (
  secrets: Array<{ name: string; secretName: string }>,
  tls: Record<string, unknown> = tlsFor(secrets.map((s) => s.name)),
): Record<string, unknown> => ({
  tls: { secrets },
  listeners: [{ ...HTTP_LISTENER, port: 8443, servicePort: 443, nodePort: 30443, tls }],
  allowlists: { office: [] },
});
const workload = (out: ReturnType<typeof render>): K8sObject => [...out.all('DaemonSet'), ...out.all('Deployment')][0]!;
const hashed = (name: string): string => `tls-${createHash('sha256').update(name).digest('hex').slice(0, 16)}`;

const LONG = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`; // 253 characters

t.test('a Secret name with dots, or longer than a label, is mounted under that name', async (t) => {
  t.equal(LONG.length, 253);
  const secrets = [
    { name: 'shop.example.com-tls', secretName: 'shop.example.com-tls' }, // cert-manager's Certificate.spec.secretName
    { name: 'shop.web-tls', secretName: 'web-tls' }, // the import's <namespace>.<secretName>
    { name: LONG, secretName: LONG },
    { name: 'web', secretName: 'web-tls' },
  ];
  const out = render(values(secrets));
  const spec = out.podSpec();
  const mounts = (spec.containers[0].volumeMounts as Mount[]).filter((m) => m.mountPath.startsWith('/etc/ipgate/tls/'));
  t.same(
    mounts,
    secrets.map((s) => ({ name: s.name === 'web' ? 'tls-web' : hashed(s.name), mountPath: `/etc/ipgate/tls/${s.name}`, readOnly: true })),
    'each at /etc/ipgate/tls/<name>; a label keeps tls-<name>, anything else is hashed',
  );
  const volumes = (spec.volumes as Volume[]).filter((v) => v.name.startsWith('tls-'));
  t.same(
    volumes.map((v) => [v.name, v.secret!.secretName]),
    secrets.map((s) => [s.name === 'web' ? 'tls-web' : hashed(s.name), s.secretName]),
  );
  t.ok(
    volumes.every((v) => /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(v.name)),
    'every volume name is a DNS label',
  );
  t.equal(validateObject(workload(out)), null, 'the workload passes the Kubernetes schema');
});

const REFUSED: Array<{ what: string; name: string }> = [
  { what: 'uppercase', name: 'Shop-TLS' },
  { what: 'an underscore', name: 'shop_tls' },
  { what: 'a leading dot', name: '.shop' },
  { what: 'two dots in a row', name: 'shop..tls' },
  { what: 'a label ending in a hyphen', name: 'shop-.tls' },
  { what: 'a slash', name: 'web/x' },
  { what: '254 characters', name: `${LONG}x` },
];
for (const r of REFUSED) {
  t.test(`refused: a name with ${r.what} (no Secret can have it)`, async (t) => {
    t.match(renderError(values([{ name: r.name, secretName: 'web-tls' }], tlsFor(['web']))), /at '\/tls\/secrets\/0\/name'/);
  });
}

t.test("what `ipgate import ingress-nginx --tls` writes renders as the chart's values it names", async (t) => {
  const ing = (ns: string, name: string, host: string, secret: string): KubeObject => ({
    kind: 'Ingress',
    metadata: { name, namespace: ns, creationTimestamp: '2024-01-01T00:00:00Z' },
    spec: {
      ingressClassName: 'nginx',
      tls: [{ hosts: [host], secretName: secret }],
      rules: [{ host, http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name, port: { number: 80 } } } }] } }],
    },
  });
  const r = convertIngressNginx(
    {
      ingresses: [
        ing('shop', 'web', 'shop.example.com', 'shop.example.com-tls'),
        ing('a', 'app', 'a.example.com', 'tls'),
        ing('b', 'app', 'b.example.com', 'tls'),
      ],
      services: [],
      configMap: null,
      servicesFrom: 'file',
    },
    { ...DEFAULT_OPTIONS, tls: true },
  );
  const https = (r.config!.listeners as Array<Record<string, unknown>>)[1]!;
  const note = r.report.notes.find((n) => n.item === 'tls.secrets')!;
  // The note is the chart value, in YAML flow style: [{name: x, secretName: x}, ...]
  const secrets = [...note.value!.matchAll(/\{name: ([^,]+), secretName: ([^}]+)\}/g)].map((m) => ({ name: m[1]!, secretName: m[2]! }));
  t.same(
    secrets.map((s) => s.name),
    ['shop.example.com-tls', 'b.tls', 'a.tls'],
    "ingress-nginx's order (equal times: namespace/name descending)",
  );
  const out = render(values(secrets, https.tls as Record<string, unknown>));
  const text = out.one('ConfigMap', '-config').data['config.yaml'] as string;
  t.match(text, /\/etc\/ipgate\/tls\/shop\.example\.com-tls\/tls\.crt/, 'the imported paths reach config.yaml');
  const mounted = (out.podSpec().containers[0].volumeMounts as Mount[]).map((m) => m.mountPath);
  for (const c of (https.tls as { certificates: Array<{ cert: string }> }).certificates) {
    t.ok(mounted.includes(c.cert.replace(/\/tls\.crt$/, '')), `${c.cert}: its directory is mounted`);
  }
  t.equal(validateObject(workload(out)), null);
});
