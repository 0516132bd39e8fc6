/**
 * `ipgate allowlist ...`: the admin API for operators, without curl.
 *
 * Every write says what it did and nothing else: `add` of a CIDR the list already has is refused
 * unless `--replace` is given (a silent replace would drop the entry's comment and expiry), and
 * then it prints "replaced" with what was there. The list is read first and the write carries
 * `If-Match` with the version read, so "added" vs "replaced" is true of the version written to:
 * a concurrent change makes the write fail (412) rather than the message lie.
 *
 * Exit codes: see EXIT and the usage text.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { parseCidr } from '../allowlist/cidr';
import {
  ADMIN_OPTIONS,
  adminOptionsUsage,
  adminUrl,
  outputFormat,
  parseCommandLine,
  renderDocument,
  table,
  tokenFromFile,
  UsageError,
  type OutputFormat,
} from './common';

const ALLOWLIST_USAGE = `Usage: ipgate allowlist COMMAND [ARGS] [options]

Commands:
  ls                                the allowlists: version, applied version, entries
  get NAME                          the entries of one list (json/yaml output can be PUT back as is)
  add NAME CIDR [--comment C] [--expires T] [--replace]
                                    add an allow entry (T: RFC 3339, or a duration like 30m, 12h, 7d);
                                    a CIDR already listed is refused unless --replace is given
  deny NAME CIDR [--comment C] [--expires T] [--replace]
                                    add a deny entry (the most specific entry wins; deny wins a tie)
  rm NAME CIDR                      remove the entry with this CIDR
  check NAME IP                     would IP be admitted now, and by which entry (exit 1: no)
  replace NAME -f FILE [--dry-run]  make the list exactly FILE's entries (one write, If-Match the
                                    version read) and print what was added, removed and changed;
                                    --dry-run prints the difference only. FILE: one entry a line,
                                    "CIDR", "allow CIDR" or "deny CIDR", optional "# comment"; or JSON
                                    as \`get -o json\` prints it. "-" reads standard input.
  create NAME [-f FILE]             create a list (empty, or FILE's entries)
  delete NAME                       delete a list (refused while a listener or route uses it)
  explain IP --listener L [--host H] [--path P] [--header "Name: value"]... [--xff "a, b"]
          [--proxy-header H] [--sni NAME]
                                    what ipgate would decide for a connection from IP on listener L:
                                    the client address, how it was derived, the route, the entry,
                                    the decision. HTTP listeners with routes: --host (or a Host
                                    --header) and --path (default /) pick the route; TCP listeners
                                    with routes: --sni (the ClientHello's name; none: no SNI sent).
                                    --header may be repeated; --xff "a, b" is --header
                                    "X-Forwarded-For: a, b".

Options (the same names in every command and in \`ipgate doctor\`):
${adminOptionsUsage(true, "the API's answer")}  --admin URL            old name of --admin-url

Flags take their value as --flag=value or --flag value.

Exit codes: 0 done (check and explain: admitted), 1 check and explain: not admitted, 2 usage error
(bad flags or arguments, unreadable FILE or token), 3 refused (by the API: its status and message
are printed; or add/deny of a CIDR already listed, without --replace), 4 the admin API could not be
reached.
`;

const EXIT = { ok: 0, notAllowed: 1, usage: 2, api: 3, unreachable: 4 } as const;

interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
  env: NodeJS.ProcessEnv;
  now: () => number;
}

/** An allowlist entry as the admin API reads and writes it (absent action = allow). */
export interface Entry {
  cidr: string;
  action?: 'allow' | 'deny';
  comment?: string;
  expiresAt?: string;
}

interface ListBody {
  name: string;
  version: string;
  entries: Entry[];
  source?: string;
  temporary?: Entry[];
}

interface ApiReply {
  status: number;
  json: Record<string, unknown> | null;
  text: string;
}

const OPTIONS = {
  ...ADMIN_OPTIONS,
  admin: { type: 'string' },
  comment: { type: 'string' },
  expires: { type: 'string' },
  replace: { type: 'boolean' },
  file: { type: 'string', short: 'f' },
  'dry-run': { type: 'boolean' },
  listener: { type: 'string' },
  xff: { type: 'string' },
  'proxy-header': { type: 'string' },
  host: { type: 'string' },
  path: { type: 'string' },
  sni: { type: 'string' },
  header: { type: 'string', multiple: true },
} as const;

type CommandOption =
  | 'comment'
  | 'expires'
  | 'replace'
  | 'file'
  | 'dry-run'
  | 'listener'
  | 'xff'
  | 'proxy-header'
  | 'host'
  | 'path'
  | 'sni'
  | 'header';

/** Each command: its positional arguments and the options beyond the admin ones it accepts. */
const COMMANDS: Record<string, { args: string[]; options: CommandOption[]; required?: CommandOption[] }> = {
  ls: { args: [], options: [] },
  get: { args: ['NAME'], options: [] },
  add: { args: ['NAME', 'CIDR'], options: ['comment', 'expires', 'replace'] },
  deny: { args: ['NAME', 'CIDR'], options: ['comment', 'expires', 'replace'] },
  rm: { args: ['NAME', 'CIDR'], options: [] },
  check: { args: ['NAME', 'IP'], options: [] },
  replace: { args: ['NAME'], options: ['file', 'dry-run'], required: ['file'] },
  create: { args: ['NAME'], options: ['file'] },
  delete: { args: ['NAME'], options: [] },
  explain: { args: ['IP'], options: ['listener', 'xff', 'proxy-header', 'host', 'path', 'sni', 'header'], required: ['listener'] },
};

/** `--expires`: RFC 3339 passes through (the API validates it); `90s`, `30m`, `12h`, `7d` are from now. */
export function expiresAt(text: string, now: number): string {
  const m = /^([1-9][0-9]{0,6})([smhd])$/.exec(text);
  if (m === null) return text;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd'];
  return new Date(now + Number(m[1]) * unit).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

class Client {
  constructor(
    private readonly base: URL,
    private readonly token: string,
  ) {}

  get href(): string {
    return this.base.href;
  }

  call(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<ApiReply> {
    const base = this.base.href.endsWith('/') ? this.base : new URL(`${this.base.href}/`);
    const url = new URL(path.replace(/^\//, ''), base);
    const payload = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      accept: 'application/json',
      'user-agent': 'ipgate-cli',
      ...extra,
    };
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
          try {
            json = JSON.parse(text) as Record<string, unknown>;
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, json, text });
        });
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
      req.on('error', reject);
      req.end(payload ?? undefined);
    });
  }
}

/** The API refused (or answered with something that is not JSON where JSON was due). */
class Refused extends Error {
  constructor(
    readonly reply: ApiReply,
    readonly hint = '',
  ) {
    super('refused');
  }
}

/** The API could not be reached. */
class Unreachable extends Error {}

function ok(reply: ApiReply, allowEmpty = false): Record<string, unknown> {
  if (reply.status >= 200 && reply.status < 300 && (reply.json !== null || (allowEmpty && reply.text.trim() === '')))
    return reply.json ?? {};
  throw new Refused(reply, reply.status === 412 ? 'the list changed while this command ran; nothing was written by it: run it again' : '');
}

const q = (s: string): string => JSON.stringify(s);

/** `10.0.0.0/8 deny "office" until 2026-...` */
function describe(e: Entry): string {
  return `${e.cidr} ${e.action ?? 'allow'}${e.comment ? ` ${q(e.comment)}` : ''}${e.expiresAt ? ` until ${e.expiresAt}` : ''}`;
}

/** The canonical CIDR text when it parses (the API stores that form), else the text as given. */
function canonical(cidr: string): string {
  const p = parseCidr(cidr);
  return p.ok ? p.cidr.text : cidr;
}

/** An entry as sent: canonical CIDR, `action` only for deny (absent = allow). */
function outgoing(e: Entry): Entry {
  return {
    cidr: canonical(e.cidr),
    ...(e.action === 'deny' ? { action: 'deny' as const } : {}),
    ...(e.comment !== undefined && e.comment !== '' ? { comment: e.comment } : {}),
    ...(e.expiresAt !== undefined ? { expiresAt: e.expiresAt } : {}),
  };
}

const ENTRY_FIELDS = new Set(['cidr', 'action', 'comment', 'expiresAt']);

/**
 * A list file: JSON (`{entries: [...]}` as `get -o json` prints it, or a bare array), else one
 * entry a line: `CIDR`, `allow CIDR` or `deny CIDR`, then an optional `# comment`; blank lines and
 * lines that are only a comment are skipped. Each CIDR is checked here, so a bad file is refused
 * (naming the line and quoting the value) before anything is sent.
 */
function parseListFile(text: string, where: string): Entry[] {
  const trimmed = text.trimStart();
  const entries: Array<{ entry: Entry; at: string }> = [];
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (err) {
      throw new UsageError(`${where}: not valid JSON: ${(err as Error).message}`);
    }
    const raw = Array.isArray(doc) ? doc : (doc as { entries?: unknown }).entries;
    if (!Array.isArray(raw))
      throw new UsageError(`${where}: JSON must be {"entries": [...]} (as \`get -o json\` prints it) or an array of entries`);
    raw.forEach((e: unknown, i) => {
      const at = `${where} entries[${i}]`;
      if (typeof e !== 'object' || e === null || typeof (e as Entry).cidr !== 'string')
        throw new UsageError(`${at}: expected {"cidr": "...", ...}`);
      const bad = Object.keys(e).find((k) => !ENTRY_FIELDS.has(k));
      if (bad !== undefined) throw new UsageError(`${at}: unknown field ${q(bad)} (allowed: cidr, action, comment, expiresAt)`);
      const entry = e as Entry;
      if (entry.action !== undefined && entry.action !== 'allow' && entry.action !== 'deny')
        throw new UsageError(`${at}.action: ${q(String(entry.action))}: expected "allow" or "deny"`);
      entries.push({ entry: { ...entry }, at });
    });
  } else {
    text.split(/\r?\n/).forEach((line, i) => {
      const hash = line.indexOf('#');
      const body = (hash < 0 ? line : line.slice(0, hash)).trim();
      const comment = hash < 0 ? '' : line.slice(hash + 1).trim();
      if (body === '') return;
      const at = `${where} line ${i + 1}`;
      const words = body.split(/\s+/);
      let action: 'allow' | 'deny' = 'allow';
      let cidr: string;
      if (words.length === 1) cidr = words[0]!;
      else if (words.length === 2 && (words[0] === 'allow' || words[0] === 'deny')) [action, cidr] = [words[0], words[1]!];
      else throw new UsageError(`${at}: ${q(body)}: expected "CIDR", "allow CIDR" or "deny CIDR", then an optional "# comment"`);
      entries.push({ entry: { cidr, ...(action === 'deny' ? { action } : {}), ...(comment !== '' ? { comment } : {}) }, at });
    });
  }
  const seen = new Map<string, string>();
  return entries.map(({ entry, at }) => {
    const p = parseCidr(entry.cidr);
    if (!p.ok) throw new UsageError(`${at}: ${p.message}`);
    const before = seen.get(p.cidr.text);
    if (before !== undefined) throw new UsageError(`${at}: ${p.cidr.text} is listed twice (also at ${before.slice(where.length + 1)})`);
    seen.set(p.cidr.text, at);
    return outgoing(entry);
  });
}

interface ListDiff {
  added: Entry[];
  removed: Entry[];
  changed: Array<{ cidr: string; before: Entry; after: Entry }>;
}

/** What changes when `current` becomes `next`, keyed by canonical CIDR, in `next`'s order. */
export function diffEntries(current: readonly Entry[], next: readonly Entry[]): ListDiff {
  const now = new Map(current.map((e) => [canonical(e.cidr), e]));
  const wanted = new Set(next.map((e) => canonical(e.cidr)));
  const diff: ListDiff = { added: [], removed: [], changed: [] };
  for (const e of next) {
    const key = canonical(e.cidr);
    const before = now.get(key);
    if (before === undefined) diff.added.push(e);
    else if (
      (before.action ?? 'allow') !== (e.action ?? 'allow') ||
      (before.comment ?? '') !== (e.comment ?? '') ||
      before.expiresAt !== e.expiresAt
    ) {
      diff.changed.push({ cidr: key, before, after: e });
    }
  }
  for (const e of current) if (!wanted.has(canonical(e.cidr))) diff.removed.push(e);
  return diff;
}

function diffLines(d: ListDiff): string {
  const field = (name: string, a: string | undefined, b: string | undefined): string | null =>
    (a ?? '') === (b ?? '') ? null : `${name} ${a ? q(a) : '-'} -> ${b ? q(b) : '-'}`;
  return [
    ...d.added.map((e) => `+ ${describe(e)}\n`),
    ...d.removed.map((e) => `- ${describe(e)}\n`),
    ...d.changed.map(
      (c) =>
        `~ ${c.cidr}: ${[
          field('action', c.before.action ?? 'allow', c.after.action ?? 'allow'),
          field('comment', c.before.comment, c.after.comment),
          field('expiresAt', c.before.expiresAt, c.after.expiresAt),
        ]
          .filter((x) => x !== null)
          .join(', ')}\n`,
    ),
  ].join('');
}

function readFileArg(file: string): string {
  try {
    return fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read -f ${q(file)}: ${(err as Error).message}`);
  }
}

interface Parsed {
  command: string;
  args: string[];
  values: Partial<Record<CommandOption, string | boolean | string[]>>;
  output: OutputFormat;
  client: Client;
}

function parseCommand(argv: string[], env: NodeJS.ProcessEnv): Parsed | 'help' {
  const { values, positionals } = parseCommandLine(argv, OPTIONS, true);
  if (values.help === true) return 'help';
  const command = positionals.shift();
  if (command === undefined) throw new UsageError('no command given');
  const spec = COMMANDS[command];
  if (spec === undefined) throw new UsageError(`unknown command ${q(command)}`);
  const output = outputFormat(values);
  const own: Parsed['values'] = {};
  for (const name of Object.keys(OPTIONS) as Array<keyof typeof OPTIONS>) {
    if (name in ADMIN_OPTIONS || name === 'admin' || values[name] === undefined) continue;
    if (!spec.options.includes(name as CommandOption))
      throw new UsageError(
        `${command} takes no --${name} (it takes: ${spec.options.map((o) => `--${o}`).join(', ') || 'only the admin options'})`,
      );
    own[name as CommandOption] = values[name];
  }
  for (const name of spec.required ?? []) if (own[name] === undefined) throw new UsageError(`${command} needs --${name}`);
  if (positionals.length !== spec.args.length) {
    throw new UsageError(
      `${command} takes ${spec.args.length} argument(s)${spec.args.length ? ` (${spec.args.join(' ')})` : ''}, got ${positionals.length}`,
    );
  }
  if (values['admin-url'] !== undefined && values.admin !== undefined)
    throw new UsageError('--admin is the old name of --admin-url: give one of them');
  const base = adminUrl(values['admin-url'] ?? values.admin, env)!;
  const token = tokenFromFile(values['token-file']) ?? (env.IPGATE_ADMIN_TOKEN ?? '').trim();
  if (token === '') throw new UsageError('no admin token: pass --token-file FILE or set IPGATE_ADMIN_TOKEN');
  return { command, args: positionals, values: own, output, client: new Client(base, token) };
}

export async function allowlistMain(
  argv: string[],
  io: Io = {
    out: (s) => process.stdout.write(s),
    err: (s) => process.stderr.write(s),
    env: process.env,
    now: Date.now,
  },
): Promise<number> {
  let p: Parsed | 'help';
  try {
    if (argv.length === 0) {
      io.err(ALLOWLIST_USAGE);
      return EXIT.usage;
    }
    p = parseCommand(argv, io.env);
    if (p === 'help') {
      io.out(ALLOWLIST_USAGE);
      return EXIT.ok;
    }
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`ipgate allowlist: ${err.message}\n\n${ALLOWLIST_USAGE}`);
    return EXIT.usage;
  }
  try {
    return await run(p, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`ipgate allowlist ${p.command}: ${err.message}\n`);
      return EXIT.usage;
    }
    if (err instanceof Refused) {
      const { reply } = err;
      const body = reply.json;
      const detail =
        body && typeof body.message === 'string'
          ? `${String(body.error)}: ${body.message}${typeof body.field === 'string' ? ` (field ${body.field})` : ''}`
          : reply.text.slice(0, 300);
      io.err(`ipgate allowlist ${p.command}: HTTP ${reply.status}: ${detail}\n${err.hint ? `${err.hint}\n` : ''}`);
      return EXIT.api;
    }
    if (err instanceof Unreachable) {
      io.err(`ipgate allowlist: cannot reach the admin API at ${p.client.href}: ${err.message}\n`);
      return EXIT.unreachable;
    }
    throw err;
  }
}

async function run(p: Parsed, io: Io): Promise<number> {
  const { command, args, values, output, client } = p;
  const enc = encodeURIComponent;
  const call = async (method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ApiReply> => {
    try {
      return await client.call(method, path, body, headers);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new Unreachable(`${code ? `${code}: ` : ''}${(err as Error).message}`);
    }
  };
  const getList = async (name: string): Promise<ListBody> => ok(await call('GET', `/v1/allowlists/${enc(name)}`)) as unknown as ListBody;
  const print = (doc: unknown, text: () => string): void => io.out(output === 'table' ? text() : renderDocument(output, doc));
  const name = args[0]!;

  switch (command) {
    case 'ls': {
      const body = ok(await call('GET', '/v1/allowlists'));
      const lists = body.allowlists as Array<{
        name: string;
        version: string;
        appliedVersion: string | null;
        entries: number;
        source?: string;
      }>;
      const withSource = lists.some((l) => l.source !== undefined);
      print(body, () =>
        table([
          ['NAME', 'VERSION', 'APPLIED', 'ENTRIES', ...(withSource ? ['SOURCE'] : [])],
          ...lists.map((l) => [l.name, l.version, l.appliedVersion ?? '-', String(l.entries), ...(withSource ? [l.source ?? '-'] : [])]),
        ]),
      );
      return EXIT.ok;
    }
    case 'get': {
      const list = await getList(name);
      print(list, () => {
        const rows = (entries: Entry[]): string =>
          table([
            ['CIDR', 'ACTION', 'EXPIRES', 'COMMENT'],
            ...entries.map((e) => [e.cidr, e.action ?? 'allow', e.expiresAt ?? '-', e.comment ?? '']),
          ]);
        let s = `# ${list.name} version ${list.version}, ${list.entries.length} entries${list.source ? `, source ${list.source}` : ''}\n`;
        if (list.entries.length > 0) s += rows(list.entries);
        if (list.temporary && list.temporary.length > 0)
          s += `# temporary entries (through the API, until they expire): ${list.temporary.length}\n${rows(list.temporary)}`;
        return s;
      });
      return EXIT.ok;
    }
    case 'add':
    case 'deny': {
      const list = await getList(name);
      const cidr = canonical(args[1]!);
      const existing = [...list.entries, ...(list.temporary ?? [])].find((e) => e.cidr === cidr);
      if (existing !== undefined && values.replace !== true) {
        io.err(
          `ipgate allowlist ${command}: ${name} already has ${describe(existing)} (version ${list.version}); nothing changed. ` +
            'Pass --replace to replace that entry (its comment and expiry are replaced too), or rm it first.\n',
        );
        return EXIT.api;
      }
      const entry: Entry = {
        cidr,
        ...(command === 'deny' ? { action: 'deny' as const } : {}),
        ...(typeof values.comment === 'string' && values.comment !== '' ? { comment: values.comment } : {}),
        ...(typeof values.expires === 'string' ? { expiresAt: expiresAt(values.expires, io.now()) } : {}),
      };
      const body = ok(
        await call(
          'POST',
          `/v1/allowlists/${enc(name)}/entries${values.replace === true ? '?replace=true' : ''}`,
          { entries: [entry] },
          { 'if-match': `"${list.version}"` },
        ),
      );
      const after = `version ${String(body.version)}, ${(body.entries as Entry[]).length} entries`;
      print(body, () =>
        existing !== undefined
          ? `replaced ${describe(existing)} in ${name} with ${describe(entry)}: ${after}\n`
          : `added ${command === 'deny' ? 'deny ' : ''}${cidr} to ${name}: ${after}\n`,
      );
      return EXIT.ok;
    }
    case 'rm': {
      const body = ok(await call('DELETE', `/v1/allowlists/${enc(name)}/entries/${enc(args[1]!)}`));
      print(body, () => `removed ${args[1]} from ${name}: version ${String(body.version)}, ${(body.entries as Entry[]).length} entries\n`);
      return EXIT.ok;
    }
    case 'check': {
      const body = ok(await call('GET', `/v1/allowlists/${enc(name)}/check?ip=${enc(args[1]!)}`));
      const entry = body.entry as Entry | null;
      print(body, () => {
        const by = entry
          ? ` entry ${entry.cidr}${entry.action === 'deny' ? ' (deny)' : ''}${entry.comment ? ` (${entry.comment})` : ''}${entry.expiresAt ? `, until ${entry.expiresAt}` : ''}`
          : '';
        if (body.allowed === true) return `${String(body.ip)} is allowed by ${name}${by}\n`;
        return entry
          ? `${String(body.ip)} is denied by ${name}${by}\n`
          : `${String(body.ip)} is not allowed by ${name} (version ${String(body.version)})\n`;
      });
      return body.allowed === true ? EXIT.ok : EXIT.notAllowed;
    }
    case 'replace': {
      const file = values.file as string;
      const next = parseListFile(readFileArg(file), file === '-' ? 'stdin' : file);
      const list = await getList(name);
      const diff = diffEntries(list.entries, next);
      const changes = diff.added.length + diff.removed.length + diff.changed.length;
      const counts = `${diff.added.length} added, ${diff.removed.length} removed, ${diff.changed.length} changed`;
      const doc = (extra: object): object => ({ name, fromVersion: list.version, ...extra, ...diff });
      if (values['dry-run'] === true || changes === 0) {
        const unchanged = changes === 0;
        print(
          doc({ dryRun: values['dry-run'] === true, written: false }),
          () =>
            `${diffLines(diff)}${
              unchanged
                ? `${name} already matches ${file}: version ${list.version}, ${next.length} entries; nothing sent\n`
                : `dry run: ${name} version ${list.version} not changed; ${file} would make ${next.length} entries (${counts})\n`
            }`,
        );
        return EXIT.ok;
      }
      const body = ok(await call('PUT', `/v1/allowlists/${enc(name)}`, { entries: next }, { 'if-match': `"${list.version}"` }));
      print(
        doc({ dryRun: false, written: true, list: body }),
        () =>
          `${diffLines(diff)}replaced ${name} from ${file}: version ${list.version} -> ${String(body.version)}, ${(body.entries as Entry[]).length} entries (${counts})\n`,
      );
      return EXIT.ok;
    }
    case 'create': {
      const entries =
        typeof values.file === 'string' ? parseListFile(readFileArg(values.file), values.file === '-' ? 'stdin' : values.file) : [];
      const body = ok(await call('POST', '/v1/allowlists', { name, entries }));
      print(
        body,
        () =>
          `created ${name}: version ${String(body.version)}, ${Array.isArray(body.entries) ? body.entries.length : entries.length} entries\n`,
      );
      return EXIT.ok;
    }
    case 'delete': {
      const body = ok(await call('DELETE', `/v1/allowlists/${enc(name)}`), true);
      print(body, () => `deleted ${name}\n`);
      return EXIT.ok;
    }
    default: {
      // explain
      const req: Record<string, unknown> = { listener: values.listener, peer: args[0] };
      const headers = explainHeaders(Array.isArray(values.header) ? values.header : [], typeof values.xff === 'string' ? values.xff : null);
      if (Object.keys(headers).length > 0) req.headers = headers;
      if (typeof values['proxy-header'] === 'string') req.proxyHeader = values['proxy-header'];
      if (typeof values.host === 'string') req.host = values.host;
      if (typeof values.path === 'string') req.path = values.path;
      if (typeof values.sni === 'string') req.sni = values.sni;
      let reply: Record<string, unknown>;
      try {
        reply = ok(await call('POST', '/v1/explain', req));
      } catch (err) {
        // The API's words name its fields; say which flag sets each.
        const field = err instanceof Refused ? err.reply.json?.field : undefined;
        const flag =
          field === 'host'
            ? '--host NAME (or --header "Host: NAME")'
            : field === 'sni'
              ? '--sni only on a TCP listener with routes'
              : field === 'proxyHeader'
                ? '--proxy-header'
                : field === 'peer'
                  ? 'the IP argument'
                  : null;
        if (err instanceof Refused && flag !== null && err.hint === '') throw new Refused(err.reply, `give ${flag}`);
        throw err;
      }
      const body = reply;
      print(body, () => explainText(body));
      return body.decision === 'allow' ? EXIT.ok : EXIT.notAllowed;
    }
  }
}

/**
 * `--header "Name: value"` (repeatable; a name given twice keeps both values, as a request carries
 * them) and `--xff`, as the explain API's `headers`. A header without a colon is a usage error.
 */
function explainHeaders(lines: readonly string[], xff: string | null): Record<string, string | string[]> {
  const out: Record<string, string[]> = {};
  const add = (name: string, value: string): void => {
    const key = name.toLowerCase();
    (out[key] ??= []).push(value);
  };
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : line.slice(0, colon).trim();
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new UsageError(`--header ${q(line)}: expected "Name: value"`);
    add(name, line.slice(colon + 1).trim());
  }
  if (xff !== null) add('x-forwarded-for', xff);
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.length === 1 ? v[0]! : v]));
}

/** The explain answer as labelled lines. */
function explainText(b: Record<string, unknown>): string {
  const s = (v: unknown): string => (v === null || v === undefined ? '-' : String(v));
  const e = b.entry as (Entry & { index?: number }) | null | undefined;
  const rows: string[][] = [
    ['listener', `${s(b.listener)} (${s(b.mode)})`],
    ['peer', `${s(b.peer)}${b.peerTrusted === true ? ' (a trusted PROXY source)' : ''}`],
    ['proxy header', s(b.proxyHeader)],
    ['client', b.client == null ? '-' : `${s(b.client)}${b.clientPort != null ? ` port ${s(b.clientPort)}` : ''} via ${s(b.via)}`],
  ];
  if (b.mode === 'http')
    rows.push(['trusted proxy', b.trustedProxy === true ? 'yes (X-Forwarded-For walked)' : 'no (X-Forwarded-For ignored)']);
  if ('sni' in b) rows.push(['sni', s(b.sni)]);
  if ('route' in b) {
    const r = b.route as {
      name: string;
      host: string;
      hostMatch: string;
      path: { path: string; match: string } | null;
      upstreams: string[];
    } | null;
    rows.push([
      'route',
      r === null
        ? '- (none matched)'
        : `${r.name} (host ${r.host}, ${r.hostMatch}${r.path !== null ? `; path ${r.path.path}, ${r.path.match}` : ''}) -> ${r.upstreams.join(', ')}`,
    ]);
  }
  rows.push(['allowlist', `${s(b.allowlist)} version ${s(b.allowlistVersion)}`]);
  rows.push(['entry', e ? describe(e) : '-']);
  rows.push([
    'decision',
    `${s(b.decision)}${b.reason !== undefined ? ` (${s(b.reason)})` : ''}${b.status !== undefined ? `, status ${s(b.status)}` : ''}` +
      `${b.detail !== undefined ? `: ${s(b.detail)}` : ''}`,
  ]);
  return table(rows);
}
