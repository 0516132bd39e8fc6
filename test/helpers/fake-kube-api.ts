/**
 * A loopback stand-in for the Kubernetes API server, for the ConfigMap store: the ConfigMap GET,
 * list, PUT and watch endpoints as the API server answers them, with the RBAC the chart grants and
 * faults to inject.
 *
 * Faithful where the store depends on it:
 * - every request must carry `Authorization: Bearer <token>` (401 Status otherwise);
 * - RBAC with resourceNames: get/put on an allowed name only; list and watch only with
 *   `fieldSelector=metadata.name=<allowed name>` (403 Status otherwise, as the API server does,
 *   since it can only authorize a collection request by name through that selector); no create,
 *   no delete (the fake has no such routes);
 * - one resourceVersion counter (etcd's revision) for every write; PUT with a stale
 *   metadata.resourceVersion gets 409 Conflict; list answers carry the current revision;
 * - watch: `watch=1` streams JSON lines in a chunked response, replays history after the given
 *   resourceVersion (ADDED for the current state when it is "" or "0"), sends BOOKMARK events when
 *   `allowWatchBookmarks=true`, ends after `timeoutSeconds`; a resourceVersion older than the last
 *   compaction gets 410 Gone (an ERROR event in a 200 stream, as the API server does, or HTTP 410).
 *
 * Faults: `compact()`, `dropWatches()`, `failNext(n, status)`, `down()`/`up()` (connections
 * refused), `pauseWatches()` (events held back from open watches).
 *
 * Other resources, read-only (for `ipgate import ingress-nginx`): `serve(path, body)` answers GET
 * on that exact path (a list or one object), with the same token check; nothing else of them.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import fs from 'node:fs';
import path from 'node:path';

export interface ConfigMapObject {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; resourceVersion: string; uid: string; creationTimestamp: string; [k: string]: unknown };
  data?: Record<string, string>;
  [k: string]: unknown;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly watch: boolean;
  readonly authorization: string | undefined;
  readonly status: number;
}

interface HistoryEvent {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: ConfigMapObject;
}

interface OpenWatch {
  ns: string;
  name: string;
  res: http.ServerResponse;
  bookmarks: boolean;
  timers: NodeJS.Timeout[];
}

export interface FakeKubeOptions {
  token?: string;
  /** RBAC resourceNames: the ConfigMaps this "service account" may touch. */
  allowedNames?: string[];
  /** Interval of BOOKMARK events on watches that asked for them. Default 1000. */
  bookmarkIntervalMs?: number;
  /** How an expired resourceVersion on a watch is answered. Default `event` (what the API server does). */
  goneAs?: 'event' | 'http';
}

export class FakeKubeApi {
  readonly token: string;
  readonly requests: RecordedRequest[] = [];
  private readonly server: http.Server;
  private readonly sockets = new Set<Socket>();
  private readonly objects = new Map<string, ConfigMapObject>();
  private history: HistoryEvent[] = [];
  private revision = 100;
  private compactedRV = 0;
  private readonly watches = new Set<OpenWatch>();
  private readonly served = new Map<string, unknown>();
  private paused = false;
  private failures: Array<{ status: number; match: (r: { method: string; watch: boolean }) => boolean }> = [];
  private readonly allowed: Set<string>;
  private readonly bookmarkIntervalMs: number;
  goneAs: 'event' | 'http';
  port = 0;

  constructor(opts: FakeKubeOptions = {}) {
    this.token = opts.token ?? 'test-token-0123456789';
    this.allowed = new Set(opts.allowedNames ?? ['ipgate-allowlists']);
    this.bookmarkIntervalMs = opts.bookmarkIntervalMs ?? 1000;
    this.goneAs = opts.goneAs ?? 'event';
    this.server = http.createServer((req, res) => this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    this.endWatches();
    for (const s of this.sockets) s.destroy();
    if (this.server.listening) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Write a kubeconfig for this server (token auth) into `dir`; returns its path. */
  writeKubeconfig(dir: string, namespace?: string): string {
    const file = path.join(dir, 'kubeconfig');
    fs.writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'current-context: fake',
        'contexts:',
        '- name: fake',
        '  context:',
        '    cluster: fake',
        '    user: fake',
        ...(namespace ? [`    namespace: ${namespace}`] : []),
        'clusters:',
        '- name: fake',
        '  cluster:',
        `    server: ${this.url}`,
        'users:',
        '- name: fake',
        '  user:',
        `    token: ${this.token}`,
        '',
      ].join('\n'),
    );
    return file;
  }

  // --- state, as kubectl would change it ------------------------------------------------------

  /** Create a ConfigMap (the chart's job; ipgate has no create permission). */
  create(ns: string, name: string, data?: Record<string, string>): ConfigMapObject {
    const obj: ConfigMapObject = {
      metadata: {
        name,
        namespace: ns,
        resourceVersion: '',
        uid: `uid-${name}`,
        creationTimestamp: new Date().toISOString(),
        labels: { 'app.kubernetes.io/name': 'ipgate' },
        annotations: { 'helm.sh/resource-policy': 'keep' },
      },
      ...(data ? { data } : {}),
    };
    return this.commit(ns, name, obj, 'ADDED');
  }

  get(ns: string, name: string): ConfigMapObject | undefined {
    const o = this.objects.get(`${ns}/${name}`);
    return o ? structuredClone(o) : undefined;
  }

  /** `kubectl edit`: set one data key (or remove it with null). */
  setData(ns: string, name: string, key: string, value: string | null): ConfigMapObject {
    const cur = this.objects.get(`${ns}/${name}`);
    if (!cur) throw new Error(`no configmap ${ns}/${name}`);
    const next = structuredClone(cur);
    const data = { ...(next.data ?? {}) };
    if (value === null) delete data[key];
    else data[key] = value;
    next.data = data;
    return this.commit(ns, name, next, 'MODIFIED');
  }

  /** A metadata-only change (a label): the resourceVersion moves, the data does not. */
  touch(ns: string, name: string): ConfigMapObject {
    const cur = this.objects.get(`${ns}/${name}`);
    if (!cur) throw new Error(`no configmap ${ns}/${name}`);
    const next = structuredClone(cur);
    next.metadata.labels = { ...(next.metadata.labels as Record<string, string>), touched: String(this.revision) };
    return this.commit(ns, name, next, 'MODIFIED');
  }

  delete(ns: string, name: string): void {
    const cur = this.objects.get(`${ns}/${name}`);
    if (!cur) return;
    this.objects.delete(`${ns}/${name}`);
    const rv = ++this.revision;
    const obj = structuredClone(cur);
    obj.metadata.resourceVersion = String(rv);
    this.publish({ rv, type: 'DELETED', object: obj });
  }

  get resourceVersion(): string {
    return String(this.revision);
  }

  /** Answer GET `apiPath` (the path without the query) with `body`: Ingress and Service lists or objects. */
  serve(apiPath: string, body: unknown): void {
    this.served.set(apiPath, body);
  }

  // --- faults -----------------------------------------------------------------------------------

  /** Forget history up to now: a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.compactedRV = this.revision;
    this.history = [];
  }

  /** Cut every open watch mid-stream (a socket reset, not a clean end). */
  dropWatches(): void {
    for (const w of this.watches) {
      for (const t of w.timers) clearTimeout(t);
      w.res.socket?.destroy();
    }
    this.watches.clear();
  }

  /** Hold events back from open watches (a watch lagging behind); new watches still replay history. */
  pauseWatches(): void {
    this.paused = true;
  }

  resumeWatches(): void {
    this.paused = false;
  }

  /** The next `count` requests matching `match` (default: any non-watch) answer `status` with a Status body. */
  failNext(count: number, status = 500, match: (r: { method: string; watch: boolean }) => boolean = (r) => !r.watch): void {
    for (let i = 0; i < count; i++) this.failures.push({ status, match });
  }

  /** Stop listening and cut every connection: clients get ECONNREFUSED until `up()`. */
  async down(): Promise<void> {
    this.endWatches();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  async up(): Promise<void> {
    await this.start();
  }

  openWatches(): number {
    return this.watches.size;
  }

  // --- the API ------------------------------------------------------------------------------------

  private commit(ns: string, name: string, obj: ConfigMapObject, type: 'ADDED' | 'MODIFIED'): ConfigMapObject {
    const rv = ++this.revision;
    const stored = structuredClone(obj);
    delete stored.apiVersion;
    delete stored.kind;
    stored.metadata.resourceVersion = String(rv);
    this.objects.set(`${ns}/${name}`, stored);
    this.publish({ rv, type, object: structuredClone(stored) });
    return structuredClone(stored);
  }

  private publish(ev: HistoryEvent): void {
    this.history.push(ev);
    if (this.paused) return;
    for (const w of this.watches) {
      if (w.ns === ev.object.metadata.namespace && w.name === ev.object.metadata.name) send(w.res, ev.type, ev.object);
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    const watch = url.searchParams.get('watch') === '1' || url.searchParams.get('watch') === 'true';
    const method = req.method ?? 'GET';
    const record = (status: number): void => {
      this.requests.push({ method, path: url.pathname, query: url.searchParams, watch, authorization: req.headers.authorization, status });
    };
    const reply = (status: number, body: unknown): void => {
      record(status);
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${this.token}`) {
      reply(401, statusBody(401, 'Unauthorized', 'Unauthorized'));
      return;
    }
    const fault = this.failures.findIndex((f) => f.match({ method, watch }));
    if (fault !== -1) {
      const { status } = this.failures.splice(fault, 1)[0]!;
      // Drain the body first so the connection stays usable.
      req.resume();
      req.on('end', () => reply(status, statusBody(status, status === 429 ? 'TooManyRequests' : 'InternalError', 'injected fault')));
      return;
    }
    if (method === 'GET' && !watch && this.served.has(url.pathname)) {
      reply(200, this.served.get(url.pathname));
      return;
    }
    const one = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps\/([^/]+)$/.exec(url.pathname);
    const coll = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps$/.exec(url.pathname);
    if (one) {
      const ns = decodeURIComponent(one[1]!);
      const name = decodeURIComponent(one[2]!);
      const verb = method === 'GET' ? 'get' : method === 'PUT' ? 'update' : method.toLowerCase();
      if (!this.allowed.has(name) || (method !== 'GET' && method !== 'PUT')) {
        reply(403, forbidden(verb, ns, name));
        return;
      }
      if (method === 'GET') {
        const obj = this.objects.get(`${ns}/${name}`);
        if (obj) reply(200, { apiVersion: 'v1', kind: 'ConfigMap', ...obj });
        else reply(404, statusBody(404, 'NotFound', `configmaps "${name}" not found`, name));
        return;
      }
      readBody(req).then(
        (text) => {
          let body: ConfigMapObject;
          try {
            body = JSON.parse(text) as ConfigMapObject;
          } catch {
            reply(400, statusBody(400, 'BadRequest', 'the body is not JSON'));
            return;
          }
          const cur = this.objects.get(`${ns}/${name}`);
          if (!cur) {
            reply(404, statusBody(404, 'NotFound', `configmaps "${name}" not found`, name));
            return;
          }
          if (body.metadata?.name !== name) {
            reply(400, statusBody(400, 'BadRequest', 'the name of the object does not match the name on the URL'));
            return;
          }
          const rv = body.metadata?.resourceVersion;
          if (rv && rv !== cur.metadata.resourceVersion) {
            reply(
              409,
              statusBody(
                409,
                'Conflict',
                `Operation cannot be fulfilled on configmaps "${name}": the object has been modified; please apply your changes to the latest version and try again`,
                name,
              ),
            );
            return;
          }
          const size = JSON.stringify(body.data ?? {}).length;
          if (size > 1024 * 1024) {
            reply(422, statusBody(422, 'Invalid', `ConfigMap "${name}" is invalid: []: Too long: must have at most 1048576 bytes`, name));
            return;
          }
          const next: ConfigMapObject = {
            ...body,
            metadata: { ...cur.metadata, ...body.metadata, uid: cur.metadata.uid, creationTimestamp: cur.metadata.creationTimestamp },
          };
          const stored = this.commit(ns, name, next, 'MODIFIED');
          reply(200, { apiVersion: 'v1', kind: 'ConfigMap', ...stored });
        },
        () => res.destroy(),
      );
      return;
    }
    if (coll && method === 'GET') {
      const ns = decodeURIComponent(coll[1]!);
      const selector = url.searchParams.get('fieldSelector') ?? '';
      const m = /^metadata\.name=([^,]+)$/.exec(selector);
      const verb = watch ? 'watch' : 'list';
      if (!m || !this.allowed.has(m[1]!)) {
        reply(403, forbidden(verb, ns));
        return;
      }
      const name = m[1]!;
      if (!watch) {
        const obj = this.objects.get(`${ns}/${name}`);
        reply(200, {
          kind: 'ConfigMapList',
          apiVersion: 'v1',
          metadata: { resourceVersion: String(this.revision) },
          items: obj ? [obj] : [],
        });
        return;
      }
      this.startWatch(req, res, ns, name, url.searchParams, record);
      return;
    }
    reply(404, statusBody(404, 'NotFound', 'the server could not find the requested resource'));
  }

  private startWatch(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    ns: string,
    name: string,
    q: URLSearchParams,
    record: (status: number) => void,
  ): void {
    const rvText = q.get('resourceVersion') ?? '';
    const from = rvText === '' || rvText === '0' ? null : Number(rvText);
    if (from !== null && from < this.compactedRV) {
      const gone = statusBody(410, 'Expired', `too old resource version: ${from} (${this.compactedRV})`);
      if (this.goneAs === 'http') {
        record(410);
        res.writeHead(410, { 'content-type': 'application/json' });
        res.end(JSON.stringify(gone));
        return;
      }
      record(200);
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      send(res, 'ERROR', gone);
      res.end();
      return;
    }
    record(200);
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const w: OpenWatch = { ns, name, res, bookmarks: q.get('allowWatchBookmarks') === 'true', timers: [] };
    if (from === null) {
      const obj = this.objects.get(`${ns}/${name}`);
      if (obj) send(res, 'ADDED', obj);
    } else {
      for (const ev of this.history) {
        if (ev.rv > from && ev.object.metadata.namespace === ns && ev.object.metadata.name === name) send(res, ev.type, ev.object);
      }
    }
    this.watches.add(w);
    if (w.bookmarks) {
      const tick = (): void => {
        send(res, 'BOOKMARK', { kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: String(this.revision) } });
        w.timers[0] = setTimeout(tick, this.bookmarkIntervalMs);
      };
      w.timers[0] = setTimeout(tick, this.bookmarkIntervalMs);
    }
    const timeout = Number(q.get('timeoutSeconds') ?? '0');
    if (timeout > 0) w.timers[1] = setTimeout(() => res.end(), timeout * 1000);
    const cleanup = (): void => {
      for (const t of w.timers) clearTimeout(t);
      this.watches.delete(w);
    };
    res.on('close', cleanup);
    req.on('close', cleanup);
  }

  private endWatches(): void {
    for (const w of this.watches) {
      for (const t of w.timers) clearTimeout(t);
      w.res.end();
    }
    this.watches.clear();
  }
}

function send(res: http.ServerResponse, type: string, object: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  const obj = type === 'ERROR' || type === 'BOOKMARK' ? object : { apiVersion: 'v1', kind: 'ConfigMap', ...(object as object) };
  res.write(`${JSON.stringify({ type, object: obj })}\n`);
}

function statusBody(code: number, reason: string, message: string, name?: string): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(name ? { details: { name, kind: 'configmaps' } } : {}),
    code,
  };
}

function forbidden(verb: string, ns: string, name?: string): Record<string, unknown> {
  const what = name ? `configmaps "${name}"` : 'configmaps';
  return statusBody(
    403,
    'Forbidden',
    `${what} is forbidden: User "system:serviceaccount:${ns}:ipgate" cannot ${verb} resource "configmaps" in API group "" in the namespace "${ns}"`,
    name,
  );
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
