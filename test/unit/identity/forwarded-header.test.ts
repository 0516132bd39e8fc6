import t from 'tap';
import { forwardedElement, forwardedNode, forwardedValue, forwardedWithoutHost } from '../../../src/identity/forwarded-header';

t.test('RFC 7239 nodes: IPv4 bare, IPv6 quoted and bracketed (section 6)', async (t) => {
  t.equal(forwardedNode('192.0.2.60'), '192.0.2.60');
  t.equal(forwardedNode('2001:db8:cafe::17'), '"[2001:db8:cafe::17]"');
});

t.test('values are tokens when they can be, else quoted-strings with escapes (section 4)', async (t) => {
  t.equal(forwardedValue('http'), 'http');
  t.equal(forwardedValue('example.com'), 'example.com');
  t.equal(forwardedValue('example.com:8080'), '"example.com:8080"', 'colon is not a tchar');
  t.equal(forwardedValue('[::1]:80'), '"[::1]:80"');
  t.equal(forwardedValue('a"b\\c'), '"a\\"b\\\\c"', 'quote and backslash escaped');
  t.equal(forwardedValue(''), '""', 'empty is quoted');
});

t.test('elements: for, proto, then host when known', async (t) => {
  t.equal(forwardedElement('203.0.113.7', 'http', 'example.com'), 'for=203.0.113.7;proto=http;host=example.com');
  t.equal(forwardedElement('2001:db8::1', 'http', 'example.com:8080'), 'for="[2001:db8::1]";proto=http;host="example.com:8080"');
  t.equal(forwardedElement('203.0.113.7', 'http', null), 'for=203.0.113.7;proto=http');
});

t.test('a received chain without its host= pairs (a routed listener names only the routed host)', async (t) => {
  const rows: [description: string, value: string, expect: string | null][] = [
    ['no host pair: as received', 'for=192.0.2.1;proto=https, for=10.0.0.5', 'for=192.0.2.1;proto=https, for=10.0.0.5'],
    ['a host pair dropped, the rest kept in order', 'for=192.0.2.1;host=admin.example.com;proto=https', 'for=192.0.2.1;proto=https'],
    [
      'in every element, any case',
      'Host=admin.example.com;for=1.1.1.1, for=2.2.2.2;HOST="admin.example.com:443"',
      'for=1.1.1.1, for=2.2.2.2',
    ],
    ['an element of a host pair only is dropped', 'host=admin.example.com, for=2.2.2.2', 'for=2.2.2.2'],
    [
      'a quoted value holding ";", "," and an escaped quote',
      'for="[2001:db8::1]";by="a;b,c\\"d";host=x',
      'for="[2001:db8::1]";by="a;b,c\\"d"',
    ],
    ['"host" inside another pair\'s value is kept', 'for=1.1.1.1;by=host', 'for=1.1.1.1;by=host'],
    ['whitespace around elements', '  for=1.1.1.1 ;host=a ,  for=2.2.2.2  ', 'for=1.1.1.1, for=2.2.2.2'],
    ['only a host pair: nothing left', 'host=admin.example.com', ''],
    ['a pair without "=": not RFC 7239', 'for=1.1.1.1;host', null],
    ['an unterminated quoted-string', 'host="admin.example.com', null],
    ['text after a quoted value', 'host="a"b;for=1.1.1.1', null],
    ['an empty value', 'for=;host=a', null],
  ];
  for (const [description, value, expect] of rows) t.equal(forwardedWithoutHost(value), expect, description);
});
