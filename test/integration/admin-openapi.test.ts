/**
 * The admin API's OpenAPI document, fetched from a running admin app over a real socket and linted
 * with Redocly's linter (@redocly/openapi-core, the `recommended-strict` ruleset: every rule an
 * error): zero problems. Beyond the linter: every operation has a stable camelCase operationId and
 * documents at least one 4xx, the error responses it can really send are listed, and `servers`
 * names the default admin address.
 */
import t from 'tap';
import { startAdminGate } from '../helpers/admin-api';

const listener = { name: 'tcp', mode: 'tcp', listen: '127.0.0.1:0', allowlist: 'main', upstreams: ['127.0.0.1:9'] };
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

interface Operation {
  operationId?: string;
  responses: Record<string, { description?: string }>;
  security?: unknown[];
}
type Paths = Record<string, Partial<Record<(typeof METHODS)[number], Operation>>>;

/** The operations the admin API has, by id, with the statuses each must document. */
const expected: Record<string, { route: string; statuses: number[] }> = {
  getHealth: { route: 'GET /healthz', statuses: [200, 421] },
  getReadiness: { route: 'GET /readyz', statuses: [200, 421, 503] },
  getMetrics: { route: 'GET /metrics', statuses: [200, 421] },
  listAllowlists: { route: 'GET /v1/allowlists', statuses: [200, 401, 403, 421] },
  getAllowlist: { route: 'GET /v1/allowlists/{name}', statuses: [200, 400, 401, 403, 404, 421] },
  replaceAllowlist: { route: 'PUT /v1/allowlists/{name}', statuses: [200, 400, 401, 403, 404, 409, 412, 413, 415, 421, 428, 503] },
  createAllowlist: { route: 'POST /v1/allowlists', statuses: [201, 400, 401, 403, 409, 413, 415, 421, 503] },
  deleteAllowlist: { route: 'DELETE /v1/allowlists/{name}', statuses: [204, 400, 401, 403, 404, 409, 412, 421, 503] },
  getLogLevel: { route: 'GET /v1/log-level', statuses: [200, 401, 403, 421] },
  setLogLevel: { route: 'PUT /v1/log-level', statuses: [200, 400, 401, 403, 413, 415, 421] },
  addAllowlistEntries: { route: 'POST /v1/allowlists/{name}/entries', statuses: [200, 400, 401, 403, 404, 409, 412, 413, 415, 421, 503] },
  removeAllowlistEntry: { route: 'DELETE /v1/allowlists/{name}/entries/{cidr}', statuses: [200, 400, 401, 403, 404, 409, 412, 421, 503] },
  checkAllowlistAddress: { route: 'GET /v1/allowlists/{name}/check', statuses: [200, 400, 401, 403, 404, 421] },
  listAuditRecords: { route: 'GET /v1/audit', statuses: [200, 400, 401, 403, 421] },
  explainDecision: { route: 'POST /v1/explain', statuses: [200, 400, 401, 403, 404, 413, 415, 421] },
  listConnections: { route: 'GET /v1/connections', statuses: [200, 400, 401, 403, 404, 421] },
  listRoutes: { route: 'GET /v1/routes', statuses: [200, 400, 401, 403, 404, 421] },
};

t.test('the OpenAPI document lints clean and documents every operation', async (t) => {
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8'] }, listeners: [listener] });
  const r = await g.api('GET', '/openapi.json', { token: null });
  t.equal(r.status, 200);
  const doc = r.json as { openapi: string; servers?: { url: string; description?: string }[]; paths: Paths };

  // The linter is an ES module; this test file is CommonJS.
  const redocly = await import('@redocly/openapi-core');
  const config = await redocly.createConfig({ extends: ['recommended-strict'] });
  const problems = await redocly.lintFromString({ source: r.text, absoluteRef: `${g.base}/openapi.json`, config });
  t.same(
    problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(', ')}`),
    [],
    'Redocly recommended-strict: zero problems',
  );

  t.match(doc.servers, [{ url: 'http://127.0.0.1:9901', description: /admin/ }], 'servers: the default admin address');

  const seen = new Map<string, string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (op === undefined) continue;
      const route = `${method.toUpperCase()} ${path}`;
      t.match(op.operationId, /^[a-z][A-Za-z0-9]+$/, `${route}: a camelCase operationId`);
      t.notOk(seen.has(op.operationId!), `${route}: operationId ${op.operationId} is unique`);
      seen.set(op.operationId!, route);
      const codes = Object.keys(op.responses);
      t.ok(
        codes.some((c) => /^4\d\d$/.test(c)),
        `${route}: at least one 4xx`,
      );
      for (const c of codes)
        t.ok(op.responses[c]!.description && op.responses[c]!.description !== 'Default Response', `${route} ${c}: described`);
    }
  }
  t.equal(seen.size, Object.keys(expected).length, `${Object.keys(expected).length} operations`);
  for (const [id, want] of Object.entries(expected)) {
    t.equal(seen.get(id), want.route, `${id} is ${want.route}`);
    const [method, path] = want.route.split(' ') as [string, string];
    const op = doc.paths[path]?.[method.toLowerCase() as (typeof METHODS)[number]];
    t.same(Object.keys(op?.responses ?? {}).sort(), want.statuses.map(String).sort(), `${id}: the statuses it can send`);
  }
});

t.test('the documented statuses are the ones sent: a sample of each 4xx over the wire', async (t) => {
  const g = await startAdminGate(t, { allowlists: { main: ['10.0.0.0/8'] }, listeners: [listener] });
  const doc = (await g.api('GET', '/openapi.json', { token: null })).json as { paths: Paths };
  const cases: { what: string; method: string; url: string; path: string; opts?: Parameters<typeof g.api>[2]; status: number }[] = [
    {
      what: 'a rebinding Host',
      method: 'GET',
      url: '/healthz',
      path: '/healthz',
      opts: { headers: { host: 'evil.example' } },
      status: 421,
    },
    { what: 'no token', method: 'GET', url: '/v1/allowlists', path: '/v1/allowlists', opts: { token: null }, status: 401 },
    { what: 'a wrong token', method: 'GET', url: '/v1/audit', path: '/v1/audit', opts: { token: 'wrong-token-0123456789' }, status: 403 },
    { what: 'an unknown list', method: 'GET', url: '/v1/allowlists/nope', path: '/v1/allowlists/{name}', status: 404 },
    { what: 'a bad address', method: 'GET', url: '/v1/allowlists/main/check?ip=x', path: '/v1/allowlists/{name}/check', status: 400 },
    {
      what: 'PUT without If-Match',
      method: 'PUT',
      url: '/v1/allowlists/main',
      path: '/v1/allowlists/{name}',
      opts: { body: { entries: [] } },
      status: 428,
    },
    {
      what: 'a stale If-Match',
      method: 'DELETE',
      url: '/v1/allowlists/main/entries/10.0.0.0%2F8',
      path: '/v1/allowlists/{name}/entries/{cidr}',
      opts: { headers: { 'if-match': '"0-x"' } },
      status: 412,
    },
    {
      what: 'text/plain',
      method: 'POST',
      url: '/v1/allowlists/main/entries',
      path: '/v1/allowlists/{name}/entries',
      opts: { raw: '10.0.0.1', headers: { 'content-type': 'text/plain' } },
      status: 415,
    },
    {
      what: 'a body over the limit',
      method: 'POST',
      url: '/v1/explain',
      path: '/v1/explain',
      opts: { raw: JSON.stringify({ pad: 'x'.repeat(1_100_000) }) },
      status: 413,
    },
    { what: 'an unknown listener', method: 'GET', url: '/v1/connections?listener=nope', path: '/v1/connections', status: 404 },
  ];
  for (const c of cases) {
    const r = await g.api(c.method, c.url, c.opts);
    t.equal(r.status, c.status, `${c.what}: ${r.text.slice(0, 200)}`);
    const op = doc.paths[c.path]?.[c.method.toLowerCase() as (typeof METHODS)[number]];
    t.ok(op?.responses[String(c.status)], `${c.what}: ${c.status} is documented for ${c.method} ${c.path}`);
  }
});
