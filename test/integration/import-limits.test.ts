/**
 * An Ingress's rate-limit annotations imported (src/import/limits.ts) and run: the config the
 * import writes passes the loader `check-config` uses and limits as ingress-nginx did (burst = rate
 * x limit-burst-multiplier, nodelay, 503 past it), limit-whitelist's clients exempt, limit-connections
 * as requests in progress. In process, real sockets, clients by their 127.0.0.x source.
 */
import type http from 'node:http';
import t from 'tap';
import { countingBackend } from '../helpers/http';
import { startIpgate } from '../helpers/ipgate';
import { connect, readAll, waitFor } from '../helpers/net';
import { convertIngressNginx } from '../../src/import/ingress-nginx';
import { limitIngress } from '../helpers/limit-ingress';

async function get(port: number, from: string, path = '/'): Promise<number> {
  const c = await connect({ port, localAddress: from });
  c.write(`GET ${path} HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n`);
  return Number(/^HTTP\/1\.1 (\d{3})/.exec((await readAll(c, 10_000)).toString('latin1'))?.[1] ?? 0);
}

t.test('limit-rps, limit-burst-multiplier, limit-connections and limit-whitelist behave as the annotations say', async (t) => {
  const held: http.ServerResponse[] = [];
  const be = await countingBackend((req, res) => {
    if (req.url === '/hold') held.push(res);
    else res.end('ok\n');
  });
  t.teardown(() => be.close());
  const r = convertIngressNginx({
    ingresses: [
      limitIngress({
        'limit-rpm': '1',
        'limit-burst-multiplier': '3',
        'limit-connections': '1',
        'limit-whitelist': '127.0.0.9/32',
      }),
    ],
    services: [],
    configMap: null,
    servicesFrom: 'file',
  });
  t.same(r.report.unconverted, [], 'every annotation converted');
  const config = r.config as { allowlists: Record<string, unknown>; listeners: Array<Record<string, unknown>> };
  const listener = config.listeners[0]!;
  const g = await startIpgate(
    {
      allowlists: { ...config.allowlists, 'ingress-default': ['127.0.0.0/8'] },
      listeners: [
        {
          ...listener,
          listen: '127.0.0.1:0',
          allowlist: 'ingress-default',
          routes: (listener.routes as Array<Record<string, unknown>>).map((x) => ({ ...x, upstreams: [`127.0.0.1:${be.port}`] })),
        },
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const port = g.port();
  const seq: number[] = [];
  for (let i = 0; i < 5; i++) seq.push(await get(port, '127.0.0.2'));
  t.same(seq, [200, 200, 200, 200, 503], "limit-rpm 1 x multiplier 3: burst 3 + 1 at once, then 503 (ingress-nginx's status)");
  const exempt: number[] = [];
  for (let i = 0; i < 8; i++) exempt.push(await get(port, '127.0.0.9'));
  t.same(exempt, Array(8).fill(200), 'limit-whitelist: never limited');
  const a = get(port, '127.0.0.3', '/hold');
  await waitFor(() => held.length === 1, 5000, 'one request in progress');
  t.equal(await get(port, '127.0.0.3', '/hold'), 503, 'limit-connections 1: a second in progress, 503');
  held.splice(0)[0]!.end('done\n');
  t.equal(await a, 200);
});
