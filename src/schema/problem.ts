/**
 * How a config problem is written: the field's path, the value quoted (summarised when large) and
 * what is wrong with it. Shared by the config's validation and the route tables it builds.
 */
/** `listeners[1].allowlist[0]: "10.0.0.1/33": prefix length 33 out of range for IPv4` */
export function problem(path: string, value: unknown, message: string): string {
  const shown = formatValue(value);
  // Address and CIDR refusals (allowlist/cidr.ts) already begin with the quoted value.
  return message.startsWith(`${shown}: `) ? `${path}: ${message}` : `${path}: ${shown}: ${message}`;
}

/**
 * A value as a problem quotes it: JSON when short; a large one summarised so that the line stays
 * readable (a mistyped `allowlist:` holding a hundred CIDRs is `{office: [100 items]}`, not the
 * hundred CIDRs): long strings cut, mappings by their keys, lists by their first items and count.
 */
export function formatValue(value: unknown): string {
  if (value === undefined) return '(missing)';
  const text = JSON.stringify(value);
  if (text === undefined) return String(value);
  if (text.length <= MAX_VALUE) return text;
  if (typeof value === 'string') return `${JSON.stringify(value.slice(0, MAX_VALUE - 20))}... (${value.length} characters)`;
  if (Array.isArray(value))
    return listSummary(
      value.map((v) => brief(v)),
      `${value.length} item${value.length === 1 ? '' : 's'}`,
      '[',
      ']',
    );
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    return listSummary(
      keys.map((k) => `${/^[A-Za-z0-9_.-]+$/.test(k) ? k : JSON.stringify(k)}: ${brief((value as Record<string, unknown>)[k])}`),
      `${keys.length} key${keys.length === 1 ? '' : 's'}`,
      '{',
      '}',
    );
  }
  return `${text.slice(0, MAX_VALUE - 3)}...`;
}

/** Longest value quoted whole. */
const MAX_VALUE = 80;

/** A nested value in a summary: a short scalar as JSON, else its kind and size. */
function brief(v: unknown): string {
  if (Array.isArray(v)) return `[${v.length} item${v.length === 1 ? '' : 's'}]`;
  if (v !== null && typeof v === 'object') return `{${Object.keys(v).length} key${Object.keys(v).length === 1 ? '' : 's'}}`;
  const t = JSON.stringify(v) ?? String(v);
  return t.length <= 24 ? t : `${t.slice(0, 21)}...`;
}

/** `[a, b, ... (40 items)]`: as many parts as fit, then the count of the whole. */
function listSummary(parts: string[], count: string, open: string, close: string): string {
  let out = '';
  let shown = 0;
  for (const p of parts) {
    if (out.length + p.length > MAX_VALUE - 24) break;
    out += (shown > 0 ? ', ' : '') + p;
    shown++;
  }
  return shown === parts.length ? `${open}${out}${close}` : `${open}${out}${shown > 0 ? ', ' : ''}... (${count})${close}`;
}
