/**
 * The client IP across a kube-proxy NodePort, end to end, in network namespaces on this machine.
 *
 *   client 203.0.113.10, .20 ─┐                      ┌─ node1 192.0.2.11 ── edge pod 10.244.1.10 (ipgate)
 *   lb 198.51.100.10 (HAProxy)├── wan (bridge br0) ──┤
 *                             │                      └─ node2 192.0.2.12 ── backend pod 10.244.2.20 (ipgate echo)
 *
 * The nodes route the pod network between them (10.244.1.0/24 on node1, 10.244.2.0/24 on node2, no
 * encapsulation) and NAT the NodePorts with rules shaped like kube-proxy's (kube-proxy-rules.ts).
 * ipgate runs in the edge pod and forwards to the echo backend, which reports the client it learned.
 * One ipgate process serves both phases; the nodes' rules are swapped from Local to Cluster, the way
 * an operator flipping `externalTrafficPolicy` would.
 *
 * Listeners (Service port -> nodePort -> pod port):
 *   tcp      30443 -> 8443  PROXY off, outbound PROXY v2 to the TCP echo
 *   http     30080 -> 8080  HTTP, X-Real-IP to the HTTP echo
 *   lb       30444 -> 8444  PROXY required, trustedSources = the load balancer (198.51.100.10)
 *   lbnodes  30445 -> 8445  PROXY required, trustedSources = the node addresses; the NodePort is
 *                           firewalled to the load balancer (the only safe way to trust SNATed peers)
 * HAProxy in the lb namespace: 198.51.100.10:443 -> node1:30444 and :444 -> node1:30445, send-proxy-v2.
 *
 * Only namespaces this test creates carry lab traffic; the host's network is never touched.
 */
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import t from 'tap';
import YAML from 'yaml';
import { MAIN, ROOT, tmpDir } from '../helpers/ipgate';
import { waitFor } from '../helpers/net';
import { Lab, labUnavailable, removeStaleLabs, type NsProcess } from '../helpers/netns';
import { missing, which } from '../helpers/peers';
import { kubeProxyRules, type TrafficPolicy } from './kube-proxy-rules';
import type { TcpResult } from './lab-agent';

const AGENT = path.join(ROOT, 'dist/test/e2e/lab-agent.js');
const CLIENT = '203.0.113.10';
const STRANGER = '203.0.113.20';
const LB = '198.51.100.10';
const NODE1 = '192.0.2.11';
const NODE2 = '192.0.2.12';
const EDGE = '10.244.1.10';
const BACKEND = '10.244.2.20';
const CLUSTER_CIDR = '10.244.0.0/16';
const PORTS = [
  { name: 'tcp', nodePort: 30443, targetPort: 8443 },
  { name: 'http', nodePort: 30080, targetPort: 8080 },
  { name: 'lb', nodePort: 30444, targetPort: 8444 },
  { name: 'lbnodes', nodePort: 30445, targetPort: 8445, allowOnlyFrom: `${LB}/32` },
];

/** A PROXY v2 header claiming `source` (TCP4), as a client forging one would send it. */
function forgedV2(source: string, dest: string): string {
  const sig = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');
  const b = Buffer.alloc(16 + 12);
  sig.copy(b, 0);
  b[12] = 0x21; // v2, PROXY
  b[13] = 0x11; // TCP over IPv4
  b.writeUInt16BE(12, 14);
  Buffer.from(source.split('.').map(Number)).copy(b, 16);
  Buffer.from(dest.split('.').map(Number)).copy(b, 20);
  b.writeUInt16BE(40000, 24);
  b.writeUInt16BE(30445, 26);
  return Buffer.concat([b, Buffer.from('hello\n')]).toString('base64');
}

/** The lab-agent running in one namespace, as a request/response function. */
class Agent {
  private nextId = 1;
  private readonly pending = new Map<number, (r: Record<string, unknown>) => void>();
  constructor(private readonly p: NsProcess) {
    readline.createInterface({ input: p.child.stdout! }).on('line', (line) => {
      const msg = JSON.parse(line) as Record<string, unknown>;
      const cb = this.pending.get(msg.id as number);
      if (cb) {
        this.pending.delete(msg.id as number);
        cb(msg);
      }
    });
  }
  request(op: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.p.child.stdin!.write(`${JSON.stringify({ id, op, ...args })}\n`);
    });
  }
  tcp(host: string, port: number, localAddress: string, extra: Record<string, unknown> = {}): Promise<TcpResult> {
    return this.request('tcp', { host, port, localAddress, ...extra }) as unknown as Promise<TcpResult>;
  }
  async tcpMany(count: number, host: string, port: number, localAddress: string): Promise<TcpResult[]> {
    return (await this.request('tcpMany', { count, host, port, localAddress })).results as TcpResult[];
  }
  http(url: string, localAddress?: string): Promise<{ status?: number; body?: string; error?: string }> {
    return this.request('http', { url, localAddress }) as Promise<{ status?: number; body?: string; error?: string }>;
  }
}

const skip =
  labUnavailable() ||
  missing('haproxy') ||
  (!fs.existsSync(AGENT) || !fs.existsSync(MAIN) ? 'dist/ is not built (npm run build:all)' : false);

t.test('kube-proxy NodePort lab: client IP under externalTrafficPolicy Local and Cluster', { skip, timeout: 90_000 }, async (t) => {
  const stale = removeStaleLabs();
  if (stale.length > 0) t.comment(`removed namespaces of a crashed run: ${stale.join(' ')}`);
  const lab = new Lab();
  t.teardown(() => lab.teardown());

  // ---- topology -------------------------------------------------------------------------------
  for (const role of ['wan', 'client', 'lb', 'node1', 'node2', 'edge', 'backend']) lab.addNamespace(role);
  lab.ip('wan', 'link', 'add', 'br0', 'type', 'bridge');
  lab.ip('wan', 'link', 'set', 'br0', 'up');
  for (const role of ['client', 'lb', 'node1', 'node2']) {
    lab.veth(role, 'eth0', 'wan', `p-${role}`);
    lab.ip('wan', 'link', 'set', `p-${role}`, 'master', 'br0');
  }
  // One L2 segment, several subnets: on-link routes stand in for the internet's routers.
  lab.ip('client', 'addr', 'add', `${CLIENT}/24`, 'dev', 'eth0');
  lab.ip('client', 'addr', 'add', `${STRANGER}/24`, 'dev', 'eth0');
  lab.ip('lb', 'addr', 'add', `${LB}/24`, 'dev', 'eth0');
  lab.ip('node1', 'addr', 'add', `${NODE1}/24`, 'dev', 'eth0');
  lab.ip('node2', 'addr', 'add', `${NODE2}/24`, 'dev', 'eth0');
  for (const [role, nets] of [
    ['client', ['192.0.2.0/24', '198.51.100.0/24']],
    ['lb', ['192.0.2.0/24', '203.0.113.0/24']],
    ['node1', ['203.0.113.0/24', '198.51.100.0/24']],
    ['node2', ['203.0.113.0/24', '198.51.100.0/24']],
  ] as const) {
    for (const net of nets) lab.ip(role, 'route', 'add', net, 'dev', 'eth0');
  }
  // Pods: a veth from each pod to its node; the nodes route each other's pod CIDR (host-gw style).
  lab.veth('edge', 'eth0', 'node1', 'veth-edge');
  lab.ip('node1', 'addr', 'add', '10.244.1.1/24', 'dev', 'veth-edge');
  lab.ip('edge', 'addr', 'add', `${EDGE}/24`, 'dev', 'eth0');
  lab.ip('edge', 'route', 'add', 'default', 'via', '10.244.1.1');
  lab.veth('backend', 'eth0', 'node2', 'veth-backend');
  lab.ip('node2', 'addr', 'add', '10.244.2.1/24', 'dev', 'veth-backend');
  lab.ip('backend', 'addr', 'add', `${BACKEND}/24`, 'dev', 'eth0');
  lab.ip('backend', 'route', 'add', 'default', 'via', '10.244.2.1');
  lab.ip('node1', 'route', 'add', '10.244.2.0/24', 'via', NODE2);
  lab.ip('node2', 'route', 'add', '10.244.1.0/24', 'via', NODE1);
  for (const node of ['node1', 'node2']) lab.sysctl(node, 'net.ipv4.ip_forward', '1');

  const setPolicy = (policy: TrafficPolicy): void => {
    for (const [node, hasLocalEndpoint] of [
      ['node1', true],
      ['node2', false],
    ] as const) {
      lab.iptablesRestore(
        node,
        kubeProxyRules({
          policy,
          hasLocalEndpoint,
          clusterCidr: CLUSTER_CIDR,
          ports: PORTS.map((p) => ({ ...p, podIP: EDGE })),
        }),
      );
    }
  };

  // ---- processes ------------------------------------------------------------------------------
  const node = process.execPath;
  const echo = lab.spawn('backend', node, [MAIN, 'echo', '--tcp', `${BACKEND}:7100`, '--http', `${BACKEND}:7180`]);
  const dir = tmpDir('ipgate-e2e-');
  const configFile = path.join(dir, 'ipgate.yaml');
  fs.writeFileSync(
    configFile,
    YAML.stringify({
      logging: { level: 'debug', format: 'json' },
      store: { type: 'memory' },
      admin: { listen: `${EDGE}:9901` },
      clusterNetworks: [CLUSTER_CIDR, '10.96.0.0/12', '192.0.2.0/24'],
      allowlists: { clients: [{ cidr: `${CLIENT}/32`, comment: 'the lab client' }] },
      listeners: [
        {
          name: 'tcp',
          mode: 'tcp',
          listen: '0.0.0.0:8443',
          allowlist: 'clients',
          upstreams: [`${BACKEND}:7100`],
          outboundProxyProtocol: 'v2',
        },
        { name: 'http', mode: 'http', listen: '0.0.0.0:8080', allowlist: 'clients', upstreams: [`${BACKEND}:7180`] },
        {
          name: 'lb',
          mode: 'tcp',
          listen: '0.0.0.0:8444',
          allowlist: 'clients',
          upstreams: [`${BACKEND}:7100`],
          outboundProxyProtocol: 'v2',
          proxyProtocol: { mode: 'required', trustedSources: [`${LB}/32`] },
        },
        {
          name: 'lbnodes',
          mode: 'tcp',
          listen: '0.0.0.0:8445',
          allowlist: 'clients',
          upstreams: [`${BACKEND}:7100`],
          outboundProxyProtocol: 'v2',
          proxyProtocol: { mode: 'required', trustedSources: ['192.0.2.0/24', '10.244.1.1/32', '10.244.2.1/32'] },
        },
      ],
    }),
  );
  const ipgate = lab.spawn('edge', node, [MAIN, '--config', configFile]);
  const haproxyCfg = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(
    haproxyCfg,
    `global
  maxconn 256
defaults
  mode tcp
  timeout connect 3s
  timeout client 10s
  timeout server 10s
frontend fe_lb
  bind ${LB}:443
  default_backend be_lb
backend be_lb
  server node1 ${NODE1}:30444 send-proxy-v2
frontend fe_lbnodes
  bind ${LB}:444
  default_backend be_lbnodes
backend be_lbnodes
  server node1 ${NODE1}:30445 send-proxy-v2
`,
  );
  const haproxy = lab.spawn('lb', which('haproxy') ?? 'haproxy', ['-db', '-f', haproxyCfg]);
  const clientAgent = new Agent(lab.spawn('client', node, [AGENT]));
  // The kubelet's view: node1 reaches the pod's admin port (never exposed on a NodePort).
  const kubelet = new Agent(lab.spawn('node1', node, [AGENT]));

  await Promise.all([
    echo.waitOutput('ipgate echo:'),
    ipgate.waitOutput('"msg":"ready"'),
    lab.waitListen(haproxy, 443),
    lab.waitListen(haproxy, 444),
  ]);
  const logLines = (): Record<string, unknown>[] =>
    ipgate
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  const readyz = async (): Promise<{ checks: Array<{ name: string; status: string; message: string }> }> => {
    const r = await kubelet.http(`http://${EDGE}:9901/readyz`);
    if (r.body === undefined) throw new Error(`readyz: ${r.error}`);
    return JSON.parse(r.body) as { checks: Array<{ name: string; status: string; message: string }> };
  };
  const check = async (name: string): Promise<{ name: string; status: string; message: string } | undefined> =>
    (await readyz()).checks.find((c) => c.name === name);
  /** Accepted, then closed by ipgate before any byte came back (a close or a reset: we had sent data). */
  const refused = (r: TcpResult): boolean => r.connected && (r.line === '' || r.line === null) && r.error !== 'timeout';
  const echoClient = (line: string | null): string | undefined => /client=([0-9.]+):\d+ via=(\S+)/.exec(line ?? '')?.[1];

  // ---- externalTrafficPolicy: Local -----------------------------------------------------------
  setPolicy('Local');

  await t.test('Local: the backend learns the client over TCP (ipgate -> PROXY v2 -> echo)', async (t) => {
    const r = await clientAgent.tcp(NODE1, 30443, CLIENT);
    t.match(r.line, new RegExp(`^ipgate-echo client=${CLIENT}:\\d+ via=proxy-v2 peer=${EDGE}:`), 'echo reports the client address');
  });

  await t.test('Local: the backend learns the client over HTTP (X-Real-IP)', async (t) => {
    const r = await clientAgent.http(`http://${NODE1}:30080/`, CLIENT);
    t.equal(r.status, 200, r.error ?? '');
    const body = JSON.parse(r.body ?? '{}') as { client?: string; via?: string; headers?: Record<string, string | null> };
    t.equal(body.client, CLIENT);
    t.equal(body.via, 'x-real-ip');
    t.equal(body.headers?.['x-forwarded-for'], CLIENT);
  });

  await t.test('Local: a client not on the allowlist is denied (TCP closed, HTTP 403)', async (t) => {
    const r = await clientAgent.tcp(NODE1, 30443, STRANGER);
    t.ok(r.connected, 'the TCP handshake completes');
    t.ok(refused(r), `closed before any byte (got ${JSON.stringify(r)})`);
    const h = await clientAgent.http(`http://${NODE1}:30080/`, STRANGER);
    t.equal(h.status, 403);
    await waitFor(() => logLines().some((l) => l.msg === 'denied' && l.client === STRANGER && l.listener === 'tcp'), 5000, 'deny log line');
  });

  await t.test('Local: a node without a local ipgate pod drops NodePort traffic', async (t) => {
    const r = await clientAgent.tcp(NODE2, 30443, CLIENT, { timeoutMs: 1500 });
    t.notOk(r.connected, `no connection through node2 (got ${JSON.stringify(r)})`);
  });

  await t.test('Local: HAProxy send-proxy-v2 in front, ipgate trusting exactly the load balancer', async (t) => {
    const r = await clientAgent.tcp(LB, 443, CLIENT);
    t.equal(echoClient(r.line), CLIENT, `the backend learns the client through the balancer (${r.line})`);
    const forged = await clientAgent.tcp(NODE1, 30444, STRANGER, { send: forgedV2(CLIENT, EDGE) });
    t.ok(refused(forged), 'a client forging a PROXY header claiming an allowlisted address is closed (pp_untrusted)');
  });

  await t.test('Local: self-check sees public peers, no source NAT suspected', async (t) => {
    const rs = await clientAgent.tcpMany(25, NODE1, 30443, CLIENT);
    t.equal(rs.filter((r) => echoClient(r.line) === CLIENT).length, 25, 'all 25 connections carry the client address');
    const c = await check('source_nat.tcp');
    t.equal(c?.status, 'ok', c?.message ?? 'no check');
  });

  // ---- externalTrafficPolicy: Cluster ---------------------------------------------------------
  setPolicy('Cluster');

  await t.test('Cluster: ipgate sees a node address, so the allowlisted client is denied', async (t) => {
    const via1 = await clientAgent.tcp(NODE1, 30443, CLIENT);
    const via2 = await clientAgent.tcp(NODE2, 30443, CLIENT);
    t.ok(refused(via1), `through node1: closed (${JSON.stringify(via1)})`);
    t.ok(refused(via2), `through node2: closed (${JSON.stringify(via2)})`);
    // node1 masquerades to its address towards the pod, node2 to its own node address.
    await waitFor(
      () => logLines().some((l) => l.msg === 'denied' && l.listener === 'tcp' && l.client === '10.244.1.1'),
      5000,
      'deny of 10.244.1.1',
    );
    await waitFor(() => logLines().some((l) => l.msg === 'denied' && l.listener === 'tcp' && l.client === NODE2), 5000, `deny of ${NODE2}`);
    t.notOk(
      logLines().some((l) => l.msg === 'denied' && l.client === CLIENT),
      'ipgate never saw 203.0.113.10 under Cluster',
    );
    const h = await clientAgent.http(`http://${NODE1}:30080/`, CLIENT);
    t.equal(h.status, 403, 'HTTP: 403 for the same reason');
  });

  await t.test('Cluster: the self-check flags source NAT (/readyz and one log line)', async (t) => {
    await clientAgent.tcpMany(20, NODE2, 30443, CLIENT);
    await clientAgent.tcpMany(20, NODE1, 30443, CLIENT);
    const c = await check('source_nat.tcp');
    t.equal(c?.status, 'warn');
    t.match(c?.message, /^source NAT suspected: \d+% of the last \d+ connections to listener tcp came from clusterNetworks/);
    await waitFor(() => logLines().some((l) => l.selfCheck === 'source_nat' && l.listener === 'tcp'), 5000, 'source NAT log line');
    const lines = logLines().filter((l) => l.selfCheck === 'source_nat' && l.listener === 'tcp');
    t.equal(lines.length, 1, 'logged once, not per connection');
    t.equal(lines[0]?.level, 'warn');
    t.match(String(lines[0]?.msg), /^source NAT suspected on listener tcp/);
    const lbnodes = await check('source_nat.lbnodes');
    t.not(lbnodes?.status, 'warn', 'a listener whose node peers are trusted PROXY sources is not flagged');
  });

  await t.test('Cluster: HAProxy in front with trustedSources = the balancer: its address is SNATed away, refused', async (t) => {
    for (let i = 0; i < 3; i++) {
      const r = await clientAgent.tcp(LB, 443, CLIENT);
      t.ok(r.line === '' || r.line === null, `refused (${JSON.stringify(r)})`);
    }
    await waitFor(async () => (await check('proxy_untrusted.lb'))?.status === 'warn', 5000, 'proxy_untrusted.lb warn');
  });

  await t.test('Cluster: HAProxy in front, ipgate trusting the node addresses, NodePort firewalled to the balancer', async (t) => {
    const r = await clientAgent.tcp(LB, 444, CLIENT);
    t.equal(echoClient(r.line), CLIENT, `the PROXY header restores the client (${r.line})`);
    const forged = await clientAgent.tcp(NODE1, 30445, STRANGER, { send: forgedV2(CLIENT, EDGE), timeoutMs: 1500 });
    t.notOk(forged.connected, 'a client cannot reach that NodePort to forge a header (node firewall)');
  });
});
