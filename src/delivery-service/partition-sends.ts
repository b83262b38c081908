/**
 * The scheduler's sends by partition: those started (until their verdict
 * is settled) and the signal that withdraws those of a partition still
 * waiting in the gateway client's lines. A handover, a lost lease or a
 * shutdown withdraws them: a request that has not gone out by then must
 * not go out later, after the next holder sent it and newer ones
 * (docs/delivery.md, "What can be duplicated").
 */
export class PartitionSends {
  /** Sends started, with their partition. */
  readonly #started = new Map<Promise<void>, number>();
  readonly #withdraw = new Map<number, AbortController>();

  /** Aborts when the partition's waiting sends are withdrawn; a fresh one after each withdrawal. */
  signalOf(partition: number): AbortSignal {
    let controller = this.#withdraw.get(partition);
    if (controller === undefined) {
      controller = new AbortController();
      this.#withdraw.set(partition, controller);
    }
    return controller.signal;
  }

  /** The partition's sends still waiting for a slot are withdrawn (not sent); those already written go on. */
  withdraw(partition: number): void {
    this.#withdraw.get(partition)?.abort();
    this.#withdraw.delete(partition);
  }

  /** Every partition's waiting sends withdrawn. */
  withdrawAll(): void {
    for (const partition of [...this.#withdraw.keys()]) this.withdraw(partition);
  }

  /** Tracks a send until it settles (`work` never rejects: the caller logs its failures). */
  track(work: Promise<void>, partition: number): void {
    const tracked = work.finally(() => {
      this.#started.delete(tracked);
    });
    this.#started.set(tracked, partition);
  }

  /** The sends started and not settled (of one partition, or all). */
  started(partition?: number): Promise<void>[] {
    const sends: Promise<void>[] = [];
    for (const [send, of] of this.#started) if (partition === undefined || of === partition) sends.push(send);
    return sends;
  }

  get size(): number {
    return this.#started.size;
  }
}

/** Whether every promise settled within `ms`. */
export async function settledWithin(promises: readonly Promise<unknown>[], ms: number): Promise<boolean> {
  if (promises.length === 0) return true;
  let timer: NodeJS.Timeout | undefined;
  const finished = await Promise.race([
    Promise.allSettled(promises).then(() => true),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => {
        resolve(false);
      }, ms);
    }),
  ]);
  clearTimeout(timer);
  return finished;
}
