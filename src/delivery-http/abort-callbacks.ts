/**
 * Callbacks run when a signal aborts, through one `abort` listener per
 * signal however many callbacks it has. Node's `EventTarget` compares each
 * new listener with every one it holds (no duplicates allowed), so
 * thousands of requests each listening on their partition's signal while
 * they wait for a slot cost time quadratic in the line's length; a `Set`
 * adds and removes in O(1).
 */
const callbacksOf = new WeakMap<AbortSignal, Set<() => void>>();

/** Runs `callback` once when `signal` aborts (in the order callbacks were added), unless `unwatchAbort` comes first. */
export function watchAbort(signal: AbortSignal, callback: () => void): void {
  let callbacks = callbacksOf.get(signal);
  if (callbacks === undefined) {
    const added = new Set<() => void>();
    callbacks = added;
    callbacksOf.set(signal, added);
    signal.addEventListener(
      'abort',
      () => {
        callbacksOf.delete(signal);
        for (const run of added) run();
      },
      { once: true },
    );
  }
  callbacks.add(callback);
}

export function unwatchAbort(signal: AbortSignal, callback: () => void): void {
  callbacksOf.get(signal)?.delete(callback);
}
