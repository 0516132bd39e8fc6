import t from 'tap';
import { PP_REASONS } from '../../../src/proxy-protocol/codes';
import type { PpReason } from '../../../src/proxy-protocol/codes';
import { INVALID } from '../../fixtures/proxy-protocol/vectors';

/** Codes the listener reports; decodeProxyHeader never returns them. */
const LISTENER_ONLY: PpReason[] = ['pp_truncated', 'pp_timeout', 'pp_untrusted', 'pp_missing'];

t.test('every code has one short sentence', async (t) => {
  for (const [code, sentence] of Object.entries(PP_REASONS)) {
    t.match(code, /^pp_[a-z0-9_]+$/, `${code} is a bounded snake_case label`);
    t.match(sentence, /^[A-Z].*\.$/, `${code} reads as a sentence`);
    t.ok(sentence.length <= 200, `${code} fits on a log line`);
  }
  t.ok(Object.isFrozen(PP_REASONS), 'the catalogue cannot be altered at runtime');
});

t.test('the vector table exercises every decode-level code, and only catalogued ones', async (t) => {
  const seen = new Set<string>();
  for (const row of INVALID) if (row.expect.kind === 'error') seen.add(row.expect.reason);
  const decodeLevel = Object.keys(PP_REASONS)
    .filter((c) => !LISTENER_ONLY.includes(c as PpReason))
    .sort();
  t.same([...seen].sort(), decodeLevel);
  for (const code of LISTENER_ONLY) t.ok(code in PP_REASONS, `${code} lives in the catalogue too`);
});
