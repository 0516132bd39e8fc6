/**
 * Whom an imported listener believes about the client (src/import/trust.ts): every combination of
 * the controller ConfigMap's four trust keys (use-proxy-protocol, use-forwarded-headers,
 * enable-real-ip, proxy-real-ip-cidr), with and without the operator's flags, is imported; each
 * written config is checked by the loader, then asked about a set of connections through ipgate's
 * own identity code (the PROXY decoder, derive.ts, the X-Forwarded-For walk, the matcher). For
 * every connection, ipgate's client must be no further from ipgate than the one ingress-nginx
 * chose (or the connection closed): the import never trusts more than the source did. And a
 * range that trusts every peer is written only with --trust-all-proxies.
 *
 * The reference is nginx.tmpl (v1.15): realip on when any of the three booleans is;
 * set_real_ip_from = proxy-real-ip-cidr (default 0.0.0.0/0), checked against the socket peer;
 * real_ip_header proxy_protocol with use-proxy-protocol (before 1.13 always, which is what the
 * import carries over: trust.ts says why), else X-Forwarded-For, walked with real_ip_recursive on.
 * `listen ... proxy_protocol` refuses a connection without a header.
 */
import t from 'tap';
import { Matcher } from '../../../src/allowlist/matcher';
import { buildConfig } from '../../../src/config/load';
import type { Config } from '../../../src/schema/config';
import { afterHeader, beforeHeader } from '../../../src/identity/derive';
import { clientFromForwardedFor } from '../../../src/identity/forwarded-for';
import { convertIngressNginx, DEFAULT_OPTIONS, type ImportOptions, type ImportResult } from '../../../src/import/ingress-nginx';
import type { KubeObject } from '../../../src/import/objects';
import { familiesCovered } from '../../../src/import/trust';
import { parseCidr } from '../../../src/allowlist/cidr';
import { decodeProxyHeader } from '../../../src/proxy-protocol/decoder';

const INGRESS: KubeObject = {
  kind: 'Ingress',
  metadata: { name: 'web', namespace: 'shop', creationTimestamp: '2024-01-01T00:00:00Z' },
  spec: {
    ingressClassName: 'nginx',
    rules: [
      {
        host: 'shop.example.com',
        http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: 'web', port: { number: 80 } } } }] },
      },
    ],
  },
};

function convert(data: Record<string, string>, opts: Partial<ImportOptions> = {}): ImportResult {
  const configMap: KubeObject = { kind: 'ConfigMap', metadata: { name: 'ingress-nginx-controller', namespace: 'ingress-nginx' }, data };
  return convertIngressNginx({ ingresses: [INGRESS], services: [], configMap, servicesFrom: 'file' }, { ...DEFAULT_OPTIONS, ...opts });
}

// ---- the connections asked about: every address distinct, so a client address tells its hop.
const BALANCER = '10.0.0.5'; // inside the narrow proxy-real-ip-cidr 10.0.0.0/24
const STRANGER = '192.0.2.7'; // outside it
const PROXY_SOURCES = [null, '10.0.0.9', '198.51.100.9'] as const; // no header, a source inside the CIDR, one outside
const XFFS = [null, '203.0.113.5', '203.0.113.5, 10.0.0.7'] as const; // none, one client, a client behind a proxy inside the CIDR

interface Probe {
  socket: string;
  proxySource: string | null;
  xff: string | null;
}
const PROBES: Probe[] = [];
for (const socket of [BALANCER, STRANGER])
  for (const proxySource of PROXY_SOURCES) for (const xff of XFFS) PROBES.push({ socket, proxySource, xff });

/** The hops of a probe, nearest first: socket, PROXY source, X-Forwarded-For right to left. */
function chain(p: Probe): string[] {
  return [
    p.socket,
    ...(p.proxySource !== null ? [p.proxySource] : []),
    ...(p.xff
      ?.split(',')
      .map((s) => s.trim())
      .reverse() ?? []),
  ];
}

/** 'closed', or how many hops from ipgate the chosen client is (0: the socket peer). */
type Outcome = 'closed' | number;

function depth(p: Probe, client: string): number {
  const i = chain(p).indexOf(client);
  if (i < 0) throw new Error(`client ${client} is not a hop of ${JSON.stringify(p)}`);
  return i;
}

/** ingress-nginx's $remote_addr for the probe (nginx.tmpl, realip module; see the file comment). */
function ingressNginx(data: Record<string, string>, p: Probe): Outcome {
  const on = (k: string): boolean => data[k] === 'true';
  const pp = on('use-proxy-protocol');
  const realip = pp || on('use-forwarded-headers') || on('enable-real-ip');
  // `listen ... proxy_protocol`: no header, no request.
  if (pp && p.proxySource === null) return 'closed';
  if (!realip) return 0;
  const text = data['proxy-real-ip-cidr'] ?? '0.0.0.0/0';
  const cidrs = text.split(',').map((s) => parseCidr(s.trim()));
  // An invalid value fails `nginx -t`: nothing trusted is the most the import may assume.
  if (cidrs.some((c) => !c.ok)) return 0;
  const from = Matcher.compile(cidrs.map((c) => ({ cidr: (c as { ok: true; cidr: { text: string } }).cidr.text })));
  if (!from.admits(p.socket)) return 0;
  if (pp) return 1;
  // real_ip_recursive on: from the right, past every hop in set_real_ip_from.
  const hops = chain(p);
  let i = 0;
  while (i + 1 < hops.length && (i === 0 || from.admits(hops[i]!))) i++;
  return i;
}

/** ipgate's client for the probe under `config`, through the data path's own functions. */
function ipgate(config: Config, p: Probe): Outcome {
  const l = config.listeners[0]!;
  const mode = l.proxyProtocol.mode;
  const sources = l.proxyProtocol.trustedSources as string[];
  const trusted = mode !== 'off' && Matcher.compile(sources.map((cidr) => ({ cidr }))).admits(p.socket);
  let outcome = beforeHeader(mode, trusted);
  if (outcome === null) {
    const bytes = Buffer.from(
      p.proxySource !== null ? `PROXY TCP4 ${p.proxySource} 10.0.0.1 40000 8080\r\nGET / HTTP/1.1\r\n` : 'GET / HTTP/1.1\r\n',
    );
    const r = decodeProxyHeader(bytes);
    if (r.kind === 'more') throw new Error('a complete header was read as incomplete');
    outcome = afterHeader(r, bytes[0]!, mode, trusted);
  }
  if (!outcome.ok) return 'closed';
  // Mode off: a PROXY line is the start of an HTTP request, answered 400.
  if (mode === 'off' && p.proxySource !== null) return 'closed';
  let client = outcome.source?.address ?? p.socket;
  const proxies = Matcher.compile((l.http.trustedProxies as string[]).map((cidr) => ({ cidr })));
  if (proxies.admits(client)) client = clientFromForwardedFor(p.xff, client, proxies);
  return depth(p, client);
}

const KEY_VALUES = [undefined, 'true', 'false'] as const;
const CIDR_VALUES = [undefined, '10.0.0.0/24', '0.0.0.0/0', '10.0.0.0/24,0.0.0.0/0', '10.0.0.300/24'] as const;
const FLAGS: Array<{ what: string; opts: Partial<ImportOptions> }> = [
  { what: 'no flag', opts: {} },
  { what: '--trust-all-proxies', opts: { trustAllProxies: true } },
  { what: '--proxy-real-ip-cidr 10.0.0.0/25 (the balancers)', opts: { proxyRealIpCidr: ['10.0.0.0/25'] } },
  { what: '--proxy-real-ip-cidr 192.0.2.0/24', opts: { proxyRealIpCidr: ['192.0.2.0/24'] } },
];

const TRUST_ALL = new Set(['0.0.0.0/0', '10.0.0.0/24,0.0.0.0/0']);

t.test('every combination of the four keys: never more trust than ingress-nginx, no trust-all range without the flag', async (t) => {
  let rows = 0;
  let configs = 0;
  /** Probes where both chose the same hop past the socket: the check is not vacuous (all closed). */
  let beyondSocket = 0;
  const violations: string[] = [];
  for (const pp of KEY_VALUES)
    for (const fh of KEY_VALUES)
      for (const er of KEY_VALUES)
        for (const cidr of CIDR_VALUES)
          for (const flag of FLAGS) {
            rows++;
            const data: Record<string, string> = {};
            if (pp !== undefined) data['use-proxy-protocol'] = pp;
            if (fh !== undefined) data['use-forwarded-headers'] = fh;
            if (er !== undefined) data['enable-real-ip'] = er;
            if (cidr !== undefined) data['proxy-real-ip-cidr'] = cidr;
            const row = `${JSON.stringify(data)} ${flag.what}`;
            const r = convert(data, flag.opts);

            // Refused exactly when a header is believed and the peers trusted would be everyone without
            // --trust-all-proxies, or the flag names peers ingress-nginx did not trust.
            const realip = pp === 'true' || fh === 'true' || er === 'true';
            const invalid = cidr === '10.0.0.300/24';
            const flagCidr = flag.opts.proxyRealIpCidr?.[0];
            const outside = flagCidr === '192.0.2.0/24' && cidr === '10.0.0.0/24';
            const everyone = flagCidr === undefined ? !invalid && (cidr === undefined || TRUST_ALL.has(cidr)) : false;
            const expectRefused = realip && (outside || invalid || (everyone && flag.opts.trustAllProxies !== true));
            if (r.report.refused.length > 0 !== expectRefused)
              violations.push(`${row}: refused ${JSON.stringify(r.report.refused)}, expected ${expectRefused}`);
            if (r.report.refused.length > 0) {
              if (r.config !== null) violations.push(`${row}: refused, but a config was returned`);
              const why = r.report.refused.map((f) => f.reason).join(' ');
              if (outside && !/outside the ConfigMap's proxy-real-ip-cidr/.test(why))
                violations.push(`${row}: the refusal does not say the flag is outside: ${why}`);
              if (!outside && !/--proxy-real-ip-cidr 10\.0\.0\.0\/24/.test(why))
                violations.push(`${row}: the refusal does not name the flag: ${why}`);
              if (invalid && !/^invalid: .*Correct it in the input/.test(why))
                violations.push(`${row}: the refusal does not say the value is invalid: ${why}`);
              if (everyone && !/--trust-all-proxies/.test(why))
                violations.push(`${row}: the refusal does not name --trust-all-proxies: ${why}`);
              continue;
            }
            if (r.config === null) {
              violations.push(`${row}: no config and no refusal`);
              continue;
            }
            configs++;
            const config = buildConfig(r.config);
            const l = config.listeners[0]!;
            for (const [field, list] of [
              ['trustedSources', l.proxyProtocol.trustedSources],
              ['trustedProxies', l.http.trustedProxies],
            ] as const) {
              const covered = familiesCovered(
                (list as string[]).map((c) => (parseCidr(c) as { ok: true; cidr: Parameters<typeof familiesCovered>[0][number] }).cidr),
              );
              if (covered.length > 0 && flag.opts.trustAllProxies !== true)
                violations.push(`${row}: ${field} ${JSON.stringify(list)} trusts everyone without --trust-all-proxies`);
            }
            if (pp === 'true' && (l.http.trustedProxies as string[]).length > 0)
              violations.push(`${row}: X-Forwarded-For trusted with use-proxy-protocol`);
            for (const p of PROBES) {
              const want = ingressNginx(data, p);
              const got = ipgate(config, p);
              const ok = got === 'closed' || (want !== 'closed' && got <= want);
              if (got !== 'closed' && got === want && got > 0) beyondSocket++;
              if (!ok) violations.push(`${row} ${JSON.stringify(p)}: ipgate ${got}, ingress-nginx ${want}`);
            }
          }
  t.equal(rows, 3 * 3 * 3 * 5 * 4, `${rows} combinations`);
  t.ok(configs > 150, `${configs} configs written and probed with ${PROBES.length} connections each`);
  t.ok(beyondSocket > 500, `${beyondSocket} probes where both believed the same PROXY header or X-Forwarded-For hop`);
  t.same(violations, [], 'no combination trusts more than ingress-nginx did');
});

t.test("the model can fail: the config main wrote for the issue's ConfigMap trusts more than ingress-nginx", async (t) => {
  // What `ipgate import` wrote before: the default 0.0.0.0/0 for both the PROXY sources and the
  // X-Forwarded-For proxies. A stranger's PROXY header naming 198.51.100.9 with X-Forwarded-For
  // naming an allowlisted address chose the X-Forwarded-For entry.
  const data = { 'use-proxy-protocol': 'true', 'use-forwarded-headers': 'true' };
  const old = buildConfig({
    allowlists: { a: ['0.0.0.0/0'] },
    listeners: [
      {
        name: 'http',
        mode: 'http',
        listen: '0.0.0.0:8080',
        allowlist: 'a',
        upstreams: ['127.0.0.1:1'],
        proxyProtocol: { mode: 'required', trustedSources: ['0.0.0.0/0'] },
        http: { trustedProxies: ['0.0.0.0/0'] },
      },
    ],
  });
  const forged: Probe = { socket: STRANGER, proxySource: '198.51.100.9', xff: '203.0.113.5' };
  t.equal(ingressNginx(data, forged), 1, 'ingress-nginx: the PROXY source is the client');
  t.equal(ipgate(old, forged), 2, 'the old import: the X-Forwarded-For entry the client wrote');
  const r = convert(data, { trustAllProxies: true });
  t.equal(ipgate(buildConfig(r.config!), forged), 1, 'the import now: the PROXY source');
});

t.test('the refusal and the notes say what to do', async (t) => {
  const unset = convert({ 'use-proxy-protocol': 'true' });
  t.equal(unset.config, null);
  t.match(unset.report.refused, [
    {
      source: 'ConfigMap ingress-nginx/ingress-nginx-controller',
      item: 'proxy-real-ip-cidr',
      reason:
        /^not set: ingress-nginx's default 0\.0\.0\.0\/0 trusts every IPv4 peer to name the client in a PROXY header, so any client could choose the address the allowlist checks\. Pass your load balancers' CIDRs .*--proxy-real-ip-cidr 10\.0\.0\.0\/24/,
    },
  ]);
  t.equal(unset.report.refused[0]!.value, undefined, 'no value: the key is not set');

  const xff = convert({ 'use-forwarded-headers': 'true', 'proxy-real-ip-cidr': '0.0.0.0/1,128.0.0.0/1' });
  t.match(
    xff.report.refused,
    [
      {
        item: 'proxy-real-ip-cidr',
        value: '0.0.0.0/1,128.0.0.0/1',
        reason: /^it trusts every IPv4 peer to name the client in X-Forwarded-For/,
      },
    ],
    'two halves are everyone too',
  );

  const v6 = convert({ 'use-proxy-protocol': 'true' }, { proxyRealIpCidr: ['2001:db8::/64'] });
  t.match(
    v6.report.refused,
    [
      {
        item: '--proxy-real-ip-cidr',
        value: '2001:db8::/64',
        reason:
          /outside the ConfigMap's proxy-real-ip-cidr \(not set: ingress-nginx's default 0\.0\.0\.0\/0\): ingress-nginx never believed a PROXY header from it/,
      },
    ],
    'the default covers IPv4 only: an IPv6 balancer was never believed',
  );

  const flagged = convert(
    { 'use-proxy-protocol': 'true', 'use-forwarded-headers': 'true', 'compute-full-forwarded-for': 'true' },
    { proxyRealIpCidr: ['10.0.0.0/24'] },
  );
  const l = (flagged.config!.listeners as Array<Record<string, Record<string, unknown>>>)[0]!;
  t.same(l.proxyProtocol, { mode: 'required', trustedSources: ['10.0.0.0/24'] });
  t.same(l.http, { xForwardedFor: 'append' }, 'no trustedProxies; compute-full-forwarded-for is append');
  const notes = flagged.report.notes.map((n) => `${n.item}: ${n.reason}`).join('\n');
  t.match(
    notes,
    /use-forwarded-headers: with use-proxy-protocol, X-Forwarded-For does not choose the client .* From 1\.13 .* http\.trustedProxies by hand/,
  );
  t.match(notes, /compute-full-forwarded-for: ingress-nginx appended the PROXY source to the X-Forwarded-For the client sent, unchecked/);
  t.match(notes, /use-proxy-protocol: .*ipgate closes such connections \(pp_untrusted\)/);

  const cfh = convert({ 'compute-full-forwarded-for': 'true' });
  t.equal(
    (cfh.config!.listeners as Array<Record<string, Record<string, unknown>>>)[0]!.http!.xForwardedFor,
    'replace',
    'without use-forwarded-headers ingress-nginx sent the client only',
  );

  const header = convert({ 'use-forwarded-headers': 'true', 'forwarded-for-header': 'CF-Connecting-IP' });
  t.same(header.report.refused, [], 'nothing is trusted, so nothing to refuse');
  t.match(header.report.unconverted, [
    { item: 'forwarded-for-header', value: 'CF-Connecting-IP', reason: /X-Forwarded-For only; no proxy is trusted/ },
  ]);

  const unused = convert({}, { proxyRealIpCidr: ['10.0.0.0/24'], trustAllProxies: true });
  t.same(
    unused.report.notes.map((n) => n.item),
    ['--proxy-real-ip-cidr', '--trust-all-proxies'],
    'flags with nothing to trust are named as not used',
  );
});

t.test('familiesCovered: prefix 0, halves, and gaps', async (t) => {
  const c = (...xs: string[]) => xs.map((x) => (parseCidr(x) as { ok: true; cidr: Parameters<typeof familiesCovered>[0][number] }).cidr);
  t.same(familiesCovered(c('0.0.0.0/0')), [4]);
  t.same(familiesCovered(c('::/0', '10.0.0.0/8')), [6]);
  t.same(familiesCovered(c('128.0.0.0/1', '0.0.0.0/1')), [4], 'order does not matter');
  t.same(familiesCovered(c('0.0.0.0/1', '128.0.0.0/2')), [], 'a gap at the top');
  t.same(familiesCovered(c('0.0.0.0/2', '0.0.0.0/1', '128.0.0.0/1', '::/1', '8000::/1')), [4, 6], 'nested and both families');
  t.same(familiesCovered([]), []);
});
