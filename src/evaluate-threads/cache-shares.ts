/** Bounds of a cache of compiled rulesets. */
export interface CacheBounds {
  readonly maxEntries: number;
  readonly maxBytes: number;
}

/**
 * The worker's cache bounds (`evaluate.cacheMaxEntries`, `cacheMaxBytes`)
 * shared out in equal parts: one for each evaluation thread, and one for the
 * event loop when it evaluates too (small requests, or `evaluate.threads`
 * 0). Caches in different threads cannot be one (each thread has a heap of
 * its own), so a user evaluated in both is cached twice; equal shares keep
 * the sum within the configured bounds whatever the mix of requests.
 */
export function cacheShares(
  total: CacheBounds,
  threads: number,
  eventLoop: boolean,
): { readonly perThread: CacheBounds; readonly eventLoop: CacheBounds | undefined } {
  const shares = Math.max(1, threads + (eventLoop ? 1 : 0));
  const share = {
    maxEntries: Math.floor(total.maxEntries / shares),
    maxBytes: Math.floor(total.maxBytes / shares),
  };
  return { perThread: share, eventLoop: eventLoop ? share : undefined };
}
