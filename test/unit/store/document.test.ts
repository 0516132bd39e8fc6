import t from 'tap';
import {
  DOCUMENT_FORMAT,
  listVersion,
  makeList,
  parseDocument,
  revisionOf,
  seedList,
  serializeDocument,
} from '../../../src/store/document';

const doc = (lists: unknown): string => JSON.stringify({ format: DOCUMENT_FORMAT, lists });

t.test('a valid document round-trips through serialize with the same versions', async (t) => {
  const text = doc({ b: { revision: 3, entries: [{ cidr: '10.0.0.0/8', comment: 'x' }] }, a: { revision: 0, entries: [] } });
  const p = parseDocument(text);
  t.ok(p.ok);
  if (!p.ok) return;
  t.match(p.lists.get('b')!.version, /^3-[0-9a-f]{12}$/);
  const again = parseDocument(serializeDocument({ lists: p.lists }));
  t.ok(again.ok);
  if (!again.ok) return;
  t.same([...again.lists.keys()], ['a', 'b'], 'lists sorted by name in the file');
  t.equal(again.lists.get('b')!.version, p.lists.get('b')!.version, 'same version after a round trip');
});

t.test('the version changes with the content even when the revision does not, and with the revision', async (t) => {
  const a = [{ cidr: '10.0.0.0/8' }];
  const b = [{ cidr: '10.0.0.0/8', comment: 'c' }];
  t.not(listVersion(1, a), listVersion(1, b), 'content');
  t.not(listVersion(1, a), listVersion(2, a), 'revision (A -> B -> A is not "unchanged")');
  t.equal(revisionOf(listVersion(41, a)), 41);
  t.equal(revisionOf('garbage'), 0);
});

t.test('refused documents, each with the reason', async (t) => {
  const rows: Array<[string, string, RegExp]> = [
    ['not JSON', '{', /not valid JSON/],
    ['an array', '[]', /must be a JSON object/],
    ['unknown top-level field', JSON.stringify({ format: DOCUMENT_FORMAT, lists: {}, extra: 1 }), /unknown top-level field "extra"/],
    ['wrong format', JSON.stringify({ format: 'x', lists: {} }), /format must be/],
    ['lists not an object', JSON.stringify({ format: DOCUMENT_FORMAT, lists: [] }), /lists must be an object/],
    ['bad list name', doc({ '-x': { revision: 1, entries: [] } }), /not a valid list name/],
    ['list not an object', doc({ a: [] }), /lists\.a: must be an object/],
    ['unknown list field', doc({ a: { revision: 1, entries: [], version: 'x' } }), /lists\.a: unknown field "version"/],
    ['negative revision', doc({ a: { revision: -1, entries: [] } }), /lists\.a\.revision/],
    ['fractional revision', doc({ a: { revision: 1.5, entries: [] } }), /lists\.a\.revision/],
    ['revision as string', doc({ a: { revision: '1', entries: [] } }), /lists\.a\.revision/],
    ['entries not an array', doc({ a: { revision: 1, entries: {} } }), /lists\.a\.entries: must be an array/],
    ['host bits set', doc({ a: { revision: 1, entries: [{ cidr: '10.0.0.1/8' }] } }), /lists\.a\.entries\[0\]\.cidr/],
    ['entry as a string that is not a CIDR', doc({ a: { revision: 1, entries: ['10.0.0.0/33'] } }), /lists\.a\.entries\[0\]\.cidr/],
    ['entry as a number', doc({ a: { revision: 1, entries: [5] } }), /lists\.a\.entries\[0\]: entry must be an object/],
    ['unknown entry field', doc({ a: { revision: 1, entries: [{ cidr: '10.0.0.0/8', ttl: 5 }] } }), /unknown field "ttl"/],
    ['bad expiresAt', doc({ a: { revision: 1, entries: [{ cidr: '10.0.0.0/8', expiresAt: 'tomorrow' }] } }), /expiresAt/],
    [
      'duplicate CIDR',
      doc({ a: { revision: 1, entries: [{ cidr: '10.0.0.0/8' }, { cidr: '10.0.0.0/8' }] } }),
      /entries\[1\]\.cidr: 10\.0\.0\.0\/8 is listed twice/,
    ],
  ];
  for (const [what, text, reason] of rows) {
    const p = parseDocument(text);
    t.equal(p.ok, false, what);
    if (!p.ok) t.match(p.reason, reason, `${what}: ${p.reason}`);
  }
});

t.test('seeding from the config drops duplicates (first wins) and starts at revision 1', async (t) => {
  const l = seedList('main', [
    { cidr: '10.0.0.0/8', comment: 'first' },
    { cidr: '10.0.0.0/8', comment: 'second' },
  ]);
  t.same(l.entries, [{ cidr: '10.0.0.0/8', comment: 'first' }]);
  t.equal(revisionOf(l.version), 1);
  t.ok(Object.isFrozen(l) && Object.isFrozen(l.entries));
});

t.test('the compact form (Kubernetes store): bare CIDR strings for plain allow entries, read back the same', async (t) => {
  const entries = [{ cidr: '10.0.0.1/32' }, { cidr: '10.0.0.0/8', action: 'deny' as const }, { cidr: '192.0.2.0/24', comment: 'docs' }];
  const lists = new Map([['a', makeList('a', entries, 4)]]);
  const text = serializeDocument({ lists }, true);
  t.equal(
    text,
    '{"format":"ipgate.allowlists/v1","lists":{"a":{"revision":4,"entries":["10.0.0.1/32",{"cidr":"10.0.0.0/8","action":"deny"},{"cidr":"192.0.2.0/24","comment":"docs"}]}}}\n',
  );
  const back = parseDocument(text);
  t.ok(back.ok);
  if (back.ok) {
    t.same(back.lists.get('a')!.entries, entries, 'same entries');
    t.equal(back.lists.get('a')!.version, lists.get('a')!.version, 'same version as the indented form');
  }
});
