/**
 * `ipgate allowlist ls|get|add|rm|check`: the admin API for operators, without curl.
 *
 * Exit codes: 0 done (check: allowed), 1 check: not allowed, 2 usage error, 3 the API refused
 * (4xx/5xx, its message printed), 4 the admin API could not be reached.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

export const ALLOWLIST_USAGE = `Usage: ipgate allowlist COMMAND [options]

Commands:
  ls                                   the allowlists: version, applied version, entries
  get NAME                             the entries of one list
  add NAME CIDR [--comment C] [--expires T]
                                       add an entry (T: RFC 3339, or a duration like 30m, 12h, 7d)
  rm NAME CIDR                         remove the entry with this CIDR
  check NAME IP                        would IP be admitted now, and by which entry (exit 1: no)

Options:
  --admin URL        admin API (default $IPGATE_ADMIN_URL or http://127.0.0.1:9901); a host name
                     other than localhost must be listed in the server's admin.allowedHosts
  --token-file FILE  file holding the bearer token (default: $IPGATE_ADMIN_TOKEN)
  --json             print the API's JSON answer
`;

export const EXIT = { ok: 0, notAllowed: 1, usage: 2, api: 3, unreachable: 4 } as const;

interface Io { out: (s: string) => void; err: (s: string) => void; env: NodeJS.ProcessEnv; now: () => number }

class Usage extends Error {}

interface ApiReply { status: number; json: Record<string, unknown> | null; text: string }

function take(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) throw new Usage(`${name} needs a value`);
  args.splice(i, 2);
  return v;
}

/** `--expires`: RFC 3339 passes through (the API validates it); `90s`, `30m`, `12h`, `7d` are from now. */
export function expiresAt(text: string, now: number): string {
  const m = /^([1-9][0-9]{0,6})([smhd])$/.exec(text);
  if (m === null) return text;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  return new Date(now + Number(m[1]) * unit).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function call(base: URL, token: string, method: string, path: string, body?: unknown): Promise<ApiReply> {
  const url = new URL(path.replace(/^\//, ''), base.href.endsWith('/') ? base : new URL(`${base.href}/`));
  const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json', 'user-agent': 'ipgate-cli' };
  if (payload) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(payload.length);
  }
  const mod = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(url, { method, headers, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: Record<string, unknown> | null = null;
        try { json = JSON.parse(text) as Record<string, unknown>; } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, json, text });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', reject);
    req.end(payload ?? undefined);
  });
}

interface Entry { cidr: string; comment?: string; expiresAt?: string }

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n') + '\n';
}

export async function allowlistMain(argv: string[], io: Io = {
  out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s), env: process.env, now: Date.now,
}): Promise<number> {
  const args = argv.slice();
  let base: URL;
  let token: string;
  let json = false;
  let command: string;
  try {
    if (args.includes('--help') || args.includes('-h') || args.length === 0) {
      io.out(ALLOWLIST_USAGE);
      return args.length === 0 ? EXIT.usage : EXIT.ok;
    }
    const admin = take(args, '--admin') ?? io.env.IPGATE_ADMIN_URL ?? 'http://127.0.0.1:9901';
    const tokenFile = take(args, '--token-file');
    const jsonAt = args.indexOf('--json');
    if (jsonAt >= 0) {
      json = true;
      args.splice(jsonAt, 1);
    }
    try {
      base = new URL(admin);
    } catch {
      throw new Usage(`--admin ${JSON.stringify(admin)} is not a URL (e.g. http://127.0.0.1:9901)`);
    }
    if (tokenFile !== undefined) {
      try {
        token = fs.readFileSync(tokenFile, 'utf8').trim();
      } catch (err) {
        throw new Usage(`cannot read --token-file: ${(err as Error).message}`);
      }
    } else {
      token = (io.env.IPGATE_ADMIN_TOKEN ?? '').trim();
    }
    if (token === '') throw new Usage('no admin token: pass --token-file FILE or set IPGATE_ADMIN_TOKEN');
    command = args.shift()!;
    const arity: Record<string, number> = { ls: 0, get: 1, add: 2, rm: 2, check: 2 };
    if (!(command in arity)) throw new Usage(`unknown command "${command}"`);
    const comment = command === 'add' ? take(args, '--comment') : undefined;
    const expires = command === 'add' ? take(args, '--expires') : undefined;
    const extra = args.find((a) => a.startsWith('--'));
    if (extra !== undefined) throw new Usage(`unknown option ${extra}`);
    if (args.length !== arity[command]) throw new Usage(`${command} takes ${arity[command]} argument(s), got ${args.length}`);
    args.push(comment ?? '', expires ?? '');
  } catch (err) {
    if (!(err instanceof Usage)) throw err;
    io.err(`ipgate allowlist: ${err.message}\n\n${ALLOWLIST_USAGE}`);
    return EXIT.usage;
  }

  const [a = '', b = '', comment, expires] = args;
  const enc = encodeURIComponent;
  let reply: ApiReply;
  try {
    switch (command) {
      case 'ls': reply = await call(base, token, 'GET', '/v1/allowlists'); break;
      case 'get': reply = await call(base, token, 'GET', `/v1/allowlists/${enc(a)}`); break;
      case 'add': {
        const entry: Entry = { cidr: b };
        if (comment) entry.comment = comment;
        if (expires) entry.expiresAt = expiresAt(expires, io.now());
        reply = await call(base, token, 'POST', `/v1/allowlists/${enc(a)}/entries`, { entries: [entry] });
        break;
      }
      case 'rm': reply = await call(base, token, 'DELETE', `/v1/allowlists/${enc(a)}/entries/${enc(b)}`); break;
      default: reply = await call(base, token, 'GET', `/v1/allowlists/${enc(a)}/check?ip=${enc(b)}`); break;
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    io.err(`ipgate allowlist: cannot reach the admin API at ${base.href}: ${code ? `${code}: ` : ''}${(err as Error).message}\n`);
    return EXIT.unreachable;
  }
  const body = reply.json;
  if (reply.status < 200 || reply.status >= 300 || body === null) {
    const detail = body && typeof body.message === 'string'
      ? `${String(body.error)}: ${body.message}${typeof body.field === 'string' ? ` (field ${body.field})` : ''}`
      : reply.text.slice(0, 300);
    io.err(`ipgate allowlist ${command}: HTTP ${reply.status}: ${detail}\n`);
    return EXIT.api;
  }
  if (json) {
    io.out(`${JSON.stringify(body, null, 2)}\n`);
    return command === 'check' && body.allowed !== true ? EXIT.notAllowed : EXIT.ok;
  }
  switch (command) {
    case 'ls': {
      const lists = body.allowlists as { name: string; version: string; appliedVersion: string | null; entries: number }[];
      io.out(table([['NAME', 'VERSION', 'APPLIED', 'ENTRIES'], ...lists.map((l) => [l.name, l.version, l.appliedVersion ?? '-', String(l.entries)])]));
      return EXIT.ok;
    }
    case 'get': {
      const entries = body.entries as Entry[];
      io.out(`# ${String(body.name)} version ${String(body.version)}, ${entries.length} entries\n`);
      if (entries.length > 0) io.out(table([['CIDR', 'EXPIRES', 'COMMENT'], ...entries.map((e) => [e.cidr, e.expiresAt ?? '-', e.comment ?? ''])]));
      return EXIT.ok;
    }
    case 'add':
    case 'rm':
      io.out(`${command === 'add' ? 'added' : 'removed'} ${b} ${command === 'add' ? 'to' : 'from'} ${a}: version ${String(body.version)}, ${(body.entries as Entry[]).length} entries\n`);
      return EXIT.ok;
    default: {
      const entry = body.entry as Entry | null;
      if (body.allowed === true && entry) {
        io.out(`${String(body.ip)} is allowed by ${a} entry ${entry.cidr}${entry.comment ? ` (${entry.comment})` : ''}${entry.expiresAt ? `, until ${entry.expiresAt}` : ''}\n`);
        return EXIT.ok;
      }
      io.out(`${String(body.ip)} is not allowed by ${a} (version ${String(body.version)})\n`);
      return EXIT.notAllowed;
    }
  }
}
