/**
 * X-Request-ID (issue "Operations"): one id per request, in the access line and to the backend,
 * so a request can be followed from ipgate's log into the backend's. A trusted proxy's id is kept
 * (it names the request across the hops before ipgate); anyone else's is replaced, since a client
 * could otherwise make its requests look like another's in the logs.
 *
 * Ours are 32 hex characters like nginx's $request_id: 16 random per process, then a 16-digit
 * counter. Unique per process for 2^64 requests, and costing a counter increment and a string
 * join instead of 16 random bytes per request.
 */
import { randomBytes } from 'node:crypto';

const PREFIX = randomBytes(8).toString('hex');
let counter = 0;

export function newRequestId(): string {
  counter++;
  return PREFIX + counter.toString(16).padStart(16, '0');
}

/** A received id is kept only if it is 1-200 visible ASCII characters (it is logged and forwarded). */
export function validRequestId(id: string): boolean {
  if (id.length === 0 || id.length > 200) return false;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}
