/**
 * The one catalogue of end reasons (src/reasons.ts): every code is a bounded metric label with one
 * sentence, no code is in two groups, and the PROXY stage's codes are part of it.
 */
import t from 'tap';
import { PP_REASONS } from '../../../src/proxy-protocol/codes';
import { ROUTE_MISS_REASONS } from '../../../src/route/codes';
import { TLS_REASONS } from '../../../src/tls/codes';
import {
  CLIENT_REASONS,
  DENIAL_REASONS,
  EDGE_REASONS,
  END_REASONS,
  H2_REASONS,
  HOST_REASONS,
  REASONS,
  TLS_HANDSHAKE_REASONS,
  UPSTREAM_REASONS,
} from '../../../src/reasons';

const GROUPS = {
  DENIAL_REASONS,
  CLIENT_REASONS,
  HOST_REASONS,
  UPSTREAM_REASONS,
  END_REASONS,
  EDGE_REASONS,
  H2_REASONS,
  PP_REASONS,
  TLS_REASONS,
  ROUTE_MISS_REASONS,
  TLS_HANDSHAKE_REASONS,
} as const;

t.test('each code is in exactly one group, and REASONS holds them all', async (t) => {
  const seen = new Map<string, string>();
  for (const [group, codes] of Object.entries(GROUPS)) {
    for (const code of Object.keys(codes)) {
      t.notOk(seen.has(code), `${code}: only in ${group} (also in ${seen.get(code) ?? 'none'})`);
      seen.set(code, group);
    }
  }
  t.same(Object.keys(REASONS).sort(), [...seen.keys()].sort(), 'REASONS is the union of the groups');
  t.notOk('ok' in REASONS, '`ok` is no failure');
});

t.test('each code is a short snake_case label with one sentence', async (t) => {
  for (const [code, sentence] of Object.entries(REASONS)) {
    t.match(code, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, `${code}: a label`);
    t.ok(code.length <= 24, `${code}: short`);
    t.match(sentence, /^[A-Z].*[.)]$/, `${code}: one sentence`);
    t.notOk(sentence.includes('\n'), `${code}: one line`);
  }
});

t.test('the groups carry the codes the data path and the metrics name', async (t) => {
  t.same(Object.keys(DENIAL_REASONS).sort(), ['denied_by_entry', 'not_allowlisted', 'revoked']);
  t.same(Object.keys(UPSTREAM_REASONS).sort(), [
    'upstream_dns',
    'upstream_error',
    'upstream_refused',
    'upstream_reset',
    'upstream_timeout',
  ]);
  t.same(Object.keys(CLIENT_REASONS).sort(), [
    'bad_request',
    'client_abort',
    'h2_malformed',
    'h2_required',
    'h2_stream_timeout',
    'header_timeout',
    'header_too_large',
    'idle_timeout',
  ]);
  t.same(Object.keys(H2_REASONS).sort(), ['h2_control_flood', 'h2_idle_timeout', 'h2_protocol_error', 'h2_rapid_reset']);
  t.same(Object.keys(END_REASONS).sort(), ['denied', 'drain', 'route_removed', 'trust_revoked']);
  t.same(Object.keys(ROUTE_MISS_REASONS).sort(), ['route_bad_path', 'route_no_host', 'route_no_path', 'route_path_params']);
  t.same(Object.keys(HOST_REASONS).sort(), ['host_invalid', 'host_missing', 'host_repeated', 'host_too_long']);
  t.same(Object.keys(EDGE_REASONS).sort(), [
    'body_too_large',
    'limited_concurrent',
    'limited_connection_rate',
    'limited_requests',
    'redirected',
    'upstream_none_up',
  ]);
});
