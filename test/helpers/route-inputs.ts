/**
 * Generated requests for the route differential test (test/integration/route-differential.test.ts):
 * request targets and Host headers built from the site of helpers/location-backends.ts
 * (admin.example.com, www.example.com with /admin and /public, any other name) and bent the ways
 * two parsers can read differently: percent-encodings (of letters, dots, slashes, ";"), dot
 * segments, ";" parameters, case, backslashes, doubled slashes, overlong and double encodings,
 * raw non-ASCII bytes, long segments; Hosts with userinfo, ports, trailing dots, case,
 * percent-encodings, fullwidth letters, IDN (xn-- and raw UTF-8), long labels, IP literals,
 * duplicates, none; absolute-form targets whose authority differs from Host.
 *
 * Everything is a latin1 "byte string" (one char per byte), so a raw UTF-8 name goes on the wire
 * as its bytes. Seeded (helpers/prng.ts): the same seed gives the same inputs.
 */

export type Family = 'path' | 'host' | 'both';

export interface RouteInput {
  /** What was bent: the path only (Host plain), the Host only (path plain), or both. */
  family: Family;
  /** The mutations applied, for the report. */
  tags: string[];
  /** The request target as sent (byte string). */
  target: string;
  /** Host header values, one line each (none, one, or two). */
  hosts: string[];
}

type Rand = () => number;

const bytes = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');

const pick = <T>(rand: Rand, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const chance = (rand: Rand, p: number): boolean => rand() < p;

const hex = (rand: Rand, c: number): string => {
  const h = c.toString(16).padStart(2, '0');
  return `%${chance(rand, 0.5) ? h.toUpperCase() : h}`;
};

const SEGMENTS = [
  'admin',
  'admin',
  'public',
  'x',
  'index.html',
  'ADMIN',
  'Admin',
  'adminx',
  'admin.',
  'adm',
  'in',
  '',
  '.',
  '..',
  'public',
  'admin',
];

/** Indexes of the characters of `s` that satisfy `ok`. */
function where(s: string, ok: (c: string) => boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < s.length; i++) if (ok(s[i]!)) out.push(i);
  return out;
}

function at(rand: Rand, s: string, ok: (c: string) => boolean): number {
  const xs = where(s, ok);
  return xs.length === 0 ? -1 : pick(rand, xs);
}

const isLetter = (c: string): boolean => /[A-Za-z]/.test(c);

/** Insert `text` at a "/" boundary (after a random "/", or at the end). */
function atBoundary(rand: Rand, path: string, text: string): string {
  const slashes = where(path, (c) => c === '/');
  const i = chance(rand, 0.2) ? path.length : pick(rand, slashes) + 1;
  return path.slice(0, i) + text + path.slice(i);
}

const PATH_MUTATIONS: Array<[tag: string, f: (rand: Rand, p: string) => string]> = [
  [
    'pct-letter',
    (rand, p) => {
      const i = at(rand, p, isLetter);
      return i < 0 ? p : p.slice(0, i) + hex(rand, p.charCodeAt(i)) + p.slice(i + 1);
    },
  ],
  [
    'pct-dot',
    (rand, p) => {
      const i = at(rand, p, (c) => c === '.');
      return i < 0 ? atBoundary(rand, p, `${hex(rand, 0x2e)}${hex(rand, 0x2e)}/`) : p.slice(0, i) + hex(rand, 0x2e) + p.slice(i + 1);
    },
  ],
  [
    'pct-slash',
    (rand, p) => {
      const i = at(rand, p, (c) => c === '/');
      return i <= 0 ? p + hex(rand, 0x2f) : p.slice(0, i) + hex(rand, 0x2f) + p.slice(i + 1);
    },
  ],
  [
    'pct-semicolon',
    (rand, p) => {
      const i = at(rand, p, isLetter);
      return i < 0 ? p : p.slice(0, i + 1) + hex(rand, 0x3b) + pick(rand, ['', 'x=1', 'jsessionid=A1']) + p.slice(i + 1);
    },
  ],
  [
    'param',
    (rand, p) => {
      const slashes = where(p, (c) => c === '/').filter((i) => i > 0);
      const param = pick(rand, [';', ';x=1', ';jsessionid=A1', ';a;b', ';/', ';..']);
      const i = slashes.length === 0 || chance(rand, 0.3) ? p.length : pick(rand, slashes);
      return p.slice(0, i) + param + p.slice(i);
    },
  ],
  ['dot-param', (rand, p) => atBoundary(rand, p, `${pick(rand, ['..;', '..;x', '.;', '..;/..;', '%2e%2e;', '.%2e;x'])}/`)],
  [
    'dot-segment',
    (rand, p) => atBoundary(rand, p, `${pick(rand, ['.', '..', '%2e', '%2E%2e', '.%2e', '%2e.', '...', '..%2f', '.%00.'])}/`),
  ],
  [
    'case',
    (rand, p) => p.replace(/[A-Za-z]/g, (c) => (chance(rand, 0.4) ? (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) : c)),
  ],
  [
    'backslash',
    (rand, p) => {
      const i = at(rand, p, (c) => c === '/');
      return i < 0 ? p : p.slice(0, i) + pick(rand, ['\\', '%5c', '%5C', '/\\']) + p.slice(i + 1);
    },
  ],
  [
    'double-slash',
    (rand, p) => {
      const i = at(rand, p, (c) => c === '/');
      return i < 0 ? p : `${p.slice(0, i)}/${p.slice(i)}`;
    },
  ],
  ['query', (rand, p) => `${p}?${pick(rand, ['q=1', 'x=/admin/', 'a;b', '/../admin', '', '%2f'])}`],
  ['fragment', (rand, p) => `${p}#${pick(rand, ['x', '/admin'])}`],
  [
    'encoding-trick',
    (rand, p) =>
      atBoundary(
        rand,
        p,
        `${pick(rand, ['%c0%ae%c0%ae', '%252e%252e', '%u002e%u002e', '%00', '%2500', '%25', '%2', '%zz', '%e0%80%ae'])}/`,
      ),
  ],
  [
    'non-ascii',
    (rand, p) =>
      atBoundary(rand, p, pick(rand, [bytes('é'), '\xe9', bytes('İ'), `${bytes('ａ')}dmin`, bytes('ſ'), '%C4%B0', '%EF%BD%81dmin'])),
  ],
  [
    'special',
    (rand, p) =>
      atBoundary(
        rand,
        p,
        pick(rand, [
          '|',
          '{',
          '}',
          '^',
          '`',
          '"',
          '<',
          '>',
          "'",
          '!',
          '$',
          '&',
          '(',
          '*',
          '+',
          ',',
          '=',
          ':',
          '@',
          '~',
          '[',
          ']',
          '%20',
          '%09',
          '\t',
        ]),
      ),
  ],
  ['long', (rand, p) => atBoundary(rand, p, `${'a'.repeat(pick(rand, [64, 255, 1000, 4000, 9000]))}/`)],
];

const HOSTS = ['www.example.com', 'admin.example.com', 'other.example.net'];

const HOST_MUTATIONS: Array<[tag: string, f: (rand: Rand, h: string) => string]> = [
  ['host-case', (rand, h) => h.replace(/[a-z]/g, (c) => (chance(rand, 0.5) ? c.toUpperCase() : c))],
  ['host-trailing-dot', (_rand, h) => `${h}.`],
  ['host-port', (rand, h) => `${h}:${pick(rand, ['80', '8080', '', 'x', '99999', '0080', '80:80'])}`],
  [
    'host-userinfo',
    (rand, h) => pick(rand, [`u@${h}`, `${pick(rand, HOSTS)}@${h}`, `${pick(rand, HOSTS)}:x@${h}`, `${h}@${pick(rand, HOSTS)}`]),
  ],
  [
    'host-pct',
    (rand, h) => {
      const i = at(rand, h, (c) => c === '.' || isLetter(c));
      return i < 0 ? h : h.slice(0, i) + hex(rand, h.charCodeAt(i)) + h.slice(i + 1);
    },
  ],
  [
    'host-fullwidth',
    (rand, h) => {
      const i = at(rand, h, isLetter);
      if (i < 0) return h;
      const w = String.fromCharCode(0xff41 + h.toLowerCase().charCodeAt(i) - 0x61);
      return h.slice(0, i) + (chance(rand, 0.5) ? bytes(w) : encodeURIComponent(w)) + h.slice(i + 1);
    },
  ],
  [
    'host-idn',
    (rand, h) =>
      pick(rand, [
        bytes(`ä${h.slice(1)}`),
        `xn--dmin-moa${h.slice(h.indexOf('.'))}`,
        bytes('ａdmin.example.com'),
        bytes('admın.example.com'),
        `xn--admn-2ta${h.slice(h.indexOf('.'))}`,
      ]),
  ],
  [
    'host-long-label',
    (rand, h) => `${'a'.repeat(pick(rand, [63, 64, 200]))}.${chance(rand, 0.3) ? `${'b.'.repeat(pick(rand, [80, 130]))}` : ''}${h}`,
  ],
  ['host-ip', (rand) => pick(rand, ['127.0.0.1', '[::1]', '[::1]:80', '2130706433', '0x7f.1'])],
  ['host-backslash', (rand, h) => pick(rand, [`${h}\\@${pick(rand, HOSTS)}`, `${pick(rand, HOSTS)}\\${h}`])],
  ['host-list', (rand, h) => `${h}, ${pick(rand, HOSTS)}`],
  [
    'host-char',
    (rand, h) => {
      const i = at(rand, h, (c) => c === '.');
      return i < 0 ? h : h.slice(0, i) + pick(rand, ['_', '-', '..', '/', '?', '#', ' ', '%']) + h.slice(i);
    },
  ],
];

/** Paths every backend serves (Tomcat serves files only): mutations of these show most. */
const SERVED = [
  '/',
  '/admin/',
  '/public/',
  '/admin/index.html',
  '/public/index.html',
  '/index.html',
  '/admin',
  '/public/admin/',
  '/x/../admin/',
];

function mutatePath(rand: Rand, tags: string[]): string {
  let p: string;
  if (chance(rand, 0.6)) {
    p = pick(rand, SERVED);
  } else {
    const n = 1 + Math.floor(rand() * 4);
    const segments: string[] = [];
    for (let i = 0; i < n; i++) segments.push(pick(rand, SEGMENTS));
    p = `/${segments.join('/')}${chance(rand, 0.4) ? '/' : ''}`;
  }
  const k = 1 + Math.floor(rand() * 2);
  for (let i = 0; i < k; i++) {
    const [tag, f] = pick(rand, PATH_MUTATIONS);
    tags.push(tag);
    p = f(rand, p);
  }
  return p;
}

function mutateHost(rand: Rand, tags: string[]): string {
  let h = pick(rand, HOSTS);
  const k = 1 + Math.floor(rand() * 2);
  for (let i = 0; i < k; i++) {
    const [tag, f] = pick(rand, HOST_MUTATIONS);
    tags.push(tag);
    h = f(rand, h);
  }
  return h;
}

/** One generated request. */
export function routeInput(rand: Rand): RouteInput {
  const r = rand();
  const family: Family = r < 0.5 ? 'path' : r < 0.8 ? 'host' : 'both';
  const tags: string[] = [];
  let target = family === 'host' ? pick(rand, ['/', '/admin/', '/public/', '/admin', '/x']) : mutatePath(rand, tags);
  let hosts = [
    family === 'path'
      ? pick(rand, ['www.example.com', 'www.example.com', 'admin.example.com', 'other.example.net'])
      : mutateHost(rand, tags),
  ];
  if (family !== 'path') {
    const shape = rand();
    if (shape < 0.1) {
      tags.push('host-dup');
      hosts.push(chance(rand, 0.5) ? mutateHost(rand, tags) : pick(rand, HOSTS));
    } else if (shape < 0.14) {
      tags.push('host-none');
      hosts = [];
    } else if (shape < 0.17) {
      tags.push('host-empty');
      hosts = [''];
    } else if (shape < 0.3) {
      // Absolute form: the authority replaces Host (RFC 9112 3.2.2); Host says something else.
      tags.push('absolute-form');
      target = `${pick(rand, ['http', 'HTTP', 'https'])}://${mutateHost(rand, tags)}${target}`;
      hosts = [pick(rand, HOSTS)];
    }
  }
  return { family, tags, target, hosts };
}

/** The request's bytes: the target and Host lines as given, a User-Agent naming it, Connection: close. */
export function requestBytes(input: RouteInput, userAgent: string): Buffer {
  const hostLines = input.hosts.map((h) => `Host: ${h}\r\n`).join('');
  return Buffer.from(`GET ${input.target} HTTP/1.1\r\n${hostLines}User-Agent: ${userAgent}\r\nConnection: close\r\n\r\n`, 'latin1');
}
