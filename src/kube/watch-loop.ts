/**
 * The supervision of a list-then-watch, shared by the ConfigMap store (store/kubernetes-store.ts)
 * and the lists ConfigMap watch (configmap-watch.ts): what to do each time a watch ends.
 * - 410 Gone (an ERROR event in the stream, or HTTP 410): the resume point is older than the API
 *   server keeps: list again (after backoff if this keeps happening), then watch from the list;
 * - the server ended a healthy stream (timeoutSeconds): resume at once (a few ms of jitter);
 * - anything else (a drop, a refusal, a stream cut at once with nothing in it, as a proxy does): a
 *   failure, noted, then exponential backoff with jitter (kube/backoff.ts); a stream that carried
 *   events resets the count.
 */
import { backoffDelay, type BackoffPolicy } from './backoff';
import type { WatchEnd } from './kube-client';

interface WatchLoop {
  readonly backoff: BackoffPolicy;
  closed(): boolean;
  /** List, and make the list's resourceVersion the next watch's start. */
  relist(): Promise<void>;
  /** Open one watch from the resume point; resolves when it ends, with the ERROR event that ended it, if any. */
  watchOnce(): Promise<{ end: WatchEnd; streamError: { code: number; message: string } | null }>;
  /** 410 Gone: about to relist. */
  expired(): void;
  noteError(err: unknown, during: 'relist' | 'watch'): void;
  /** Resolves after `ms`, or at once when closed. */
  pause(ms: number): Promise<void>;
}

export async function runWatchLoop(w: WatchLoop): Promise<void> {
  let failures = 0;
  let relist = false;
  while (!w.closed()) {
    if (relist) {
      try {
        await w.relist();
        relist = false;
      } catch (err) {
        w.noteError(err, 'relist');
        await w.pause(backoffDelay(w.backoff, failures++));
        continue;
      }
    }
    const startedAt = Date.now();
    const { end, streamError } = await w.watchOnce();
    if (w.closed() || end.kind === 'stopped') break;
    if (streamError?.code === 410 || (end.kind === 'status' && end.error.status === 410)) {
      w.expired();
      relist = true;
      if (failures > 0) await w.pause(backoffDelay(w.backoff, failures - 1));
      failures++;
      continue;
    }
    // A stream that ends at once with nothing in it (a proxy cutting it) is a failure, not a timeout.
    if (end.kind === 'closed' && streamError === null && (end.events > 0 || Date.now() - startedAt >= 1000)) {
      failures = 0;
      await w.pause(Math.round(Math.random() * 50));
      continue;
    }
    if (end.kind !== 'status' && end.events > 0) failures = 0;
    const err = streamError
      ? new Error(`watch ERROR event ${streamError.code}: ${streamError.message}`)
      : end.kind === 'closed'
        ? new Error('watch ended')
        : end.error;
    w.noteError(err, 'watch');
    await w.pause(backoffDelay(w.backoff, failures++));
  }
}
