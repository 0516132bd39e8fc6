/**
 * The size of a request head as ipgate parsed it, for ipgate_http_request_size_bytes
 * (metrics/listener-stats.ts RequestCounts): the request line and every header field, `name: value`
 * and CRLF each, and the blank line. llhttp hands over names and values without the blanks around
 * a value, so those (a few bytes, if a client sends any) are not counted; nothing else differs from
 * the bytes on the wire (the strict parser refuses obs-fold). One pass over the header list, no
 * allocation.
 */
export function requestHeadBytes(head: { readonly method: string; readonly url: string; readonly rawHeaders: readonly string[] }): number {
  // `METHOD SP target SP HTTP/1.x CRLF`
  let n = head.method.length + head.url.length + 12;
  const raw = head.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) n += raw[i]!.length + raw[i + 1]!.length + 4;
  return n + 2;
}
