import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { matrixError, MESSAGES } from '../errors/error-catalogue.js';
import type { Logger } from '../logging/logger.js';
import type { EvaluateRun } from '../consumer/evaluate-queue.js';
import { failure, successBytes } from '../contract/reply.js';
import type { StoreBoundsObserver } from '../service/bounded-store.js';
import type { RulesetCacheStats } from '../service/ruleset-cache.js';
import type { CacheSnapshot, EvaluateThreadData, FromThread, ToThread } from './thread-messages.js';

export interface EvaluatePoolOptions {
  readonly threads: number;
  /** Every thread's settings; the cache bounds are shared out between the threads. */
  readonly data: EvaluateThreadData;
  readonly resourceLimits?: ResourceLimits;
  readonly logger: Logger;
  /** Hears the store operations a thread gave up (deadline, timeout), for the metrics. */
  readonly observer?: StoreBoundsObserver;
  /** The thread's script: `evaluate-thread` next to this file unless given (tests give threads that fail). */
  readonly threadUrl?: URL;
  /** How long to wait before starting again a thread that failed before it was ready (doubles, up to 30 s). */
  readonly restartDelayMs?: number;
}

interface Pending {
  readonly resolve: (run: EvaluateRun) => void;
}

/** One slot of the pool: its current thread and the requests it has not answered. */
interface Slot {
  readonly index: number;
  thread: Worker | undefined;
  ready: boolean;
  readonly pending: Map<number, Pending>;
  /** The last counts of the slot's current thread. */
  cache: CacheSnapshot;
  /** Failed starts in a row (a thread that exits before it is ready). */
  failedStarts: number;
}

const EMPTY: CacheSnapshot = {
  size: 0,
  bytes: 0,
  hits: 0,
  misses: 0,
  invalidations: 0,
  staleRefreshes: 0,
  evictions: 0,
};
const MAX_RESTART_DELAY_MS = 30_000;
/** The snapshot's counts (they only grow), as opposed to its gauges. */
const COUNTS = ['hits', 'misses', 'invalidations', 'staleRefreshes', 'evictions'] as const;

/**
 * Evaluation off the event loop: `threads` worker threads, each running
 * `evaluate-thread.ts` (parsing, its own cache and store connection,
 * compiling, evaluating, the reply encoded). The event loop only copies a
 * body to the least busy thread and publishes the bytes it gets back. The
 * threads start with the first request (each costs some 40 MB at rest).
 *
 * A thread that fails (an uncaught throw, an exit, `terminate`) answers
 * every request it held `Unavailable` (the caller may retry; nothing was
 * changed) and is replaced at once, so no request is ever left without a
 * reply. Change events reach every thread's cache (`invalidate`, `clear`).
 */
export class EvaluatePool {
  readonly #options: EvaluatePoolOptions;
  readonly #log: Logger;
  readonly #slots: Slot[];
  readonly #threadUrl: URL;
  readonly #execArgv: string[] | undefined;
  #nextId = 1;
  #closing = false;
  /** Threads are started by the first request: a worker never asked to evaluate does not pay for them. */
  #started = false;
  /** Counts of threads that are gone, so that the metrics' counters never go back. */
  readonly #retired: Record<(typeof COUNTS)[number], number> = {
    hits: 0,
    misses: 0,
    invalidations: 0,
    staleRefreshes: 0,
    evictions: 0,
  };

  constructor(options: EvaluatePoolOptions) {
    if (!Number.isInteger(options.threads) || options.threads < 1) throw new RangeError('threads must be at least 1');
    this.#options = options;
    this.#log = options.logger;
    // From the sources (tests, tsx) the thread runs from the sources too, through the same loader.
    const ownExtension = extname(fileURLToPath(import.meta.url));
    this.#threadUrl = options.threadUrl ?? new URL(`./evaluate-thread${ownExtension}`, import.meta.url);
    // Otherwise the thread inherits the process's options (`--cpu-prof` included).
    this.#execArgv = extname(fileURLToPath(this.#threadUrl)) === '.ts' ? ['--import', 'tsx'] : undefined;
    this.#slots = Array.from({ length: options.threads }, (_, index) => ({
      index,
      thread: undefined,
      ready: false,
      pending: new Map<number, Pending>(),
      cache: EMPTY,
      failedStarts: 0,
    }));
  }

  /** An `EvaluateRunner`: never rejects. */
  readonly run = async (body: Uint8Array, context: { readonly deadline: number | undefined }): Promise<EvaluateRun> => {
    if (!this.#started && !this.#closing) {
      this.#started = true;
      for (const slot of this.#slots) this.#start(slot);
    }
    const slot = this.#leastBusy();
    const thread = slot?.thread;
    if (slot === undefined || thread === undefined || this.#closing)
      return interrupted('no evaluation thread is running');
    const id = this.#nextId++;
    // A copy of the body's own bytes (a delivery may be a slice of a larger buffer), transferred, not copied again.
    const copy = new Uint8Array(body);
    return new Promise<EvaluateRun>((resolve) => {
      slot.pending.set(id, { resolve });
      try {
        this.#post(thread, { type: 'evaluate', id, body: copy, deadline: context.deadline }, [copy.buffer]);
      } catch (error) {
        slot.pending.delete(id);
        resolve(interrupted(`the evaluation thread did not take the request: ${String(error)}`));
      }
    });
  };

  /** A change event for this user: every thread drops its entry. */
  invalidate(userId: string): void {
    this.#broadcast({ type: 'invalidate', userId });
  }

  /** Change events may have been missed: every thread drops its whole cache. */
  clear(): void {
    this.#broadcast({ type: 'clear' });
  }

  /** The threads' caches as one, for the metrics (counts as of each thread's last answer). */
  readonly cache: { readonly size: number; readonly bytes: number; readonly stats: RulesetCacheStats } = (() => {
    const sum = (read: (snapshot: CacheSnapshot) => number) =>
      this.#slots.reduce((total, s) => total + read(s.cache), 0);
    const retired = this.#retired;
    return {
      get size() {
        return sum((s) => s.size);
      },
      get bytes() {
        return sum((s) => s.bytes);
      },
      stats: {
        get hits() {
          return retired.hits + sum((s) => s.hits);
        },
        get misses() {
          return retired.misses + sum((s) => s.misses);
        },
        get invalidations() {
          return retired.invalidations + sum((s) => s.invalidations);
        },
        get staleRefreshes() {
          return retired.staleRefreshes + sum((s) => s.staleRefreshes);
        },
        get evictions() {
          return retired.evictions + sum((s) => s.evictions);
        },
      },
    };
  })();

  /** Threads running now. */
  get running(): number {
    return this.#slots.filter((slot) => slot.thread !== undefined).length;
  }

  /** Requests the threads hold now. */
  get inFlight(): number {
    return this.#slots.reduce((total, slot) => total + slot.pending.size, 0);
  }

  /**
   * Stops the threads. Call it once nothing more is sent (the consumer
   * drained): a request still held is answered `Unavailable`.
   */
  async close(): Promise<void> {
    this.#closing = true;
    await Promise.all(
      this.#slots.map(async (slot) => {
        const thread = slot.thread;
        if (thread !== undefined) await thread.terminate();
      }),
    );
  }

  #leastBusy(): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.#slots) {
      if (slot.thread === undefined) continue;
      if (best === undefined || slot.pending.size < best.pending.size) best = slot;
    }
    return best;
  }

  #broadcast(message: ToThread): void {
    for (const slot of this.#slots) if (slot.thread !== undefined) this.#post(slot.thread, message);
  }

  #post(thread: Worker, message: ToThread, transfer: ArrayBuffer[] = []): void {
    thread.postMessage(message, transfer);
  }

  #start(slot: Slot): void {
    const { data, threads, resourceLimits } = this.#options;
    const thread = new Worker(this.#threadUrl, {
      workerData: {
        ...data,
        // Shared out: the bounds are the worker's, not each thread's.
        cacheMaxEntries: Math.floor(data.cacheMaxEntries / threads),
        cacheMaxBytes: Math.floor(data.cacheMaxBytes / threads),
      } satisfies EvaluateThreadData,
      ...(this.#execArgv === undefined ? {} : { execArgv: this.#execArgv }),
      ...(resourceLimits === undefined ? {} : { resourceLimits }),
      name: `evaluate-${slot.index}`,
    });
    slot.thread = thread;
    slot.ready = false;
    thread.on('message', (message: FromThread) => {
      this.#receive(slot, message);
    });
    thread.on('error', (error) => {
      this.#log.error({ err: error, thread: slot.index }, 'an evaluation thread failed');
    });
    thread.on('exit', (code) => {
      this.#exited(slot, thread, code);
    });
  }

  #receive(slot: Slot, message: FromThread): void {
    switch (message.type) {
      case 'ready':
        slot.ready = true;
        slot.failedStarts = 0;
        return;
      case 'done': {
        slot.cache = message.cache;
        const pending = slot.pending.get(message.id);
        if (pending === undefined) return;
        slot.pending.delete(message.id);
        const reply =
          message.bytes !== undefined
            ? successBytes(message.bytes)
            : failure(matrixError(message.error?.kind ?? 'Internal', message.error?.error ?? MESSAGES.internalError));
        pending.resolve({
          reply,
          ...(message.stats === undefined ? {} : { stats: message.stats }),
          ...(message.cause === undefined ? {} : { cause: message.cause }),
          ...(message.failure === undefined
            ? {}
            : { failure: Object.assign(new Error(message.failure.message), message.failure) }),
          ...(message.deadlinePassed === true ? { deadlinePassed: true as const } : {}),
        });
        return;
      }
      case 'undecodable':
        this.#log.warn(
          { userId: message.userId },
          'stored push rules cannot be decoded: evaluated as the server defaults',
        );
        return;
      case 'store-unreachable':
        this.#log.warn(
          { thread: slot.index, err: message.error, attempt: message.attempt, retryInMs: message.retryInMs },
          'an evaluation thread cannot reach MongoDB; retrying',
        );
        return;
      case 'abandoned':
        this.#options.observer?.storeOperationAbandoned(message.operation, message.reason);
        return;
    }
  }

  #exited(slot: Slot, thread: Worker, code: number): void {
    if (slot.thread !== thread) return;
    slot.thread = undefined;
    for (const key of COUNTS) this.#retired[key] += slot.cache[key];
    slot.cache = EMPTY;
    const held = [...slot.pending.values()];
    slot.pending.clear();
    // Nothing an evaluation does changes data: the caller may send it again.
    for (const pending of held) pending.resolve(interrupted(`the evaluation thread exited (code ${code})`));
    if (this.#closing) return;
    // A thread that never got ready cannot even start: wait longer each time rather than spin.
    slot.failedStarts = slot.ready ? 0 : slot.failedStarts + 1;
    const retryInMs =
      slot.failedStarts === 0
        ? 0
        : Math.min(MAX_RESTART_DELAY_MS, (this.#options.restartDelayMs ?? 1000) * 2 ** (slot.failedStarts - 1));
    this.#log.error(
      { thread: slot.index, code, answeredUnavailable: held.length, retryInMs },
      'an evaluation thread stopped; starting another',
    );
    if (retryInMs === 0) {
      this.#start(slot);
      return;
    }
    setTimeout(() => {
      if (!this.#closing && slot.thread === undefined) this.#start(slot);
    }, retryInMs).unref();
  }
}

function interrupted(cause: string): EvaluateRun {
  return { reply: failure(matrixError('Unavailable', MESSAGES.evaluationInterrupted)), cause };
}
