/**
 * The route decision holds for what the backend serves (docs/routes-and-sni.md "What a backend
 * behind a route must do"), proven differentially: generated request targets and Host headers
 * (helpers/route-inputs.ts) go as raw bytes through ipgate to real backends that say which of
 * their locations served them (helpers/location-backends.ts): nginx `server_name` + `location`
 * blocks, Tomcat 10 (a servlet container's normalisation, `;` parameters included), and a
 * WHATWG-URL router (Express-style case-insensitive prefixes). For every input:
 *   - ipgate answered it itself (a 4xx, no Date header: it produced the response), or
 *   - the backend served no location (its own 404/400/redirect), or
 *   - the location it served belongs to the route ipgate decided (its access line's `route`).
 * Each input is sent by a client outside the guarded lists (127.0.0.2: a guarded location
 * served to it is a bypass) and by one inside every list (127.0.0.3: every decision is
 * forwarded, so a divergence in either direction shows).
 *
 * The route table, the same on every listener: admin.example.com (guarded), www.example.com
 * with /admin (guarded), /public and / (open), and the default route "*" (open); the listener of
 * the WHATWG router matches its paths with ignoreCase (that router is case-insensitive), the
 * second Tomcat listener reads ";" as a servlet container (`http.pathParameters: servlet`).
 *
 * Seeded and time-boxed: IPGATE_DIFF_SEED replays a run (the seed is printed), IPGATE_DIFF_MS is
 * the time per backend (default 20 s; the servlet listener gets half).
 */
import t from 'tap';
import { startIpgate, type LogCapture } from '../helpers/ipgate';
import { rawRequest } from '../helpers/http';
import { locationNginx, locationTomcat, locationWhatwg, servedLocation, type Location } from '../helpers/location-backends';
import { missing } from '../helpers/peers';
import { prng } from '../helpers/prng';
import { requestBytes, routeInput, type Family, type RouteInput } from '../helpers/route-inputs';
import { tomcatMissing } from '../helpers/tomcat';

const skip = missing('nginx') || tomcatMissing();

const SEED = process.env.IPGATE_DIFF_SEED !== undefined ? Number(process.env.IPGATE_DIFF_SEED) : Math.floor(Math.random() * 2 ** 31);
const BUDGET_MS = Number(process.env.IPGATE_DIFF_MS ?? 20_000);
/** Inputs in flight per backend. */
const CONCURRENCY = 4;

const ATTACKER = '127.0.0.2';
const INSIDER = '127.0.0.3';

/** Which route each location belongs to. */
const ROUTE_OF: Record<Location, string> = {
  'admin-host': 'admin',
  'www-admin': 'www-admin',
  'www-public': 'www-public',
  'www-root': 'www',
  default: 'default',
};
const GUARDED = new Set(['admin', 'www-admin']);
/** The host part of a route: a mismatch between two routes of one host is the path's doing. */
const HOST_OF: Record<string, string> = {
  admin: 'admin.example.com',
  'www-admin': 'www.example.com',
  'www-public': 'www.example.com',
  www: 'www.example.com',
  default: '*',
};

function routes(ignoreCase: boolean): Record<string, unknown>[] {
  const ic = ignoreCase ? { ignoreCase: true } : {};
  return [
    { name: 'admin', hosts: ['admin.example.com'], allowlist: 'guarded' },
    { name: 'www-admin', hosts: ['www.example.com'], paths: [{ path: '/admin', match: 'prefix', ...ic }], allowlist: 'guarded' },
    { name: 'www-public', hosts: ['www.example.com'], paths: [{ path: '/public', match: 'prefix', ...ic }] },
    { name: 'www', hosts: ['www.example.com'], paths: [{ path: '/', match: 'prefix' }] },
    { name: 'default', hosts: ['*'] },
  ];
}

/** The access lines by User-Agent, as they are written. */
class AccessLines {
  private readonly byAgent = new Map<string, Record<string, unknown>>();
  private scanned = 0;
  private readonly waiting = new Map<string, () => void>();

  constructor(private readonly logs: LogCapture) {
    const write = logs._write.bind(logs);
    logs._write = (chunk, enc, cb) => {
      write(chunk, enc, cb);
      this.scan();
    };
  }

  private scan(): void {
    const lines = this.logs.lines;
    for (; this.scanned < lines.length; this.scanned++) {
      const l = lines[this.scanned]!;
      if (typeof l.userAgent === 'string' && 'route' in l) {
        this.byAgent.set(l.userAgent, l);
        this.waiting.get(l.userAgent)?.();
      }
    }
  }

  async get(agent: string, ms = 5000): Promise<Record<string, unknown>> {
    this.scan();
    const found = this.byAgent.get(agent);
    if (found !== undefined) return found;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no access line for ${agent} within ${ms} ms`)), ms);
      this.waiting.set(agent, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    this.waiting.delete(agent);
    return this.byAgent.get(agent)!;
  }
}

interface Failure {
  family: Family;
  /**
   * `host`: the backend served another host's location; `path`: another path's of the same host;
   * `allowlist`: a guarded route's request of a client outside its list was forwarded.
   */
  cause: 'host' | 'path' | 'allowlist';
  from: string;
  input: RouteInput;
  decided: string;
  served: Location;
  status: number;
}

/** Outcome counts of one backend, and its failures. */
class Tally {
  readonly counts = new Map<string, number>();
  readonly failures: Failure[] = [];
  inputs = 0;
  bump(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
  summary(): string {
    return [...this.counts]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ');
  }
}

const show = (i: RouteInput): string => `${JSON.stringify(i.target)} Host ${JSON.stringify(i.hosts)} [${i.tags.join(' ')}]`;

t.test('route differential: every served location belongs to the route ipgate decided', { skip }, async (t) => {
  const [nginx, tomcat, whatwg] = await Promise.all([locationNginx(t), locationTomcat(t), locationWhatwg(t)]);
  const listener = (name: string, port: number, extra: { ignoreCase?: boolean; servlet?: boolean } = {}): Record<string, unknown> => ({
    name,
    mode: 'http',
    listen: '127.0.0.1:0',
    allowlist: 'open',
    upstreams: [`127.0.0.1:${port}`],
    http: extra.servlet === true ? { pathParameters: 'servlet' } : {},
    routes: routes(extra.ignoreCase === true),
  });
  const g = await startIpgate(
    {
      allowlists: { open: ['127.0.0.0/8'], guarded: [`${INSIDER}/32`] },
      listeners: [
        listener('nginx', nginx),
        listener('tomcat', tomcat),
        listener('tomcat-servlet', tomcat, { servlet: true }),
        listener('whatwg', whatwg, { ignoreCase: true }),
      ],
    },
    'info',
  );
  t.teardown(() => g.app.shutdown(0));
  const access = new AccessLines(g.logs);
  t.comment(`route differential: seed ${SEED} (replay: IPGATE_DIFF_SEED=${SEED}), ${BUDGET_MS} ms per backend`);

  const backends: Array<[name: string, ms: number]> = [
    ['nginx', BUDGET_MS],
    ['tomcat', BUDGET_MS],
    ['tomcat-servlet', BUDGET_MS / 2],
    ['whatwg', BUDGET_MS],
  ];
  for (const [name, ms] of backends) {
    const tally = new Tally();
    const rand = prng(SEED);
    const port = g.port(name);
    const deadline = Date.now() + ms;
    let seq = 0;
    const one = async (input: RouteInput, from: string): Promise<void> => {
      const agent = `diff-${name}-${seq++}`;
      const r = await rawRequest(port, requestBytes(input, agent), from, 20_000);
      // ipgate's own answers carry no Date header; every backend's do.
      if (r.header('date') === undefined) return tally.bump(`${input.family} ipgate ${r.status}`);
      const loc = servedLocation(r.body);
      if (loc === null) return tally.bump(`${input.family} backend ${r.status}, no location`);
      const line = await access.get(agent);
      const decided = String(line.route);
      if (from === ATTACKER && GUARDED.has(decided)) {
        tally.bump(`${input.family} ALLOWLIST`);
        tally.failures.push({ family: input.family, cause: 'allowlist', from, input, decided, served: loc, status: r.status });
        return;
      }
      if (ROUTE_OF[loc] === decided) return tally.bump(`${input.family} served by the decided route`);
      const cause = HOST_OF[decided] === HOST_OF[ROUTE_OF[loc]] ? 'path' : 'host';
      tally.bump(`${input.family} MISMATCH by ${cause}${from === ATTACKER && GUARDED.has(ROUTE_OF[loc]) ? ' (bypass)' : ''}`);
      tally.failures.push({ family: input.family, cause, from, input, decided, served: loc, status: r.status });
    };
    const worker = async (): Promise<void> => {
      while (Date.now() < deadline) {
        const input = routeInput(rand);
        tally.inputs++;
        await one(input, ATTACKER);
        await one(input, INSIDER);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));

    t.comment(`${name}: ${tally.inputs} inputs x 2 clients: ${tally.summary()}`);
    t.ok(tally.inputs >= 50, `${name}: enough inputs in the time box (${tally.inputs})`);
    const examples = (cause: Failure['cause']): string[] =>
      tally.failures
        .filter((f) => f.cause === cause)
        .slice(0, 12)
        .map((f) => `${f.from} ${show(f.input)}: decided ${f.decided}, served ${f.served} (${f.status})`);
    t.same(examples('allowlist'), [], `${name}: no guarded route's request from ${ATTACKER} is forwarded`);
    t.same(examples('path'), [], `${name}: no input is served by another path's route of its host than the decided one`);
    t.same(examples('host'), [], `${name}: no input is served by another host's route than the decided one`);
    t.ok(
      [...tally.counts.keys()].some((k) => k.endsWith('served by the decided route')),
      `${name}: some inputs were served (the check is not vacuous)`,
    );
    t.ok(
      [...tally.counts.keys()].some((k) => / ipgate 40\d$/.test(k)),
      `${name}: some inputs were refused by ipgate`,
    );
  }
});
