import t from 'tap';
import { forwardedElement, forwardedNode, forwardedValue } from '../../../src/identity/forwarded-header';

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
