/**
 * Reads of single documents by key, asked for in the same turn of the event
 * loop, sent as one query for all of them.
 *
 * At c = 64 a worker reads dozens of users' documents at once, and each
 * read on its own pays the driver's whole round (server selection, a
 * session, a pooled connection, one write and one read on its socket, a
 * reply to parse): most of a single-rule read's CPU. Batched, they share
 * one round. A read asked for while nothing is being read goes out at once,
 * alone, so a lone read (c = 1) waits for nothing; reads asked for while
 * others are out wait for the end of the turn (`setImmediate`) and go
 * together, at most `maxBatch` keys per query.
 *
 * A batch answers each key with what a read of that key alone would have
 * answered at about the same instant. A key the batch did not return is
 * read again alone by `fetchOne`: the document may be absent, or the reply
 * may have been cut short (a server returns at most 16 MiB in one batch).
 */
export class ReadBatcher<T> {
  readonly #fetchMany: (keys: readonly string[]) => Promise<ReadonlyMap<string, T>>;
  readonly #fetchOne: (key: string) => Promise<T | null>;
  readonly #maxBatch: number;
  #queued: Waiter<T>[] = [];
  #scheduled = false;
  #outstanding = 0;

  constructor(options: {
    readonly fetchMany: (keys: readonly string[]) => Promise<ReadonlyMap<string, T>>;
    readonly fetchOne: (key: string) => Promise<T | null>;
    readonly maxBatch: number;
  }) {
    this.#fetchMany = options.fetchMany;
    this.#fetchOne = options.fetchOne;
    this.#maxBatch = Math.max(1, options.maxBatch);
  }

  /** Queries out now (for tests). */
  get outstanding(): number {
    return this.#outstanding;
  }

  async load(key: string): Promise<T | null> {
    if (this.#outstanding === 0 && this.#queued.length === 0) return this.#track(this.#fetchOne(key));
    return new Promise<T | null>((resolve, reject) => {
      this.#queued.push({ key, resolve, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#flush();
      });
    });
  }

  #flush(): void {
    const queued = this.#queued;
    this.#queued = [];
    for (let at = 0; at < queued.length;) {
      // A batch of distinct keys; a key asked for twice is answered by one read.
      const batch = new Map<string, Waiter<T>[]>();
      for (; at < queued.length && (batch.size < this.#maxBatch || batch.has(queued[at]?.key ?? '')); at += 1) {
        const waiter = queued[at];
        if (waiter === undefined) continue;
        const waiters = batch.get(waiter.key);
        if (waiters === undefined) batch.set(waiter.key, [waiter]);
        else waiters.push(waiter);
      }
      void this.#track(this.#answer(batch));
    }
  }

  async #answer(batch: ReadonlyMap<string, readonly Waiter<T>[]>): Promise<void> {
    const keys = [...batch.keys()];
    let found: ReadonlyMap<string, T>;
    try {
      found =
        keys.length === 1 ? singleton(keys[0] ?? '', await this.#fetchOne(keys[0] ?? '')) : await this.#fetchMany(keys);
    } catch (error) {
      for (const waiters of batch.values()) for (const waiter of waiters) waiter.reject(error);
      return;
    }
    await Promise.all(
      [...batch].map(async ([key, waiters]) => {
        try {
          const value = found.get(key) ?? (keys.length === 1 ? null : await this.#fetchOne(key));
          for (const waiter of waiters) waiter.resolve(value);
        } catch (error) {
          for (const waiter of waiters) waiter.reject(error);
        }
      }),
    );
  }

  async #track<R>(work: Promise<R>): Promise<R> {
    this.#outstanding += 1;
    try {
      return await work;
    } finally {
      this.#outstanding -= 1;
    }
  }
}

interface Waiter<T> {
  readonly key: string;
  readonly resolve: (value: T | null) => void;
  readonly reject: (error: unknown) => void;
}

function singleton<T>(key: string, value: T | null): ReadonlyMap<string, T> {
  return value === null ? new Map() : new Map([[key, value]]);
}
