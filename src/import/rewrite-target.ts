/**
 * ingress-nginx `rewrite-target` per path: the prefix rewrite (docs/edge-rules.md "Rewrites") that
 * does exactly what nginx did, or why there is none.
 *
 * What ingress-nginx does (template.go buildProxyPass, since 0.22.0): every location of an Ingress
 * with `rewrite-target: T` whose path P differs from T gets `rewrite "(?i)P" T break;`, and every
 * location of its host becomes `location ~* "^P"`. nginx's `rewrite` replaces the WHOLE path with
 * T (its captures filled in; the query is kept), not the part the regular expression matched. So:
 *
 * - `P(/|$)(.*)` with `L$2` (L a literal path ending in `/`): the location takes P and P/...,
 *   never P<other>; `/P/x` goes up as `L` + `x`, `/P` and `/P/` as `L`. That is the prefix P
 *   replaced by L, exactly.
 * - `P/?(.*)` with `L$1`: the same for P and P/..., but the location also took P<other> (`/foobar`
 *   under `/foo/?(.*)`, sent as `L` + `bar`): ipgate's prefix matches on "/" boundaries only, so
 *   those requests are not routed to it (a note; every request it does route goes up as nginx
 *   sent it).
 * - a path without capture groups (`rewrite-target: /` on `/foo`, the pre-0.22 habit): nginx
 *   sends EVERY request under P as T itself (`/foo/a/b` -> `/`; a `$n` in T is empty); ipgate
 *   rewrites prefixes only: listed, never approximated.
 * - anything else: listed. ipgate evaluates no regular expression on a request path, so a form
 *   it cannot read as a prefix cannot be carried over.
 */

/** What one path of an Ingress with rewrite-target becomes. */
export type RewritePlan =
  /** The path equals the target: ingress-nginx did not rewrite it. */
  | { kind: 'none' }
  | {
      kind: 'prefix';
      /** The path entry (a prefix). */
      prefix: string;
      /** http.rewrite.replacePrefix */
      replacePrefix: string;
      /** nginx also routed `<prefix><other>` (not on a "/" boundary) here: the `/?` form. */
      widerInNginx: boolean;
    }
  | { kind: 'refused'; reason: string };

/** A literal path segment run: nothing nginx's PCRE reads as syntax (`.` included: it matches any character). */
const LITERAL = /^\/[A-Za-z0-9\-_~%!&',;=:@/]*$/;
const REGEX_SYNTAX = /[\^$*+?()[\]{}|\\.]/;

export function rewriteForPath(path: string, target: string): RewritePlan {
  if (path === target) return { kind: 'none' };
  const slashOrEnd = path.endsWith('(/|$)(.*)') ? path.slice(0, -'(/|$)(.*)'.length) : null;
  const optionalSlash = slashOrEnd === null && path.endsWith('/?(.*)') ? path.slice(0, -'/?(.*)'.length) : null;
  const p = slashOrEnd ?? optionalSlash;
  const group = slashOrEnd !== null ? '$2' : '$1';
  if (p !== null && p !== '' && LITERAL.test(p) && !p.endsWith('/')) {
    const lit = target.endsWith(group) ? target.slice(0, -group.length) : null;
    if (lit?.endsWith('/') && LITERAL.test(lit))
      return { kind: 'prefix', prefix: p, replacePrefix: lit, widerInNginx: optionalSlash !== null };
    return {
      kind: 'refused',
      reason: `rewrite-target ${JSON.stringify(target)} on ${JSON.stringify(path)}: ipgate maps this path form only with a target that is a literal path ending in "/" followed by ${group} (${JSON.stringify(`/${group}`)}, ${JSON.stringify(`/app/${group}`)}), which is a prefix replacement; this one is not, and ipgate evaluates no regular expression on a request`,
    };
  }
  if (!REGEX_SYNTAX.test(path)) {
    // No capture group: a `$n` in the target is empty (nginx copies captures it has only).
    const sent = target.replace(/\$[0-9]/g, '');
    return {
      kind: 'refused',
      reason: `rewrite-target ${JSON.stringify(target)} on ${JSON.stringify(path)} (no capture groups): ingress-nginx (0.22 and later) sent EVERY request under this path upstream as ${JSON.stringify(sent)} (nginx's rewrite replaces the whole path, not the prefix), which ipgate's prefix rewrite cannot do; if the backend expects only the prefix removed (rewrite-target before 0.22), write http.rewrite: {replacePrefix: ${JSON.stringify(sent.endsWith('/') ? sent : `${sent}/`)}} on the route by hand`,
    };
  }
  return {
    kind: 'refused',
    reason: `rewrite-target ${JSON.stringify(target)} on ${JSON.stringify(path)}: not one of the forms ipgate maps exactly to a prefix rewrite ("<prefix>(/|$)(.*)" with "/$2", "<prefix>/?(.*)" with "/$1"); ipgate evaluates no regular expression on a request (a backtracking one costs time a crafted path controls)`,
  };
}
