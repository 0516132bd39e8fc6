/**
 * rewrite-target per path (src/import/rewrite-target.ts): the forms that are a prefix rewrite, and
 * the others refused with their reason. Each mapped row is checked against what nginx's
 * `rewrite "(?i)<path>" <target> break;` makes of sample request paths (emulated with the same
 * regular expression, anchored as the location `~* "^<path>"` is, replacing the whole path), and
 * against ipgate's own rewrite (src/forward/http/edge-rules.ts rewriteTarget) on the same paths
 * where ipgate's prefix routes them.
 */
import t from 'tap';
import { rewriteTarget } from '../../../src/forward/http/edge-rules';
import { rewriteForPath } from '../../../src/import/rewrite-target';

/** nginx: the location `~* "^path"` matches, then `rewrite` replaces the whole $uri with the target, $n filled. */
function nginxRewrite(path: string, target: string, uri: string): string | null {
  const m = new RegExp(`^${path}`, 'i').exec(uri);
  if (m === null) return null;
  return target.replace(/\$([0-9])/g, (_, n: string) => m[Number(n)] ?? '');
}

/** ipgate: the route's prefix on "/" boundaries, then the prefix replaced. */
function ipgateRewrite(prefix: string, replacePrefix: string, uri: string): string | null {
  if (uri !== prefix && !uri.startsWith(`${prefix}/`)) return null;
  return rewriteTarget({ replacePrefix, forwardedPrefix: false }, uri, prefix, {});
}

const SAMPLES = ['/api', '/api/', '/api/users', '/api/users/7/', '/api//x', '/apix', '/API/Users', '/v2/api/x', '/'];

t.test('the prefix forms: every path ipgate routes goes upstream as nginx sent it', async (t) => {
  const rows: Array<{ path: string; target: string; prefix: string; replacePrefix: string; wider: boolean }> = [
    { path: '/api(/|$)(.*)', target: '/$2', prefix: '/api', replacePrefix: '/', wider: false },
    { path: '/api(/|$)(.*)', target: '/v1/$2', prefix: '/api', replacePrefix: '/v1/', wider: false },
    { path: '/api/?(.*)', target: '/$1', prefix: '/api', replacePrefix: '/', wider: true },
    { path: '/api/?(.*)', target: '/internal/$1', prefix: '/api', replacePrefix: '/internal/', wider: true },
  ];
  for (const row of rows) {
    const plan = rewriteForPath(row.path, row.target);
    t.same(
      plan,
      { kind: 'prefix', prefix: row.prefix, replacePrefix: row.replacePrefix, widerInNginx: row.wider },
      `${row.path} with ${row.target}`,
    );
    for (const uri of SAMPLES) {
      if (uri.includes('//')) continue; // both merge slashes before matching (nginx merge_slashes, ipgate's normal form)
      const ours = ipgateRewrite(row.prefix, row.replacePrefix, uri);
      const theirs = nginxRewrite(row.path, row.target, uri);
      if (ours !== null) t.equal(ours, theirs, `${row.path} ${row.target}: ${uri} goes up as nginx sent it (${theirs})`);
      else if (theirs !== null)
        t.ok(
          (row.wider && !uri.startsWith(`${row.prefix}/`) && uri !== row.prefix) || uri.toLowerCase().startsWith(row.prefix),
          `${row.path}: ${uri} is routed by nginx only (${row.wider ? 'the optional slash, or ' : ''}case): the note names it`,
        );
    }
  }
});

t.test('the other forms are refused with their reason, never approximated', async (t) => {
  const rows: Array<{ path: string; target: string; reason: RegExp }> = [
    { path: '/old', target: '/', reason: /sent EVERY request under this path upstream as "\/"/ },
    { path: '/static', target: '/$2', reason: /sent EVERY request under this path upstream as "\/"/ },
    { path: '/app', target: '/new', reason: /as "\/new".*replacePrefix: "\/new\/"/ },
    { path: '/api(/|$)(.*)', target: '/$1', reason: /a literal path ending in "\/" followed by \$2/ },
    { path: '/api(/|$)(.*)', target: '/x$2', reason: /a literal path ending in "\/" followed by \$2/ },
    { path: '/api(/|$)(.*)', target: '/$2?a=b', reason: /followed by \$2/ },
    { path: '/api/?(.*)', target: '/$2', reason: /followed by \$1/ },
    { path: '/v1.0(/|$)(.*)', target: '/$2', reason: /not one of the forms/ },
    { path: '/(.*)/api(/|$)(.*)', target: '/$3', reason: /not one of the forms/ },
    { path: '/api/(.*)', target: '/$1', reason: /not one of the forms.*no regular expression on a request/ },
    { path: '/items/[0-9]+', target: '/x', reason: /not one of the forms/ },
  ];
  for (const row of rows) {
    const plan = rewriteForPath(row.path, row.target);
    t.equal(plan.kind, 'refused', `${row.path} with ${row.target}: refused`);
    if (plan.kind === 'refused') t.match(plan.reason, row.reason, `${row.path} with ${row.target}: its reason`);
  }
  t.same(rewriteForPath('/', '/'), { kind: 'none' }, 'the path equal to the target: ingress-nginx did not rewrite it');
});
