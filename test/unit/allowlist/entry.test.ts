import t from 'tap';
import { parseRfc3339, validateEntry } from '../../../src/allowlist/entry';

t.test('validateEntry accepts entries and returns a canonical frozen copy', async (t) => {
  const rows: Array<[desc: string, input: unknown, entry: object]> = [
    ['cidr only', { cidr: '10.0.0.0/8' }, { cidr: '10.0.0.0/8' }],
    ['cidr is canonicalised', { cidr: '2001:0DB8::/32' }, { cidr: '2001:db8::/32' }],
    ['a bare address becomes a host route', { cidr: '1.2.3.4' }, { cidr: '1.2.3.4/32' }],
    ['comment kept', { cidr: '::1', comment: 'ops laptop' }, { cidr: '::1/128', comment: 'ops laptop' }],
    [
      'expiresAt in UTC',
      { cidr: '10.0.0.0/8', expiresAt: '2030-01-31T18:00:00Z' },
      { cidr: '10.0.0.0/8', expiresAt: '2030-01-31T18:00:00Z' },
    ],
    [
      'expiresAt with offset and fraction',
      { cidr: '10.0.0.0/8', expiresAt: '2030-01-31T18:00:00.123456+02:00' },
      { cidr: '10.0.0.0/8', expiresAt: '2030-01-31T18:00:00.123456+02:00' },
    ],
    [
      'expiresAt with lower-case t and z (RFC 3339 5.6 note)',
      { cidr: '10.0.0.0/8', expiresAt: '2030-01-31t18:00:00z' },
      { cidr: '10.0.0.0/8', expiresAt: '2030-01-31t18:00:00z' },
    ],
    [
      '29 February in a leap year',
      { cidr: '10.0.0.0/8', expiresAt: '2028-02-29T00:00:00Z' },
      { cidr: '10.0.0.0/8', expiresAt: '2028-02-29T00:00:00Z' },
    ],
  ];
  for (const [desc, input, entry] of rows) {
    const r = validateEntry(input);
    t.same(r, { ok: true, entry }, desc);
    t.ok(r.ok && Object.isFrozen(r.entry), `${desc}: frozen`);
  }
});

t.test('validateEntry rejects with the field and a reason', async (t) => {
  const rows: Array<[desc: string, input: unknown, field: string, message: RegExp]> = [
    ['not an object', '10.0.0.0/8', '', /must be an object/],
    ['null', null, '', /must be an object/],
    ['an array', ['10.0.0.0/8'], '', /must be an object/],
    ['missing cidr', { comment: 'x' }, 'cidr', /cidr is required/],
    ['cidr not a string', { cidr: 10 }, 'cidr', /must be a string/],
    ['cidr host bits carry the parser message', { cidr: '10.0.0.1/8' }, 'cidr', /did you mean 10\.0\.0\.0\/8/],
    [
      'a typo in a field name is not silently dropped',
      { cidr: '10.0.0.0/8', expires_at: '2030-01-01T00:00:00Z' },
      'expires_at',
      /unknown field "expires_at"/,
    ],
    ['comment not a string', { cidr: '10.0.0.0/8', comment: 5 }, 'comment', /must be a string/],
    ['comment too long', { cidr: '10.0.0.0/8', comment: 'x'.repeat(1025) }, 'comment', /too long/],
    ['expiresAt not a string', { cidr: '10.0.0.0/8', expiresAt: 1893456000000 }, 'expiresAt', /RFC 3339/],
    [
      'date only (local time: depends on the replica TZ)',
      { cidr: '10.0.0.0/8', expiresAt: '2030-01-01' },
      'expiresAt',
      /not an RFC 3339 date-time/,
    ],
    ['no offset', { cidr: '10.0.0.0/8', expiresAt: '2030-01-01T00:00:00' }, 'expiresAt', /not an RFC 3339 date-time/],
    ['space instead of T', { cidr: '10.0.0.0/8', expiresAt: '2030-01-01 00:00:00Z' }, 'expiresAt', /not an RFC 3339 date-time/],
    ['month 13', { cidr: '10.0.0.0/8', expiresAt: '2030-13-01T00:00:00Z' }, 'expiresAt', /month 13 out of range/],
    ['30 February', { cidr: '10.0.0.0/8', expiresAt: '2030-02-30T00:00:00Z' }, 'expiresAt', /day 30 out of range/],
    ['29 February in a common year', { cidr: '10.0.0.0/8', expiresAt: '2100-02-29T00:00:00Z' }, 'expiresAt', /day 29 out of range/],
    ['hour 24', { cidr: '10.0.0.0/8', expiresAt: '2030-01-01T24:00:00Z' }, 'expiresAt', /hour 24 out of range/],
    ['a leap second', { cidr: '10.0.0.0/8', expiresAt: '2030-06-30T23:59:60Z' }, 'expiresAt', /leap seconds are not supported/],
    ['offset hour 24', { cidr: '10.0.0.0/8', expiresAt: '2030-01-01T00:00:00+24:00' }, 'expiresAt', /offset \+24:00 out of range/],
  ];
  for (const [desc, input, field, message] of rows) {
    const r = validateEntry(input);
    t.notOk(r.ok, `${desc}: rejected`);
    if (!r.ok) {
      t.equal(r.field, field, `${desc}: field`);
      t.match(r.message, message, desc);
    }
  }
});

t.test('parseRfc3339 gives the instant the offset names', async (t) => {
  const rows: Array<[desc: string, input: string, ms: number]> = [
    ['UTC', '2030-01-01T00:00:00Z', Date.UTC(2030, 0, 1)],
    ['a positive offset is earlier in UTC', '2030-01-01T02:00:00+02:00', Date.UTC(2030, 0, 1)],
    ['lower-case z', '2030-01-01t00:00:00z', Date.UTC(2030, 0, 1)],
    ['nanoseconds truncate to milliseconds', '2030-01-01T00:00:00.123999999Z', Date.UTC(2030, 0, 1) + 123],
  ];
  for (const [desc, input, ms] of rows) t.equal(parseRfc3339(input), ms, desc);
  t.ok(Number.isNaN(parseRfc3339('2030-02-30T00:00:00Z')), 'an invalid date is NaN, not a rolled-over date');
});
