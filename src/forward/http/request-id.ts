/**
 * X-Request-ID (issue "Operations"): one id per request, in the access line and to the backend,
 * so a request can be followed from ipgate's log into the backend's. A trusted proxy's id is kept
 * (it names the request across the hops before ipgate); anyone else's is replaced, since a client
 * could otherwise make its requests look like another's in the logs.
 *
 * Ours are 128 random bits as 32 lower-case hex characters, as nginx's `$request_id` (16 bytes
 * from the OS's CSPRNG, hex-encoded): no id says anything about the others, so an id seen in one
 * response (or guessed from a process prefix and a counter, as the ids were before) names no other
 * request. The bytes are drawn from crypto.randomBytes BATCH_IDS ids at a time and hex-encoded
 * once per batch: one getrandom(2) and one encoding per 256 requests, and each id is then a slice
 * of the batch's text (~70 ns of CPU against ~210 ns for a hex conversion of 16 bytes per id and
 * ~4 us for a randomBytes call per id; bench/micro/request-id.ts). A slice keeps its batch's 8 KiB
 * string alive while the id lives (the request's headers and access line): a few batches at most.
 */
import { randomBytes } from 'node:crypto';

/** Ids per randomBytes call: 256 x 16 bytes = one 4 KiB read of the CSPRNG. */
const BATCH_IDS = 256;
const ID_HEX = 32;
const BATCH_HEX = BATCH_IDS * ID_HEX;

let batch = '';
let offset = BATCH_HEX;

/** A new request id: 32 hex characters of fresh randomness. */
export function newRequestId(): string {
  if (offset >= BATCH_HEX) {
    batch = randomBytes(BATCH_HEX / 2).toString('hex');
    offset = 0;
  }
  const id = batch.slice(offset, offset + ID_HEX);
  offset += ID_HEX;
  return id;
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
