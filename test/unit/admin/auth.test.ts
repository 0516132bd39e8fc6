import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { authenticate, loadTokens } from '../../../src/admin/auth';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ipgate-auth-'));
const write = (name: string, text: string): string => {
  const p = path.join(dir, name);
  fs.writeFileSync(p, text);
  return p;
};
const base = { tokenFile: null, tokenEnv: 'TOKEN_VAR', tokensFile: null };

t.test('the single token (file or env) is named admin; named tokens come from the tokens file', async (t) => {
  const fromEnv = loadTokens(base, { TOKEN_VAR: ' env-token-0123456789 \n' });
  t.equal(authenticate(fromEnv, 'env-token-0123456789'), 'admin', 'env token, trimmed');
  const fromFile = loadTokens({ ...base, tokenFile: write('t', 'file-token-0123456789\n') }, { TOKEN_VAR: 'env-token-0123456789' });
  t.equal(authenticate(fromFile, 'file-token-0123456789'), 'admin', 'tokenFile wins over the env');
  t.equal(authenticate(fromFile, 'env-token-0123456789'), null);
  const named = loadTokens(
    { ...base, tokensFile: write('n', '# ops\n\nalice:alice-token-0123456789\nbob:bob-token-01234567890:with-colon\n') },
    {},
  );
  t.equal(authenticate(named, 'alice-token-0123456789'), 'alice');
  t.equal(authenticate(named, 'bob-token-01234567890:with-colon'), 'bob', 'only the first colon separates');
  t.equal(authenticate(named, 'alice-token-012345678'), null, 'a prefix is not the token');
  t.equal(authenticate(named, ''), null);
  t.equal(loadTokens(base, {}).entries.length, 0, 'no token configured: nothing authenticates');
  t.equal(authenticate(loadTokens(base, {}), 'anything'), null);
});

t.test('bad token configuration is refused at start with the place named', async (t) => {
  const rows: Array<[string, Parameters<typeof loadTokens>[0], NodeJS.ProcessEnv, RegExp]> = [
    ['short env token', base, { TOKEN_VAR: 'short' }, /TOKEN_VAR: the token is shorter than 16/],
    ['missing token file', { ...base, tokenFile: path.join(dir, 'nope') }, {}, /cannot read .*nope/],
    ['line without colon', { ...base, tokensFile: write('a', 'justatoken0123456789\n') }, {}, /line 1: expected name:token/],
    ['bad name', { ...base, tokensFile: write('b', 'bad name:token-0123456789abc\n') }, {}, /line 1: "bad name" is not a valid token name/],
    [
      'duplicate name',
      { ...base, tokensFile: write('c', 'a:token-0123456789abc\na:token-0123456789abd\n') },
      {},
      /line 2: token name "a" is used twice/,
    ],
    [
      'admin named twice',
      { ...base, tokensFile: write('d', 'admin:token-0123456789abc\n') },
      { TOKEN_VAR: 'env-token-0123456789' },
      /token name "admin" is used twice/,
    ],
    ['white space in a token', { ...base, tokensFile: write('e', 'a:token 0123456789abc\n') }, {}, /white space/],
  ];
  for (const [what, config, env, message] of rows) {
    t.throws(() => loadTokens(config, env), { name: 'TokenError', code: 'ERR_ADMIN_TOKEN', message }, what);
  }
});
